"""Prepared kernels (jaxgrader.grading.sandbox.prepared): forked from a sandboxed process that imported
JAX once, each still a fresh kernel as far as a submission can tell, and nothing one student's
kernel does reaches the next one's. Real bubblewrap, real kernels, real forks."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import nbformat
import psutil
import pytest
from traitlets.config import Config

from jaxgrader.grading.sandbox import prepared
from jaxgrader.grading.sandbox.limits import LimitedExecute, RunLog
from jaxgrader.grading.sandbox.sandbox import SandboxedKernelManager, check_sandbox

from .test_sandbox import Kernel

pytestmark = pytest.mark.slow

PRELOAD = ["jax", "jax.numpy"]


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()
    prepared.close_all()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    (root / "gradebook.db").write_text("grades")
    (root / "autograded" / "me" / "ps1").mkdir(parents=True)
    return root


def config(course, **settings) -> Config:
    c = Config()
    c.CourseDirectory.root = str(course)
    c.JaxGrader.seed = 99
    c.SandboxedKernelManager.preload = PRELOAD
    for name, value in settings.items():
        setattr(c.SandboxedKernelManager, name, value)
    return c


def start(loop, course, prepared_kernel=True, **settings) -> Kernel:
    assert check_sandbox() == ""
    km = SandboxedKernelManager(kernel_name="python3", config=config(course, **settings))
    km.use_prepared = prepared_kernel
    return Kernel(loop, km, cwd=str(course / "autograded" / "me" / "ps1"))


STATE = ("import json, os, sys; print(json.dumps([os.getcwd(), os.getuid(), dict(os.environ), "
         "'jax' in sys.modules, os.getppid(), sorted(os.listdir('.'))]))")


def _normal(env: dict, scratch: str) -> dict:
    return {k: v.replace(scratch, "<scratch>") for k, v in env.items()}


def test_a_prepared_kernel_is_what_a_fresh_one_is_with_jax_already_imported(loop, course):
    fresh = start(loop, course, prepared_kernel=False)
    try:
        assert not fresh.probe(STATE)[3]
        fresh.run("import " + ", ".join(PRELOAD))
        cwd, uid, env, jax_loaded, _, files = fresh.probe(STATE)
        expected = (_normal(env, cwd), files)
    finally:
        fresh.shutdown()
    parents = set()
    for _ in range(2):
        k = start(loop, course)
        try:
            cwd, uid, env, jax_loaded, parent, files = k.probe(STATE)
            assert jax_loaded, "not forked from the prepared process"
            assert (_normal(env, cwd), files) == expected  # same environment and scratch directory
            assert uid == (k.km._lease.uid if os.geteuid() == 0 else os.geteuid()) and uid != 0
            parents.add(parent)
            assert k.probe("import jax.numpy as jnp; print(int(jnp.arange(4).sum()))") == 6
        finally:
            k.shutdown()
    assert len(parents) == 1  # both forked from one process: imports paid once


def test_nothing_one_kernel_leaves_reaches_the_next(loop, course):
    """Files in HOME, TMPDIR, /tmp and /dev/shm, System V IPC objects, processes left running,
    a changed startup file: all gone before the next student's kernel starts."""
    a = start(loop, course)
    try:
        a.run("import os, subprocess\n"
              "for p in ('planted', os.environ['TMPDIR'] + '/planted', '/tmp/planted', '/dev/shm/planted'):\n"
              "    open(p, 'w').write('x')\n"
              "os.makedirs('.ipython/profile_default/startup', exist_ok=True)\n"
              "open('.ipython/profile_default/startup/00.py', 'w').write('PLANTED = 1')\n"
              "os.makedirs('/tmp/locked/deeper'); os.chmod('/tmp/locked', 0)\n"
              "subprocess.run(['ipcmk', '--shmem', '4096'], check=True, capture_output=True)\n"
              "subprocess.Popen(['sleep', '4321'], start_new_session=True)\n")
        assert "4321" in a.run("import subprocess; print(subprocess.run(['ps', '-eo', 'args'], "
                               "capture_output=True, text=True).stdout)")["stdout"]
    finally:
        a.shutdown()
    b = start(loop, course)
    try:
        seen = b.probe("import json, os, subprocess\n"
                       "mounts = [line.split()[4] for line in open('/proc/self/mountinfo')]\n"
                       "print(json.dumps([sorted(os.listdir('.')), os.listdir(os.environ['TMPDIR']), "
                       "[p for p in os.listdir('/tmp') if not any(m.startswith(f'/tmp/{p}/') for m in mounts)], "  # not bind parents
                       "os.listdir('/dev/shm'), "
                       "subprocess.run(['ipcs', '-m'], capture_output=True, text=True).stdout, "
                       "subprocess.run(['ps', '-eo', 'args'], capture_output=True, text=True).stdout, "
                       "'PLANTED' in globals()]))")
        files, tmpdir, tmp, shm, ipcs, ps, planted = seen
        assert "planted" not in files and tmpdir == [] and tmp == [] and shm == []
        assert "0x" not in ipcs and "4321" not in ps and not planted
    finally:
        b.shutdown()


