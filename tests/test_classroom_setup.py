"""`jaxgrader classroom`'s checks, and what the classroom's other tests share (tests/test_classroom.py: the
hub, the browser and the isolation attempts; tests/test_classroom_load.py: 30 students at once).

The classroom is made of real parts: Unix accounts (useradd, each with a name prefix unique to the test
session, removed with `userdel --remove` at the end), a JupyterHub and configurable-http-proxy, nbgrader's
exchange in a temporary folder (never the machine's /srv). Making accounts needs root: without it these
tests skip.

Students' servers run the course's Python as each student. Where that Python lies under a folder others
may not enter (pyenv's under /root, mode 0700, on the CI machines), `jaxgrader classroom` refuses to start
and says so (`test_a_python_students_cannot_run_is_refused`); the other tests then run the command in a
mount namespace of its own where that folder is enterable (0711) and holds only what the environment
needs (`reachable`): what a teacher does on a real server with `chmod o+x` or a Python under /opt,
without changing this machine.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT
from .short_lesson import short_lesson

COURSE_ID = "jax-from-first-principles"  # nbgrader_config.py's


def need_root() -> None:
    missing = [tool for tool in ("useradd", "userdel", "chpasswd", "unshare") if shutil.which(tool) is None]
    if os.geteuid() != 0 or missing:
        pytest.skip("the classroom makes Unix accounts and starts servers as them: needs root"
                    + (f" and {', '.join(missing)}" if missing else ""))


def session_prefix() -> str:
    """Account names of one test session: 'jg' and 4 hex digits, so that two sessions never share one."""
    return "jg" + secrets.token_hex(2)


def make_instructor(name: str) -> None:
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", name], check=True,
                   capture_output=True)


def set_password(name: str, password: str) -> None:
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True, capture_output=True)


def remove_accounts(names) -> None:
    """Stop every process of these accounts (by pid), then `userdel --remove` each (home and mail too)."""
    import psutil

    from jaxgrader.grading.classroom.accounts import account, remove_account

    uids = {found.pw_uid for found in map(account, names) if found is not None}
    for _ in range(2):
        procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=10)
    for name in names:
        remove_account(name)


def base_folder() -> Path:
    """A scratch folder every account may enter (pytest's own are 0700): the course, exchange and hub state."""
    base = Path(tempfile.mkdtemp(prefix="jaxgrader-classroom-"))
    os.chmod(base, 0o711)
    return base


def scratch_course(base: Path, instructor: str, roster: list[str] | None = None) -> Path:
    """The course with lesson 1 cut short (tests/short_lesson.py), its Korean release cut alike, the Korean
    catalogs, and a roster; the instructor's alone (mode 0700), as `jaxgrader classroom` requires."""
    course = base / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    _, release = short_lesson(course)
    for step in ("source", "release"):
        ko = nbformat.read(ROOT / "ko" / step / "lesson1" / "pure_functions.ipynb", as_version=4)
        ko.cells = ko.cells[: len(release.cells)]
        assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in ko.cells] == \
            [c.metadata.get("nbgrader", {}).get("grade_id") for c in release.cells]
        (course / "ko" / step / "lesson1").mkdir(parents=True)
        nbformat.write(ko, course / "ko" / step / "lesson1" / "pure_functions.ipynb")
    shutil.copytree(ROOT / "i18n" / "ko", course / "i18n" / "ko")
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as fh:
        # configurable-http-proxy installed once per checkout (git-ignored), not once per test run
        fh.write(f"\nc.Classroom.npm_prefix = {str(ROOT / '.npm-classroom')!r}  # tests/test_classroom_setup.py\n"
                 "c.Classroom.user_environment = {'JAX_PLATFORMS': 'cpu'}\n")
    if roster is not None:
        (course / "roster.csv").write_text("id,first_name,last_name,email,lms_user_id\n" + "".join(
            f"{sid},{sid[len(sid) - 3:].capitalize()},Student,{sid}@example.edu,{1000 + i}\n"
            for i, sid in enumerate(roster)))
    subprocess.run(["chown", "-R", f"{instructor}:", str(course)], check=True)
    os.chmod(course, 0o700)
    return course


def _needed_paths() -> list[Path]:
    """What a user's server of this environment reads: the interpreter, its library, the packages, jaxgrader."""
    import jaxgrader

    paths = sysconfig.get_paths()
    return [Path(os.path.realpath(p)) for p in (sys.executable, paths["stdlib"], paths["platstdlib"],
                                                  paths["purelib"], Path(jaxgrader.__file__).parent)]


