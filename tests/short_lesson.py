"""Lesson 1 cut short, for tests of the class run itself (gradebooks, intake, scale-out, hostile
submissions), not of the lesson.

Those tests grade a course a few times over; what they check (a record per student, scores
that survive an interruption, a one-line error per broken file) does not depend on how many
exercises a notebook has. The first exercises of lesson 1, with its setup cell, are a real
assignment graded by the real grader at a third of the cost. The trials grade the whole lesson.
"""

from __future__ import annotations

import nbformat

from jaxgrader.grading.course.notebooks import grade_id, read_notebook

from .conftest import ROOT

ASSIGNMENT, NOTEBOOK = "lesson1", "pure_functions"
LAST = "test_add_at"  # the third exercise's test cell: predict, sgd_step and add_at are kept


def _cut(nb, last: str):
    ids = [grade_id(c) for c in nb.cells]
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)  # a copy
    nb.cells = nb.cells[: ids.index(last) + 1]
    return nb


def short_notebooks(last: str = LAST) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """(source, release) of lesson 1, cut alike after test cell ``last``."""
    return (_cut(read_notebook(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"), last),
            _cut(read_notebook(ROOT / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"), last))


# What lesson 1's notebook imports of the course's preload list (nbgrader_config.py): a class run's
# prepared process imports its preload list once per grading process (jaxgrader/grading/sandbox/prepared.py),
# which the course's lessons 3-5 need whole (optax, scikit-learn, Keras: 4 s), and a test that grades a
# handful of lesson 1 submissions would pay for them in every worker of every run.
LESSON1_PRELOAD = ["jax", "jax.numpy", "jaxgrader.checks"]


def preload_lesson1(course, workers: int | None = 1) -> None:
    """Make ``course``'s prepared processes import only what lesson 1 needs, and grade on ``workers`` local
    workers (its nbgrader_config.py, appended). One by default: every local worker of a run starts a
    process and a zygote of its own (about 3 CPU-seconds), which a test's class of a few submissions
    does not win back; tests of the run itself across workers (hostile class, scale-out) pass None
    or say how many they want."""
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as fh:
        fh.write(f"\nc.SandboxedKernelManager.preload = {LESSON1_PRELOAD!r}  # tests/short_lesson.py\n")
        if workers is not None:
            fh.write(f"c.JaxGrader.workers = {workers}  # tests/short_lesson.py\n")


def short_lesson(course, last: str = LAST, workers: int | None = 1) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """Write lesson 1 cut after test cell ``last`` as ``course``'s source (and release) of lesson1, and
    make its prepared processes import only what lesson 1 needs, on ``workers`` local workers
    (``preload_lesson1``, where the course has its nbgrader_config.py); return (source, release)."""
    if (course / "nbgrader_config.py").is_file():
        preload_lesson1(course, workers)
    source, release = short_notebooks(last)
    for kind, nb in (("source", source), ("release", release)):
        folder = course / kind / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")
    return source, release
