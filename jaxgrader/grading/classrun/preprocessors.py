"""nbgrader preprocessors for what a submitted notebook must not decide or carry.

Registered in ``nbgrader_config.py``. They run in the grader, outside the
student's kernel:

* ``SanitizeSubmission`` (first step of autograding): drops cell tags (nbclient
  skips cells tagged ``skip-execution``), repairs nbgrader metadata a student
  edited (unknown keys, another ``schema_version``: either would otherwise abort
  the whole run), and keeps the marks of a duplicated cell on its last copy.
  It refuses no code: the kernel runs in an OS sandbox and points come from
  :mod:`jaxgrader.grading.verdict.verdict`, so honest code that imports ``sys``, uses a
  magic or sets an attribute runs as written. Code that reaches for the
  kernel's machinery is only *flagged* (:func:`suspicious`) for the teacher.
* ``HideHiddenTests`` (feedback): removes hidden tests from the feedback, and
  with them every output the student's kernel wrote (it could have copied the
  hidden tests it saw run into any later output). What stays: the student's
  own code, written answers, and the grader's verdict lines.
"""

from __future__ import annotations

import ast
import re

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

NBGRADER_KEYS = {"grade", "grade_id", "locked", "points", "schema_version", "solution", "task", "checksum",
                 "cell_type"}

# What honest answers to these lessons never touch: the kernel's own machinery.
# Used only to flag a submission for the teacher, never to refuse it.
SUSPICIOUS_NAMES = {
    "get_ipython": "reaches into the notebook kernel",
    "ctypes": "edits memory",
    "gc": "walks the interpreter's objects",
    "sqlite3": "opens databases",
    "__builtins__": "reaches into builtins",
    "builtins": "reaches into builtins",
}
SUSPICIOUS_ATTRS = {
    "input_transformers_cleanup": "changes how cells are run",
    "input_transformers_post": "changes how cells are run",
    "ast_transformers": "changes how cells are run",
    "events": "hooks into cell execution",
    "__code__": "rewrites a function's code",
    "__globals__": "rewrites a function's globals",
    "modules": "edits sys.modules",
    "settrace": "traces the interpreter",
    "setprofile": "traces the interpreter",
    "fork": "starts processes",
    "kill": "signals processes",
    "displayhook": "changes how results are shown",
    "excepthook": "changes how errors are shown",
}


def suspicious(source: str) -> str:
    """'' or a one-line reason why a teacher may want to look at this cell.

    A flag, not a verdict: the cell runs and is graded like any other.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Name) and node.id in SUSPICIOUS_NAMES:
            return f"{where}: `{node.id}` {SUSPICIOUS_NAMES[node.id]}"
        if isinstance(node, ast.Attribute) and node.attr in SUSPICIOUS_ATTRS:
            return f"{where}: `.{node.attr}` {SUSPICIOUS_ATTRS[node.attr]}"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = (name or "").split(".")[0]
                if top in SUSPICIOUS_NAMES:
                    return f"{where}: imports `{name}` ({SUSPICIOUS_NAMES[top]})"
    return ""


def flags_of(nb) -> list[str]:
    """One line per student cell that :func:`suspicious` flags."""
    flags = []
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        if cell.cell_type != "code" or (meta.get("grade") and not meta.get("solution")) or meta.get("locked"):
            continue
        reason = suspicious(cell.source)
        if reason:
            flags.append(f"cell {index} ({meta.get('grade_id') or 'unmarked'}): {reason}")
    return flags


class SanitizeSubmission(NbGraderPreprocessor):
    """Make a submitted notebook's metadata safe to grade; runs before nbgrader's own sanitizing."""

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
            if not isinstance(meta, dict) or not isinstance(meta.get("grade_id"), str) or not meta.get("grade_id"):
                del cell.metadata["nbgrader"]
            else:
                for key in set(meta) - NBGRADER_KEYS:
                    del meta[key]
                meta["schema_version"] = 3
                for flag in ("grade", "solution", "locked", "task"):
                    meta[flag] = bool(meta.get(flag, False))
                if meta["grade"] and not isinstance(meta.get("points"), (int, float)):
                    meta["points"] = 0  # nbgrader restores the real points from the gradebook
        return cell, resources


HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback without hidden tests and without anything the kernel printed.

    Test cells keep the grader's verdict (written outside the kernel); other code
    cells lose their outputs. Set ``c.HideHiddenTests.enabled = False`` to show
    hidden tests and outputs as nbgrader does by default.
    """

    enabled = Bool(True, help="Remove hidden tests and kernel outputs from feedback.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not self.enabled or cell.cell_type != "code":
            return cell, resources
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        is_test = meta.get("grade") and not meta.get("solution")
        if HIDDEN_BLOCK.search(cell.source):
            cell.source = HIDDEN_BLOCK.sub("# (hidden tests are not shown)", cell.source)
        if not is_test:
            cell.outputs = []
        return cell, resources
