"""The sandboxed grading kernel, probed from inside with real bubblewrap and real kernels.

One sandboxed kernel answers most probes; a few more check what must hold across
kernels (shutdown leaves nothing, startup files don't persist, ``isolation="none"``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import psutil
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from traitlets.config import Config

from jaxgrader.grading.sandbox.limits import MemoryWatchdog
from jaxgrader.grading.sandbox.bwrap import SYSTEM_PATH, check_sandbox, read_only_paths, sandbox_command
from jaxgrader.grading.sandbox.kerneldirs import sweep_stale_dirs as _sweep_stale_dirs
from jaxgrader.grading.sandbox.sandbox import COURSE_ITEMS, SandboxedKernelManager, isolation_of

from .conftest import ROOT

pytestmark = pytest.mark.slow

SECRET = "JAXGRADER_TEST_SECRET"
SEED = "271828"
AS_ROOT = os.geteuid() == 0
NOBODY = 65534


def expected_uid(km) -> int:
    """A uid of the kernel's own when the grader is root, else the grader's."""
    return km._kernel_uid() if AS_ROOT else os.geteuid()


class Kernel:
    """A kernel manager and client driven synchronously on one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, km: AsyncKernelManager, cwd: str | None = None):
        self.loop, self.km = loop, km
        loop.run_until_complete(km.start_kernel(**({"cwd": cwd} if cwd else {})))
        self.kc = km.client()
        self.kc.start_channels()
        loop.run_until_complete(self.kc.wait_for_ready(timeout=60))

    def run(self, code: str, timeout: float = 120) -> dict:
        """stdout, stderr and error name of one cell."""
        out = {"stdout": "", "stderr": "", "error": ""}

        def hook(msg):
            if msg["msg_type"] == "stream":
                out[msg["content"]["name"]] += msg["content"]["text"]
            elif msg["msg_type"] == "error":
                out["error"] = f"{msg['content']['ename']}: {msg['content']['evalue']}"
        self.loop.run_until_complete(self.kc.execute_interactive(code, timeout=timeout, output_hook=hook))
        return out

    def probe(self, code: str):
        """Run ``code`` that prints one JSON value; fail on any error or stderr."""
        out = self.run(code)
        assert not out["error"] and not out["stderr"], out
        return json.loads(out["stdout"].strip().splitlines()[-1])

    def shutdown(self) -> None:
        self.kc.stop_channels()
        self.loop.run_until_complete(self.km.shutdown_kernel())


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A fake course directory with everything the kernel must not see."""
    root = tmp_path_factory.mktemp("course")
    (root / "gradebook.db").write_text("grades")
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    for folder in ("source/ps1", "release/ps1", "submitted/other/ps1", "submitted/me/ps1",
                   "autograded/me/ps1", "feedback/other/ps1"):
        (root / folder).mkdir(parents=True)
        (root / folder / "ps1.ipynb").write_text("{}")
    return root


@pytest.fixture(scope="module")
def host_env():
    """A secret in the grader's environment, and nbgrader's execution marker (the seed is in course_config)."""
    saved = {k: os.environ.get(k) for k in (SECRET, "NBGRADER_EXECUTION")}
    os.environ.update({SECRET: "hunter2", "NBGRADER_EXECUTION": "autograde"})
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def course_config(course: Path) -> Config:
    c = Config()
    c.CourseDirectory.root = str(course)
    c.JaxGrader.seed = int(SEED)  # the run's seed travels in the configuration; the kernel gets it as JAXGRADER_SEED
    return c


@pytest.fixture(scope="module")
def kernel(loop, course, host_env):
    assert check_sandbox() == ""
    k = Kernel(loop, SandboxedKernelManager(kernel_name="python3", config=course_config(course)),
               cwd=str(course / "autograded" / "me" / "ps1"))
    yield k
    k.shutdown()


def test_check_sandbox_and_isolation_reported(kernel):
    assert check_sandbox() == ""
    assert isolation_of(kernel.km) == "bubblewrap"
    assert isolation_of(AsyncKernelManager()) == "none"


def test_binds_never_expose_the_course(tmp_path):
    course = tmp_path / "course"
    for p in (".venv/lib", "jaxgrader", "source/ps1", "submitted/x"):
        (course / p).mkdir(parents=True)
    (course / "gradebook.db").write_text("")
    link = tmp_path / "venv-link"
    link.symlink_to(course / ".venv")
    elsewhere = tmp_path / "another-course"  # not the configured course, but looks like one
    elsewhere.mkdir()
    (elsewhere / "nbgrader_config.py").write_text("")
    wanted = [course / ".venv", course / ".venv" / "lib", link, course / "jaxgrader", course, tmp_path,
              course / "source" / "ps1", course / "gradebook.db", elsewhere, "/usr/lib", "/nonexistent"]
    kept, refused = read_only_paths([str(p) for p in wanted], roots=[str(course)],
                                    secret=[str(course / item) for item in COURSE_ITEMS])
    assert sorted(kept) == sorted(map(str, [course / ".venv", course / "jaxgrader", link]))
    assert sorted(refused) == sorted(map(str, [tmp_path, course, course / "gradebook.db", course / "source" / "ps1",
                                               elsewhere]))


def test_course_and_host_are_invisible(kernel, course):
    hidden = [str(course), *(str(course / p) for p in ("gradebook.db", "nbgrader_config.py", "source",
                                                       "release", "submitted/other", "autograded", "feedback"))]
    # The real course around this repository (its venv may live inside it).
    hidden += [str(ROOT / p) for p in ("source", "release", "nbgrader_config.py", "gradebook.db", "tests")]
    hidden += [str(Path.home() / ".ssh"), "/home", str(ROOT.parent / "shared"),  # shared/ sits beside the checkout
               str(Path(tempfile.gettempdir()) / "pytest-of-root")]
    seen = kernel.probe(f"""
