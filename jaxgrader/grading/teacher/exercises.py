"""Names for graded cells: the exercise heading each one sits under.

Every graded cell of a lesson sits under a heading ``## Exercise K: <title> (P points)``
(docs/authoring.md). A teacher and a student think in exercises, not in grade ids, so
the class report and the feedback summary name each graded cell by that heading,
read from the instructor's source notebook (a student can edit the headings in a
submission; the source is the course's own text).
"""

from __future__ import annotations

import re

_HEADING = re.compile(r"^##\s+(.+?)\s*#*\s*$", re.M)
# "(2 points)", "(3 points, graded by hand)"; an edition's "(2점)", "(3점, 직접 채점)"
_POINTS = re.compile(r"\s*\([^()]*(?:\bpoints?\b|\d\s*점)[^()]*\)\s*$")


def _title(line: str) -> str:
    return _POINTS.sub("", line).strip()


def _under_headings(nb):
    """(cell, its nbgrader metadata, the last level-2 heading above it without its points ('' if none))."""
    heading = ""
    for cell in nb.cells:
        yield cell, cell.get("metadata", {}).get("nbgrader", {}) or {}, heading
        if cell.cell_type == "markdown":
            headings = _HEADING.findall(cell.source)
            if headings:
                heading = _title(headings[-1])


def graded_cells(nb) -> list[tuple[str, str, str]]:
    """(grade_id, kind, heading) per graded cell, in order; kind is "test", "answer" or "written".

    The heading is the last level-2 markdown heading above the cell, without its
    points ('' if there is none).
    """
    return [(meta.get("grade_id", ""), "written" if cell.cell_type == "markdown"
             else "answer" if meta.get("solution") else "test", heading)
            for cell, meta, heading in _under_headings(nb) if meta.get("grade")]


def headings(nb) -> dict[str, str]:
    """grade_id -> the exercise heading above it, for every cell with a grade id ('' under none)."""
    return {meta["grade_id"]: heading for _, meta, heading in _under_headings(nb) if meta.get("grade_id")}


def names(nb, words: dict[str, str] | None = None) -> dict[str, str]:
    """grade_id -> a name for people: the exercise heading, and which of its graded cells.

    "Exercise 2: update without mutating", "Exercise 5: the train step (test 2 of 4)",
    "Exercise 8: why `f(params, x)`? (written answer)". A cell without a heading above
    it keeps its grade id. ``words``: the suffixes in an edition's language (English template ->
    translated template, from its ``grader.po``).
    """
    words = words or {}

    def say(template: str, **fields) -> str:
        try:
            return words.get(template, template).format(**fields)
        except (KeyError, IndexError, ValueError):  # a broken translation: the English
            return template.format(**fields)

    cells = graded_cells(nb)
    tests_under: dict[str, list[str]] = {}
    for gid, kind, heading in cells:
        if kind == "test":
            tests_under.setdefault(heading, []).append(gid)
    out = {}
    for gid, kind, heading in cells:
        if not heading:
            out[gid] = gid
        elif kind == "written":
            out[gid] = say("{heading} (written answer)", heading=heading)
        elif kind == "answer":
            out[gid] = say("{heading} (answer)", heading=heading)
        elif len(tests_under[heading]) > 1:
            out[gid] = say("{heading} (test {k} of {n})", heading=heading, k=tests_under[heading].index(gid) + 1,
                           n=len(tests_under[heading]))
        else:
            out[gid] = heading
    return out


def source_names(coursedir, assignment: str, notebook: str, language: str | None = None,
                 words: dict[str, str] | None = None) -> dict[str, str]:
    """``names`` of the instructor's notebook, in an edition's words when ``language`` is given
    (its ``<lang>/source/``, falling back to the English headings); ``{}`` if none can be read."""
    from ..course.coursedir import edition_coursedir, folder
    from ..course.notebooks import NotebookError, read_notebook

    for course in ([edition_coursedir(coursedir, language)] if language else []) + [coursedir]:
        path = folder(course, "source", ".", assignment) / f"{notebook}.ipynb"
        try:
            return names(read_notebook(path), words if course is not coursedir else None)
        except NotebookError:
            continue
    return {}
