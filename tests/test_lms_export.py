"""`jaxgrader export`: grades in Canvas's and Moodle's gradebook import formats, and a long CSV.

No grading run: a small gradebook is built with nbgrader's own API (three students, two
assignments, one submission missing per student but ada, a late penalty, a name with a comma
and a quote), and each export is compared byte for byte with a file written from the LMS's
documented format (tests/fixtures/lms/, see jaxgrader/grading/teacher/lms_export.py for the sources).
"""

from __future__ import annotations

import datetime
import shutil

import pytest

from .conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "lms"
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own autoflush warnings


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    """The gradebook file, built once (nbgrader runs alembic for each new gradebook: seconds)."""
    from nbgrader.api import Gradebook

    path = tmp_path_factory.mktemp("lms") / "gradebook.db"
    with Gradebook(f"sqlite:///{path}") as gb:
        gb.add_student("ada", first_name="Ada", last_name="Lovelace", email="ada@example.edu", lms_user_id="1001")
        gb.add_student("bo")  # no name, email or LMS id: the export still has a row, with what there is
        gb.add_student("cy", first_name="Cy", last_name="O'Neil, Jr.", email="cy@example.edu", lms_user_id="1003")
        for name, cells, month in (("lesson2", [("q1", 3)], 2), ("lesson1", [("q1", 2), ("q2", 2)], 1)):
            gb.add_assignment(name, duedate=datetime.datetime(2026, month, 1))
            gb.add_notebook("nb", name)
            for cell, points in cells:
                gb.add_grade_cell(cell, "nb", name, max_score=points, cell_type="code")
        scores = {("ada", "lesson1"): {"q1": 2, "q2": 1.5}, ("ada", "lesson2"): {"q1": 3},
                  ("bo", "lesson1"): {"q1": 0, "q2": 0}, ("cy", "lesson2"): {"q1": 1.25}}
        for (student, assignment), cells in scores.items():
            gb.add_submission(assignment, student)
            for cell, score in cells.items():
                gb.find_grade(cell, "nb", assignment, student).auto_score = score
        gb.find_submission_notebook("nb", "lesson2", "ada").late_submission_penalty = 0.5
        gb.db.commit()
    return path


@pytest.fixture
def course(tmp_path, gradebook):
    """A course directory with the course's configuration and a copy of the gradebook."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copy2(gradebook, course / "gradebook.db")
    return course


def _configure(course, text: str) -> None:
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write(f"\n{text}\n")


def _export(course, *args) -> int:
    from jaxgrader.grading.cli import main

    return main(["--root", str(course), "export", *args])


def test_canvas_gradebook_import(course, capsys):
    _configure(course, 'c.LmsExport.canvas_assignment_ids = {"lesson1": 111}')
    assert _export(course, "--format", "canvas") == 0
    assert (course / "grades-canvas.csv").read_text() == (FIXTURES / "canvas.csv").read_text()
    assert "no lms_user_id for bo" in capsys.readouterr().err


def test_moodle_grade_import(course, tmp_path):
    out = tmp_path / "moodle.csv"
    assert _export(course, "--format", "moodle", "-o", str(out)) == 0
    assert out.read_text() == (FIXTURES / "moodle.csv").read_text()


def test_moodle_matches_by_username_when_told(course):
    _configure(course, 'c.LmsExport.moodle_identifier = "username"')
    assert _export(course, "--format", "moodle", "-a", "lesson1") == 0
    lines = (course / "grades-moodle.csv").read_text().splitlines()
    assert lines[0] == "First name,Last name,Username,lesson1"
    assert "Ada,Lovelace,ada,3.50" in lines


def test_long_csv(course):
    assert _export(course, "--format", "csv", "-a", "lesson1", "-a", "lesson2") == 0
    assert (course / "grades-csv.csv").read_text() == (FIXTURES / "long.csv").read_text()


@pytest.mark.parametrize("problem", ["unknown assignment", "no gradebook"])
def test_problems_are_one_line(course, capsys, problem):
    if problem == "no gradebook":
        (course / "gradebook.db").unlink()
    assert _export(course, "--format", "canvas", "-a", "lesson9") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("lesson9" in err if problem == "unknown assignment" else "no gradebook" in err)
    assert not (course / "grades-canvas.csv").exists()
