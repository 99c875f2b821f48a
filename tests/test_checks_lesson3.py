"""Lesson 3's kernel-side helpers for the transfer exercise (jaxgrader.checks.mlp): the residual
network's parameters, its reference forward pass and its mean squared error."""

from __future__ import annotations

import jax
import numpy as np

from jaxgrader.checks import mlp


def _numpy_residual(params, x):
    h = np.asarray(x, np.float64)
    for layer in params["hidden"]:
        h = h + np.tanh(h @ np.asarray(layer["W"], np.float64) + np.asarray(layer["b"], np.float64))
    return h @ np.asarray(params["out"]["W"], np.float64) + np.asarray(params["out"]["b"], np.float64)


def test_random_residual_params_have_the_exercise_structure():
    params = mlp.random_residual_params(5, 3, 1, seed=0)
    assert jax.tree.map(lambda a: a.shape, params) == {
        "hidden": [{"W": (5, 5), "b": (5,)}] * 3, "out": {"W": (5, 1), "b": (1,)}}
    assert mlp.random_residual_params(4, 0, 2, seed=1)["hidden"] == []
    assert all(leaf.dtype == np.float32 for leaf in jax.tree.leaves(params))


def test_reference_residual_apply_adds_each_block_to_its_input():
    params = mlp.random_residual_params(4, 2, 1, seed=2)
    x = np.random.default_rng(3).normal(size=4).astype(np.float32)
    np.testing.assert_allclose(np.asarray(mlp.reference_residual_apply(params, x)), _numpy_residual(params, x), rtol=1e-5)
    # no blocks: only the linear head
    head = mlp.random_residual_params(4, 0, 1, seed=4)
    np.testing.assert_allclose(np.asarray(mlp.reference_residual_apply(head, x)),
                               x @ np.asarray(head["out"]["W"]) + np.asarray(head["out"]["b"]), rtol=1e-5)


def test_reference_mse_loss_is_the_mean_over_the_batch():
    params = mlp.random_residual_params(3, 2, 1, seed=5)
    r = np.random.default_rng(6)
    X, t = r.normal(size=(7, 3)).astype(np.float32), r.normal(size=7).astype(np.float32)
    predictions = np.stack([_numpy_residual(params, x)[0] for x in X])
    expected = np.mean((predictions - t) ** 2)
    assert np.shape(mlp.reference_mse_loss(params, X, t)) == ()
    np.testing.assert_allclose(float(mlp.reference_mse_loss(params, X, t)), expected, rtol=1e-5)
    # not the (B, B) broadcast of (B, 1) - (B,)
    assert not np.isclose(expected, np.mean((predictions[:, None] - t[None, :]) ** 2))