import json, os
def listing(p):
    try:
        return sorted(os.listdir(p))
    except OSError as e:
        return type(e).__name__
print(json.dumps({{"exists": [p for p in {hidden!r} if os.path.lexists(p)],
                   "root": sorted(os.listdir('/')), "repo": listing({str(ROOT)!r}),
                   "course_parent": listing({str(course.parent)!r})}}))
""")
    assert seen["exists"] == []
    # The system, /proc, /dev, /tmp, and the top folders of the Python environment and of the package's
    # checkout (its .venv and jaxgrader/ are bound in: the interpreter's prefix and the checkout's venv, wherever they are).
    bound = {Path(p).resolve().parts[1] for p in (sys.prefix, sys.base_prefix, ROOT)}
    assert set(seen["root"]) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev",
                                 "tmp", "opt"} | bound, seen["root"]
    assert seen["course_parent"] == "FileNotFoundError"
    # At most the venv and the package are bound out of the repository, never the rest of it.
    venv = Path(sys.prefix).resolve()
    allowed = {"jaxgrader"} | ({venv.relative_to(ROOT.resolve()).parts[0]} if venv.is_relative_to(ROOT.resolve()) else set())
    assert seen["repo"] == "FileNotFoundError" or set(seen["repo"]) <= allowed, seen["repo"]


def test_writes_stay_in_scratch(kernel):
    name = f"jaxgrader-escape-{uuid.uuid4().hex}"
    site = next(p for p in sys.path if p.endswith("site-packages"))
    package = str(ROOT / "jaxgrader")
    targets = [f"{site}/{name}.pth", f"{package}/{name}.py", f"/tmp/{name}", f"/etc/{name}", f"/{name}"]
    result = kernel.probe(f"""
import json, os
result = {{}}
for path in {targets!r} + [os.path.join(os.getcwd(), {name!r})]:
    try:
        with open(path, "w") as f:
            f.write("import os; os.system('touch /tmp/pwned')")
        result[path] = "written"
    except OSError as e:
        result[path] = type(e).__name__
