"""Grading on a real Dask cluster into a real PostgreSQL gradebook.

A scheduler and two workers run as separate processes on this machine (``dask
scheduler``, ``dask worker --nthreads 1``), the way they run on a cluster's hosts.
The demo class (lesson 1: the solution, the blank release, one with mistakes) is
graded through them; one worker is killed while it grades, and every submission
must still end up graded exactly once, with the scores the local backend gives.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from jaxgrader.grading.demo import answers_for
from jaxgrader.grading.course.notebooks import write_submission

from .conftest import ROOT
from .short_lesson import short_lesson, short_notebooks

distributed = pytest.importorskip("distributed")

STUDENTS = ("ada", "bo", "cy")  # solution, blank release, some classic mistakes
SEED = "20261123"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A Dask scheduler and workers, each a process group of its own."""

    def __init__(self, base: Path):
        self.base = base
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.dask = str(Path(sys.executable).parent / "dask")
        self.procs: dict[str, subprocess.Popen] = {}
        env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
        self.env = {**env, "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")}
        self._start("scheduler", [self.dask, "scheduler", "--host", "127.0.0.1",
                                  "--port", self.address.rsplit(":", 1)[1], "--no-dashboard"])
        self.client = distributed.Client(self.address, timeout=60, set_as_default=False)

    def _start(self, name: str, cmd: list[str]) -> None:
        log = open(self.base / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                            cwd=self.base, start_new_session=True)

    def start_worker(self, name: str) -> None:
        (self.base / name).mkdir(exist_ok=True)
        self._start(name, [self.dask, "worker", self.address, "--nthreads", "1", "--name", name,
                           "--no-dashboard", "--local-directory", str(self.base / name)])
        deadline = time.monotonic() + 120
        while name not in self.names().values():
            assert time.monotonic() < deadline, (self.base / f"{name}.log").read_text()[-2000:]
            time.sleep(0.5)

    def names(self) -> dict[str, str]:
        """worker address -> worker name"""
        return {addr: w["name"] for addr, w in self.client.scheduler_info(n_workers=-1)["workers"].items()}

    def pids(self) -> dict[str, int]:
        """worker address -> pid of the worker process (the nanny restarts it if it dies)"""
        return {addr: pid for addr, pid in self.client.run(os.getpid, on_error="return").items()
                if isinstance(pid, int)}

    def grading(self) -> dict[str, list[str]]:
        """worker address -> keys of grading tasks it is running"""
        return {addr: [k for k in keys if str(k).startswith("jaxgrader-grade-")]
                for addr, keys in self.client.processing().items()}

    def kill_group(self, name: str) -> None:
        """The host dies: the worker, its nanny and its kernels, at once."""
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()

    def close(self) -> None:
        self.client.close()
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        c.start_worker("w1")
        c.start_worker("w2")
        yield c
    finally:
        c.close()


def _course(path: Path, db_url: str | None = None, students=STUDENTS) -> Path:
    path.mkdir(parents=True)
    config = (ROOT / "nbgrader_config.py").read_text()
    config += f"\nc.JaxGrader.seed = {SEED}  # one seed for every run here: scores are comparable\n"
    if db_url:
        config += f"\nc.CourseDirectory.db_url = {db_url!r}\n"
    (path / "nbgrader_config.py").write_text(config)
    short_lesson(path)
    for student in students:
        write_submission(path / "release" / "lesson1", path / "submitted" / student / "lesson1",
                         {"pure_functions": answers_for(ROOT, "lesson1", "pure_functions", student)})
    return path


def _grade_cells() -> int:
    nb, _ = short_notebooks()
    return sum(1 for c in nb.cells if (c.metadata.get("nbgrader") or {}).get("grade"))


