"""Two checks before a classroom starts: can every account run the course's Python, and is the course
directory the instructor's alone?

Each user's JupyterLab runs as that user, so the interpreter, its standard library, the environment's
packages and ``jaxgrader.checks`` (which visible tests import) must be readable by all: every folder
above them enterable by others (``o+x``), the files readable (``o+r``). A virtual environment made from
a Python under ``/root`` (pyenv's default as root) fails this: ``/root`` is 0700. And the environment
must not live inside the course directory, which must be 0700: an editable install of jaxgrader
(``pip install -e .``) points students' kernels into the course, solutions and all.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from ..course.config import CourseError, one_line

# What the students' environment must hold: the interpreter's view of itself and of the packages a
# user's server and kernels import.
# (found, not imported: importing JAX would take seconds)
_PROBE = """
import json, sys, sysconfig
from importlib.util import find_spec
names = ["jupyterhub", "jupyterlab", "nbgrader", "jax", "jaxgrader.checks"]
missing = [n for n in names if find_spec(n) is None]
if missing:
    sys.exit("missing: " + ", ".join(missing))
print(json.dumps({
    "executable": sys.executable, "prefix": sys.prefix, "base_prefix": sys.base_prefix,
    "stdlib": sysconfig.get_paths()["stdlib"], "purelib": sysconfig.get_paths()["purelib"],
    "packages": [find_spec(n).origin for n in names],
}))
"""


def _mode(path: Path) -> str:
    return stat.filemode(path.stat().st_mode)


def blocked(path: Path) -> str | None:
    """Why an account other than the owner cannot reach ``path`` (None: it can): the first folder above
    it others may not enter, or the file itself others may not read."""
    for candidate in dict.fromkeys([Path(os.path.abspath(path)), Path(os.path.realpath(path))]):  # a link's way too
        for folder in reversed(candidate.parents):
            real = Path(os.path.realpath(folder))
            if not real.stat().st_mode & stat.S_IXOTH:
                return f"{real} is {_mode(real)} (others may not enter it)"
        real = Path(os.path.realpath(candidate))
        mode = real.stat().st_mode
        if not mode & stat.S_IROTH or (real.is_dir() and not mode & stat.S_IXOTH):
            return f"{real} is {_mode(real)} (others may not read it)"
    return None


def students_environment(python: str, course: Path) -> dict:
    """What ``python`` reports of its environment; CourseError (one line, with what to do) where students
    could not run it, or where it lies inside the course directory."""
    probe = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    if probe.returncode:
        raise CourseError(f"{python} cannot start a classroom server: {one_line(probe.stderr, 300)} "
                          "(pip install -r requirements.txt into it)")
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    paths = [Path(python), Path(found["executable"]), Path(found["stdlib"]) / "os.py",
             Path(found["purelib"]), *map(Path, found["packages"])]
    for path in paths:
        why = blocked(path)
        if why:
            raise CourseError(
                f"students' servers could not run {python}: {why}. Install the course's Python where every "
                "account can read it (for example a virtual environment under /opt made from the system's "
                "python3 or a Python installed under /usr/local) and name it with c.Classroom.python; "
                "docs/classroom.md, 'The course's Python'")
    course = Path(os.path.realpath(course))
    for path in paths:
        real = Path(os.path.realpath(path))
        if real == course or course in real.parents:
            raise CourseError(
                f"students' servers would run {real}, inside the course directory {course}, which only the "
                "instructor may read: make the students' environment outside it, with jaxgrader installed "
                "as a copy (pip install /path/to/course, not pip install -e); docs/classroom.md")
    return found


def course_is_private(course: Path, instructor: str) -> None:
    """CourseError unless ``course`` belongs to ``instructor`` and nobody else may read or enter it."""
    import pwd

    st = course.stat()
    owner = pwd.getpwuid(st.st_uid).pw_name if st.st_uid in {p.pw_uid for p in pwd.getpwall()} else st.st_uid
    if owner != instructor or stat.S_IMODE(st.st_mode) & 0o077:
        raise CourseError(
            f"the course directory {course} is {_mode(course)}, owned by {owner}: source/, the gradebook and "
            f"autograded/ must be the instructor's alone. Run: chown -R {instructor}: {course} && chmod 700 {course}")


def root_only(path: Path, what: str) -> None:
    """CourseError unless ``path`` and the folders above it may be changed by root alone: the hub runs it as root,
    so whoever could change it could run anything as root (an instructor's course directory is not such a place)."""
    path = Path(os.path.abspath(path))
    for part in [path, *path.parents]:
        st = part.stat()
        if st.st_uid != 0 or st.st_mode & 0o022 and not (part.is_dir() and st.st_mode & stat.S_ISVTX):
            raise CourseError(f"{what} {path}: {part} is {_mode(part)}, owned by uid {st.st_uid}; the hub runs it as "
                              "root, so only root may be able to change it (install it under /opt or /usr/local)")
