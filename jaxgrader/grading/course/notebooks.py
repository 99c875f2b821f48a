"""Small helpers over nbgrader-marked notebooks (read, find cells, fill answers).

nbgrader keeps its marks in ``cell.metadata.nbgrader``; these helpers give the
course command and the test suite one vocabulary for them instead of dict
digging in every file.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat


class NotebookError(ValueError):
    """A notebook that cannot be used, with a one-line reason naming the file."""


MAX_NOTEBOOK_BYTES = 64 * 2**20  # far above any honest submission (lesson notebooks are < 1 MB)
MAX_NESTING = 64  # JSON depth; nbformat 4 needs about 8


def _nesting(text: str) -> int:
    """Deepest bracket nesting outside strings, without building anything (a 20,000-deep
    notebook must be a one-line error, not a RecursionError in the grader)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Read and validate a notebook, raising NotebookError with a one-line reason."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise NotebookError(f"{path}: no such file") from None
    except OSError as exc:
        raise NotebookError(f"{path}: cannot be read ({exc.__class__.__name__})") from None
    if not path.is_file():
        raise NotebookError(f"{path}: not a file")
    if size == 0:
        raise NotebookError(f"{path}: empty file")
    if size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{path}: {size / 2**20:.0f} MiB, larger than the {MAX_NOTEBOOK_BYTES // 2**20} MiB limit")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotebookError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NotebookError(f"{path}: cannot be read ({exc.__class__.__name__})") from None
    if "\x00" in text:
        raise NotebookError(f"{path}: binary data, not a notebook")
    if _nesting(text) > MAX_NESTING:
        raise NotebookError(f"{path}: nested more than {MAX_NESTING} levels deep, not a notebook")
    try:
        raw = json.loads(text)
    except RecursionError:
        raise NotebookError(f"{path}: nested too deeply, not a notebook") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(raw, dict) or raw.get("nbformat") != 4:
        raise NotebookError(f"{path}: not an nbformat 4 notebook")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several validation error types
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise NotebookError(f"{path}: invalid notebook ({first_line})") from None
    for index, cell in enumerate(nb.cells, 1):  # nbgrader needs these ids, and fails with a bare KeyError without
        meta = nbgrader_meta(cell)
        if (meta.get("solution") or meta.get("grade") or meta.get("locked")) and not meta.get("grade_id"):
            raise NotebookError(f"{path}: cell {index} is an nbgrader cell without a grade_id "
                                "(its metadata was edited outside Jupyter)")
    return nb


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def grade_id(cell) -> str | None:
    return nbgrader_meta(cell).get("grade_id")


def is_solution(cell) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_autograded_test(cell) -> bool:
    """An autograder test cell: graded, not a solution, code."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"


def autograded_tests(nb) -> dict[str, float]:
    """grade_id -> points of every auto-graded test cell."""
    return {grade_id(c): float(nbgrader_meta(c).get("points", 0)) for c in nb.cells if is_autograded_test(c)}


def fill_answers(release_nb, answers: dict[str, str]):
    """A copy of ``release_nb`` whose solution cells hold ``answers[grade_id]``.

    This is what a student does: type into the solution cells and nothing else.
    Cells not named in ``answers`` keep the release stub.
    """
    nb = nbformat.from_dict(json.loads(json.dumps(release_nb)))
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in answers and is_solution(cell):
            cell.source = answers[gid]
    return nb


def write_submission(release_dir: Path, folder: Path, answers: dict[str, dict[str, str] | None]) -> None:
    """Write what a student submits: each released notebook, typed into or (None) left as is.

    ``answers`` maps notebook name -> {grade_id: text} or None.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, typed in answers.items():
        release = read_notebook(Path(release_dir) / f"{name}.ipynb")
        nbformat.write(release if typed is None else fill_answers(release, typed), folder / f"{name}.ipynb")


def solutions_of(source_nb) -> dict[str, str]:
    """grade_id -> instructor solution text of every solution cell, markers removed.

    Hidden tests never live in solution cells, so this is safe to put into a
    (demo) submission.
    """
    answers = {}
    for cell in source_nb.cells:
        if is_solution(cell):
            lines = [
                line
                for line in cell.source.splitlines()
                if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
            ]
            answers[grade_id(cell)] = "\n".join(lines)
    return answers
