"""Lesson 3's kernel-side helpers (jaxgrader.checks.mlp): the parameters hidden tests draw, and
stand-ins that have the exercises' signatures but answer none of them (the kernel can import them;
a hidden test's stand-in twin swaps them in where an earlier exercise failed)."""

from __future__ import annotations

import jax
import numpy as np

from jaxgrader.checks import mlp


def _numpy_residual(params, x):
    h = np.asarray(x, np.float64)
    for layer in params["hidden"]:
        h = h + np.tanh(h @ np.asarray(layer["W"], np.float64) + np.asarray(layer["b"], np.float64))
    return h @ np.asarray(params["out"]["W"], np.float64) + np.asarray(params["out"]["b"], np.float64)


def _numpy_mlp(params, x):
    h = np.asarray(x, np.float64)
    for layer in params[:-1]:
        h = np.maximum(h @ np.asarray(layer["W"], np.float64) + np.asarray(layer["b"], np.float64), 0.0)
    return h @ np.asarray(params[-1]["W"], np.float64) + np.asarray(params[-1]["b"], np.float64)


def test_standin_init_layer_takes_init_layers_arguments_but_draws_something_else():
    """Exercise 1 fixes W = random.normal(key, (in_dim, out_dim)) * scale (He's sqrt(2 / in_dim) by default) and
    zero biases: the stand-in has that signature and those shapes, and answers it for no key."""
    key = jax.random.key(0)
    layer = mlp.standin_init_layer(key, 6, 4)
    assert jax.tree.map(np.shape, layer) == {"W": (6, 4), "b": (4,)}
    exercise = np.asarray(jax.random.normal(key, (6, 4))) * np.sqrt(2.0 / 6)
    assert not np.allclose(np.asarray(layer["W"]), exercise, rtol=1e-3)
    assert np.all(np.abs(np.asarray(layer["W"])) <= np.sqrt(2.0 / 6))  # uniform within the default scale
    assert not np.any(np.asarray(layer["b"]) == 0)
    scaled = mlp.standin_init_layer(key, 6, 4, 0.3)
    assert np.all(np.abs(np.asarray(scaled["W"])) <= 0.3)
    assert not np.allclose(np.asarray(scaled["W"]), np.asarray(jax.random.normal(key, (6, 4))) * 0.3, rtol=1e-3)
    other = mlp.standin_init_layer(jax.random.key(1), 6, 4)
    assert not np.allclose(np.asarray(other["W"]), np.asarray(layer["W"]))  # the key decides the draw
    legacy = mlp.standin_init_layer(jax.random.PRNGKey(0), 6, 4)
    assert np.shape(legacy["W"]) == (6, 4)


def test_random_residual_params_have_the_exercise_structure():
    params = mlp.random_residual_params(5, 3, 1, seed=0)
    assert jax.tree.map(lambda a: a.shape, params) == {
        "hidden": [{"W": (5, 5), "b": (5,)}] * 3, "out": {"W": (5, 1), "b": (1,)}}
    assert mlp.random_residual_params(4, 0, 2, seed=1)["hidden"] == []
    assert all(leaf.dtype == np.float32 for leaf in jax.tree.leaves(params))


def test_stand_ins_take_the_exercises_arguments_but_compute_something_else():
    params = mlp.random_params([4, 6, 3], seed=2)
    x = np.random.default_rng(3).normal(size=4).astype(np.float32)
    assert np.shape(mlp.standin_apply(params, x)) == (3,)
    assert not np.allclose(np.asarray(mlp.standin_apply(params, x)), _numpy_mlp(params, x), rtol=1e-3)
    y = np.eye(3, dtype=np.float32)[1]
    ce = -np.sum(y * (_numpy_mlp(params, x) - np.log(np.sum(np.exp(_numpy_mlp(params, x))))))
    assert np.shape(mlp.standin_example_loss(params, x, y)) == ()
    assert not np.isclose(float(mlp.standin_example_loss(params, x, y)), ce, rtol=1e-3)
    X, Y = np.stack([x, -x]), np.stack([y, y])
    summed = float(mlp.standin_example_loss(params, x, y) + mlp.standin_example_loss(params, -x, y))
    np.testing.assert_allclose(float(mlp.standin_batch_loss(params, X, Y)), summed, rtol=1e-6)  # a sum, not a mean
    residual = mlp.random_residual_params(4, 2, 1, seed=4)
    assert np.shape(mlp.standin_residual_apply(residual, x)) == (1,)
    assert not np.allclose(np.asarray(mlp.standin_residual_apply(residual, x)), _numpy_residual(residual, x), rtol=1e-3)
