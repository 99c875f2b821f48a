"""The bubblewrap command line a grading kernel runs under, and whether it can run here.

What the kernel sees: the system (``/usr``, ``/etc``, read-only), the Python
environment it imports from (the interpreter, the venv, the ``jaxgrader``
package, as the interpreter itself reports them: read-only, each bound on
its own so that a venv inside the course directory does not expose the course), a fresh scratch directory (its only
writable place: cwd, HOME, TMPDIR, IPython and Jupyter dirs), small private
tmpfs ``/tmp`` and ``/dev/shm``, its own ``/proc`` and a minimal ``/dev``. It
has no network (own network namespace), its own PID namespace (it sees only
its own processes; all of them die with it), a cleared environment, resource
limits (``prlimit``) and, when the grader is root, uid 65534 ("nobody").

When the grader runs as root, bubblewrap runs as root *without* a user
namespace (only root can reach e.g. a pyenv Python under ``/root``, mode 0700,
to bind it; so the namespaces are listed one by one instead of
``--unshare-all``, which would add a user namespace mapping the kernel to host
root) and ``setpriv`` drops the kernel to uid/gid 65534 with no capabilities
inside the sandbox. A grader that is not root runs bubblewrap unprivileged in a
user namespace (``--unshare-user --disable-userns``); the kernel keeps the
grader's uid but sees only what is bound.

Pure functions of their arguments (and of this machine): the kernel manager that uses
them is :mod:`jaxgrader.grading.sandbox.sandbox`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Bound read-only (or re-created as the host's symlinks on merged-/usr systems).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Mount points the sandbox creates itself: never re-create or chmod them as bind parents.
SANDBOX_MOUNTS = ("/", "/tmp", "/dev", "/proc")


def within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")



# A Python kernel imports from its prefixes, sys.path and, for setuptools' editable
# installs (`pip install -e .`: jaxgrader), from paths a meta-path finder maps.
_ROOTS_SCRIPT = """
import json, sys
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]
for finder in sys.meta_path:
    module = sys.modules.get(getattr(finder, "__module__", None) or "")
    paths += [p for p in getattr(module, "MAPPING", {}).values() if isinstance(p, str)]
