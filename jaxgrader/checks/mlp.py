"""Inputs and stand-in functions for the lesson-3 MLP tests (list-of-dicts parameters).

Hidden tests import these instead of each defining its own copy. A test of one
exercise reports the student's own chain (judged when the earlier exercises passed) and
the same computation with stand-ins swapped in for the earlier ones (``init_layer``,
``mlp_apply``, ``cross_entropy_loss``, ...; judged when one of them failed), so that one
mistake costs one part, not every part built on it. The stand-ins
have the exercises' signatures but compute something else (a tanh network, a squared
error): this module is importable in the student's kernel, so nothing in it may answer
a graded exercise (``tests/test_answer_key.py`` tries). The reference run uses the same
stand-ins, so the values still compare. Nothing here judges.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def put(a):
    """A float32 device array from anything array-like (no compilation per shape)."""
    return jax.device_put(np.asarray(a, np.float32))


def standin_init_layer(key, in_dim, out_dim, scale=None):
    """A stand-in for ``init_layer`` with its signature: uniform weights in ``[-scale, scale)`` (not the
    exercise's normal draw), ``scale`` by default ``sqrt(2 / in_dim)`` as the exercise's, and biases of 0.1."""
    scale = (2.0 / in_dim) ** 0.5 if scale is None else scale
    return {"W": jax.random.uniform(key, (in_dim, out_dim), minval=-scale, maxval=scale),
            "b": jnp.full((out_dim,), 0.1, jnp.float32)}


def random_params(sizes, seed: int, gain: float = 1.0):
    """Random ``[{"W": (m, n), "b": (n,)}, ...]`` for layer ``sizes``, drawn with NumPy.

    Like the notebook's ``make_test_params``, but put on the device directly:
    ``jnp.asarray`` of a float64 array would compile a conversion per shape.
    """
    r = np.random.default_rng(seed)
    return [{"W": put(gain * r.normal(size=(m, n)) / np.sqrt(m)), "b": put(gain * r.normal(size=(n,)) * 0.1)}
            for m, n in zip(sizes[:-1], sizes[1:])]


def standin_apply(params, x):
    """A stand-in forward pass with lesson 3's parameters: tanh on every hidden layer (not the exercise's ReLU)."""
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["W"] + layer["b"])
    return x @ params[-1]["W"] + params[-1]["b"]


def standin_example_loss(params, x, y):
    """A stand-in loss of one example: squared error between the softmax and one-hot ``y`` (not a cross-entropy)."""
    return jnp.sum((jax.nn.softmax(standin_apply(params, x)) - y) ** 2)


def standin_batch_loss(params, X, Y):
    """A stand-in loss of a batch: :func:`standin_example_loss` summed over the batch (not a mean of cross-entropies)."""
    return jnp.sum((jax.nn.softmax(standin_apply(params, X)) - Y) ** 2)


def random_residual_params(width: int, depth: int, out_dim: int, seed: int, gain: float = 1.0):
    """Random ``{"hidden": [{"W": (width, width), "b": (width,)}] * depth, "out": {"W": (width, out_dim), "b": (out_dim,)}}``.

    The parameters of the residual network of the assignment's transfer exercise,
    drawn with NumPy like :func:`random_params`.
    """
    layers = random_params([width] * (depth + 1) + [out_dim], seed, gain)
    return {"hidden": layers[:-1], "out": layers[-1]}


def standin_residual_apply(params, x):
    """A stand-in for the transfer exercise's network, same parameters: ``h = tanh(h @ W + b)`` per block, no skip."""
    h = x
    for layer in params["hidden"]:
        h = jnp.tanh(h @ layer["W"] + layer["b"])
    return h @ params["out"]["W"] + params["out"]["b"]


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


__all__ = ["away_from_kinks", "put", "random_params", "random_residual_params", "standin_apply",
           "standin_batch_loss", "standin_example_loss", "standin_init_layer", "standin_residual_apply"]
