"""Kernel-side guard, installed before any student code runs while autograding.

``nbgrader_config.py`` starts every grading kernel with
``--IPKernelApp.exec_lines=import jaxgrader.guard; jaxgrader.guard.install()``,
so this runs first, in the kernel, with nothing of the student's loaded yet.
It does three things:

1. **Noise is not failure.** nbgrader zeroes a test cell that writes anything to
   stderr. Known platform and version notices (JAX falling back to the CPU,
   float64 truncation, deprecations of APIs a lesson does not grade) are
   filtered here, by message or category. Exceptions are untouched: a real
   error still fails its cell.
2. **Snapshot and restore.** It imports the modules tests rely on (NumPy and its
   testing helpers, JAX, the grader's checks, builtins) and records their public
   attributes; before every cell it puts back any that a student replaced, and
   restores their ``sys.modules`` entries (so a file named ``numpy.py`` or
   ``jaxgrader/`` written into the working directory cannot shadow them).
3. Nothing else: static checks on the student's cells live in
   ``jaxgrader.preprocessors`` and run outside the kernel.

In-kernel defences can be worked around by code that sets out to do so; that
code is what the static check refuses to run. See docs/grading.md.
"""

from __future__ import annotations

import importlib
import logging
import sys
import warnings

GUARDED_MODULES = (
    "builtins",
    "math",
    "numpy",
    "numpy.testing",
    "jax",
    "jax.numpy",
    "jax.random",
    "jax.tree",
    "jax.tree_util",
    "jax.nn",
    "jax.lax",
    "jax.test_util",
    "jax.monitoring",
    "jaxgrader",
    "jaxgrader.trees",
    "jaxgrader.gradients",
    "jaxgrader.compiles",
    "jaxgrader.timing",
    "jaxgrader.budgets",
    "jaxgrader.guard",
)

# (message regex, category) pairs that are notices, not failures.
KNOWN_WARNINGS = (
    (r"Explicitly requested dtype .* is not available", UserWarning),
    (r".*", DeprecationWarning),
    (r".*", FutureWarning),
    (r".*os\.fork\(\) was called.*", RuntimeWarning),
)
# Loggers that print platform notices ("An NVIDIA GPU may be present ... Falling back to cpu").
QUIET_LOGGERS = ("jax._src.xla_bridge", "absl")

_snapshot: dict[str, dict[str, object]] = {}
_modules: dict[str, object] = {}


def filter_known_noise() -> None:
    for message, category in KNOWN_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def _take_snapshot() -> None:
    for name in GUARDED_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _modules[name] = module
        _snapshot[name] = {attr: getattr(module, attr) for attr in dir(module)
                           if not attr.startswith("__") or attr in ("__import__", "__build_class__")}


def restore() -> list[str]:
    """Put back every guarded attribute and module; return what had been changed."""
    changed = []
    for name, module in _modules.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module
            changed.append(f"sys.modules[{name!r}]")
        attrs = _snapshot[name]
        for attr, original in attrs.items():
            try:
                current = getattr(module, attr)
            except AttributeError:
                current = None
            if current is not original:
                try:
                    setattr(module, attr, original)
                    changed.append(f"{name}.{attr}")
                except (AttributeError, TypeError):
                    pass
    return changed


def _before_cell(*_args) -> None:
    restore()
    filter_known_noise()


def install() -> None:
    """Called once at kernel start (see module docstring)."""
    filter_known_noise()
    _take_snapshot()
    try:
        shell = get_ipython()  # noqa: F821  (defined in IPython kernels)
    except NameError:
        return
    shell.events.register("pre_run_cell", _before_cell)


__all__ = ["install", "restore", "filter_known_noise"]
