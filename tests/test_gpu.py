"""Grading on a GPU host: the sandbox's bubblewrap command passes the NVIDIA device nodes
(``--dev-bind``) and the driver's libraries (read-only), and a kernel can use what is passed.

No GPU here: the device nodes are stand-ins (files named as the driver's) under a directory
of this test, and the dynamic linker's cache is a text, so the command is the one a GPU host
would get; bubblewrap itself runs it for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from jaxgrader.grading.sandbox import gpu
from jaxgrader.grading.sandbox.sandbox import SYSTEM_PATH, check_sandbox, sandbox_command

LDCONFIG = """\
\tlibnvidia-ml.so.1 (libc6,x86-64) => {lib}/libnvidia-ml.so.1
\tlibcuda.so.1 (libc6,x86-64) => {lib}/libcuda.so.1
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
"""


@pytest.fixture
def host():
    # outside pytest's private (0700) tree: the sandboxed user must reach the stand-ins
    base = Path(tempfile.mkdtemp(prefix="jaxgrader-gpu-test-"))
    os.chmod(base, 0o755)
    dev, lib = base / "dev", base / "nvidia" / "lib64"
    (dev / "nvidia-caps").mkdir(parents=True)
    lib.mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap1", "null", "nvme0"):
        (dev / name).write_text(f"device {name}\n")
    (lib / "libcuda.so.1").write_text("driver\n")
    yield dev, lib
    shutil.rmtree(base, ignore_errors=True)


def test_the_nodes_and_library_dirs_of_the_driver_are_found(host):
    dev, lib = host
    assert gpu.device_nodes(str(dev)) == [str(dev / n) for n in
                                          ("nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl", "nvidia-caps/nvidia-cap1")]
    assert gpu.driver_library_dirs(LDCONFIG.format(lib=lib)) == [str(lib)]  # /usr and /lib: shown already
    assert gpu.device_nodes(str(dev / "missing")) == []


def test_the_sandbox_command_dev_binds_the_nodes_and_shows_the_driver_read_only(host):
    dev, lib = host
    tmp_path = dev.parent
    extra = gpu.sandbox_additions(str(dev), LDCONFIG.format(lib=lib))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    cmd = sandbox_command(["sh", "-c", "true"], env={"PATH": SYSTEM_PATH, **extra["env"]}, ro=extra["ro"],
                          rw=[str(scratch)], dev=extra["dev"], chdir=str(scratch), as_root=os.geteuid() == 0)
    pairs = list(zip(cmd, cmd[1:], cmd[2:]))
    for node in extra["dev"]:
        assert ("--dev-bind", node, node) in pairs
    assert ("--ro-bind", str(lib), str(lib)) in pairs
    assert ("--setenv", "XLA_PYTHON_CLIENT_PREALLOCATE", "false") in pairs
    assert not any(a == "--dev-bind" and "null" in b for a, b, _ in pairs)


    if shutil.which("bwrap") is None or check_sandbox():
        pytest.skip(f"bubblewrap cannot run here: {check_sandbox() or 'not installed'}")
    # Run for real: the kernel's user reads and writes a passed node, reads the driver, cannot
    # write it, and sees no node that was not passed.
    probe = (f"cat {dev}/nvidia0 && echo written > {dev}/nvidiactl && cat {lib}/libcuda.so.1 && "
             f"(echo x > {lib}/libcuda.so.1 2>/dev/null && echo WRITABLE || echo read-only) && "
             f"(cat {dev}/null 2>/dev/null || echo no-null) && cat {dev}/nvidia-caps/nvidia-cap1")
    os.chmod(dev / "nvidiactl", 0o666)
    cmd = sandbox_command(["sh", "-c", probe], env={"PATH": SYSTEM_PATH}, ro=extra["ro"], rw=[str(scratch)],
                          dev=extra["dev"], chdir=str(scratch), as_root=os.geteuid() == 0)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:5] == ["device nvidia0", "driver", "read-only", "no-null",
                                          "device nvidia-caps/nvidia-cap1"], done.stdout
    assert (dev / "nvidiactl").read_text() == "written\n"  # a device node is the host's, read-write
