"""Per-backend budgets that hidden tests read, kept in one table.

Every entry is a *ratio* or a *count*, never absolute time, so a test means the
same thing on a CPU grader, a Colab T4 or a TPU. Hidden tests look budgets up
with :func:`budget`, which picks the row for the backend the grader runs on.
Widen a number here (with a comment saying what was measured) rather than
special-casing a test.
"""

from __future__ import annotations

import jax

BUDGETS: dict[str, dict[str, float]] = {
    # Measured on a 2-core CPU grader; see docs/benchmarks.md.
    "cpu": {
        # compile time / warm run time of a tiny jitted function: compile must dominate.
        "min_compile_over_run_small": 5.0,
        # warm call of vmap(jit(grad)) / warm call of jit(vmap(grad)) at batch 1:
        # the first form re-traces through vmap on every call.
        "min_dispatch_overhead_ratio_small": 1.5,
        # seconds one hidden benchmark may spend re-measuring a student's code.
        "max_benchmark_s": 20.0,
    },
    "gpu": {
        "min_compile_over_run_small": 5.0,
        "min_dispatch_overhead_ratio_small": 1.5,
        "max_benchmark_s": 20.0,
    },
    "tpu": {
        "min_compile_over_run_small": 5.0,
        "min_dispatch_overhead_ratio_small": 1.5,
        "max_benchmark_s": 20.0,
    },
}


def current_backend() -> str:
    """'cpu', 'gpu' or 'tpu' (ROCm and CUDA both report 'gpu')."""
    return jax.default_backend()


def budget(name: str, backend: str | None = None) -> float:
    """The budget ``name`` for ``backend`` (default: the one JAX is running on)."""
    backend = backend or current_backend()
    try:
        row = BUDGETS[backend]
    except KeyError:
        raise KeyError(f"no budgets for backend {backend!r}; add a row to jaxgrader/budgets.py") from None
    try:
        return row[name]
    except KeyError:
        raise KeyError(f"no budget {name!r} for backend {backend!r} in jaxgrader/budgets.py") from None
