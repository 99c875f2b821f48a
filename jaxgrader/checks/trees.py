"""Compare pytrees the way a grader should: structure first, then leaf by leaf.

A student who returns ``(grads_b, grads_W)`` instead of ``{"W": ..., "b": ...}``
deserves a message about the *structure*, not a shape error from deep inside
NumPy; a student whose bias gradient is wrong deserves to be told which leaf
(``[1]['b']``) is off, and by how much.
"""

from __future__ import annotations

import jax
import numpy as np

# float32 has ~7 significant digits; a reference computation done in a different
# order (vmap vs. loop, fused vs. not) differs by a few ulps per operation.
FLOAT32_RTOL = 1e-5
FLOAT32_ATOL = 1e-6


def _path_str(path) -> str:
    return jax.tree_util.keystr(path) or "<root>"


def assert_same_structure(actual, expected, name: str = "value") -> None:
    """Raise AssertionError naming both tree structures if they differ."""
    actual_def = jax.tree.structure(actual)
    expected_def = jax.tree.structure(expected)
    if actual_def != expected_def:
        raise AssertionError(
            f"{name} has the wrong structure:\n  got      {actual_def}\n  expected {expected_def}"
        )


def assert_trees_close(
    actual,
    expected,
    *,
    rtol: float = FLOAT32_RTOL,
    atol: float = FLOAT32_ATOL,
    name: str = "value",
    check_dtype: bool = False,
) -> None:
    """Assert two pytrees match: same structure, same shapes, values within tolerance.

    The message names the leaf by its key path (e.g. ``grads[1]['b']``) and says
    how far off it is, so a failing hidden test is still useful feedback.
    """
    assert_same_structure(actual, expected, name)
    actual_leaves = jax.tree_util.tree_flatten_with_path(actual)[0]
    expected_leaves = jax.tree.leaves(expected)
    for (path, a), e in zip(actual_leaves, expected_leaves):
        where = f"{name}{jax.tree_util.keystr(path)}"
        a_np, e_np = np.asarray(a), np.asarray(e)
        if a_np.shape != e_np.shape:
            raise AssertionError(f"{where} has shape {a_np.shape}, expected {e_np.shape}")
        if check_dtype and a_np.dtype != e_np.dtype:
            raise AssertionError(f"{where} has dtype {a_np.dtype}, expected {e_np.dtype}")
        if not np.allclose(a_np, e_np, rtol=rtol, atol=atol, equal_nan=False):
            diff = np.abs(a_np.astype(np.float64) - e_np.astype(np.float64))
            raise AssertionError(
                f"{where} differs from the expected value: max abs error {np.nanmax(diff):.3g} "
                f"(rtol={rtol}, atol={atol})"
            )


def assert_trees_equal(actual, expected, name: str = "value") -> None:
    """Bit-identical comparison (e.g. 'weight decay must leave biases untouched')."""
    assert_same_structure(actual, expected, name)
    actual_leaves = jax.tree_util.tree_flatten_with_path(actual)[0]
    for (path, a), e in zip(actual_leaves, jax.tree.leaves(expected)):
        a_np, e_np = np.asarray(a), np.asarray(e)
        if a_np.shape != e_np.shape or not np.array_equal(a_np, e_np):
            raise AssertionError(f"{name}{jax.tree_util.keystr(path)} was expected to be unchanged")


def global_norm(tree) -> float:
    """Euclidean norm of all leaves together, computed in float64 on the host."""
    return float(np.sqrt(sum(np.sum(np.asarray(x, np.float64) ** 2) for x in jax.tree.leaves(tree))))
