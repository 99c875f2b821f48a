"""Prepared kernels: grading kernels forked from a sandboxed process that already imported JAX.

Why: a grading kernel's start and imports (ipykernel, JAX, optax, scikit-learn, Keras)
cost 1.3 to 4 CPU-seconds per submission, up to a third of what grading a submission
costs, paid again for every student. A grading process (a local worker, a Dask worker)
keeps one *zygote* (:mod:`jaxgrader.grading.sandbox.zygote`): a process in a bubblewrap sandbox
like a kernel's, which imports ``SandboxedKernelManager.preload`` once and then forks
one kernel at a time. Imports are paid once per grading process, not once per submission.

Isolation between students, kept as with fresh kernels:

* one kernel at a time per zygote; before the next fork every process of the last one
  is killed (the sandbox has its own PID namespace: the zygote can find them all), the
  sandbox's ``/tmp``, ``/dev/shm`` and System V IPC objects are emptied, and the
  kernel's scratch directory is restored from the copy taken once imports were done
  (kept outside the sandbox);
* the zygote is non-dumpable: a kernel cannot ptrace it or read its memory; a kernel
  that kills or stops it only costs a restart (replies are awaited with a timeout);
* a kernel is the zygote's only kind of child, and it gets the environment, working
  directory, limits, uid and seed a fresh kernel would get. The environment variables
  the preloaded imports read are checked: a kernel whose environment differs gets a
  zygote started with its own, and a notebook that changes one of them (e.g.
  ``JAX_ENABLE_X64`` before ``import jax``) is run again in a fresh kernel, since
  imports done ahead of it could not see the change (:class:`limits.LimitedExecute`).

The instructor's reference run always gets a fresh kernel. Anything that goes wrong
with a zygote falls back to a fresh kernel for that notebook: slower, never different.
"""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import threading
import time
from pathlib import Path

import psutil

from .kerneldirs import remove_tree

REPLY_TIMEOUT_S = 20.0  # a fork or a reset; a zygote that takes longer is replaced
START_TIMEOUT_S = 180.0  # imports, once per zygote (Keras takes a few seconds)
MARKER = "env-changed"  # in the kernel's ipc directory: written by a kernel that changed an import-time variable

_launcher_queue: queue.Queue = queue.Queue()
_launcher_lock = threading.Lock()
_launcher_started = False
_pool_lock = threading.Lock()
_pool: dict[tuple, "Zygote"] = {}


class ZygoteError(RuntimeError):
    """The zygote could not start, answer or fork; the kernel is started fresh instead."""


class Incompatible(Exception):
    """A kernel with this environment would not have imported as the zygote did: start one with it."""


def _launch(fn):
    """Run ``fn`` on a thread that lives as long as this process.

    bubblewrap's --die-with-parent follows the thread that started it, and a zygote
    must outlive the grading thread that happened to need it first.
    """
    global _launcher_started
    with _launcher_lock:
        if not _launcher_started:
            def loop():
                while True:
                    job, box = _launcher_queue.get()
                    try:
                        box.put((job(), None))
                    except BaseException as exc:  # handed back to the caller
                        box.put((None, exc))
            threading.Thread(target=loop, daemon=True, name="jaxgrader-zygote-launcher").start()
            _launcher_started = True
    box: queue.Queue = queue.Queue()
    _launcher_queue.put((fn, box))
    result, exc = box.get()
    if exc is not None:
        raise exc
    return result


