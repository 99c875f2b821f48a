"""Intake: LMS zips through `nbgrader zip_collect`, decorated names, corrupt notebooks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest

from jaxgrader.grading.classrun.intake import canonical, normalise_names
from jaxgrader.grading.course.notebooks import fill_answers, solutions_of

from .conftest import ROOT
from .short_lesson import short_lesson


@pytest.mark.parametrize("name", ["Copy of pure_functions", "pure_functions (1)", "pure_functions(2)",
                                  "Copy of Copy of pure_functions (3)", "pure_functions-1",
                                  "pure_functions - Copy", "Pure Functions", "pure_functions-checkpoint"])
def test_decorated_names_reduce_to_the_released_name(name):
    assert canonical(name) == "pure_functions"


@pytest.mark.parametrize("name", ["pure_function", "training_loop", "lesson1", "pure_functions_v2"])
def test_other_names_do_not(name):
    assert canonical(name) != "pure_functions"


def test_normalise_takes_the_newest_candidate_and_never_overwrites(tmp_path):
    (tmp_path / "Copy of pure_functions.ipynb").write_text("old")
    os.utime(tmp_path / "Copy of pure_functions.ipynb", (1, 1))
    (tmp_path / "pure_functions (1).ipynb").write_text("new")
    notes = normalise_names(tmp_path, ["pure_functions"])
    assert (tmp_path / "pure_functions.ipynb").read_text() == "new"
    assert notes == ["renamed 'pure_functions (1).ipynb' to 'pure_functions.ipynb' (newest of 2)"]
    (tmp_path / "Copy of pure_functions.ipynb").write_text("other")
    assert normalise_names(tmp_path, ["pure_functions"]) == []
    assert (tmp_path / "pure_functions.ipynb").read_text() == "new"


def test_lms_zip_to_grades(tmp_path):
    """A Canvas-style download: renamed, late, corrupt and missing submissions in one zip."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    source, release = short_lesson(course)
    answers = solutions_of(source)
    archive = course / "downloaded" / "lesson1" / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as zf:
        zf.writestr("ada_1001_2001_Copy of pure_functions.ipynb", nbformat.writes(fill_answers(release, answers)))
        zf.writestr("bo_late_1002_2002_pure_functions (1).ipynb", nbformat.writes(release))
        zf.writestr("cy_1003_2003_pure_functions.ipynb", "{\"cells\": [")
        zf.writestr("dee_1004_2004_notes.txt", "no notebook here")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    collect = subprocess.run([sys.executable, "-m", "nbgrader", "zip_collect", "lesson1"], cwd=course, env=env,
                             capture_output=True, text=True, timeout=300)
    assert collect.returncode == 0, collect.stderr[-2000:]
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["ada", "bo", "cy"]
    (course / "submitted" / "dee" / "lesson1").mkdir(parents=True)  # a student with an empty folder

    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "-a", "lesson1",
                          "--no-feedback"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, run.stderr[-2000:]  # some submissions had problems
    summary = {r["student"]: r for r in json.loads((course / "grading-summary.json").read_text())}
    assert summary["ada"]["status"] == "graded" and summary["ada"]["score"] > 0
    assert any("Copy of pure_functions.ipynb" in n for n in summary["ada"]["notes"])
    assert summary["bo"]["status"] == "graded" and summary["bo"]["score"] == 0
    assert summary["cy"]["status"] == "error" and "not valid JSON" in summary["cy"]["error"]
    assert summary["dee"]["status"] == "error" and "no such file" in summary["dee"]["error"]
    assert "cy/lesson1" in run.stdout and "not valid JSON" in run.stdout
