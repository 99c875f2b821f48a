"""Students for the similarity tests and benchmark: the demo class, and near-copies generated from it.

* ``ed`` copied ``ada`` (the instructor's solution) and changed what copying changes cheaply: every
  local name renamed, the comments rewritten and new ones added, the top-level definitions of each cell
  in another order (``near_copy``);
* ``dee`` answered nothing: the release, with the starter code's comments edited (she shares only the
  starter code with anyone);
* ``indie`` solved the lesson on their own, correctly and differently (``demo/independent/``, lessons 1
  and 3; the trials grade them to full marks: ``honest-independent``).

So ``ada``, ``cy`` and ``hana`` (who type the solution, ``cy``'s with some wrong answers, ``hana`` ``cy``'s
in the Korean edition) and ``ed`` are near-copies of each other; ``bo``, ``dee`` and ``indie`` are not.
"""

from __future__ import annotations

import ast
import builtins
import io
import random
import tokenize
from pathlib import Path

from jaxgrader.grading import trials

from .conftest import ROOT

COPIES = {"ed": "ada"}  # near-copy -> whom it copied
NEAR_COPIES = {"ada", "cy", "hana", "ed"}  # every pair of these is a near-copy
APART = {"bo", "dee", "indie"}  # none of these is a near-copy of anyone


def independent_answers(assignment: str) -> dict[str, str] | None:
    """grade_id -> an independent correct answer (demo/independent/<assignment>.toml), or None."""
    return trials.independent_answers(ROOT, assignment)


def _local_names(tree: ast.Module) -> set[str]:
    """Names bound inside functions (locals, loop and comprehension variables, inner functions and the
    parameters of inner functions and lambdas): what a copier renames without breaking a test's call."""
    top_params = {a.arg for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for a in node.args.args + node.args.kwonlyargs}
    found = set()
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                found.add(inner.id)
            elif isinstance(inner, (ast.FunctionDef, ast.Lambda)) and inner is not node:
                if isinstance(inner, ast.FunctionDef):
                    found.add(inner.name)
                found |= {a.arg for a in inner.args.args}
    return found - top_params - set(dir(builtins))


def _renamed(code: str, names: dict[str, str]) -> str:
    """``code`` with these names replaced where they are names (not attributes, not keyword arguments)."""
    lines = code.splitlines(keepends=True)
    tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    edits = []
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or tok.string not in names:
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == "." or (after == "=" and before in ("(", ",")):
            continue
        edits.append((tok.start, tok.end, names[tok.string]))
    for (row, col), (_, end), new in reversed(edits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)


def _recommented(code: str, rng: random.Random) -> str:
    """Comments rewritten, and a new one above each top-level definition."""
    notes = ["# works on the tests", "# careful with the shapes here", "# pure: no global state", "# see lecture"]
    out = []
    for line in code.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            line = line[: len(line) - len(stripped)] + rng.choice(notes)
        elif "  # " in line:
            line = line.split("  # ")[0] + "   " + rng.choice(notes)
        if line.startswith(("def ", "@", "class ")) and not (out and out[-1].startswith("@")):
            out.append(rng.choice(notes))
        out.append(line)
    return "\n".join(out) + "\n"


def _reordered(code: str) -> str:
    """Top-level definitions in reverse order, the other statements after them (valid where nothing runs a
    definition's body before the cell ends, as in every answer cell of this course)."""
    tree = ast.parse(code)
    lines = code.splitlines(keepends=True)
    ends = [0] + [n.end_lineno for n in tree.body]
    # each statement with the comments above it
    text = {id(n): "".join(lines[ends[i]:n.end_lineno]).strip("\n") + "\n" for i, n in enumerate(tree.body)}
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    if len(defs) < 2:
        return code
    rest = [n for n in tree.body if n not in defs]
    return "\n\n".join(text[id(n)] for n in reversed(defs)) + "\n\n" + "".join(text[id(n)] for n in rest)


def near_copy(code: str, seed: int = 0) -> str:
    """What a student who copied ``code`` hands in: names, comments, layout and order changed."""
    rng = random.Random(seed)
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a written answer: the same words, reflowed
        return "\n".join(" ".join(code.split()[i:i + 9]) for i in range(0, len(code.split()), 9))
    names = {n: rng.choice(["my_", "the_", ""]) + n + rng.choice(["_", "1", "_v"]) for n in sorted(_local_names(tree))}
    return _reordered(_recommented(_renamed(code, names), rng))


def class_answers(root: Path, assignment: str, notebook: str) -> dict[str, dict[str, str] | None]:
    """student -> grade_id -> what they typed (None: the release as it is) for the generated students."""
    from jaxgrader.grading.course.config import load_config
    from jaxgrader.grading.course.coursedir import coursedir_of, folder
    from jaxgrader.grading.course.notebooks import read_notebook, solutions_of
    from jaxgrader.grading.demo import answers_for

    release = read_notebook(folder(coursedir_of(load_config(root)), "release", ".", assignment) / f"{notebook}.ipynb")
    stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
             if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    students = {copier: {gid: near_copy(code, k) for k, (gid, code) in enumerate(
                answers_for(root, assignment, notebook, original).items())} for copier, original in COPIES.items()}
    students["dee"] = {gid: stub.replace("# YOUR CODE HERE", "# TODO: come back to this after the lecture")
                       .replace("YOUR ANSWER HERE", "I will answer this later.") for gid, stub in stubs.items()}
    own = independent_answers(assignment)
    if own is not None:
        solutions = solutions_of(read_notebook(folder(coursedir_of(load_config(root)), "source", ".", assignment)
                                               / f"{notebook}.ipynb"))
        assert set(own) == set(solutions), f"{assignment}: independent answers for {sorted(set(solutions) - set(own))}?"
        students["indie"] = own
    return students


def write_class(root: Path, assignment: str) -> list[str]:
    """The demo class (``jaxgrader demo``'s) and the generated students, in ``submitted/``: who is in it."""
    from jaxgrader.grading.course.config import load_config
    from jaxgrader.grading.course.coursedir import coursedir_of, folder, source_notebooks
    from jaxgrader.grading.course.notebooks import write_submission
    from jaxgrader.grading.demo import write_demo_submissions

    students = write_demo_submissions(root, [assignment])
    coursedir = coursedir_of(load_config(root))
    release = folder(coursedir, "release", ".", assignment)
    typed: dict[str, dict] = {}
    for notebook in source_notebooks(root, assignment):
        for student, answers in class_answers(root, assignment, notebook).items():
            typed.setdefault(student, {})[notebook] = answers
    for student, notebooks in typed.items():
        write_submission(release, folder(coursedir, "submitted", student, assignment), notebooks)
    return students + list(typed)