print(json.dumps({{"result": result, "cwd": os.getcwd(), "home": os.path.expanduser('~')}}))
""")
    written = {p for p, r in result["result"].items() if r == "written"}
    # Its own scratch and its private /tmp (a tmpfs: nothing reaches the host's /tmp).
    assert written == {os.path.join(result["cwd"], name), f"/tmp/{name}"}, result
    assert result["home"] == result["cwd"] == kernel.km.scratch_dir
    for path in targets:
        assert not os.path.exists(path), path
    assert (Path(kernel.km.scratch_dir) / name).exists()


def test_no_network(kernel):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        seen = kernel.probe(f"""
import json, socket
def connect(host):
    try:
        socket.create_connection((host, {port}), timeout=2).close()
        return "connected"
    except OSError as e:
        return type(e).__name__
print(json.dumps({{"loopback": connect("127.0.0.1"), "interfaces": [n for _, n in socket.if_nameindex()]}}))
""")
        assert seen["loopback"] != "connected"
        assert seen["interfaces"] == ["lo"]
        with pytest.raises(BlockingIOError):
            listener.accept()  # the host's listener saw nothing
    finally:
        listener.close()


def test_unprivileged_and_alone(kernel):
    seen = kernel.probe("""
import json, os
cmds = {}
for pid in (p for p in os.listdir('/proc') if p.isdigit()):
    try:
        cmds[pid] = open(f'/proc/{pid}/cmdline').read().replace('\\0', ' ')
    except OSError:
        pass
status = dict(line.split(':', 1) for line in open('/proc/self/status'))
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
                  "cmds": cmds, "capeff": status['CapEff'].strip(), "nnp": status['NoNewPrivs'].strip()}))
""")
    assert seen["uid"] == seen["euid"] == expected_uid(kernel.km)
    assert seen["capeff"] == "0000000000000000" and seen["nnp"] == "1"
    if AS_ROOT:
        assert seen["gid"] == expected_uid(kernel.km) and seen["groups"] in ([], [expected_uid(kernel.km)])
    # Its /proc holds bwrap's init and the kernel's own processes, not the grader or pytest.
    assert len(seen["cmds"]) <= 4, seen["cmds"]
    assert not any("pytest" in c for c in seen["cmds"].values()), seen["cmds"]
    # On the host the kernel really runs as that uid, as a child of the provisioner's process,
    # so the memory watchdog (jaxgrader.grading.sandbox.limits) sums its memory.
    root = psutil.Process(kernel.km.provisioner.pid)
    kernels = [p for p in root.children(recursive=True) if p.cmdline()[1:3] == ["-m", "ipykernel_launcher"]]
    assert len(kernels) == 1 and kernels[0].uids().real == expected_uid(kernel.km)
    assert MemoryWatchdog(root.pid, 0).rss(root) > 30 * 2**20


def test_environment_is_allowlisted(kernel):
    env = kernel.probe("import json, os; print(json.dumps(dict(os.environ)))")
    assert SECRET not in env
    assert env["JAXGRADER_SEED"] == SEED
    assert env["NBGRADER_EXECUTION"] == "autograde"
    assert env["MPLBACKEND"] == "Agg" and env["LC_ALL"] == "C.UTF-8" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PATH"].split(":")[0] == os.path.dirname(sys.executable)
    assert env["JAX_DEFAULT_MATMUL_PRECISION"] == "float32"
    for name in ("HOME", "TMPDIR", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "MPLCONFIGDIR"):
        assert env[name].startswith(kernel.km.scratch_dir), name
    ours = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
            "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR", "MPLBACKEND", "PYTHONDONTWRITEBYTECODE", "JAXGRADER_SEED",
            "NBGRADER_EXECUTION", "JAX_PLATFORMS", "JPY_PARENT_PID", "JAX_DEFAULT_MATMUL_PRECISION"}
    ipykernel_sets = {"PWD", "TERM", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "PAGER", "GIT_PAGER",
                      "PYDEVD_USE_FRAME_EVAL", "MPLBACKEND"}
    assert set(env) <= ours | ipykernel_sets, set(env) - ours - ipykernel_sets


def test_rlimits_and_no_host_fds(kernel):
    seen = kernel.probe("""
