"""Time JAX code honestly: compilation and steady-state run, measured apart.

Three traps this module avoids (see the course's notes on measuring JAX):

* asynchronous dispatch: a call returns before the device is done, so every
  clock stops only after ``jax.block_until_ready`` on the *whole* output;
* caches: jit calls and ``.lower().compile()`` share in-memory caches, so the
  first call is only a compile measurement after ``jax.clear_caches()``;
* noise: the steady state is the median of several repeats after a warm-up.

Budgets are ratios (compile against run, one form against another), never
absolute milliseconds: the same hidden test then means something on a laptop,
a 2-core grader, a T4 or a TPU.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import jax


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds for the first call after clearing caches, and for a warm call."""

    first_call_s: float
    run_s: float

    @property
    def compile_s(self) -> float:
        """Trace + lower + compile, estimated as the first call minus a warm call."""
        return max(self.first_call_s - self.run_s, 0.0)


def _timed_call(fn, args) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def measure(fn, *args, repeats: int = 5, clear_caches: bool = True) -> Timing:
    """Time ``fn(*args)``: first (cold) call, then the median of ``repeats`` warm calls.

    ``fn`` may be any callable (jitted or not), so ``jit(vmap(g))`` and
    ``vmap(jit(g))`` are measured the same way.
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    if clear_caches:
        jax.clear_caches()
    first = _timed_call(fn, args)
    _timed_call(fn, args)  # warm-up: allocator, thread pools
    run = statistics.median(_timed_call(fn, args) for _ in range(repeats))
    return Timing(first_call_s=first, run_s=run)
