"""Per-backend budgets that hidden tests read, kept in one table.

Every entry is a *ratio* or a *count*, never absolute time, so a test means the
same thing on a CPU grader, a Colab T4 or a TPU. Hidden tests look budgets up
with :func:`budget`, which picks the row for the backend the grader runs on.
Widen a number here (with a comment saying what was measured) rather than
special-casing a test.
"""

from __future__ import annotations

import jax

_CPU = {
    # Measured on a 2-core CPU grader (jax 0.7.2, 0.10.2, 0.12); see docs/benchmarks.md.
    # compile time / warm run time of a small jitted function: compile must dominate.
    "min_compile_over_run_small": 5.0,
    # seconds one hidden benchmark may spend re-measuring a student's code.
    "max_benchmark_s": 20.0,
    # lesson 2: warm call of the student's per-example gradients / warm call of a reference
    # jit(vmap(grad)) at batch 1. vmap(jit(grad)) measured 26-65x, the right form ~1x;
    # 8 sits far from both, also at load average 11.
    "max_slowdown_vs_jit_outer_small": 8.0,
    # lesson 2: student's run time / grader's re-measured run time of a ~15-30 ms matmul
    # chain must lie within this factor either way. No block_until_ready measured ~1e-3x;
    # 4 flaked once at load average 11 (other graders sharing the 2 cores), hence 20.
    "run_remeasure_tolerance": 20.0,
}

BUDGETS: dict[str, dict[str, float]] = {
    "cpu": _CPU,
    # Not yet measured on accelerators: the CPU ratios, which are wide. Compile time and
    # Python dispatch are larger relative to small-batch run time on a GPU or TPU, so the
    # same ratios are expected to hold. Replace with measured rows when a grader has one.
    "gpu": dict(_CPU),
    "tpu": dict(_CPU),
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