import json, os, resource
fds = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        fds[fd] = os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        pass
print(json.dumps({"nproc": resource.getrlimit(resource.RLIMIT_NPROC),
                  "fsize": resource.getrlimit(resource.RLIMIT_FSIZE),
                  "cpu": resource.getrlimit(resource.RLIMIT_CPU), "fds": fds}))
""")
    km = kernel.km
    assert seen["nproc"] == [km.max_processes] * 2
    assert seen["fsize"] == [km.max_file_size_mb * 2**20] * 2
    assert seen["cpu"] == [km.cpu_time_s] * 2
    # No descriptor leads back to a host directory (an open directory fd escapes any mount sandbox). The
    # kernel's own scratch folder is its home, mounted at the same path: IPython may hold its profile
    # folder open there for a moment (seen once in a full run), which leads nowhere else.
    scratch = kernel.km.scratch_dir.rstrip("/") + "/"
    dirs = {fd: target for fd, target in seen["fds"].items()
            if target.startswith("/") and os.path.isdir(target) and not (target + "/").startswith(scratch)}
    assert dirs == {}, dirs


def test_jax_and_course_libraries_work(kernel):
    out = kernel.run("""
import os
os.environ["KERAS_BACKEND"] = "jax"
import jax, jax.numpy as jnp
import keras, optax
import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
doubled = jax.jit(lambda x: x * 2)(jnp.ones(3))
assert doubled.tolist() == [2.0, 2.0, 2.0]
assert keras.backend.backend() == "jax"
assert keras.Sequential([keras.layers.Dense(2)])(jnp.ones((1, 3))).shape == (1, 2)
assert optax.adam(1e-3).init(jnp.ones(2)) is not None
assert load_digits().data.shape == (1797, 64)
plt.plot([1, 2]); plt.savefig("plot.png")
assert plt.get_backend().lower() == "agg"
print("ok")
""")
    assert out == {"stdout": "ok\n", "stderr": "", "error": ""}


def test_interrupt_reaches_the_kernel(kernel):
    """nbgrader interrupts a cell at its timeout; signals to bwrap would kill the sandbox instead."""
    async def interrupt_soon():
        await asyncio.sleep(1.5)
        await kernel.km.interrupt_kernel()
    task = kernel.loop.create_task(interrupt_soon())
    start = time.monotonic()
    out = kernel.run("import time\ntime.sleep(60)")
    kernel.loop.run_until_complete(task)
    assert out["error"].startswith("KeyboardInterrupt") and time.monotonic() - start < 30
    assert kernel.probe("print(1)") == 1  # still alive


def _sleepers() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if (p.info["cmdline"] or [])[:2] == ["sleep", "1000"]:
            found.append(p)
    return found


def test_shutdown_leaves_nothing_and_startup_files_do_not_persist(loop, course, host_env):
    config = course_config(course)
    first = Kernel(loop, SandboxedKernelManager(kernel_name="python3", config=config))
    kernel_dir = first.km._kernel_dir
    assert first.probe("""
import json, os, subprocess, warnings
# Python 3.12+ warns that forking a multi-threaded process (the kernel has threads) may deadlock
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
subprocess.Popen(["sleep", "1000"], start_new_session=True)   # a detached sleeper
if os.fork() == 0:                                             # a double-forked one
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "1000"])
    os._exit(0)
os.wait()
startup = os.path.expanduser("~/.ipython/profile_default/startup")
os.makedirs(startup, exist_ok=True)
with open(os.path.join(startup, "00-tamper.py"), "w") as f:
    f.write("TAMPERED = True\\n")
