"""Shared fixtures. Tests run the real nbgrader and real kernels in temporary courses."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
LECTURES = sorted((ROOT / "notebooks").glob("*.ipynb"))
EDITIONS = sorted(p.parent.name for p in (ROOT / "i18n").glob("*/edition.toml"))

# Kernels and nbgrader's `alembic` must come from this interpreter's environment.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")


# Groups that take longest on two cores, started first so that no long group is left to run
# alone at the end (`pytest -n 2`). A scheduling hint only: a stale order costs minutes,
# never correctness.
LONGEST_FIRST = ["trials-lesson3", "trials-lesson5", "trials-lesson4", "trials-lesson6", "trials-lesson7",
                 "tests/test_classroom.py", "tests/test_scaleout.py",
                 "tests/test_gradebook.py", "tests/test_course.py", "tests/test_answer_key.py", "tests/test_hostile.py",
                 "trials-lesson1", "trials-lesson2", "colab-lesson3", "colab-lesson4", "colab-lesson5", "colab-lesson6", "colab-lesson7",
                 "tests/test_class_report.py", "tests/test_limits.py", "tests/test_browser.py", "tests/test_intake.py",
                 "tests/test_forger.py", "tests/test_prepared.py", "tests/test_artifacts.py", "tests/test_similarity.py",
                 "tests/test_translation.py",
                 "notebooks/lesson3_pytree_mlp.ipynb", "notebooks/lesson4_training_loop.ipynb",
                 "notebooks/lesson6_a_loop_that_lasts.ipynb", "ko/notebooks/lesson6_a_loop_that_lasts.ipynb",
                 "notebooks/lesson7_many_devices.ipynb", "ko/notebooks/lesson7_many_devices.ipynb",
                 "notebooks/lesson2_transformations.ipynb", "ko/notebooks/lesson3_pytree_mlp.ipynb",
                 "ko/notebooks/lesson4_training_loop.ipynb", "ko/notebooks/lesson2_transformations.ipynb"]


def group_of(nodeid: str) -> str:
    """The unit of work one xdist worker runs in one go: a test file, a lecture notebook (its
    cells share one kernel), or one assignment's tests in test_assignments.py (they share the
    grading of its trial students, `_trials` there) and in test_colab.py. Module fixtures run
    once this way."""
    module = nodeid.split("::")[0]
    param = re.search(r"\[(lesson\d+)\]$", nodeid)
    if param and module.endswith("test_assignments.py"):
        return f"trials-{param[1]}"
    if param and module.endswith("test_colab.py"):  # its module fixture is cheap
        return f"colab-{param[1]}"
    return module


def pytest_xdist_make_scheduler(config, log):
    """`pytest -n N` hands out whole groups (`group_of`), in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)

    return ByGroup(config, log)


def _version_lanes(path: Path) -> bool:
    """Whether a lecture notebook runs in every version lane (else in the main lane only).

    An edition's lecture is the English program with other text (tests/test_translation.py
    compares the code, f-string fields included, and the printed outputs), so each lane runs
    one of the two: the main lane (the newest JAX) the English, the colab lane (JAX 0.7.2) the
    edition's, where there is one (``_edition_lecture``)."""
    relative = path.resolve().relative_to(ROOT)
    if relative.parts[0] != "notebooks":
        return True  # an edition's own copy (ko/notebooks/...)
    return not any((ROOT / lang / relative).is_file() for lang in EDITIONS)


def _edition_lecture(path: Path) -> bool:
    """An edition's copy of a lecture (ko/notebooks/...)."""
    return path.resolve().relative_to(ROOT).parts[0] != "notebooks"


def pytest_collection_modifyitems(config, items):
    """Lecture notebooks (collected by nbval) belong to the version lanes (``_version_lanes``), an
    edition's to the colab lane only (marked ``colab`` too: the main lane runs ``not colab``);
    the longest groups go first."""
    for item in items:
        path = Path(str(item.fspath))
        if "notebooks" in path.parts and _version_lanes(path):
            item.add_marker(pytest.mark.lane)
            if _edition_lecture(path):
                item.add_marker(pytest.mark.colab)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))  # stable: cells keep their order


# --------------------------------------------------------------------------- PostgreSQL


def _postgres_bin(name):
    import shutil

    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL server on a free loopback port; installed with apt-get if missing.

    Yields a connection string for its maintenance database (``dbname=postgres``).
    """
    import getpass
    import pwd
    import shutil
    import socket
    import subprocess
    import tempfile

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
        yield {"host": "127.0.0.1", "port": port, "user": user}
    finally:
        subprocess.run(run_as + [pg_ctl, "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def postgres(postgres_server, request):
    """A fresh, empty database on the test server: its SQLAlchemy URL (for ``CourseDirectory.db_url``)."""
    import re

    import psycopg

    server = postgres_server
    name = "gb_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    with psycopg.connect(f"host={server['host']} port={server['port']} user={server['user']} dbname=postgres",
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://{server['user']}@{server['host']}:{server['port']}/{name}"

