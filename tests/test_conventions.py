"""One convention across lessons (docs/authoring.md), enforced: openings, setup cell,
quick-run switch, data split, exercise headings and points, closing sections."""

from __future__ import annotations

import re

import pytest

from jaxgrader import course_style as style
from jaxgrader.grading.notebooks import read_notebook

from .conftest import ASSIGNMENTS, LECTURES, ROOT

LESSONS = [p for p in LECTURES if re.match(r"lesson\d+_", p.name)]
SOURCES = [p for a in ASSIGNMENTS for p in sorted((ROOT / "source" / a).glob("*.ipynb"))]


def _lesson_number(path):
    return int(re.search(r"lesson(\d+)", str(path.relative_to(ROOT))).group(1))


def _first_code(nb):
    return next(c for c in nb.cells if c.cell_type == "code")


def _text(nb):
    return "\n".join(c.source for c in nb.cells)


def _markdown_lines(nb):
    return [(i, line.strip()) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
            for line in c.source.splitlines()]


def _shared_rules(path, nb):
    """Rules lectures and assignments share; returns problems."""
    problems = []
    if _first_code(nb).source != style.SETUP_CELL:
        problems.append("the first code cell is not the course's setup cell (jaxgrader.course_style.SETUP_CELL)")
    text = _text(nb)
    if ("NBGRADER_EXECUTION" in text or 'environ.get("CI")' in text) and style.FAST_LINE not in text:
        problems.append(f"a quick-run switch other than `{style.FAST_LINE}`")
    if "load_digits(" in text and style.DIGITS_SPLIT not in text:
        problems.append("loads the digits without the course's split (jaxgrader.course_style.DIGITS_SPLIT)")
    return [f"{path.relative_to(ROOT)}: {p}" for p in problems]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_lecture_follows_the_course_convention(path):
    nb = read_notebook(path)
    n = _lesson_number(path)
    problems = _shared_rules(path, nb)
    first = nb.cells[0].source
    where = path.relative_to(ROOT)
    if not first.startswith(f"# Lesson {n}: "):
        problems.append(f"{where}: the first cell does not open with '# Lesson {n}: <title>'")
    if style.badge(f"notebooks/{path.name}") not in first:
        problems.append(f"{where}: no Open-in-Colab badge for notebooks/{path.name} in the first cell")
    headings = [(i, line) for i, line in _markdown_lines(nb) if line in style.LECTURE_SECTIONS]
    if [h for _, h in headings] != list(style.LECTURE_SECTIONS):
        problems.append(f"{where}: section headings {[h for _, h in headings]}, expected {list(style.LECTURE_SECTIONS)}")
    elif headings[0][0] > nb.cells.index(_first_code(nb)):
        problems.append(f"{where}: '## Objectives' comes after the first code cell")
    text = _text(nb)
    if f"release/lesson{n}/" not in text:
        problems.append(f"{where}: no link to its assignment (release/lesson{n}/)")
    if "docs.jax.dev" not in text:
        problems.append(f"{where}: no link into JAX's documentation (docs.jax.dev)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_assignment_follows_the_course_convention(path):
    nb = read_notebook(path)
    n = _lesson_number(path)
    problems = _shared_rules(path, nb)
    where = path.relative_to(ROOT)
    first = nb.cells[0].source
    if not first.startswith(f"# Lesson {n} assignment: "):
        problems.append(f"{where}: the first cell does not open with '# Lesson {n} assignment: <title>'")
    if style.badge(f"release/lesson{n}/{path.name}") not in first:
        problems.append(f"{where}: no Open-in-Colab badge for release/lesson{n}/{path.name} in the first cell")
    if f"notebooks/lesson{n}_" not in first:
        problems.append(f"{where}: the first cell does not link the lecture (notebooks/lesson{n}_...)")
    setup = _first_code(nb).metadata.get("nbgrader", {})
    if not setup.get("locked") or setup.get("grade") or setup.get("solution"):
        problems.append(f"{where}: the setup cell must be a locked, ungraded nbgrader cell")

    # Exercises: numbered 1, 2, ...; each heading's points = its graded cells' points.
    groups = style.exercises(nb)
    for number, claimed, cells in groups:
        graded = [c.metadata["nbgrader"] for c in cells if c.metadata.get("nbgrader", {}).get("grade")]
        if number is None:
            problems += [f"{where}: graded cell {m.get('grade_id')} comes before any '## Exercise' heading"
                         for m in graded]
        elif claimed != sum(int(m.get("points", 0)) for m in graded):
            problems.append(f"{where}: Exercise {number} says {claimed} points, its graded cells give "
                            f"{sum(int(m.get('points', 0)) for m in graded)}")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and "### BEGIN SOLUTION" not in cell.source:
            problems.append(f"{where}: solution cell {meta.get('grade_id')} has no '### BEGIN SOLUTION' "
                            "(students get nbgrader's `raise NotImplementedError()` stub)")
    numbers = [number for number, _, _ in groups[1:]]
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"{where}: exercises numbered {numbers}, expected 1..{len(numbers)}")
    assert not problems, "\n".join(problems)


def test_index_links_every_lecture_and_assignment():
    index = read_notebook(ROOT / "notebooks" / "00_index.ipynb")
    text = _text(index)
    missing = [p.name for p in LESSONS if p.name not in text]
    missing += [f"release/{a}/" for a in ASSIGNMENTS if f"release/{a}/" not in text]
    missing += ["a Colab badge"] if style.BADGE_IMAGE not in text else []
    assert not missing, f"notebooks/00_index.ipynb does not mention {missing}"


def test_the_heading_rule_reads_points():
    assert style.EXERCISE_HEADING.search("## Exercise 2: a loss (3 points)").groups() == ("2", "3")
    assert style.EXERCISE_HEADING.search("## Exercise 1: one (1 point)").groups() == ("1", "1")
    assert style.EXERCISE_HEADING.search("## Exercise 4: x (6 points in three tests)").groups() == ("4", "6")
    assert style.EXERCISE_HEADING.search("## Exercise 4: no points") is None


@pytest.mark.parametrize("path", LECTURES + SOURCES, ids=lambda p: p.stem)
def test_committed_outputs_name_no_machine_paths(path):
    """Tracebacks in committed outputs must not show where the author's environment lives."""
    import json

    outputs = json.dumps([c.get("outputs", []) for c in read_notebook(path).cells if c.cell_type == "code"])
    found = re.findall(r"/(?:work|root|home|tmp)/[A-Za-z0-9_.\-/]{3,40}", outputs)
    assert not found, f"{path.relative_to(ROOT)}: outputs name machine paths {sorted(set(found))[:3]}"
