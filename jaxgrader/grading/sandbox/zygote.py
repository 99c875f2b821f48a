"""A prepared kernel process: imports JAX once, then forks one grading kernel at a time.

Run by :mod:`jaxgrader.grading.sandbox.sandbox` (``SandboxedKernelManager.preload``), inside the
same bubblewrap sandbox a grading kernel gets, as ``python -c <this file's source>
MODULE...``: as source, so that a kernel's ``sys.path`` and ``sys.modules`` hold nothing
that ``python -m ipykernel_launcher`` would not. Why: a fresh kernel spends 1.3 to 4
CPU-seconds starting ipykernel and importing JAX, optax, scikit-learn and Keras before
the student's first cell runs; a kernel forked from a process that already did is ready
in about 0.4 s. Stdlib only at module level: whatever this module imports, every kernel
forked from it has imported too.

Protocol: one JSON object per line on stdin, one reply per line on the original stdout
(the process's own stdout and stderr both go to the grader's stderr, as a fresh kernel's
do). First reply, once imports are done: ``{"ready": ..., "seen": {NAME: value}}``, the
environment variables the imports read (their values then). Commands:

``{"op": "fork", "argv": [...], "env": {...}, "cwd": ..., "marker": path}``
    fork a kernel (``argv`` as ``python -m ipykernel_launcher`` would get it), reply
    ``{"pid": pid in the sandbox's PID namespace}``; or, if a kernel started with ``env``
    would not have imported the same way (a variable the imports read differs),
    ``{"incompatible": name}``: the grader starts a zygote with that environment.
``{"op": "reset"}``
    kill every other process in the sandbox (the last kernel and whatever it started),
    empty ``/tmp`` and ``/dev/shm``, remove System V IPC objects; reply ``{"ok": true}``.

Trust: kernels run the student's code with this process's uid. This process makes itself
non-dumpable, so a kernel can neither ptrace it nor read its memory, environment or file
descriptors through ``/proc``; kernels get none of its descriptors. A kernel can still
kill or stop it: the grader then starts a new one (it waits for replies with a timeout).
A kernel that sets an environment variable the preloaded imports read (``seen``) to a
value other than the one they saw would behave differently in a fresh kernel; the kernel
then writes ``marker`` and the grader runs the notebook again in a fresh kernel.
"""

import json
import os
import signal
import sys

PR_SET_DUMPABLE = 4


def _set_dumpable(on: bool) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(on), 0, 0, 0)


class _Recorder(dict):
    """os.environ while preloading: remembers each name read and its value (None: unset)."""

    def __init__(self, env, seen):
        super().__init__()
        self.env, self.seen = env, seen

    def _note(self, key):
        if isinstance(key, str):
            self.seen.setdefault(key, self.env.get(key))

    def __getitem__(self, key):
        self._note(key)
        return self.env[key]

    def __contains__(self, key):
        self._note(key)
        return key in self.env

    def get(self, key, default=None):
        self._note(key)
        return self.env.get(key, default)

    def __setitem__(self, key, value):
        self.env[key] = value

    def __delitem__(self, key):
        del self.env[key]

    def setdefault(self, key, default=None):
        self._note(key)
        return self.env.setdefault(key, default)

    def pop(self, key, *default):
        self._note(key)
        return self.env.pop(key, *default)

    def __iter__(self):
        return iter(self.env)

    def __len__(self):
        return len(self.env)

    def keys(self):
        return self.env.keys()

    def items(self):
        return self.env.items()

    def values(self):
        return self.env.values()

    def copy(self):
        return self.env.copy()


def preload(modules):
    """Import ipykernel, then ``modules``; return what a kernel's environment must match to be forked.

    (kernel, init, seen): the variables importing ipykernel read; what ipykernel sets when a
    kernel starts (TERM, PAGER, ...); the variables ``modules`` read after that, as a
    fresh kernel's ``import jax`` would, with their values. On one CPU of this process's
    set while importing: libraries that size a thread pool when loaded (OpenBLAS) then
    start none, and forking a process with threads is unsafe.
    """
    import importlib

    kernel, seen, environ = {}, {}, os.environ
    start = dict(environ)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        os.environ = _Recorder(environ, kernel)
        importlib.import_module("ipykernel.kernelapp")
        os.environ = environ
        from ipykernel.zmqshell import ZMQInteractiveShell

        before = dict(environ)
        ZMQInteractiveShell.init_environment(None)  # only touches os.environ
        init = {k: v for k, v in environ.items() if before.get(k) != v}
        os.environ = _Recorder(environ, seen)
        for name in modules:
            importlib.import_module(name)
    finally:
        os.environ = environ
        os.sched_setaffinity(0, cpus)
    global WRITTEN  # what the imports set (e.g. debugpy's PYDEVD_USE_FRAME_EVAL): a kernel has it too
    WRITTEN = {k: v for k, v in environ.items() if start.get(k) != v and k not in init}
    return kernel, init, seen


