"""The gradebook: one writer, regrading duplicates nothing, an interrupted run keeps what it
wrote and the next run grades only the rest; PostgreSQL too (a real server, started here)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import nbformat

from jaxgrader.grading.course.notebooks import fill_answers, solutions_of

from .conftest import ROOT
from .short_lesson import short_lesson

STUDENTS = {"ada": "solution", "bo": "blank", "cy": "solution", "dee": "blank"}


def _course(tmp_path, db_url=None):
    course = tmp_path / "course"
    course.mkdir()
    config = (ROOT / "nbgrader_config.py").read_text()
    if db_url:
        config += f"\nc.CourseDirectory.db_url = {db_url!r}\n"
    (course / "nbgrader_config.py").write_text(config)
    source, release = short_lesson(course)
    answers = solutions_of(source)
    for student, kind in STUDENTS.items():
        folder = course / "submitted" / student / "lesson1"
        folder.mkdir(parents=True)
        nb = fill_answers(release, answers) if kind == "solution" else release
        nbformat.write(nb, folder / "pure_functions.ipynb")
    return course


def _command(course, *extra):
    return [sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "--no-feedback", *extra]


def _grade(course, *extra):
    return subprocess.run(_command(course, *extra), capture_output=True, text=True, timeout=1200)


def _summary(course):
    return {r["student"]: r for r in json.loads((course / "grading-summary.json").read_text())}


def _gradebook(db_url):
    """student -> (submission score, number of grade rows, every auto score set)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        out = {}
        for sub in gb.find_assignment("lesson1").submissions:
            grades = [g for nb in sub.notebooks for g in nb.grades]
            autograded = [g for g in grades if g.cell.cell_type == "code"]
            out[sub.student.id] = (float(sub.score), len(grades), all(g.auto_score is not None for g in autograded))
        return out


def _check_class(course, db_url):
    summary = _summary(course)
    scores = {s: r["score"] for s, r in summary.items()}
    assert scores["ada"] == scores["cy"] > 0 and scores["bo"] == scores["dee"] == 0
    rows = _gradebook(db_url)
    assert sorted(rows) == sorted(STUDENTS)
    assert {s: r[0] for s, r in rows.items()} == scores
    assert all(complete for _, _, complete in rows.values())
    return rows


def test_interrupted_run_keeps_what_it_wrote_and_the_next_grades_only_the_rest(tmp_path):
    course = _course(tmp_path)
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    ledger = course / ".grading" / "ledger.json"

    # kill a run (the coordinator, its workers and their kernels) once it has written one record
    proc = subprocess.Popen(_command(course, "--workers", "1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    while not ledger.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = {key.split("/")[1]: entry["result"] for key, entry in json.loads(ledger.read_text()).items()}
    assert 1 <= len(written) < len(STUDENTS), "the run was not interrupted mid-way"
    rows = _gradebook(db_url)
    for student, result in written.items():  # every record written before the kill is there, complete
        assert rows[student][0] == result["score"] and rows[student][2], student

    again = _grade(course)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    summary = _summary(course)
    assert {s for s, r in summary.items() if r["kept"]} == set(written), "the rerun graded a kept record again"
    assert all(summary[s]["score"] == written[s]["score"] for s in written)
    rows = _check_class(course, db_url)

    # grading everything again duplicates nothing
    regrade = _grade(course, "--regrade")
    assert regrade.returncode == 0, regrade.stderr[-2000:]
    assert not any(r["kept"] for r in _summary(course).values())
    assert _check_class(course, db_url) == rows, "regrading changed the grade rows"
    with open(course / "grades.csv") as fh:
        assert len(list(csv.DictReader(fh))) == len(STUDENTS)


def test_postgres_gradebook(tmp_path, postgres):
    course = _course(tmp_path, postgres)
    first = _grade(course)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    rows = _check_class(course, postgres)
    assert not (course / "gradebook.db").exists(), "a server gradebook must not leave an SQLite file"
    again = _grade(course)  # nothing changed: nothing graded, the table is the same
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(r["kept"] for r in _summary(course).values())
    assert _check_class(course, postgres) == rows


def test_the_alembic_head_read_in_process_is_what_alembic_heads_prints():
    """A new gradebook records nbgrader's migration head. nbgrader asks an ``alembic heads`` process
    for it (2.6 s); jaxgrader reads it from the same scripts in-process: the same revision."""
    import nbgrader.api

    from jaxgrader.grading.course.coursedir import _alembic_head, cache_alembic_version

    nbgraders = subprocess.run([sys.executable, "-c", "from nbgrader.api import get_alembic_version as v; print(v())"],
                               capture_output=True, text=True, timeout=120)
    assert nbgraders.returncode == 0, nbgraders.stderr[-1000:]
    assert nbgraders.stdout.strip() == _alembic_head()
    cache_alembic_version()
    assert nbgrader.api.get_alembic_version() == _alembic_head()
