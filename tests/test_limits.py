"""Per-notebook time and memory limits: cells that ran keep their points, the rest score 0
with a note, and the class run goes on."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat

from jaxgrader.grading.course.notebooks import fill_answers, solutions_of

from .conftest import ROOT
from .short_lesson import short_lesson

LIMITS = """
c.Execute.timeout = 60
c.LimitedExecute.notebook_timeout = 15
c.LimitedExecute.memory_limit_mb = 1500
"""


def test_time_and_memory_limits_keep_earlier_points(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text() + LIMITS)
    # lesson 1 up to its fourth exercise (tests/short_lesson.py): the two the limits stop, and two before
    source, release = short_lesson(course, "test_count_traces")
    answers = solutions_of(source)
    students = {
        # the third exercise never finishes: exercises 1-2 keep their points
        "endless": {**answers, "add_at": "import time\ntime.sleep(600)\n" + answers["add_at"]},
        # the fourth exercise allocates ~3 GiB: exercises 1-3 keep their points
        "hungry": {**answers, "count_traces": "hog = np.ones(400_000_000)\nhog += 1\n" + answers["count_traces"]},
        "honest": answers,
    }
    for student, typed in students.items():
        folder = course / "submitted" / student / "lesson1"
        folder.mkdir(parents=True)
        nbformat.write(fill_answers(release, typed), folder / "pure_functions.ipynb")
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "--no-feedback"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = {r["student"]: r for r in json.loads((course / "grading-summary.json").read_text())}
    points = {c.metadata.nbgrader.grade_id: c.metadata.nbgrader.points for c in source.cells
              if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}
    assert summary["honest"]["score"] == sum(points.values())
    assert summary["endless"]["score"] == points["test_predict"] + points["test_sgd_step"]
    assert any("NotebookTimeLimit" in n or "CellTimeoutError" in n for n in summary["endless"]["notes"])
    assert summary["hungry"]["score"] == points["test_predict"] + points["test_sgd_step"] + points["test_add_at"]
    assert any("NotebookMemoryLimit" in n for n in summary["hungry"]["notes"])
    assert "NotebookMemoryLimit" in run.stdout  # the teacher sees the note in the table's problems
    # the limits hold for kernels forked from the prepared process too (the course's default)
    assert {s: r["timings"].get("kernels_forked") for s, r in summary.items()} == dict.fromkeys(students, 1)