def closed_folders() -> dict[Path, set[str]]:
    """Folders on the way to this environment that others may not enter -> the entries in them it needs."""
    found: dict[Path, set[str]] = {}
    for path in _needed_paths():
        for folder in reversed(path.parents):
            if not folder.stat().st_mode & stat.S_IXOTH:
                found.setdefault(folder, set()).add(path.relative_to(folder).parts[0])
                break
    return found


def reachable(argv: list[str]) -> list[str]:
    """``argv`` run where every account can reach this environment: as it is where it can already, else in a
    private mount namespace in which each closed folder is a 0711 tmpfs holding only the entries needed (bound
    from the real one). Nothing on the machine changes; the namespace ends with the command."""
    script = ["set -e"]
    for number, (folder, entries) in enumerate(sorted(closed_folders().items())):
        holds = {entry: f"$h{number}_{i}" for i, entry in enumerate(sorted(entries))}
        for entry, hold in holds.items():
            script += [f"{hold[1:]}=$(mktemp -d)", f'mount --bind {shlex.quote(str(folder / entry))} "{hold}"']
        script += [f"mount -t tmpfs -o mode=0711 tmpfs {shlex.quote(str(folder))}"]
        for entry, hold in holds.items():
            target = shlex.quote(str(folder / entry))
            script += [f"mkdir -p {target}" if os.path.isdir(folder / entry) else f"touch {target}",
                       f'mount --move "{hold}" {target}', f'rmdir "{hold}" 2>/dev/null || rm -f "{hold}"']
    if len(script) == 1:
        return argv
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script + ['exec "$@"']), "sh", *argv]


def jaxgrader(course: Path, *args: str, namespace: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "jaxgrader", "--root", str(course), *args]
    return subprocess.run(reachable(argv) if namespace else argv, capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------- the command's checks


@pytest.fixture(scope="module")
def teacher():
    """An instructor account, its scratch folder (course only), removed at the end."""
    need_root()
    name = session_prefix() + "teach"
    make_instructor(name)
    base = base_folder()
    try:
        yield name, scratch_course(base, name)
    finally:
        remove_accounts([name])
        shutil.rmtree(base, ignore_errors=True)


def _refused(course: Path, **options) -> str:
    """The one line `jaxgrader classroom --check` stops with (in this process: the checks change nothing)."""
    from jaxgrader.grading.classroom.command import Options, run
    from jaxgrader.grading.course.config import CourseError

    with pytest.raises(CourseError) as refused:
        run(course, Options(check=True, **options))
    return str(refused.value)


def test_the_demo_class_passes_the_checks(teacher):
    """`--check --demo`, the command itself: every check runs (instructor, private course, the students'
    Python), nothing changes, and it says what a start would do."""
    name, course = teacher
    done = jaxgrader(course, "classroom", "--demo", "--check", "--instructor", name)
    assert done.returncode == 0, done.stderr
    assert "the checks pass" in done.stdout and "4 students (ada, bo, cy, hana)" in done.stdout, done.stdout


def test_a_course_others_can_read_is_refused(teacher):
    name, course = teacher
    os.chmod(course, 0o755)
    try:
        why = _refused(course, demo_names=("ada",), instructor=name)
    finally:
        os.chmod(course, 0o700)
    assert f"chown -R {name}: {course} && chmod 700 {course}" in why, why


def test_a_roster_useradd_would_refuse_is_refused(teacher):
    name, course = teacher
    (course / "bad-roster.csv").write_text("id,first_name\nada,Ada\nAda Lovelace,Ada\n")
    why = _refused(course, roster=Path("bad-roster.csv"), instructor=name)
    assert "row 3: 'Ada Lovelace' cannot be a Unix account name" in why, why


def test_a_python_students_cannot_run_is_refused(teacher):
    """Where this environment lies under a folder others may not enter, the command names the folder."""
    name, course = teacher
    closed = closed_folders()
    if not closed:
        pytest.skip("every account can reach this environment already")
    why = _refused(course, demo_names=("ada",), instructor=name)
    # the command names the first closed folder it meets (the environment's own path before its base Python's)
    assert any(f"students' servers could not run {sys.executable}: {folder} is d" in why for folder in closed), why
