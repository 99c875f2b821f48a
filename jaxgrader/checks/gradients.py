"""Gradient checks that do not flake.

Hidden tests report the student's gradients and the grader compares them with
the instructor's on the same inputs (float32, a few ulps). This module adds the
independent check: the derivative along a random direction, from central finite
differences in float64 and from reverse mode, both reported as values, which
catches a hand-derived or custom gradient that does not belong to the function. Float32 differences at the default step are at the edge of their own
tolerance, which is why this runs under x64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def enable_x64():
    """Context manager turning on float64, portable from JAX 0.7 to the newest.

    ``jax.enable_x64`` exists from JAX 0.8; older releases ship it as
    ``jax.experimental.enable_x64``.
    """
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as legacy_enable_x64  # JAX < 0.8

    return legacy_enable_x64()


def directional_derivatives(fn, args, *, eps=1e-4, seed=0) -> list[float]:
    """``[from float64 central differences, from reverse mode]``: the derivative of scalar ``fn`` along one random direction.

    The check ``jax.test_util.check_grads(order=1, modes=["rev"])`` makes, compiled as one
    program (``check_grads`` runs op by op, compiling each: slow inside an autograde). Hidden
    tests *report* both numbers (rule ``close``): the grader compares them with the
    reference's, so the first checks the function's values, the second its gradient, and
    a hand-written gradient that does not belong to the function fails the second. Keep
    ``args`` away from kinks.
    """
    with enable_x64():
        args = jax.tree.map(lambda a: np.asarray(a, np.float64), tuple(args))
        r = np.random.RandomState(seed)
        tangent = jax.tree.map(lambda a: r.standard_normal(np.shape(a)), args)

        @jax.jit
        def both(args, tangent):
            def shifted(s):
                return fn(*jax.tree.map(lambda a, t: a + s * t, args, tangent))

            numerical = (shifted(eps) - shifted(-eps)) / (2 * eps)
            out, vjp = jax.vjp(fn, *args)
            cotangent = vjp(jnp.ones_like(out))
            analytic = sum(jnp.vdot(t, c) for t, c in zip(jax.tree.leaves(tangent), jax.tree.leaves(cotangent)))
            return numerical, analytic

        return [float(v) for v in both(args, tangent)]


def agrees_with_finite_differences(fn, args, *, eps=1e-4, rtol=1e-4, atol=1e-4, seed=0) -> bool:
    """True if the two :func:`directional_derivatives` agree (for notebooks and tests; hidden tests report the numbers)."""
    numerical, analytic = directional_derivatives(fn, args, eps=eps, seed=seed)
    return bool(abs(numerical - analytic) <= atol + rtol * abs(numerical))