def _rows(db_url: str) -> dict[str, tuple[float, int]]:
    """student -> (score, number of grade rows) for every submission in the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        subs = gb.find_assignment("lesson1").submissions
        assert len({s.student.id for s in subs}) == len(subs), "a student has two submissions"
        return {s.student.id: (float(s.score), sum(len(nb.grades) for nb in s.notebooks)) for s in subs}


def _cell_scores(results) -> dict[str, dict]:
    return {r.student: {gid: c["auto_score"] for gid, c in r.cells["pure_functions"].items()} for r in results}


def _in_thread(fn, *args, **kwargs):
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised by the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_dask_into_postgres_survives_a_killed_worker(tmp_path, postgres, cluster):
    from jaxgrader.grading.classrun.run import grade_class

    course = _course(tmp_path / "dask", postgres)
    thread, out = _in_thread(grade_class, course, dask=cluster.address, feedback=False, progress=False)
    first_seen: dict[str, float] = {}
    killed = None
    while thread.is_alive():
        if killed is None:
            for addr, keys in cluster.grading().items():
                for key in keys:
                    first_seen.setdefault(key, time.monotonic())
                    if time.monotonic() - first_seen[key] > 3:  # its kernel is running now
                        killed = (cluster.names()[addr], key)
                        cluster.kill_group(killed[0])
                        break
                if killed:
                    break
        time.sleep(0.3)
    thread.join()
    if "error" in out:
        raise out["error"]
    results = out["value"]
    assert killed is not None, "no worker was killed while it graded"
    assert cluster.client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures) == 2

    # every submission graded exactly once: one submission each, one row per grade cell
    assert sorted((r.student, r.status) for r in results) == [(s, "graded") for s in STUDENTS], \
        [(r.student, r.error) for r in results]
    rows = _rows(postgres)
    assert sorted(rows) == sorted(STUDENTS)
    assert all(n == _grade_cells() for _, n in rows.values())
    assert {s: score for s, (score, _) in rows.items()} == {r.student: r.score for r in results}
    assert all(r.isolation == "bubblewrap" for r in results)

    # the same scores as the local backend into SQLite
    from jaxgrader.grading.classrun.run import grade_class as grade_locally

    local = grade_locally(_course(tmp_path / "local"), workers=2, feedback=False, progress=False)
    assert {r.student: r.score for r in local} == {r.student: r.score for r in results}
    assert _cell_scores(local) == _cell_scores(results)
    scores = {r.student: r.score for r in results}
    assert scores["ada"] > scores["cy"] > scores["bo"] == 0

    # nothing changed: a rerun grades nothing and keeps the table
    cluster.start_worker("w3")  # replaces the killed one for what follows
    again = grade_class(course, dask=cluster.address, feedback=False, progress=False)
    assert all(r.kept for r in again)
    assert {r.student: r.score for r in again} == scores
    assert json.loads((course / ".grading" / "last-run.json").read_text())["graded"] == 0
    assert _rows(postgres) == rows


def _assert_one_error_after_three_deaths(thread, out):
    """The run ended (no stall) with its one submission an error: its worker died 3 times."""
    thread.join(timeout=60)
    assert not thread.is_alive(), "the run stalled"
    if "error" in out:
        raise out["error"]
    (result,) = out["value"]
    assert result.status == "error" and "died 3 times" in result.error, result.error


def test_a_submission_that_keeps_killing_workers_is_an_error_not_a_stall(tmp_path, cluster):
    """Its worker dies every time: run, two retries, then an error for that student only."""
    from jaxgrader.grading.classrun.run import grade_class

    course = _course(tmp_path / "poison", students=("bo",))
    # grading lesson 1 cut short takes about a second: too short for a kill to land reliably, so bo's
    # notebook starts with a wait (each attempt is killed long before it ends)
    submitted = course / "submitted" / "bo" / "lesson1" / "pure_functions.ipynb"
    nb = nbformat.read(submitted, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))
    nbformat.write(nb, submitted)
    thread, out = _in_thread(grade_class, course, dask=cluster.address, feedback=False, progress=False)
    kills, killed_keys = 0, set()
    deadline = time.monotonic() + 600
    while thread.is_alive() and time.monotonic() < deadline:
        pids = cluster.pids()
        for addr, keys in cluster.grading().items():
            if keys and addr not in killed_keys and addr in pids:
                time.sleep(1)
                os.kill(pids[addr], signal.SIGKILL)  # the worker process; its nanny starts a new one
                killed_keys.add(addr)
                kills += 1
        time.sleep(0.2)
    _assert_one_error_after_three_deaths(thread, out)
    assert kills == 3
    summary = json.loads((course / "grading-summary.json").read_text())
    assert summary[0]["status"] == "error"


def test_local_worker_killed_every_time_is_an_error_not_a_stall(tmp_path):
    """The local pool's rule is the same: a fresh process, at most two retries, then an error."""
    import psutil

    from jaxgrader.grading.classrun.run import grade_class

    course = _course(tmp_path / "local-poison", students=("bo",))
    thread, out = _in_thread(grade_class, course, workers=1, feedback=False, progress=False)
    killed: set[int] = set()
    deadline = time.monotonic() + 600
    while thread.is_alive() and time.monotonic() < deadline:
        for proc in psutil.Process().children():
            try:
                if proc.pid in killed or "spawn_main" not in " ".join(proc.cmdline()):
                    continue
                if any("ipykernel" in " ".join(p.cmdline()) for p in proc.children(recursive=True)):
                    proc.kill()  # the grading process, while its kernel runs
                    killed.add(proc.pid)
            except psutil.Error:
                continue
        time.sleep(0.2)
    _assert_one_error_after_three_deaths(thread, out)
    assert len(killed) == 3


