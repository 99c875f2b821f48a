"""The class list and its Unix accounts: one account per student, so that file permissions are real.

The roster is the CSV ``nbgrader db student import`` reads (and the gradebook then holds, with the
``lms_user_id`` that ``jaxgrader export`` writes): the same file makes the accounts and the
gradebook's students. An id becomes the account's name, so it must be one useradd accepts. New
accounts get a home of their own (mode 0700) and a generated password, shown once by the command;
an account that exists keeps its password (a university's accounts are theirs to manage).
"""

from __future__ import annotations

import csv
import os
import pwd
import re
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..course.config import CourseError, one_line

# What useradd accepts on Debian without --badname, and nbgrader's exchange too (no '+', no '*').
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
COLUMNS = ("id", "first_name", "last_name", "email", "lms_user_id")
FIRST_UID = 1000  # below: system accounts, never a student's
# Easy to read aloud and to type: no 0/O, 1/l/I.
ALPHABET = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"


@dataclass
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    password: str | None = field(default=None, repr=False)  # set only when the account was made now

    def row(self) -> dict[str, str]:
        return {c: getattr(self, c) for c in COLUMNS}


def read_roster(path: Path) -> list[Student]:
    """The students of a roster CSV; CourseError (one line naming the file and row) for what useradd or
    nbgrader would refuse."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise CourseError(f"{path}: cannot read the roster: {exc.strerror}") from None
    if not rows or "id" not in rows[0]:
        raise CourseError(f"{path}: a roster is a CSV with a header row and an 'id' column "
                          "(as `nbgrader db student import` reads)")
    students = [Student(**{c: (row.get(c) or "").strip() for c in COLUMNS}) for row in rows]
    check_ids([s.id for s in students], str(path))
    return students


def demo_roster(names) -> list[Student]:
    """The demo class (jaxgrader/grading/demo.py's students), first names only."""
    return [Student(id=name, first_name=name.capitalize()) for name in names]


def check_ids(ids: list[str], where: str) -> None:
    seen = set()
    for number, sid in enumerate(ids, start=2):  # row 1 is the header
        if not NAME.match(sid):
            raise CourseError(f"{where}: row {number}: {sid!r} cannot be a Unix account name "
                              "(lower-case letters, digits, '_' and '-', starting with a letter; at most 32)")
        if sid in seen:
            raise CourseError(f"{where}: row {number}: {sid} is listed twice")
        seen.add(sid)


def account(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def new_password() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(14))


def make_accounts(students: list[Student], home_base: str, instructor: str) -> list[str]:
    """Create the accounts that do not exist (each student's password is set on its ``Student``); make
    every home private, the instructor's too. Returns one line per change made to an existing account."""
    notes = _private_home(instructor)
    for student in students:
        if student.id == instructor:
            raise CourseError(f"{student.id} is the instructor and cannot be on the roster")
        found = account(student.id)
        if found is not None and found.pw_uid < FIRST_UID:
            raise CourseError(f"{student.id} is a system account (uid {found.pw_uid}), not a student's")
        if found is None:
            comment = " ".join(p for p in (student.first_name, student.last_name) if p) or student.id
            _run(["useradd", "--create-home", "--base-dir", home_base, "--shell", "/bin/bash", "--user-group",
                  "--comment", comment.replace(":", " "), student.id])
            student.password = new_password()
            _run(["chpasswd"], stdin=f"{student.id}:{student.password}\n")
            found = account(student.id)
        notes += _private_home(student.id, quiet=student.password is not None)
    return notes


def _private_home(name: str, quiet: bool = False) -> list[str]:
    """A home others may not enter (fetched assignments, the cache of submissions, feedback: its owner's alone)."""
    home = Path(account(name).pw_dir)
    if home.is_dir() and home.stat().st_mode & 0o077:
        os.chmod(home, 0o700)
        return [] if quiet else [f"{name}: home {home} made private (mode 0700)"]
    return []


def remove_account(name: str) -> None:
    """userdel -r (for tests and a class's end); the caller has stopped the account's processes."""
    subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)


def run_as(name: str, argv: list[str], cwd: Path, env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess:
    """``argv`` as the account ``name`` (its uid, primary group and supplementary groups), with its HOME."""
    found = account(name)
    if found is None:
        raise CourseError(f"no account {name}")
    groups = os.getgrouplist(name, found.pw_gid)
    environ = {"HOME": found.pw_dir, "USER": name, "LOGNAME": name, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "LANG": os.environ.get("LANG", "C.UTF-8"), **(env or {})}
    return subprocess.run(argv, cwd=cwd, env=environ, user=found.pw_uid, group=found.pw_gid, extra_groups=groups,
                          capture_output=True, text=True, timeout=timeout)


def as_account(name: str, work, *args) -> int:
    """``work(*args)`` in a forked child running as the account ``name`` (uid, groups, HOME); its exit status
    (0: it returned). For work in modules already imported: nothing is started afresh."""
    found = account(name)
    if found is None:
        raise CourseError(f"no account {name}")
    pid = os.fork()
    if pid == 0:  # the child: drop to the account, do the work, leave without running the parent's cleanup
        status = 1
        try:
            os.setgroups(os.getgrouplist(name, found.pw_gid))
            os.setgid(found.pw_gid)
            os.setuid(found.pw_uid)
            os.environ.update(HOME=found.pw_dir, USER=name, LOGNAME=name)
            work(*args)
            status = 0
        except BaseException as exc:  # noqa: BLE001  the parent reports the status; say why here
            print(f"as {name}: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _run(argv: list[str], stdin: str | None = None) -> None:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if done.returncode:
        raise CourseError(f"{argv[0]} failed: {one_line(done.stderr or done.stdout, 300)}")
