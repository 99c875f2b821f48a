"""Thirty students submitting at once through nbgrader's exchange, as the classroom lays it out.

The accounts (`useradd`, a session prefix), the exchange's folders and each role's nbgrader configuration
are made by jaxgrader's classroom code (jaxgrader/grading/classroom/), as `jaxgrader classroom` makes them;
no hub is needed to load the exchange, so none is started. A driver (this module, run as a program in a
mount namespace where every account can reach this Python: tests/test_classroom_setup.py) then:

1. releases lesson 1 as the instructor (nbgrader's ReleaseAssignment);
2. forks one process per student, each running as that student's account (uid, groups, HOME) with the
   configuration a student's server gets; all wait at one gate, then each fetches the lesson, writes its
   own answer (its name and the attempt's number in a solution cell) and submits, twice, at once with the
   other 29 (nbgrader's exchange apps in-process, jaxgrader's PrivateSubmit);
3. collects as the instructor (CheckedCollect).

Bounded in count (30 students, 2 submissions each) and time (the driver's timeout). The test checks that
every submission arrived, private, and that collect took each student's last one, once, with that
student's own answer, none lost or swapped; it prints how long each phase took (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_classroom_setup import (COURSE_ID, base_folder, make_instructor, need_root, reachable, remove_accounts,
                                   scratch_course, session_prefix)

pytestmark = pytest.mark.slow

STUDENTS, ATTEMPTS = 30, 2
ASSIGNMENT, NOTEBOOK, CELL = "lesson1", "pure_functions", "predict"
DRIVER_TIMEOUT_S = 300


def _answer(student: str, attempt: int) -> str:
    return f"# {student}, attempt {attempt}\ndef predict(params, x):\n    return params['W'] @ x + params['b']\n"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """The class made, the driver run: (its report, the course, the exchange, the students, the instructor)."""
    need_root()
    from jaxgrader.grading.classroom import accounts, exchange, hubconfig
    from jaxgrader.grading.classroom.command import _import_roster

    prefix = session_prefix()
    teacher = prefix + "teach"
    students = [accounts.Student(id=f"{prefix}s{i:02d}") for i in range(STUDENTS)]
    base = None
    try:
        make_instructor(teacher)
        base = base_folder()
        course = scratch_course(base, teacher)
        t0 = time.monotonic()
        accounts.make_accounts(students, "/home", teacher)
        made_s = time.monotonic() - t0
        _import_roster(course, students, teacher)  # the gradebook as the command leaves it (collect reads it)
        found = accounts.account(teacher)
        exchange.lay_out(str(base / "exchange"), COURSE_ID, found.pw_uid, found.pw_gid)
        configs = {role: hubconfig.write_role_config(base / "state" / role, role, COURSE_ID, str(base / "exchange"),
                                                     course) for role in (hubconfig.STUDENT, hubconfig.INSTRUCTOR)}
        job = {"teacher": teacher, "students": [s.id for s in students], "course": str(course),
               "configs": {k: str(v) for k, v in configs.items()}}
        driver = subprocess.run(reachable([sys.executable, "-m", "tests.test_classroom_load", json.dumps(job)]),
                                cwd=ROOT, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
        assert driver.returncode == 0, driver.stdout[-3000:] + driver.stderr[-3000:]
        report = json.loads(driver.stdout.strip().splitlines()[-1])
        report["accounts_seconds"] = round(made_s, 1)
        yield report, course, base / "exchange" / COURSE_ID, [s.id for s in students], teacher
    finally:
        remove_accounts([teacher, *(s.id for s in students)])
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


def test_thirty_students_submit_at_once_and_each_last_submission_is_collected_once(loaded):
    report, course, exchange, students, teacher = loaded
    failed = {s: r for s, r in report["students"].items() if r.get("error")}
    assert not failed, failed
    # every submission arrived, each private to its student and the instructor's group
    inbound = sorted((exchange / "inbound").iterdir())
    assert len(inbound) == STUDENTS * ATTEMPTS, [p.name for p in inbound]
    teacher_gid = int(report["teacher_gid"])
    for entry in inbound:
        st = entry.stat()
        assert (st.st_mode & 0o777, st.st_gid) == (0o770, teacher_gid), (entry.name, oct(st.st_mode), st.st_gid)
    # collect took each student's last submission, once, with that student's own answer
    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == sorted(students)
    for student in students:
        folder = submitted / student / ASSIGNMENT
        last = report["students"][student]["timestamps"][-1]
        assert (folder / "timestamp.txt").read_text() == last, student
        text = (folder / f"{NOTEBOOK}.ipynb").read_text()
        assert f"# {student}, attempt {ATTEMPTS}" in text, student
        assert text.count(", attempt ") == 1, f"{student}: another answer in the notebook"
    assert report["collected"] == STUDENTS, report["collect_log"]
    print(f"\n{STUDENTS} students x {ATTEMPTS} submissions: accounts {report['accounts_seconds']} s, "
          f"release {report['release_seconds']} s, fetch and submit at once {report['submit_seconds']} s "
          f"(slowest student {report['slowest_student_seconds']} s), collect {report['collect_seconds']} s")


# --------------------------------------------------------------------------- the driver (run as a program)


def _config(folder: str):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=folder).load_config()


def _exchange_app(kind: str, config):
    """One of nbgrader's exchange apps as the configuration names it (PrivateSubmit, CheckedCollect)."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeFactory

    config.CourseDirectory.assignment_id = ASSIGNMENT
    coursedir = CourseDirectory(config=config)
    return getattr(ExchangeFactory(config=config), kind)(coursedir=coursedir, authenticator=Authenticator(config=config),
                                                         config=config)


