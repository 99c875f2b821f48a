"""Inputs and reference functions for the lesson-3 MLP tests (list-of-dicts parameters).

Hidden tests import these instead of each defining its own copy. The reference
functions let a test of one exercise swap in correct versions of the earlier
ones, so one mistake costs one part, not every part built on it. Nothing here
judges: the grader compares reported values outside the kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def put(a):
    """A float32 device array from anything array-like (no compilation per shape)."""
    return jax.device_put(np.asarray(a, np.float32))


def random_params(sizes, seed: int, gain: float = 1.0):
    """Random ``[{"W": (m, n), "b": (n,)}, ...]`` for layer ``sizes``, drawn with NumPy.

    Like the notebook's ``make_test_params``, but put on the device directly:
    ``jnp.asarray`` of a float64 array would compile a conversion per shape.
    """
    r = np.random.default_rng(seed)
    return [{"W": put(gain * r.normal(size=(m, n)) / np.sqrt(m)), "b": put(gain * r.normal(size=(n,)) * 0.1)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def reference_apply(params, x):
    """ReLU on every hidden layer, raw logits out."""
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["W"] + layer["b"])
    return x @ params[-1]["W"] + params[-1]["b"]


def reference_cross_entropy(params, x, y):
    """Cross-entropy of one example against a one-hot ``y``."""
    return -jnp.sum(y * jax.nn.log_softmax(reference_apply(params, x)))


def reference_batch_loss(params, X, Y):
    """Mean cross-entropy over a batch."""
    return jnp.mean(jax.vmap(reference_cross_entropy, in_axes=(None, 0, 0))(params, X, Y))


def random_residual_params(width: int, depth: int, out_dim: int, seed: int, gain: float = 1.0):
    """Random ``{"hidden": [{"W": (width, width), "b": (width,)}] * depth, "out": {"W": (width, out_dim), "b": (out_dim,)}}``.

    The parameters of the residual network of the assignment's transfer exercise,
    drawn with NumPy like :func:`random_params`.
    """
    layers = random_params([width] * (depth + 1) + [out_dim], seed, gain)
    return {"hidden": layers[:-1], "out": layers[-1]}


def reference_residual_apply(params, x):
    """One example through the residual network: ``h = h + tanh(h @ W + b)`` per block, then a linear head."""
    h = x
    for layer in params["hidden"]:
        h = h + jnp.tanh(h @ layer["W"] + layer["b"])
    return h @ params["out"]["W"] + params["out"]["b"]


def reference_mse_loss(params, X, t):
    """Mean squared error of the single-output residual network over a batch, ``t`` of shape ``(B,)``."""
    predictions = jax.vmap(reference_residual_apply, in_axes=(None, 0))(params, X)[:, 0]
    return jnp.mean((predictions - t) ** 2)


def away_from_kinks(sizes, seed: int, batch: int | None = None, min_gap: float = 0.05):
    """Parameters and an input (or a batch) whose hidden pre-activations all stay ``min_gap`` from 0.

    Finite differences across a ReLU kink are wrong by design; redraw until none
    is near one (checked in float64 NumPy, so it costs no compilation).
    """
    while True:
        params = random_params(sizes, seed)
        shape = (sizes[0],) if batch is None else (batch, sizes[0])
        x = np.asarray(np.random.default_rng(seed).normal(size=shape), np.float32)
        h, ok = x.astype(np.float64), True
        for layer in params[:-1]:
            pre = h @ np.asarray(layer["W"], np.float64) + np.asarray(layer["b"], np.float64)
            ok = ok and float(np.min(np.abs(pre))) > min_gap
            h = np.maximum(pre, 0.0)
        if ok:
            return params, put(x)
        seed += 1000


__all__ = ["away_from_kinks", "put", "random_params", "random_residual_params", "reference_apply",
           "reference_batch_loss", "reference_cross_entropy", "reference_mse_loss", "reference_residual_apply"]
