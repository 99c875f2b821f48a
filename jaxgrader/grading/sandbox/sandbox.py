"""Every autograding kernel runs in a bubblewrap sandbox.

Why: the kernel executes the student's code. Under nbgrader's defaults that code
runs with the teacher's permissions, so it could read the gradebook, the
solutions and hidden tests, rewrite other students' submissions or the course
config, reach the network, leave processes running after grading, and see or
signal the grader. Points come from the outputs the kernel produces, so nothing
the kernel can reach may influence grading.

Selected in ``nbgrader_config.py``::

    c.LimitedExecute.kernel_manager_class = "jaxgrader.grading.sandbox.sandbox.SandboxedKernelManager"

The command line (what is bound, the namespaces, the limits) is built in
:mod:`jaxgrader.grading.sandbox.bwrap`; kernels forked from a prepared process are
:mod:`jaxgrader.grading.sandbox.prepared`'s.

It talks to the grader over ZeroMQ ``ipc`` sockets in a per-kernel directory
(mode 0700, owned by the kernel's uid) bound at the same path; TCP on
127.0.0.1 would not cross the network namespace, and only this kernel and the
grader can open these sockets.

``isolation = "none"`` (``jaxgrader grade --unsandboxed``) starts the kernel
unsandboxed but still with the clean environment, the fresh scratch directory
and the limits.
"""

from __future__ import annotations

import atexit
import itertools
import os
import sys
import tempfile
import weakref
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Dict, Enum, Integer, List, Unicode, default

from .bwrap import (SYSTEM_PATH, check_sandbox, limits_command, python_roots, read_only_paths,  # noqa: F401
                    sandbox_command)
from . import gpu, heldout
from .seed import ENV as SEED_ENV, seed_of
from .kerneldirs import DIR_PREFIX, remove_tree, sweep_stale_dirs, sweep_stale_kernels  # noqa: F401

KERNEL_UID = 0  # 0: each kernel gets a uid of its own from FIRST_KERNEL_UID up (when the grader is root)
FIRST_KERNEL_UID, KERNEL_UIDS = 1_000_000, 1_000_000
_next_uid = itertools.count(1)  # next() is atomic: kernels may start from several threads
# What nbgrader keeps in a course directory; never shown, even where the venv lives in the course.
# (The course's configured names for them are hidden too: _course_paths.)
COURSE_ITEMS = ("source", "release", "submitted", "autograded", "feedback", "gradebook.db", "nbgrader_config.py")


def isolation_of(km) -> str:
    """The isolation a kernel manager gives its kernel: 'bubblewrap' or 'none' (any other manager)."""
    return getattr(km, "isolation_used", "none")


class SandboxedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernels run sandboxed (bubblewrap) with a fresh scratch directory.

    Start kernels from a thread that outlives them: ``--die-with-parent`` follows
    the thread that launched bwrap (PR_SET_PDEATHSIG), not the process.
    """

    isolation = Enum(["bubblewrap", "none"], default_value="bubblewrap",
                     help="'bubblewrap', or 'none' to grade unsandboxed (still clean env, fresh dirs, limits)."
                     ).tag(config=True)
    kernel_uid = Integer(KERNEL_UID, help="uid and gid of the kernel when the grader is root; 0 (default): a "
                         "fresh unused uid per kernel, so that RLIMIT_NPROC, which counts per uid on the whole "
                         "host, is each kernel's own: one submission's fork bomb cannot starve the kernels "
                         "graded beside it. The sandbox's /etc/passwd names it 'student'.").tag(config=True)
    max_processes = Integer(help="RLIMIT_NPROC (0: unlimited). Counts threads, and every process of the "
                            "kernel's uid on the host: all kernels running at once share it.").tag(config=True)
    max_file_size_mb = Integer(256, help="RLIMIT_FSIZE: largest file the kernel may write (0: unlimited)."
                               ).tag(config=True)
    cpu_time_s = Integer(3600, help="RLIMIT_CPU: CPU seconds per kernel process, summed over its threads "
                         "(0: unlimited).").tag(config=True)
    address_space_mb = Integer(0, help="RLIMIT_AS per kernel process (0: unlimited). JAX needs ~1.6 GiB of "
                               "address space to start and XLA aborts (std::bad_alloc) when it runs out; the "
                               "memory watchdog (LimitedExecute.memory_limit_mb) limits resident memory."
                               ).tag(config=True)
    tmpfs_mb = Integer(256, help="Size of the sandbox's /tmp and of its /dev/shm: RAM that the memory "
                       "watchdog does not count.").tag(config=True)
    extra_ro_binds = List(Unicode(), help="More host paths to show read-only inside the sandbox (never one "
                          "holding the course directory).").tag(config=True)
    extra_dev_binds = List(Unicode(), help="Devices to pass in, e.g. /dev/nvidia0, /dev/nvidiactl, "
                           "/dev/nvidia-uvm (missing ones are skipped).").tag(config=True)
    gpu = Bool(False, help="Pass the host's NVIDIA GPU into every grading kernel (jaxgrader.grading.sandbox.gpu): its "
               "device nodes (--dev-bind), the driver's libraries outside /usr read-only, and "
               "XLA_PYTHON_CLIENT_PREALLOCATE=false (kernels graded side by side share it). Off: kernels see "
               "no GPU. Timing budgets for 'gpu' are not measured yet: the CPU's are used, with a warning "
               "(docs/benchmarks.md).").tag(config=True)
    xla_flags = Unicode("", help="XLA_FLAGS of every grading kernel (and of the reference run beside it), "
                        "e.g. '--xla_backend_optimization_level=0': grading notebooks spend most of their time "
                        "compiling small programs, which LLVM's optimisations make slower to compile and hardly "
                        "faster to run. A notebook that sets XLA_FLAGS itself should add to them, not replace "
                        "them.").tag(config=True)
    xla_defaults_for = List(Unicode(), help="Assignments whose kernels keep XLA's default flags (xla_flags "
                            "is not applied): those whose tests time compiled code, so that students' "
                            "timings are graded as they measured them.").tag(config=True)
    matmul_precision = Unicode("float32", help="JAX_DEFAULT_MATMUL_PRECISION of every grading kernel (and of "
                               "the reference run beside it). 'float32' (default): float32 matmuls in full "
                               "precision on any backend, so that two correct answers written differently agree "
                               "to float32 rounding, as on a CPU. A GPU's TF32 or a TPU's bfloat16 operands "
                               "round each answer's matmul operands differently, and with cancellation the "
                               "difference outgrows any tolerance that still tells a wrong answer (a vector "
                               "norm's rule with jnp.dot lost its part in 1 run in 20; docs/authoring.md). "
                               "'': JAX's default (faster on a TPU; hidden tests then widen their tolerances to "
                               "the measured precision). XLA:CPU ignores it.").tag(config=True)
    hold_out = List(Unicode(), list(heldout.DATASETS), help="Data sets whose held-out examples (drawn per run) no "
                    "grading kernel sees; scores are judged on them (jaxgrader.grading.sandbox.heldout; 'digits': "
                    "scikit-learn's load_digits). []: kernels read the real files.").tag(config=True)
    pass_env = List(Unicode(), ["NBGRADER_EXECUTION", "JAX_PLATFORMS"],
                    help="Variables passed on from the grader's environment when set; nothing else is "
                    "(besides the kernelspec's own env).").tag(config=True)
    kernel_env = Dict(value_trait=Unicode(), help="Variables every grading kernel gets, e.g. "
                      "{'KERAS_BACKEND': 'jax'} for a course taught on JAX.").tag(config=True)
    preload = List(Unicode(), help="Modules imported once per grading process by a prepared, sandboxed "
                   "process from which submissions' kernels are forked (jaxgrader.grading.sandbox.prepared), instead "
                   "of once per notebook by each fresh kernel. Empty (default): every kernel starts fresh. "
                   "The reference run, and isolation 'none', always get fresh kernels.").tag(config=True)
    use_prepared = Bool(False, help="Set by LimitedExecute for submissions' kernels: fork this kernel from a "
                        "prepared process when ``preload`` names modules.")
    env_changed = Unicode("", help="After a prepared kernel shut down: the import-time environment variable "
                          "it changed (the notebook must run again in a fresh kernel), else ''.")
    started_as = Unicode("", help="With use_prepared: how the kernel started, 'forked' or 'fresh' "
                         "(LimitedExecute notes it for the grading task's timings).")

    @default("max_processes")
    def _default_max_processes(self) -> int:
        return max(512, 32 * (os.cpu_count() or 1))  # XLA starts thread pools sized to the CPU count

    _kernel_dir: str | None = None
    _finalizer = None

    @property
    def isolation_used(self) -> str:
        """What this manager gives its kernels; it never falls back to 'none' on its own."""
        return self.isolation

    @property
    def scratch_dir(self) -> str | None:
        """The kernel's writable directory (cwd, HOME) while it runs."""
        return os.path.join(self._kernel_dir, "scratch") if self._kernel_dir else None

    def _sandboxed_as_root(self) -> bool:
        return self.isolation == "bubblewrap" and os.geteuid() == 0

    _uid: int | None = None

    def _kernel_uid(self) -> int:
        if not self._sandboxed_as_root():
            return os.geteuid()
        if self._uid is None:
            if self.kernel_uid:
                self._uid = self.kernel_uid
            else:  # distinct per grading process and kernel: pid and a counter
                self._uid = FIRST_KERNEL_UID + (os.getpid() * 64 + next(_next_uid)) % KERNEL_UIDS
        return self._uid

    def _identity_files(self) -> list[tuple[str, str]]:
        """/etc/passwd and /etc/group naming the kernel's uid, bound over the host's (read-only)."""
        uid, files = self._kernel_uid(), []
        for name, line in (("passwd", f"student:x:{uid}:{uid}:student:/tmp:/bin/sh\n"),
                           ("group", f"student:x:{uid}:\n")):
            host = Path("/etc", name)
            text = host.read_text() if host.exists() else ""
            path = os.path.join(self._kernel_dir, name)
            Path(path).write_text(text + ("" if text.endswith("\n") or not text else "\n") + line)
            os.chmod(path, 0o644)
            files.append((path, str(host)))
        return files

    def _make_kernel_dir(self) -> None:
        base = Path(tempfile.gettempdir())
        sweep_stale_dirs(base)
        root = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=base)
        self._kernel_dir = root
        self._finalizer = weakref.finalize(self, remove_tree, root)
        uid = self._kernel_uid()
        for sub in ("scratch", "scratch/tmp", "ipc"):
            os.mkdir(os.path.join(root, sub), 0o700)
            if uid != os.geteuid():
                os.chown(os.path.join(root, sub), uid, uid)

    def xla_flags_for(self, assignment: str | None) -> str:
        """XLA_FLAGS of a kernel that grades ``assignment`` ('': XLA's defaults, ``xla_defaults_for``)."""
        return "" if assignment in self.xla_defaults_for else self.xla_flags

    def _kernel_env(self, scratch: str, python_bin: str, spec_env: dict,
                    notebook_dir: str | None = None) -> dict[str, str]:
        env = {name: spec_env[name] for name in (self.kernel_spec.env if self.kernel_spec else {}) if name in spec_env}
        env.update(self.kernel_env)
        # nbgrader runs a submission in autograded/<student>/<assignment>, the reference run in .../<assignment>
        assignment = os.path.basename(os.path.normpath(notebook_dir)) if notebook_dir else None
        if flags := self.xla_flags_for(assignment):
            env["XLA_FLAGS"] = flags
        if self.matmul_precision:
            env["JAX_DEFAULT_MATMUL_PRECISION"] = self.matmul_precision
        env.update({name: os.environ[name] for name in self.pass_env if name in os.environ})
        if self.gpu:
            env.update(gpu.KERNEL_ENV)
        env.update({
            "PATH": f"{python_bin}:{SYSTEM_PATH}",
            "HOME": scratch,
            "TMPDIR": os.path.join(scratch, "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "IPYTHONDIR": os.path.join(scratch, ".ipython"),
            "JUPYTER_CONFIG_DIR": os.path.join(scratch, ".jupyter"),
            "JUPYTER_DATA_DIR": os.path.join(scratch, ".local/share/jupyter"),
            "JUPYTER_RUNTIME_DIR": os.path.join(scratch, ".local/share/jupyter/runtime"),
            "MPLCONFIGDIR": os.path.join(scratch, ".config/matplotlib"),
            "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1",
            SEED_ENV: str(seed_of(self.config)),
        })
        return env

    def _course_paths(self, notebook_dir: str | None) -> tuple[list[str], list[str]]:
        """(roots, secret) for read_only_paths: the course directory from config and the grader's cwd
        (nbgrader runs in the course), with what nbgrader keeps in them, and the notebook's directory."""
        course = (self.config.get("CourseDirectory", {}) if self.config else {}).get("root")
        roots = [p for p in (course, os.getcwd()) if p]
        secret = [os.path.join(r, item) for r in roots for item in COURSE_ITEMS + self._configured_items()]
        return roots, secret + ([notebook_dir] if notebook_dir else [])

    def _configured_items(self) -> tuple[str, ...]:
        """The course's own names for nbgrader's folders (``c.CourseDirectory.submitted_directory``, ...)."""
        section = self.config.get("CourseDirectory", {}) if self.config else {}
        return tuple(str(section[name]) for name in ("source_directory", "release_directory", "submitted_directory",
                                                     "autograded_directory", "feedback_directory")
                     if isinstance(section.get(name), str) and section[name])

    async def _async_pre_start_kernel(self, **kw):
        """Put the connection in a private ipc directory and wrap the kernel command in the sandbox
        (or, for a prepared kernel, keep the command for the fork: ``_async_launch_kernel``)."""
        if self.isolation == "bubblewrap" and (reason := check_sandbox()):
            raise RuntimeError(f"cannot sandbox the grading kernel: {reason} "
                               "(to grade without a sandbox: jaxgrader grade --unsandboxed)")
        notebook_dir = kw.pop("cwd", None)  # nbgrader's autograded/<student>/<assignment>: not shown
        self.env_changed, self._fork = "", None
        if self.use_prepared and self.preload and self.isolation == "bubblewrap" and self._lease is None:
            self._lease = self._lease_zygote(notebook_dir)
        if self._lease is None and (self._kernel_dir is None or not os.path.isdir(self._kernel_dir)):
            self._make_kernel_dir()
        scratch, ipc = os.path.join(self._kernel_dir, "scratch"), os.path.join(self._kernel_dir, "ipc")
        self.transport, self.cache_ports = "ipc", False
        self.ip = os.path.join(ipc, "k")
        self.connection_file = os.path.join(ipc, "kernel.json")
        if self.kernel_spec is not None:
            # Signals would reach bwrap, not the kernel (own session and PID namespace).
            self.kernel_spec.interrupt_mode = "message"

        cmd, kw = await super()._async_pre_start_kernel(**kw)
        env = self._kernel_env(scratch, os.path.dirname(cmd[0]), kw.get("env", {}), notebook_dir)
        if self._lease is not None and cmd[0] == self._kernel_python() and cmd[1:3] == ["-m", "ipykernel_launcher"]:
            # what bwrap and _wrap add for a fresh kernel: PWD (bwrap's --chdir), JPY_PARENT_PID
            self._fork = (cmd, {**env, "JPY_PARENT_PID": "1", "PWD": scratch}, notebook_dir)
            return cmd, kw
        return self._wrap(cmd, kw, env, notebook_dir)

    def _wrap(self, cmd: list[str], kw: dict, env: dict[str, str], notebook_dir: str | None):
        """(command, Popen keywords) that run ``cmd`` with ``env`` in the sandbox, under the limits."""
        scratch, ipc = os.path.join(self._kernel_dir, "scratch"), os.path.join(self._kernel_dir, "ipc")
        limits = limits_command(nproc=self.max_processes, fsize_mb=self.max_file_size_mb,
                                cpu_s=self.cpu_time_s, as_mb=self.address_space_mb)
        if self.isolation == "none":  # jupyter_client adds JPY_PARENT_PID: the kernel dies with the grader
            return limits + cmd, {**kw, "env": env, "cwd": scratch}
        env = {**env, "JPY_PARENT_PID": "1"}  # its parent is bwrap's PID 1; also keeps ipykernel's console banner off
        sandbox = sandbox_command(cmd, env=env, ro=self._read_only(cmd[0], notebook_dir), rw=[scratch, ipc],
                                  dev=self._dev_binds(),
                                  chdir=scratch, tmpfs_mb=self.tmpfs_mb, as_root=self._sandboxed_as_root(),
                                  uid=self._kernel_uid(),
                                  files=[*(self._identity_files() if self._sandboxed_as_root() else ()),
                                         *self._held_out_files()])
        return limits + sandbox, {**kw, "env": {"PATH": SYSTEM_PATH}, "cwd": "/"}

    def _held_out_files(self) -> list[tuple[str, str]]:
        """(masked copy, data file) pairs bound over the data files kernels read (``hold_out``)."""
        return heldout.masked_files(self.config) if "digits" in self.hold_out else []

    def _read_only(self, python: str, notebook_dir: str | None) -> list[str]:
        roots, secret = self._course_paths(notebook_dir)
        gpu_libraries = gpu.driver_library_dirs() if self.gpu else []
        ro, refused = read_only_paths([*python_roots(python), *self.extra_ro_binds, *gpu_libraries],
                                      roots=roots, secret=secret)
        for path in refused:
            self.log.warning("sandbox: not showing %s to the kernel: it would expose the course directory", path)
        return ro

    def _dev_binds(self) -> list[str]:
        """Device nodes passed in: ``extra_dev_binds`` that exist, and the GPU's when ``gpu`` is on."""
        return [*[d for d in self.extra_dev_binds if os.path.exists(d)], *(gpu.device_nodes() if self.gpu else [])]

    # ------------------------------------------------------------------ prepared kernels

    _lease = None  # the zygote whose directories this kernel uses (jaxgrader.grading.sandbox.prepared)
    _fork = None  # (kernel command, environment, notebook dir) when the kernel is to be forked

    def _kernel_python(self) -> str:
        argv0 = self.kernel_spec.argv[0] if self.kernel_spec else "python"
        if argv0 in {"python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]}:
            return sys.executable  # as jupyter_client's format_kernel_cmd does
        return argv0

    def _lease_zygote(self, notebook_dir: str | None):
        """An idle prepared process for this manager's sandbox settings, started if need be; None: start fresh."""
        from . import prepared

        python = self._kernel_python()
        key = (python, self._sandboxed_as_root(), self.max_processes, self.max_file_size_mb, self.cpu_time_s,
               self.address_space_mb, self.tmpfs_mb, tuple(self._read_only(python, notebook_dir)),
               tuple(self._dev_binds()), self.gpu, tuple(self.preload),
               tuple(sorted(self.kernel_env.items())), tuple(self._held_out_files()))

        def make():
            self._kernel_dir, self._uid = None, None
            self._make_kernel_dir()
            self._finalizer.detach()  # the zygote outlives this manager; its directory goes with the process
            zygote = prepared.Zygote(self._kernel_dir, self._kernel_uid())
            atexit.register(remove_tree, zygote.root)
            return zygote
        saved = self._kernel_dir, self._uid, self._finalizer
        zygote = prepared.lease(key, make)
        self._kernel_dir, self._uid, self._finalizer = saved
        if zygote is None:
            return None
        self._kernel_dir, self._uid = zygote.root, zygote.uid
        return zygote

    def _start_zygote(self, env: dict[str, str], notebook_dir: str | None) -> None:
        from .zygote import __file__ as source

        python = self._kernel_python()
        code = Path(source).read_text()
        cmd, kw = self._wrap([python, "-c", code, *self.preload], {}, env, notebook_dir)
        self._lease.start(cmd, kw["env"], kw["cwd"])
        self.log.info("prepared kernel process started (%s) in %.1f s", ", ".join(self.preload),
                      self._lease.start_seconds)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        """Fork a prepared kernel when ``_async_pre_start_kernel`` chose to; if that fails, start it fresh."""
        from .prepared import Incompatible, ZygoteError

        if self._fork is None:
            if self.use_prepared:
                self.started_as = "fresh"
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        import importlib.util

        cmd, env, notebook_dir = self._fork
        zygote = self._lease
        argv = [importlib.util.find_spec("ipykernel_launcher").origin, *cmd[3:]]
        try:
            if not zygote.running:
                self._start_zygote(env, notebook_dir)
            try:
                process = zygote.fork(argv, env)
            except Incompatible as exc:  # e.g. another seed or JAX_PLATFORMS: imports must see this kernel's
                self.log.info("restarting the prepared kernel process: %s differs", exc)
                self._start_zygote(env, notebook_dir)
                process = zygote.fork(argv, env)
        except (ZygoteError, Incompatible, OSError) as exc:
            self.log.warning("starting a fresh kernel instead of a prepared one: %s", exc)
            zygote.close()
            self._fork = None
            env = {k: v for k, v in env.items() if k not in ("JPY_PARENT_PID", "PWD")}
            kernel_cmd, kw = self._wrap(cmd, kw, env, notebook_dir)
            self.started_as = "fresh"
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        self.started_as = "forked"
        provisioner = self.provisioner
        provisioner.process, provisioner.pid, provisioner.pgid = process, process.pid, None
        provisioner.cwd = zygote.scratch
        self._reconcile_connection_info(provisioner.connection_info)

    pre_start_kernel = _async_pre_start_kernel

    def write_connection_file(self, **kwargs) -> None:
        """Written by the grader, read by the kernel's uid."""
        super().write_connection_file(**kwargs)
        if self._kernel_dir and self._kernel_uid() != os.geteuid():
            os.chown(self.connection_file, self._kernel_uid(), self._kernel_uid())

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        """After shutdown: delete the scratch and ipc directories (the PID namespace took the processes);
        a prepared kernel's zygote kills what the kernel left running and restores its directories."""
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self._lease is not None:
            self.env_changed = self._lease.release()
            self._lease = self._fork = self._kernel_dir = None
        elif not restart and self._finalizer is not None:
            self._finalizer()
            self._kernel_dir = self._finalizer = None

    cleanup_resources = _async_cleanup_resources