print(json.dumps(os.getuid()))
""") == expected_uid(first.km)
    deadline = time.monotonic() + 10
    while len(_sleepers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_sleepers()) == 2 and all(p.uids().real == expected_uid(first.km) for p in _sleepers())
    first.shutdown()
    deadline = time.monotonic() + 10
    while _sleepers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleepers() == []
    assert not os.path.exists(kernel_dir)

    # The next kernel, started the way nbgrader starts it (nbclient, cwd under autograded/).
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import getpass, json, os; print(json.dumps(['TAMPERED' in globals(), os.getcwd(), os.getuid(), "
        "getpass.getuser()]))")])
    client = NotebookClient(nb, kernel_name="python3", kernel_manager_class=SandboxedKernelManager, config=config,
                            resources={"metadata": {"path": str(course / "autograded" / "me" / "ps1")}})
    client.execute()
    tampered, cwd, uid, user = json.loads(nb.cells[0].outputs[0]["text"])
    assert tampered is False
    if AS_ROOT:  # each kernel its own uid (RLIMIT_NPROC is per uid), named in the sandbox's /etc/passwd
        assert uid != expected_uid(first.km) and uid >= 1_000_000 and user == "student"
    assert cwd.startswith(tempfile.gettempdir()) and not cwd.startswith(kernel_dir)
    assert not os.path.exists(cwd)  # nbclient's shutdown removed it


GRADER = """
import asyncio
from jaxgrader.grading.sandbox.sandbox import SandboxedKernelManager
async def main():
    km = SandboxedKernelManager(kernel_name="python3")
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    await kc.execute_interactive("import subprocess; _ = subprocess.Popen(['sleep', '1000'], start_new_session=True)")
    print(km._kernel_dir, flush=True)
    await asyncio.sleep(1000)