print(json.dumps(paths))
"""


@functools.lru_cache(maxsize=None)
def python_roots(python: str) -> tuple[str, ...]:
    """Directories the interpreter ``python`` imports from, asked from the interpreter itself.

    Asked (once per process) rather than taken from the grader's own sys.path,
    which holds the grader's cwd and whatever pytest or nbgrader added.
    """
    out = subprocess.run([python, "-c", _ROOTS_SCRIPT], cwd="/", capture_output=True, text=True,
                         env={"PATH": SYSTEM_PATH, "HOME": "/nonexistent"}, check=True, timeout=60).stdout
    paths = {os.path.realpath(python), *json.loads(out.strip().splitlines()[-1])}
    return tuple(sorted(p for p in paths if p and os.path.isabs(p) and os.path.exists(p)))


def _forms(path: str) -> set[str]:
    return {os.path.abspath(path), os.path.realpath(path)}


def read_only_paths(paths, *, roots=(), secret=()) -> tuple[list[str], list[str]]:
    """Which of ``paths`` to bind read-only: (kept, refused).

    Kept: existing paths outside the system dirs, none inside another. Refused:
    a path that holds one of ``roots`` (the course directory: a venv inside the
    course is fine, the course itself is not), that holds or lies in one of
    ``secret`` (source/, submissions, the gradebook, the notebook's directory),
    or that looks like a course itself (e.g. a copy graded elsewhere).
    """
    roots = {f for p in roots for f in _forms(p)}
    secret = {f for p in secret for f in _forms(p)}
    keep, refused = [], []
    for path in sorted({f for p in paths for f in _forms(p)}, key=lambda p: (p.count("/"), p)):
        if not os.path.exists(path) or any(within(path, s) for s in SYSTEM_DIRS):
            continue
        if (any(within(q, path) for q in roots | secret) or any(within(path, q) for q in secret)
                or any(os.path.exists(os.path.join(path, item)) for item in ("nbgrader_config.py", "gradebook.db"))):
            refused.append(path)
        elif not any(within(path, k) for k in keep):
            keep.append(path)
    return keep, refused


def sandbox_command(kernel_cmd: list[str], *, env: dict[str, str], ro: list[str], rw: list[str],
                    dev: list[str] = (), chdir: str = "/", tmpfs_mb: int = 256, as_root: bool = True,
                    uid: int = 65534, files=()) -> list[str]:
    """The bubblewrap command line that runs ``kernel_cmd`` (see the module docstring)."""
    args = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "jaxgrader"]
    if not as_root:  # unprivileged bwrap needs a user namespace; forbid nested ones
        args += ["--unshare-user", "--disable-userns"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    size = str(tmpfs_mb * 2**20)
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", size, "--tmpfs", "/tmp",
             "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    # Parents of bind targets: world-searchable (bwrap would copy e.g. /root's 0700).
    parents = sorted({str(p) for path in [*ro, *rw, *dev] for p in Path(path).parents
                      if str(p) not in SANDBOX_MOUNTS and not any(within(str(p), s) for s in SYSTEM_DIRS)},
                     key=lambda p: p.count("/"))
    for p in parents:
        args += ["--perms", "0755", "--dir", p]
    for p in ro:
        args += ["--ro-bind", os.path.realpath(p), p]
    for p in rw:
        args += ["--bind", p, p]
    for p in dev:
        args += ["--dev-bind", p, p]
    for source, target in files:  # single files over system ones, e.g. an /etc/passwd naming the kernel's uid
        args += ["--ro-bind", source, target]
    args += ["--chdir", chdir, "--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    args.append("--")
    if as_root:  # bwrap needed root to mount; the kernel gets none of it
        args += [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--"]
    return args + list(kernel_cmd)


def limits_command(*, nproc: int, fsize_mb: int, cpu_s: int, as_mb: int) -> list[str]:
    """``prlimit`` prefix: soft = hard limits, inherited by the sandbox and everything in it (0 = unlimited)."""
    cmd = [shutil.which("prlimit") or "prlimit"]
    for flag, value in (("nproc", nproc), ("fsize", fsize_mb * 2**20), ("cpu", cpu_s), ("as", as_mb * 2**20)):
        if value > 0:
            cmd.append(f"--{flag}={value}")
    return cmd + ["--"]


def _diagnose(error: str) -> str:
    """One line saying why bubblewrap failed, with what the teacher can do."""
    if "Unknown option" in error:
        return f"bubblewrap is too old ({error}): jaxgrader needs bubblewrap 0.8 or newer (Debian 12's)"
    if not any(s in error for s in ("not permitted", "Permission denied", "No permissions", "namespace")):
        return f"bubblewrap failed: {error}"
    seccomp = "\nSeccomp:\t2" in Path("/proc/self/status").read_text()
    if seccomp or any(os.path.exists(p) for p in ("/.dockerenv", "/run/.containerenv")):
        return (f"bubblewrap cannot create its namespaces here ({error}): this looks like a container, and "
                "Docker's default seccomp profile (and, for a root grader, the missing CAP_SYS_ADMIN) blocks "
                "bubblewrap (bubblewrap issue #505); grade outside the container or relax its seccomp profile")

    def sysctl(name: str) -> str:
        try:
            return Path("/proc/sys", name).read_text().strip()
        except OSError:
            return ""
    if os.geteuid() != 0 and (sysctl("user/max_user_namespaces") == "0"
                              or sysctl("kernel/unprivileged_userns_clone") == "0"
                              or sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1"):
        return (f"bubblewrap cannot create a user namespace ({error}): unprivileged user namespaces are "
                "disabled on this machine (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone "
                "or kernel.apparmor_restrict_unprivileged_userns)")
    return f"bubblewrap failed: {error}"


@functools.lru_cache(maxsize=None)
def check_sandbox() -> str:
    """'' if a sandboxed command runs on this machine (tried once per process), else one line why not."""
    if not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed: install the Debian package bubblewrap"
    for tool in ("prlimit", "setpriv"):
        if not shutil.which(tool):
            return f"{tool} is missing: install the Debian package util-linux"
    with tempfile.TemporaryDirectory(prefix="jaxgrader-check-") as tmp:
        os.chmod(tmp, 0o755)
        cmd = limits_command(nproc=0, fsize_mb=1, cpu_s=10, as_mb=0) + sandbox_command(
            ["true"], env={"PATH": SYSTEM_PATH}, ro=[], rw=[tmp], chdir=tmp, as_root=os.geteuid() == 0)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/",
                                  env={"PATH": SYSTEM_PATH})
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"bubblewrap could not run: {e}"
    if proc.returncode == 0:
        return ""
    return _diagnose((proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1])
