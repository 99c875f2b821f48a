"""What a grading kernel needs to use the host's NVIDIA GPU inside its sandbox.

Why: the sandbox (``jaxgrader.grading.sandbox.sandbox``) gives a kernel a minimal ``/dev`` and only the
system directories, the Python environment and its scratch directory, so JAX in it sees no
GPU. A GPU needs its device nodes (``/dev/nvidia0`` ..., ``/dev/nvidiactl``, ``/dev/nvidia-uvm``)
passed with ``--dev-bind``, and the driver's user-space libraries (``libcuda.so.1``,
``libnvidia-ml.so.1``, ...) visible read-only. Under ``/usr`` (Debian's and Ubuntu's driver
packages) they are visible already; elsewhere (``/usr/local/nvidia`` in containers,
``/opt``) their directories are bound read-only. JAX's CUDA wheels bring the rest of CUDA
inside the Python environment, which the sandbox shows anyway.

Kernels graded side by side share the GPU, so each allocates what it uses instead of 75%
of the GPU's memory up front (``XLA_PYTHON_CLIENT_PREALLOCATE=false``).

One line in ``nbgrader_config.py`` turns it on (docs/grading.md)::

    c.SandboxedKernelManager.gpu = True
"""

from __future__ import annotations

import fnmatch
import os
import subprocess

# Device nodes of the NVIDIA driver (nvidia0..N, control, unified memory, modesetting, MIG caps).
DEVICE_PATTERNS = ("nvidia[0-9]*", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
DEVICE_DIRS = ("nvidia-caps",)
# The driver's user-space libraries that CUDA programs load (JAX: libcuda, NVML for memory stats).
DRIVER_LIBRARIES = ("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libcudadebugger.so")
# Environment of every grading kernel that may use the GPU.
KERNEL_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def device_nodes(dev: str = "/dev") -> list[str]:
    """The NVIDIA device nodes present under ``dev`` (none on a machine without the driver)."""
    try:
        names = sorted(os.listdir(dev))
    except OSError:
        return []
    found = [os.path.join(dev, n) for n in names if any(fnmatch.fnmatch(n, p) for p in DEVICE_PATTERNS)]
    found += [os.path.join(dev, d, n) for d in DEVICE_DIRS if os.path.isdir(os.path.join(dev, d))
              for n in sorted(os.listdir(os.path.join(dev, d)))]
    return found


def _ldconfig_cache() -> str:
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        try:
            return subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
    return ""


def driver_library_dirs(ldconfig_cache: str | None = None, system_dirs=("/usr", "/lib", "/lib64", "/etc")
                        ) -> list[str]:
    """Directories holding the driver's libraries (from the dynamic linker's cache, ``ldconfig -p``)
    that the sandbox does not show already (it binds ``system_dirs``)."""
    cache = _ldconfig_cache() if ldconfig_cache is None else ldconfig_cache
    dirs = set()
    for line in cache.splitlines():
        name, _, path = line.strip().partition(" => ")
        if path and any(name.startswith(lib) for lib in DRIVER_LIBRARIES):
            directory = os.path.dirname(os.path.realpath(path) if os.path.exists(path) else path)
            if not any(directory == s or directory.startswith(s.rstrip("/") + "/") for s in system_dirs):
                dirs.add(directory)
    return sorted(dirs)


def sandbox_additions(dev: str = "/dev", ldconfig_cache: str | None = None) -> dict:
    """What the sandbox adds for the GPU: ``dev`` (nodes for ``--dev-bind``), ``ro`` (library
    directories for ``--ro-bind``) and ``env`` (the kernel's environment)."""
    return {"dev": device_nodes(dev), "ro": driver_library_dirs(ldconfig_cache), "env": dict(KERNEL_ENV)}