def test_a_kernel_cannot_reach_into_its_zygote(loop, course):
    """Non-dumpable: no ptrace, no /proc/<pid>/mem, environ or fd of the process kernels come from."""
    k = start(loop, course)
    try:
        out = k.probe("import json, os\nppid = os.getppid()\nseen = {}\n"
                      "for what in ('mem', 'environ', 'fd/0', 'fd'):\n"
                      "    try:\n"
                      "        p = f'/proc/{ppid}/{what}'\n"
                      "        seen[what] = os.listdir(p) if what == 'fd' else open(p, 'rb').read(1) is not None\n"
                      "    except OSError as e:\n"
                      "        seen[what] = type(e).__name__\n"
                      "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                      "seen['ptrace'] = libc.ptrace(16, ppid, 0, 0)\n"  # PTRACE_ATTACH
                      "print(json.dumps(seen))")
        assert out == {"mem": "PermissionError", "environ": "PermissionError", "fd/0": "PermissionError",
                       "fd": "PermissionError", "ptrace": -1}
    finally:
        k.shutdown()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_a_kernel_that_kills_or_stops_its_zygote_costs_only_a_restart(loop, course, sig, monkeypatch):
    # a stopped zygote never answers the next reset: waited out for REPLY_TIMEOUT_S (20 s) in grading, 5 s here
    monkeypatch.setattr(prepared, "REPLY_TIMEOUT_S", 5.0)
    a = start(loop, course)
    zygote = a.km._lease.proc.pid  # its sandbox's outer bwrap
    try:
        # from a timer, after this cell has answered: killing the zygote ends the sandbox, this kernel with it
        a.run(f"import os, threading; threading.Timer(0.5, os.kill, (os.getppid(), {int(sig)})).start()")
        time.sleep(2)
    finally:
        a.shutdown()
    b = start(loop, course)
    try:
        assert b.probe("import jax.numpy as jnp; print(int(jnp.arange(5).sum()))") == 10
    finally:
        b.shutdown()
    assert not psutil.pid_exists(zygote)  # the attack took the zygote down; grading went on without it


def _execute(course, source: str, **settings):
    """Run a one-cell notebook through LimitedExecute as autograde does; (outputs text, reruns)."""
    c = config(course, **settings)
    c.LimitedExecute.kernel_manager_class = SandboxedKernelManager
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    log = c.LimitedExecute.run_log = RunLog()
    ep = LimitedExecute(config=c, timeout=120)
    nb, _ = ep.preprocess(nb, {"metadata": {"path": str(course / "autograded" / "me" / "ps1"), "name": "nb"}})
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    return text.strip(), list(log.reruns)


def test_a_notebook_that_changes_what_imports_read_runs_again_fresh(course):
    """JAX reads JAX_ENABLE_X64 when imported: set before `import jax`, it works in a fresh kernel
    but came too late for a prepared one. Such a notebook runs again, and gets float64 as it would."""
    text, reruns = _execute(course, "import os\nos.environ['JAX_ENABLE_X64'] = '1'\n"
                                    "import jax.numpy as jnp\nprint(jnp.ones(1).dtype)")
    assert text == "float64" and len(reruns) == 1 and "JAX_ENABLE_X64" in reruns[0]
    # setting a variable to the value the imports saw changes nothing: no second run
    text, reruns = _execute(course, "import os\nos.environ['KERAS_BACKEND'] = 'jax'\n"
                                    "import jax.numpy as jnp\nprint(jnp.ones(1).dtype)",
                            kernel_env={"KERAS_BACKEND": "jax"}, preload=[*PRELOAD, "keras"])
    assert text == "float32" and reruns == []


def test_xla_flags_reach_a_forked_kernel(course):
    """XLA reads XLA_FLAGS when JAX first computes, after the fork: each kernel gets its assignment's."""
    text, _ = _execute(course, "import os, jax\njax.jit(lambda x: x + 1)(1.0)\n"
                               "print(sorted(os.listdir(os.environ['HOME'] + '/dump')) != [])",
                       xla_flags="--xla_dump_to=dump")
    assert text == "True"


def test_the_reference_run_gets_a_fresh_kernel(course):
    from jaxgrader.grading.verdict.verdict import execute_reference

    c = config(course)
    c.LimitedExecute.kernel_manager_class = SandboxedKernelManager
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print('jax' in sys.modules)")])
    assert execute_reference(nb, c, assignment="ps1").cells[0].outputs[0]["text"].strip() == "False"
    assert _execute(course, "import sys; print('jax' in sys.modules)")[0] == "True"
