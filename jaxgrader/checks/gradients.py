"""Gradient checks that do not flake.

Two independent checks, cheapest first:

1. Against a reference ``jax.grad`` of the *teacher's* function on identical
   inputs. Both run in float32, so the tolerance is a few ulps.
2. Against central finite differences in float64 (``jax.test_util.check_grads``).
   This catches a student who hand-derived a gradient, or whose function is
   differentiable but not the function we asked for. Finite differences in
   float32 at the default step are at the edge of their own tolerance, which is
   why this runs under x64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.test_util import check_grads

from .trees import assert_trees_close


def enable_x64():
    """Context manager turning on float64, portable from JAX 0.7 to the newest.

    ``jax.enable_x64`` exists from JAX 0.8; older releases ship it as
    ``jax.experimental.enable_x64``.
    """
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as legacy_enable_x64  # JAX < 0.8

    return legacy_enable_x64()


def to_float64(tree):
    """Cast every floating leaf to float64 (call inside ``enable_x64()``)."""
    return jax.tree.map(
        lambda x: jnp.asarray(x, jnp.float64) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x,
        tree,
    )


def assert_grad_matches_reference(grad_fn, reference_fn, args, *, argnums=0, rtol=1e-5, atol=1e-6,
                                  name="gradient"):
    """``grad_fn(*args)`` must equal ``jax.grad(reference_fn, argnums)(*args)``.

    ``grad_fn`` is whatever the student built (already a gradient function).
    """
    expected = jax.grad(reference_fn, argnums=argnums)(*args)
    actual = grad_fn(*args)
    assert_trees_close(actual, expected, rtol=rtol, atol=atol, name=name)


def assert_grad_matches_finite_differences(fn, args, *, eps=1e-4, rtol=1e-4, atol=1e-4):
    """Reverse-mode gradient of ``fn`` agrees with float64 central differences.

    Keep ``args`` away from non-differentiable points (ReLU kinks, ``abs`` at 0):
    a finite difference straddling a kink is wrong by design.
    """
    with enable_x64():
        args64 = to_float64(tuple(args))
        check_grads(fn, args64, order=1, modes=["rev"], eps=eps, atol=atol, rtol=rtol)


def agrees_with_finite_differences(fn, args, *, eps=1e-4, rtol=1e-4, atol=1e-4, seed=0) -> bool:
    """True if the reverse-mode gradient of scalar ``fn`` matches float64 central differences.

    The check ``jax.test_util.check_grads(order=1, modes=["rev"])`` makes (one
    random direction: the directional derivative from differences against the
    one from ``vjp``), compiled as one program instead of op by op, and returned
    as a bool for the grader rather than raised. Keep ``args`` away from kinks.
    """
    import numpy as np

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

        numerical, analytic = (float(v) for v in both(args, tangent))
    return bool(abs(numerical - analytic) <= atol + rtol * abs(numerical))