WRITTEN = {}


def differs(env, kernel, init, seen):
    """The first variable whose value in a kernel started with ``env`` would not be what the imports saw."""
    for name, value in kernel.items():
        if env.get(name) != value:
            return name
    after = {**env, **init}
    for name, value in seen.items():
        if after.get(name) != value:
            return name
    return None


def _text(value):
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _watch(seen, marker):
    """An audit hook: write ``marker`` once when a kernel changes a variable the imports read."""
    fired = []

    def hook(event, args):
        if fired or event not in ("os.putenv", "os.unsetenv"):
            return
        name = _text(args[0])
        if name not in seen:
            return
        value = None if event == "os.unsetenv" else _text(args[1])
        if value != seen[name]:
            fired.append(name)
            try:
                with open(marker, "w") as f:
                    f.write(name)
            except OSError:
                pass
    return hook


def _child(command, seen, replies):
    """In the forked kernel: become what `python -m ipykernel_launcher` would be, and run it."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(replies)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.setsid()
        _set_dumpable(True)
        os.environ.clear()
        os.environ.update(command["env"])
        os.environ.update(WRITTEN)
        os.chdir(command["cwd"])
        for name in ("random", "numpy.random"):  # fresh entropy, as a freshly started kernel has
            if name in sys.modules:
                sys.modules[name].seed()
        sys.argv = list(command["argv"])
        from ipykernel.kernelapp import IPKernelApp

        app = IPKernelApp.instance()  # what ipykernel_launcher does, with the watch set up in between
        app.initialize(sys.argv[1:])
        sys.addaudithook(_watch(seen, command["marker"]))
        app.start()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _others():
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def _mount_points():
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f]


def _empty(path, keep):
    """Delete what is in ``path``, but not directories that lead to a mount point (``keep``)."""
    import shutil

    for entry in os.listdir(path) if os.path.isdir(path) else ():
        full = os.path.join(path, entry)
        if any(m == full or m.startswith(full + "/") for m in keep):
            continue
        if os.path.isdir(full) and not os.path.islink(full):
            for root, dirs, _ in os.walk(full):
                for d in dirs:
                    try:
                        os.chmod(os.path.join(root, d), 0o700)
                    except OSError:
                        pass
            os.chmod(full, 0o700)
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def reset():
    """Kill everything but this process (and the sandbox's init), then empty the shared places."""
    import subprocess
    import time

    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal here, but not itself or init
        except ProcessLookupError:
            pass
        _reap()
        if not _others() or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    mounts = _mount_points()
    for place in ("/tmp", "/dev/shm"):
        _empty(place, mounts)
    try:  # util-linux, like prlimit and setpriv; without it no reset can be vouched for
        ipcrm = subprocess.run(["ipcrm", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except OSError:
        ipcrm = -1
    return {"ok": not _others() and ipcrm == 0}


def main():
    del sys.path[0]  # "" (run as `python -c`): a kernel started as `python -m ipykernel_launcher` has none
    replies = os.dup(1)
    os.dup2(2, 1)
    _set_dumpable(False)
    out = os.fdopen(replies, "w", buffering=1, closefd=False)
    kernel, init, seen = preload(sys.argv[1:])
    threads = len(os.listdir("/proc/self/task"))
    out.write(json.dumps({"ready": True, "seen": {**kernel, **seen}, "threads": threads}) + "\n")
    signal.signal(signal.SIGCHLD, _reap)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "reset":
            reply = reset()
        elif command["op"] == "fork" and differs(command["env"], kernel, init, seen):
            reply = {"incompatible": differs(command["env"], kernel, init, seen)}
        elif command["op"] == "fork":
            pid = os.fork()
            if pid == 0:
                _child(command, seen, replies)
            reply = {"pid": pid}
        else:
            reply = {"error": f"unknown op {command['op']!r}"}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
