"""One convention across lessons (docs/authoring.md), enforced: openings, setup cell,
quick-run switch, data split, exercise headings and points, closing sections."""

from __future__ import annotations

import re

import pytest

from jaxgrader import course_style as style
from jaxgrader.grading.course.notebooks import read_notebook

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


# Doc pages that moved: JAX's docs removed them, turned them into "moved to" stubs (its FAQ) or
# redirect them (`rediraffe_redirects` in JAX's docs/conf.py), or the project moved house. A link
# must name the current page (the value says which).
MOVED_DOC_TARGETS = {
    "docs.jax.dev/en/latest/working-with-pytrees.html": "pytrees.html",
    "docs.jax.dev/en/latest/working_with_pytrees.html": "pytrees.html",
    "docs.jax.dev/en/latest/faq.html#buffer-donation": "buffer_donation.html",
    "docs.jax.dev/en/latest/faq.html#benchmarking-jax-code": "benchmarking.html",
    "docs.jax.dev/en/latest/sharded-computation.html": "parallel.html",
    "docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html": "parallel.html",
    "docs.jax.dev/en/latest/notebooks/explicit-sharding.html": "parallel.html",
    "docs.jax.dev/en/latest/tutorials.html": "jax-101.html",
    "docs.jax.dev/en/latest/quickstart.html": "notebooks/thinking_in_jax.html",
    "docs.jax.dev/en/latest/notebooks/quickstart.html": "notebooks/thinking_in_jax.html",
    "docs.jax.dev/en/latest/jax-101/": "key-concepts.html, jit-compilation.html and the other pages it became",
    "docs.jax.dev/en/latest/notebooks/external_callbacks.html": "external-callbacks.html",
    "docs.jax.dev/en/latest/notebooks/How_JAX_primitives_work.html": "jax-primitives.html",
    "jax.readthedocs.io": "docs.jax.dev",
    "github.com/google/jax": "github.com/jax-ml/jax",
}
RELEASES = sorted((ROOT / "release").glob("lesson*/*.ipynb"))


def _moved(url):
    """The entry of MOVED_DOC_TARGETS that `url` (without its scheme) points into, or None."""
    for old in MOVED_DOC_TARGETS:
        if url == old or (url.startswith(old) and (old[-1] in "/#" or url[len(old)] in "/#?")):
            return old
    return None


def test_the_moved_link_rule_reads_urls():
    assert _moved("docs.jax.dev/en/latest/faq.html#buffer-donation") is not None
    assert _moved("docs.jax.dev/en/latest/jax-101/02-jitting.html") is not None
    assert _moved("github.com/google/jax/issues/1") is not None
    assert _moved("github.com/google/jaxtyping") is None
    assert _moved("docs.jax.dev/en/latest/faq.html") is None
    assert _moved("docs.jax.dev/en/latest/pytrees.html") is None


@pytest.mark.parametrize("path", LECTURES + SOURCES + RELEASES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_name_current_doc_pages(path):
    """No link in a notebook's text points at a doc page known to have moved."""
    text = _text(read_notebook(path))
    found = [(url, _moved(url)) for url in re.findall(r"https?://([^\s)>\]\"'`]+)", text) if _moved(url)]
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(
        f"{url} has moved (use {MOVED_DOC_TARGETS[old]})" for url, old in found)


# Times. Each lecture states, at its start, "**Time:** about N minutes for this lecture ..., about M
# minutes for <its|the> assignment"; the course map's table has "N min + M min" per lesson and a
# line "**In all: about H h M min**, ... h ... min of lectures and ... h ... min of assignments".
_LECTURE_TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes for this lecture.*?about (\d+) minutes", re.DOTALL)
_ASSIGNMENT_TIME = re.compile(r"\*\*Time:\*\* about (?:(\d+) h\b)?\s*(?:(\d+) min)?")  # "1 h 30 min", "2 h", "90 min"
_MAP_ROW = re.compile(r"^\| (\d+) \|.*\| (\d+) min \+ (\d+) min \|\s*$", re.MULTILINE)
_MAP_TOTAL = re.compile(r"\*\*In all: about (\d+) h (\d+) min\*\*, (\d+) h (\d+) min of lectures "
                        r"and (\d+) h (\d+) min of assignments")


def _course_map():
    """({lesson: (lecture minutes, assignment minutes)}, (total, lectures, assignments) in minutes)."""
    text = _text(read_notebook(ROOT / "notebooks" / "00_index.ipynb"))
    rows = {int(n): (int(lec), int(asg)) for n, lec, asg in _MAP_ROW.findall(text)}
    total = _MAP_TOTAL.search(text)
    sums = None if total is None else tuple(60 * int(h) + int(m) for h, m in zip(total.groups()[::2], total.groups()[1::2]))
    return rows, sums


def test_stated_times_agree_with_the_course_map():
    rows, sums = _course_map()
    problems = []
    for path in LESSONS:
        n = _lesson_number(path)
        stated = _LECTURE_TIME.search(" ".join(read_notebook(path).cells[0].source.split()))
        if stated is None:
            problems.append(f"{path.name}: no '**Time:** about N minutes for this lecture ..., about M minutes "
                            "for its assignment' in the first cell")
        elif (int(stated[1]), int(stated[2])) != rows.get(n):
            problems.append(f"{path.name} states {stated[1]} + {stated[2]} min, the course map {rows.get(n)}")
    for path in SOURCES:  # an assignment that states its own time must agree too
        stated = _ASSIGNMENT_TIME.search(" ".join(read_notebook(path).cells[0].source.split()))
        n = _lesson_number(path)
        if stated and (stated[1] or stated[2]):
            minutes = 60 * int(stated[1] or 0) + int(stated[2] or 0)
            if n in rows and minutes != rows[n][1]:
                problems.append(f"{path.relative_to(ROOT)} states {minutes} min, the course map {rows[n][1]}")
    if sorted(rows) != sorted(_lesson_number(p) for p in LESSONS):
        problems.append(f"the course map has time rows for lessons {sorted(rows)}")
    lectures, assignments = sum(lec for lec, _ in rows.values()), sum(asg for _, asg in rows.values())
    if sums != (lectures + assignments, lectures, assignments):
        problems.append(f"the course map's '**In all: ...**' line says {sums} (total, lectures, assignments in "
                        f"minutes), its rows sum to {(lectures + assignments, lectures, assignments)}")
    assert not problems, "\n".join(problems)
