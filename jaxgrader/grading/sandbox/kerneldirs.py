"""Kernel and task directories in the host's temporary folder, and the sweep that removes stale ones.

A kernel's directory (``DIR_PREFIX``: scratch and ipc) and a grading task's private
course (``TASK_DIR_PREFIX``) are named after the grader process that made them, so
that when that process is killed the next grader process on the host finds and
removes them (and ends any sandbox still running from them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .bwrap import within

DIR_PREFIX = "jaxgrader-kernel-"
# A grading task's scratch course (jaxgrader.grading.classrun.task): a submission, a gradebook copy.
TASK_DIR_PREFIX = "jaxgrader-task-"


def remove_tree(path: str) -> None:
    """Delete a kernel directory, including what the student made unreadable (chmod 000)."""
    if not os.path.lexists(path):
        return
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "u+rwX", path], stderr=subprocess.DEVNULL, check=False)
    shutil.rmtree(path, ignore_errors=True)


def kill_sandbox_of(root: str) -> None:
    """Kill whatever still runs from kernel directory ``root``: the bwrap that binds it, the kernel.

    Normally nothing does: bwrap's ``--die-with-parent`` ends the sandbox with the
    grader. But bubblewrap sets that (PR_SET_PDEATHSIG) only once it runs, so a grader
    killed while it was starting a kernel leaves a sandbox whose parent is PID 1
    (containers/bubblewrap#633), and a student's cell can keep burning CPU in it for
    up to its RLIMIT_CPU. Such a sandbox is found by its command line (bwrap binds the
    directory; the kernel reads its connection file from it) or its working directory;
    killing the outer bwrap takes its PID namespace, so everything in it, along.
    """
    import psutil

    marker = root.rstrip("/") + "/"
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "cwd"]):
        info = proc.info
        if info["pid"] == os.getpid():
            continue
        args = info.get("cmdline") or []
        if any(a == root or a.startswith(marker) for a in args) or within(info.get("cwd") or "", root):
            try:
                proc.kill()
                found.append(proc)
            except psutil.Error:
                pass
    psutil.wait_procs(found, timeout=10)


def sweep_stale_kernels() -> None:
    """Clean up after grader processes on this host that were killed: their sandboxes and directories."""
    sweep_stale_dirs(Path(tempfile.gettempdir()))


def sweep_stale_dirs(base: Path) -> None:
    """Delete kernel and task directories of grader processes that died without cleaning up
    (SIGKILL: a killed worker, an interrupted run), after killing any sandbox still running
    from a kernel directory (see kill_sandbox_of). A task directory holds a student's
    submission and a gradebook copy: left behind, /tmp fills with them, run after run."""
    for prefix in (DIR_PREFIX, TASK_DIR_PREFIX):
        for d in base.glob(prefix + "*"):
            try:
                pid = int(d.name[len(prefix):].split("-")[0])
                if d.lstat().st_uid != os.geteuid():
                    continue
                os.kill(pid, 0)
            except ProcessLookupError:
                if prefix == DIR_PREFIX:
                    kill_sandbox_of(str(d))
                remove_tree(str(d))
            except (ValueError, OSError):
                continue