def test_cpu_shares_split_the_machine_between_local_workers():
    from jaxgrader.grading.classrun.backends import core_shares

    assert core_shares(1, [0, 1, 2, 3]) == [()]  # one worker: its kernels use every CPU
    assert core_shares(4, [0]) == [()] * 4  # nothing to split
    assert core_shares(2, [1, 0]) == [(0,), (1,)]
    assert core_shares(3, list(range(8))) == [(0, 1, 2), (3, 4), (5, 6, 7)]
    assert core_shares(4, [2, 3]) == [(2,), (3,), (2,), (3,)]  # more workers than CPUs: round robin
    shares = core_shares(16, list(range(64)))
    assert sorted(c for s in shares for c in s) == list(range(64)) and {len(s) for s in shares} == {4}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to split")
def test_each_local_worker_and_the_kernels_it_starts_keep_to_their_share():
    """XLA sizes its thread pools to the CPUs a process may use: a worker's kernel must see its share."""
    from jaxgrader.grading.classrun.backends import LocalBackend, core_shares
    from jaxgrader.grading.sandbox.sandbox import SYSTEM_PATH, sandbox_command

    cpus = sorted(os.sched_getaffinity(0))
    backend = LocalBackend(2)
    try:
        backend.start(2)
        seen = [slot.pool.submit(os.sched_getaffinity, 0).result(timeout=120) for slot in backend._slots]
        assert [tuple(sorted(s)) for s in seen] == core_shares(2, cpus)
        # what a sandboxed process started from that worker sees
        cmd = sandbox_command(["nproc"], env={"PATH": SYSTEM_PATH}, ro=[], rw=[], as_root=os.geteuid() == 0)
        out = backend._slots[0].pool.submit(subprocess.check_output, cmd, text=True, cwd="/").result(timeout=120)
        assert int(out) == len(core_shares(2, cpus)[0])
    finally:
        backend.close()
    unpinned = LocalBackend(2, pin=False)  # c.JaxGrader.pin_workers = False
    try:
        unpinned.start(2)
        assert all(slot.pool.submit(os.sched_getaffinity, 0).result(timeout=120) == set(cpus)
                   for slot in unpinned._slots)
    finally:
        unpinned.close()


def test_interrupted_dask_run_keeps_what_it_wrote(tmp_path, postgres, cluster):
    """The coordinator is killed mid-run: the records written are in PostgreSQL; the rerun grades the rest."""
    from jaxgrader.grading.classrun.run import grade_class

    course = _course(tmp_path / "interrupted", postgres)
    ledger = course / ".grading" / "ledger.json"
    proc = subprocess.Popen([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "--no-feedback",
                             "--dask", cluster.address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 600
    while not ledger.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written = {key.split("/")[1]: entry["result"]["score"] for key, entry in json.loads(ledger.read_text()).items()}
    assert 1 <= len(written) < len(STUDENTS), "the run was not interrupted mid-way"
    rows = _rows(postgres)
    assert all(rows[s][0] == score for s, score in written.items())

    results = grade_class(course, dask=cluster.address, feedback=False, progress=False)
    assert {r.student for r in results if r.kept} == set(written)
    assert all(r.status == "graded" for r in results)
    rows = _rows(postgres)
    assert sorted(rows) == sorted(STUDENTS) and all(n == _grade_cells() for _, n in rows.values())


def test_kubernetes_file_parses_and_says_what_the_doc_says():
    import yaml

    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()) if d]
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    scheduler = by_name["Deployment", "jaxgrader-scheduler"]["spec"]["template"]["spec"]["containers"][0]
    assert scheduler["command"][:2] == ["dask", "scheduler"]
    assert {e["name"]: e["value"] for e in scheduler["env"]}["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] == "2"
    service = by_name["Service", "jaxgrader-scheduler"]
    assert service["spec"]["ports"][0]["port"] == 8786
    pod = by_name["Deployment", "jaxgrader-worker"]["spec"]["template"]["spec"]
    worker = pod["containers"][0]
    command = worker["command"]
    assert command[:3] == ["dask", "worker", "tcp://jaxgrader-scheduler:8786"]
    assert command[command.index("--nthreads") + 1] == "1"
    assert pod["hostUsers"] is False and worker["securityContext"]["procMount"] == "Unmasked"


def test_slurm_file_builds_its_job_script():
    path = ROOT / "deploy" / "slurm.py"
    compile(path.read_text(), str(path), "exec")  # at least valid Python where dask-jobqueue is not installed
    try:
        import dask_jobqueue
    except ImportError:
        pytest.skip("dask-jobqueue is not installed: deploy/slurm.py only compile-checked")
    import importlib.util

    assert dask_jobqueue.SLURMCluster
    spec = importlib.util.spec_from_file_location("jaxgrader_deploy_slurm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cluster = module.make_cluster(partition="cpu", account="course", workers_per_job=3, port=0,
                                  dashboard_port=0, prologue=["module load python"])
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "#SBATCH -p cpu" in script and "#SBATCH -A course" in script and "#SBATCH --cpus-per-task=6" in script
    assert "module load python" in script
    assert f"{sys.executable} -m distributed.cli.dask_worker tcp://" in script
    assert "--nthreads 1" in script and "--nworkers 3" in script