def _student(name: str, config, gate: int, out: int) -> None:
    """One student: wait at the gate, fetch, then write an answer and submit, ATTEMPTS times."""
    import nbformat

    os.read(gate, 1)  # every student starts when the driver closes the gate
    t0 = time.monotonic()
    os.chdir(os.path.expanduser("~"))
    _exchange_app("FetchAssignment", config.copy()).start()
    stamps = []
    for attempt in range(1, ATTEMPTS + 1):
        path = Path(ASSIGNMENT) / f"{NOTEBOOK}.ipynb"
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
        cell.source = _answer(name, attempt)
        nbformat.write(nb, path)
        submit = _exchange_app("Submit", config.copy())
        submit.start()
        stamps.append(submit.timestamp)
    os.write(out, json.dumps({"timestamps": stamps, "seconds": round(time.monotonic() - t0, 2)}).encode())


def main(job: dict) -> dict:
    import logging

    # imported once here, before the students are forked, not in each of them
    import nbformat  # noqa: F401
    from nbgrader.exchange.default import collect, fetch_assignment, release_assignment, submit  # noqa: F401

    from jaxgrader.grading.classroom import exchange  # noqa: F401
    from jaxgrader.grading.classroom.accounts import account, as_account

    for name in [n for n in os.environ if n.startswith("JUPYTER")]:
        del os.environ[name]
    student_config, teacher_config = _config(job["configs"]["student"]), _config(job["configs"]["instructor"])
    report: dict = {"students": {}, "teacher_gid": account(job["teacher"]).pw_gid}

    t0 = time.monotonic()
    assert as_account(job["teacher"], lambda: _exchange_app("ReleaseAssignment", teacher_config.copy()).start()) == 0
    report["release_seconds"] = round(time.monotonic() - t0, 2)

    gate_r, gate_w = os.pipe()
    children = {}
    for name in job["students"]:
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(gate_w)
            os.close(out_r)
            os._exit(as_account(name, _student, name, student_config, gate_r, out_w))
        os.close(out_w)
        children[name] = (pid, out_r)
    t0 = time.monotonic()
    os.close(gate_w)  # the gate opens: every student reads EOF at once
    for name, (pid, out_r) in children.items():
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        with os.fdopen(out_r) as fh:
            text = fh.read()
        report["students"][name] = json.loads(text) if status == 0 and text else {"error": f"exit {status}"}
    report["submit_seconds"] = round(time.monotonic() - t0, 2)
    report["slowest_student_seconds"] = max((r.get("seconds", 0) for r in report["students"].values()), default=0)

    log_path = Path(job["course"]) / "collect.log"  # (the instructor writes it)
    handler = logging.FileHandler(log_path)

    def collect_all():
        app = _exchange_app("Collect", teacher_config.copy())
        app.log.addHandler(handler)
        app.start()

    t0 = time.monotonic()
    assert as_account(job["teacher"], collect_all) == 0
    report["collect_seconds"] = round(time.monotonic() - t0, 2)
    report["collect_log"] = log_path.read_text() if log_path.exists() else ""
    report["collected"] = sum(1 for _ in (Path(job["course"]) / "submitted").iterdir())
    return report


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
