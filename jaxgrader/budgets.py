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
        # lesson 2: warm call of the student's per-example gradients / warm call of a reference
        # jit(vmap(grad)) at batch 1. Measured on the 2-core CPU (jax 0.7.2, 0.10.2, 0.12):
        # vmap(jit(grad)) is 26-65x, the right form ~1x; 8 sits far from both, also at load 11.
        "max_slowdown_vs_jit_outer_small": 8.0,
        # lesson 2: student's run time / grader's re-measured run time of a ~15-30 ms matmul
        # chain must lie within this factor either way. No block_until_ready measured ~1e-3x;
        # 4 flaked once at load average 11 (other graders sharing the 2 cores), hence 20.
        "run_remeasure_tolerance": 20.0,
    },
    "gpu": {
        "min_compile_over_run_small": 5.0,
        "min_dispatch_overhead_ratio_small": 1.5,
        "max_benchmark_s": 20.0,
        "max_slowdown_vs_jit_outer_small": 8.0,  # not yet measured on this backend
        "run_remeasure_tolerance": 20.0,  # not yet measured on this backend
    },
    "tpu": {
        "min_compile_over_run_small": 5.0,
        "min_dispatch_overhead_ratio_small": 1.5,
        "max_benchmark_s": 20.0,
        "max_slowdown_vs_jit_outer_small": 8.0,  # not yet measured on this backend
        "run_remeasure_tolerance": 20.0,  # not yet measured on this backend
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
