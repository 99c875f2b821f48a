"""The bundled demo class: students built from the course's own files.

* ``ada`` answered everything with the instructor's solutions (full marks),
* ``bo`` submitted the release untouched (zero),
* ``cy`` answered everything, but some answers are the wrong-but-plausible
  ones from ``demo/wrong-answers/<assignment>.toml`` marked ``demo = true``,
* ``hana`` works in the Korean edition (``ko/release/``) and answers as ``cy`` does:
  same score, feedback in Korean (docs/grading.md, "Editions"). She is in the class
  for each assignment the edition has.

Building submissions from ``release/`` the way a student would (typing into
solution cells only) keeps the demo true to whatever the course holds now.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .course.config import load_config
from .course.coursedir import assignments_in, coursedir_of, edition_coursedir, folder, source_notebooks
from .course.notebooks import read_notebook, solutions_of, write_submission
from .trials import wrong_answers

DEMO_STUDENTS = ("ada", "bo", "cy")
# student -> (the edition's language, the English demo student whose answers she types)
EDITION_STUDENTS = {"hana": ("ko", "cy")}


def answers_for(root: Path, assignment: str, notebook: str, student: str) -> dict[str, str] | None:
    """grade_id -> text typed by ``student``; None means 'submitted the release as is'."""
    if student == "bo":
        return None
    source = read_notebook(folder(coursedir_of(load_config(root)), "source", ".", assignment) / f"{notebook}.ipynb")
    answers = solutions_of(source)
    if student == "cy":
        for wrong in wrong_answers(root, assignment):
            if wrong.get("demo") and wrong["cell"] in answers:
                answers[wrong["cell"]] = wrong["code"]
    return answers


def write_demo_submissions(root: Path, assignments: list[str] | None = None) -> list[str]:
    """(Re)create ``submitted/<student>/<assignment>/`` for the demo students; returns who is in the class."""
    root = Path(root)
    coursedir = coursedir_of(load_config(root))
    students = {student: (None, student) for student in DEMO_STUDENTS} | EDITION_STUDENTS
    written = set()
    for student, (language, like) in students.items():
        for assignment in assignments or assignments_in(root):
            release = folder(edition_coursedir(coursedir, language), "release", ".", assignment)
            if not release.is_dir():
                continue  # the edition does not have this assignment (yet)
            where = folder(coursedir, "submitted", student, assignment)
            if where.exists():
                shutil.rmtree(where)
            where.mkdir(parents=True)
            for notebook in source_notebooks(root, assignment):
                write_submission(release, where, {notebook: answers_for(root, assignment, notebook, like)})
            written.add(student)
    return [student for student in students if student in written]