asyncio.run(main())
"""


def test_grader_death_takes_the_kernel_along():
    grader = subprocess.Popen([sys.executable, "-c", GRADER], stdout=subprocess.PIPE, text=True)
    try:
        kernel_dir = grader.stdout.readline().strip()
        descendants = psutil.Process(grader.pid).children(recursive=True)
        assert kernel_dir and len(descendants) >= 3 and len(_sleepers()) == 1
    finally:
        grader.kill()  # SIGKILL: no cleanup code runs in the grader
        grader.wait()
    _, alive = psutil.wait_procs(descendants, timeout=10)
    assert alive == [] and _sleepers() == []
    # Its directory outlives it until the next kernel start on this host sweeps it (here, or in
    # any other grader running beside this test, which may have done it already).
    _sweep_stale_dirs(Path(kernel_dir).parent)
    assert not os.path.exists(kernel_dir)


def test_a_sandbox_that_outlived_its_grader_is_killed_by_the_sweep(tmp_path):
    """bwrap's --die-with-parent misses a parent that died before bwrap set it (bubblewrap#633):
    the sandbox is reparented to PID 1 and runs on. The next sweep on the host ends it."""
    dead = subprocess.Popen(["true"])
    dead.wait()  # a grader pid that no longer runs
    kernel_dir = tmp_path / f"jaxgrader-kernel-{dead.pid}-orphan"
    live_dir = tmp_path / f"jaxgrader-kernel-{os.getpid()}-live"  # a running grader's: left alone
    for d in (kernel_dir, live_dir):
        (d / "scratch").mkdir(parents=True)
        os.chmod(d, 0o755)
        os.chmod(d / "scratch", 0o755)
    marker = str(int(time.time() * 1000) % 10**9 + 10**9)  # `sleep <marker>`: found by its arguments
    cmd = sandbox_command(["sleep", marker], env={"PATH": SYSTEM_PATH}, ro=[], rw=[str(kernel_dir / "scratch")],
                          chdir=str(kernel_dir / "scratch"), as_root=AS_ROOT)
    # `setsid -f` forks and its parent exits at once: bwrap starts already reparented, as in the race
    subprocess.run(["setsid", "-f", *cmd], check=True, cwd="/")

    def sleepers():
        return [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[-2:] == ["sleep", marker]]

    deadline = time.monotonic() + 30
    while not sleepers() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        assert sleepers(), "the orphaned sandbox did not start"
        _sweep_stale_dirs(tmp_path)
        deadline = time.monotonic() + 10
        while sleepers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sleepers() == [] and not kernel_dir.exists()
    finally:  # never leave it to the rest of the suite
        for proc in sleepers():
            proc.kill()
    assert live_dir.is_dir()


def test_unsandboxed_still_gets_clean_env_and_fresh_dirs(loop, course, host_env):
    km = SandboxedKernelManager(kernel_name="python3", isolation="none", config=course_config(course))
    k = Kernel(loop, km, cwd=str(course / "autograded" / "me" / "ps1"))
    try:
        assert isolation_of(km) == "none"
        seen = k.probe("import json, os; print(json.dumps([os.getcwd(), os.getuid(), dict(os.environ)]))")
        cwd, uid, env = seen
        assert cwd == km.scratch_dir and uid == os.geteuid()
        assert SECRET not in env and env["JAXGRADER_SEED"] == SEED and env["HOME"] == cwd
    finally:
        k.shutdown()
    assert not os.path.exists(cwd)


@pytest.mark.skipif(not AS_ROOT, reason="runs bwrap as uid 65534 through setpriv")
def test_unprivileged_grader_variant_runs():
    """The command a non-root grader gets: bwrap in a user namespace, nested user namespaces off."""
    probe = "id -u; unshare --user true 2>/dev/null && echo nested-userns || echo no-nested-userns"
    with tempfile.TemporaryDirectory() as scratch:  # in /tmp: reachable by uid 65534
        os.chmod(scratch, 0o755)
        cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
               *sandbox_command(["sh", "-c", probe], env={"PATH": SYSTEM_PATH}, ro=[], rw=[scratch],
                                chdir=scratch, as_root=False)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(NOBODY), "no-nested-userns"]


def test_xla_flags_reach_graded_and_reference_kernels_but_not_timed_assignments(course, host_env):
    """``xla_flags`` is the grading kernels' XLA_FLAGS, the reference run's too, except in the
    assignments ``xla_defaults_for`` names (their tests time compiled code as students did).
    ``matmul_precision`` (float32 unless set) reaches every one of them."""
    from jaxgrader.grading.verdict.verdict import execute_reference

    c = course_config(course)
    c.SandboxedKernelManager.xla_flags = "--xla_backend_optimization_level=0"
    c.SandboxedKernelManager.xla_defaults_for = ["timed"]
    km = SandboxedKernelManager(kernel_name="python3", config=c)
    env = km._kernel_env("/scratch", "/bin", {}, str(course / "autograded" / "me" / "ps1"))
    assert env["XLA_FLAGS"] == "--xla_backend_optimization_level=0"
    assert "XLA_FLAGS" not in km._kernel_env("/scratch", "/bin", {}, str(course / "autograded" / "me" / "timed"))
    assert env["JAX_DEFAULT_MATMUL_PRECISION"] == "float32"
    c.SandboxedKernelManager.isolation = "none"
    c.LimitedExecute.kernel_manager_class = SandboxedKernelManager
    seen = {}
    for assignment in ("ps1", "timed"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
            "import os; print(repr(os.environ.get('XLA_FLAGS')), os.environ.get('JAX_DEFAULT_MATMUL_PRECISION'))")])
        out = execute_reference(nb, c, assignment=assignment).cells[0].outputs
        seen[assignment] = "".join(o.get("text", "") for o in out).strip()
    assert seen == {"ps1": "'--xla_backend_optimization_level=0' float32", "timed": "None float32"}


def test_task_directories_of_killed_graders_are_swept(tmp_path):
    """A worker killed mid-task leaves its scratch course (a submission, a gradebook copy) in
    /tmp; the next sweep on the host removes it, and only the dead process's."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"jaxgrader-task-{dead.pid}-abc"
    live = tmp_path / f"jaxgrader-task-{os.getpid()}-def"  # a running task's: left alone
    for d in (stale, live):
        (d / "submitted" / "alice" / "lesson1").mkdir(parents=True)
        (d / "gradebook.db").write_text("grades")
    os.chmod(stale / "submitted" / "alice", 0)  # what a student's files may look like: still removed
    _sweep_stale_dirs(tmp_path)
    assert not stale.exists() and (live / "gradebook.db").exists()