def _ns_pid(pid: int) -> int | None:
    """A process's pid in its innermost PID namespace, from the NSpid line of its status."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


class ForkedKernel:
    """A kernel forked by a zygote, seen from the grader: what jupyter_client needs of a Popen.

    The grader is not its parent (the zygote is, and reaps it), so its exit status is not
    known: 0, or -9 once the grader killed it.
    """

    stdin = stdout = stderr = None

    def __init__(self, proc: psutil.Process):
        self._proc, self.pid, self.returncode = proc, proc.pid, None
        self._killed = False

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                gone = self._proc.status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                gone = True
            if gone:
                self.returncode = -9 if self._killed else 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("kernel", timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        try:
            self._proc.send_signal(signum)
        except psutil.NoSuchProcess:
            pass

    def kill(self) -> None:
        self._killed = True
        self.send_signal(9)

    def terminate(self) -> None:
        self.send_signal(15)


class Zygote:
    """One prepared process and the directory its kernels use (scratch, ipc), reused kernel after kernel."""

    def __init__(self, root: str, uid: int):
        self.root, self.uid = root, uid
        self.scratch, self.ipc = os.path.join(root, "scratch"), os.path.join(root, "ipc")
        self.template = os.path.join(root, "template")  # the scratch directory after imports; not bound
        self.busy = False
        self.seen: dict[str, str | None] = {}
        self.proc: subprocess.Popen | None = None
        self.failures = 0  # failed starts in a row (a kernel that kills its zygote does not count)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, command: list[str], env: dict[str, str], cwd: str) -> None:
        """Start the zygote with ``command`` (the sandboxed ``python -c <zygote>``) and wait for its imports."""
        self.close()
        started = time.monotonic()
        self.failures += 1  # until it is ready: a zygote that cannot start is not tried forever
        self.proc = _launch(lambda: subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.PIPE,
                                                     stdout=subprocess.PIPE, text=True, bufsize=1))
        ready = self._reply(START_TIMEOUT_S, "start")
        if not ready.get("ready"):
            raise self._fail(f"did not start: {ready}")
        if ready.get("threads", 1) != 1:  # forking a process with threads can deadlock the child
            raise self._fail(f"its imports started {ready['threads'] - 1} thread(s); not forking from it")
        self.failures = 0
        self.seen = ready.get("seen", {})
        self.start_seconds = time.monotonic() - started
        _copy(self.scratch, self.template)

    def _fail(self, why: str) -> ZygoteError:
        self.close()
        return ZygoteError(f"prepared kernel process {why}")

    def _reply(self, timeout: float, what: str) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            raise self._fail(f"gave no answer to {what}" + ("" if ready else f" within {timeout:.0f} s"))
        try:
            return json.loads(line)
        except ValueError:
            raise self._fail(f"answered {what} with {line[:100]!r}") from None

    def _ask(self, command: dict, timeout: float | None = None) -> dict:
        """The zygote's reply to ``command``, awaited ``timeout`` seconds (``REPLY_TIMEOUT_S``, read when called)."""
        if not self.running:
            raise self._fail("is not running")
        try:
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise self._fail(f"cannot be reached ({exc})") from None
        return self._reply(REPLY_TIMEOUT_S if timeout is None else timeout, command["op"])

    def fork(self, argv: list[str], env: dict[str, str]) -> ForkedKernel:
        """A new kernel: ``argv`` as ``python -m ipykernel_launcher`` gets it, ``env`` its whole environment.

        The last kernel was cleared away by :meth:`release` (a zygote whose release did not
        happen stays busy, so it is never leased again)."""
        reply = self._ask({"op": "fork", "argv": argv, "env": env, "cwd": self.scratch,
                           "marker": os.path.join(self.ipc, MARKER)})
        if reply.get("incompatible"):
            raise Incompatible(reply["incompatible"])
        pid = reply.get("pid")
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            if _ns_pid(child.pid) == pid:
                return ForkedKernel(child)
        raise self._fail(f"forked a kernel (pid {pid} in its sandbox) that is not running")

    def release(self) -> str:
        """After a kernel: end it and all it started, restore the scratch directory; return what the
        kernel's marker says (an import-time variable it changed), or ''."""
        try:
            if self.running and not self._ask({"op": "reset"}).get("ok"):
                raise self._fail("could not clear the last kernel away")
        except ZygoteError:
            pass  # closed: its PID namespace, and every process in it, is gone
        marker = Path(self.ipc, MARKER)
        try:
            changed = marker.read_text()[:200] if marker.is_file() and not marker.is_symlink() else ""
        except OSError:
            changed = ""
        for place in (self.ipc, self.scratch):
            _empty(place)
        if os.path.isdir(self.template):
            _copy(self.template, self.scratch)
        self.busy = False
        return changed

    def close(self) -> None:
        """Stop the zygote: killing its bwrap ends its PID namespace and every process in it."""
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _copy(source: str, target: str) -> None:
    """Copy the contents of ``source`` into ``target`` (created if missing), owners and modes kept."""
    os.makedirs(target, mode=0o700, exist_ok=True)
    subprocess.run(["cp", "-a", "--", source + "/.", target], check=True, capture_output=True, timeout=60)


def _empty(path: str) -> None:
    """Delete what is in ``path`` (also what a kernel made unreadable), keeping ``path`` itself."""
    for entry in os.listdir(path) if os.path.isdir(path) else ():
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            remove_tree(full)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def lease(key: tuple, make) -> Zygote | None:
    """The idle zygote for ``key`` (sandbox settings), created by ``make()`` if none; None while busy
    or after repeated failures (then kernels start fresh).

    A new key stops the idle zygotes of other keys: a grading process serves one class run at a time, and
    each run's sandbox differs (its held-out data, ``sandbox.heldout``), so a long-lived worker (Dask's)
    would otherwise keep one idle prepared process per run it ever graded."""
    stale = []
    with _pool_lock:
        zygote = _pool.get(key)
        if zygote is None:
            stale = [k for k, z in _pool.items() if not z.busy]
            stale = [_pool.pop(k) for k in stale]
            zygote = _pool[key] = make()
        if zygote.busy or zygote.failures >= 3:
            busy = None
        else:
            zygote.busy = True
            busy = zygote
    for old in stale:
        old.close()
    return busy


def close_all() -> None:
    """Stop every zygote of this process (tests; a process's own exit does it too)."""
    with _pool_lock:
        zygotes = list(_pool.values())
        _pool.clear()
    for zygote in zygotes:
        zygote.close()
