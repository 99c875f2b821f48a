"""The gradebook: regrading duplicates nothing, an interrupted run loses nothing,
and PostgreSQL serves parallel workers (a real server, installed and started here)."""

from __future__ import annotations

import csv
import getpass
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from jaxgrader.grading.notebooks import fill_answers, read_notebook, solutions_of

from .conftest import ROOT

STUDENTS = {"ada": "solution", "bo": "blank", "cy": "solution", "dee": "blank"}


def _course(tmp_path, db_url=None):
    course = tmp_path / "course"
    course.mkdir()
    config = (ROOT / "nbgrader_config.py").read_text()
    if db_url:
        config += f"\nc.CourseDirectory.db_url = {db_url!r}\n"
    (course / "nbgrader_config.py").write_text(config)
    shutil.copytree(ROOT / "source" / "lesson1", course / "source" / "lesson1")
    release = read_notebook(ROOT / "release" / "lesson1" / "pure_functions.ipynb")
    answers = solutions_of(read_notebook(ROOT / "source" / "lesson1" / "pure_functions.ipynb"))
    for student, kind in STUDENTS.items():
        folder = course / "submitted" / student / "lesson1"
        folder.mkdir(parents=True)
        nb = fill_answers(release, answers) if kind == "solution" else release
        nbformat.write(nb, folder / "pure_functions.ipynb")
    return course


def _grade(course, *extra):
    return subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "--no-feedback",
                           *extra], capture_output=True, text=True, timeout=1200)


def _scores(course):
    return {r["student"]: r["score"] for r in json.loads((course / "grading-summary.json").read_text())}


def _grade_rows(db_url):
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return (len(gb.students), len(gb.find_assignment("lesson1").submissions),
                sum(len(nb.grades) for sub in gb.find_assignment("lesson1").submissions for nb in sub.notebooks))


def _check_class(course, db_url):
    scores = _scores(course)
    assert scores["ada"] == scores["cy"] > 0 and scores["bo"] == scores["dee"] == 0
    students, submissions, grades = _grade_rows(db_url)
    assert (students, submissions) == (4, 4)
    return grades


def test_sqlite_regrade_duplicates_nothing_and_interruption_loses_nothing(tmp_path):
    course = _course(tmp_path)
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    first = _grade(course)
    assert first.returncode == 0, first.stderr[-2000:]
    grades = _check_class(course, db_url)
    before = (course / "gradebook.db").read_bytes()

    # interrupt a second run mid-way: the published gradebook must be untouched
    proc = subprocess.Popen([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "--no-feedback"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    working_copy = course / ".grading" / "gradebook.db"
    deadline = time.monotonic() + 300
    while not working_copy.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(5)  # workers are grading into the working copy now
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (course / "gradebook.db").read_bytes() == before, "an interrupted run changed the gradebook"

    again = _grade(course)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _check_class(course, db_url) == grades, "regrading changed the number of grade rows"
    with open(course / "grades.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 4


def _postgres_bin(name):
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL server on a free loopback port; installed with apt-get if missing."""
    if _postgres_bin("initdb") is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "postgresql"], capture_output=True, timeout=900,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL could not be installed (no initdb/pg_ctl, and apt-get failed or is not available)")
    # outside pytest's private tmp tree: the server's own user must reach it
    base = Path(tempfile.mkdtemp(prefix="jaxgrader-pg-"))
    data = base / "data"
    run_as = []
    if os.geteuid() == 0:  # the server refuses to run as root
        run_as = ["runuser", "-u", "postgres", "--"]
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    user = "postgres" if run_as else getpass.getuser()
    init = subprocess.run(run_as + [initdb, "-D", str(data), "-U", user, "--auth=trust", "-E", "UTF8"],
                          capture_output=True, text=True)
    if init.returncode:
        pytest.skip(f"initdb failed: {init.stderr.strip().splitlines()[-1:]}")
    start = subprocess.run(run_as + [pg_ctl, "-D", str(data), "-w", "-l", str(data / "log"),
                                     "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start"],
                           capture_output=True, text=True)
    if start.returncode:
        pytest.skip(f"PostgreSQL did not start: {start.stderr.strip()[-300:]}")
    try:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={port} user={user} dbname=postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE gradebook")
        yield f"postgresql+psycopg://{user}@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run(run_as + [pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_postgres_gradebook_with_parallel_workers(tmp_path, postgres):
    course = _course(tmp_path, postgres)
    first = _grade(course)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    grades = _check_class(course, postgres)
    assert not (course / "gradebook.db").exists(), "a server gradebook must not leave an SQLite file"
    again = _grade(course)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _check_class(course, postgres) == grades
