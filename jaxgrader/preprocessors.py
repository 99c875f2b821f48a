"""nbgrader preprocessors for what a submitted notebook must not decide.

Registered in ``nbgrader_config.py``. nbgrader restores test cells' *source*
from the gradebook and resets points and cell types, but it keeps the rest of
the student's metadata and runs the student's code in the same kernel as the
tests. These steps close the gaps:

* ``SanitizeSubmission`` (first step of autograding): drops cell tags (nbclient
  skips cells tagged ``skip-execution``), repairs nbgrader metadata a student
  edited (unknown keys, another ``schema_version``: either would otherwise abort
  grading), and refuses to run solution code that tampers with the grader
  (see :func:`tampering`): such a cell is replaced by one that raises, so the
  tests that need it fail and the teacher sees why.
* ``HideHiddenTests`` (feedback): removes hidden tests and tracebacks that
  quote them from the feedback HTML, unless the course reveals them.
"""

from __future__ import annotations

import ast
import re

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

NBGRADER_KEYS = {"grade", "grade_id", "locked", "points", "schema_version", "solution", "task", "checksum",
                 "cell_type"}

# Names whose use in a solution cell means "changing or reading the grader", not answering.
FORBIDDEN_NAMES = {
    "__builtins__": "reaches into builtins",
    "builtins": "reaches into builtins",
    "sys": "uses sys (modules, hooks, streams)",
    "importlib": "re-imports or replaces modules",
    "__import__": "imports indirectly",
    "get_ipython": "changes the notebook kernel",
    "gc": "walks the interpreter's objects",
    "ctypes": "edits memory",
    "inspect": "inspects the grader's code",
    "sqlite3": "reads the gradebook",
    "subprocess": "starts processes",
    "shutil": "copies or deletes files",
    "open": "opens files",
    "exec": "runs code built at run time",
    "eval": "runs code built at run time",
    "compile": "runs code built at run time",
    "globals": "rewrites the notebook's namespace",
    "setattr": "replaces attributes",
    "vars": "rewrites an object's attributes",
    "delattr": "deletes attributes",
}
FORBIDDEN_ATTRS = {
    "__code__": "rewrites a function's code",
    "__closure__": "rewrites a function's state",
    "__globals__": "rewrites a function's globals",
    "__dict__": "rewrites an object's attributes",
    "modules": "edits sys.modules",
    "read_text": "reads files",
    "read_bytes": "reads files",
    "write_text": "writes files",
    "write_bytes": "writes files",
    "listdir": "lists files",
    "scandir": "lists files",
    "walk": "lists files",
    "system": "runs shell commands",
    "popen": "runs shell commands",
    "chdir": "changes directory",
    "loadtxt": "reads files",
    "genfromtxt": "reads files",
    "fromfile": "reads files",
    "memmap": "maps files",
    "savetxt": "writes files",
    "tofile": "writes files",
}


def tampering(source: str) -> str:
    """'' if ``source`` only computes answers; else a reason naming the line.

    Refused: assigning to any attribute except through ``self`` (this is how
    ``np.testing.assert_allclose = ...``, ``jax.grad = ...`` or
    ``m = jaxgrader.trees; m.assert_trees_close = ...`` replace what tests rely
    on), the names and attributes above, and IPython magics / shell escapes.
    Answers to these lessons never need any of them; a refused cell is shown to
    the teacher, who can regrade by hand.
    """
    lines = source.splitlines()
    for number, line in enumerate(lines, 1):
        if re.match(r"\s*[!%]", line):
            return f"line {number}: shell escapes and magics are not run by the grader"
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""  # a syntax error fails on its own, without help
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return f"{where}: `{node.id}` {FORBIDDEN_NAMES[node.id]}"
        if isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
            return f"{where}: `.{node.attr}` {FORBIDDEN_ATTRS[node.attr]}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name and name.split(".")[0] in FORBIDDEN_NAMES:
                    return f"{where}: importing `{name}` {FORBIDDEN_NAMES[name.split('.')[0]]}"
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in targets:
            root = target
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                root = root.value
            if isinstance(target, ast.Attribute) and not (isinstance(root, ast.Name) and root.id in ("self", "cls")):
                return f"{where}: assigns to `{ast.unparse(target)}`; only `self.` attributes may be set"
    return ""


class SanitizeSubmission(NbGraderPreprocessor):
    """Make a submitted notebook safe to grade; runs before nbgrader's own sanitizing."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        # A duplicated nbgrader cell: keep the marks on the last copy only. (nbgrader's
        # own DeduplicateIds leaves the copies half-marked, and autograde then crashes.)
        seen = set()
        for cell in reversed(nb.cells):
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in seen:
                del cell.metadata["nbgrader"]
            elif gid:
                seen.add(gid)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        cell.metadata.pop("tags", None)
        meta = cell.metadata.get("nbgrader")
        if meta is not None:
            if not isinstance(meta, dict) or not meta.get("grade_id"):
                del cell.metadata["nbgrader"]
            else:
                for key in set(meta) - NBGRADER_KEYS:
                    del meta[key]
                meta["schema_version"] = 3
                for flag in ("grade", "solution", "locked", "task"):
                    meta[flag] = bool(meta.get(flag, False))
                if meta["grade"] and not isinstance(meta.get("points"), (int, float)):
                    meta["points"] = 0  # nbgrader restores the real points from the gradebook
        if cell.cell_type == "code" and not (meta and meta.get("grade") and not meta.get("solution")):
            reason = tampering(cell.source)
            if reason:
                self.log.warning("refused cell %d: %s", index, reason)
                cell.source = (
                    "raise RuntimeError("
                    + repr(f"The grader did not run this cell: {reason}. Your teacher will review it.")
                    + ")"
                )
        return cell, resources


HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


class HideHiddenTests(NbGraderPreprocessor):
    """Keep hidden tests out of feedback, so they can be reused next term.

    Set ``c.HideHiddenTests.enabled = False`` in ``nbgrader_config.py`` to show
    them (nbgrader's own default).
    """

    enabled = Bool(True, help="Remove hidden tests (and tracebacks quoting them) from feedback.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not HIDDEN_BLOCK.search(cell.source):
            return cell, resources
        cell.source = HIDDEN_BLOCK.sub("# (hidden tests are not shown)", cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
