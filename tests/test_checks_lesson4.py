"""Lesson 4's grader-side helper for gradient accumulation: right on equal micro-batches, and able to tell."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxgrader.checks.training import reference_accumulate_grads, reference_loss_fn

pytestmark = pytest.mark.lane


def _apply(params, x):
    return jnp.tanh(x @ params[0]["W"] + params[0]["b"]) @ params[1]["W"] + params[1]["b"]


def _setup(k=3, batch=5):
    keys = jax.random.split(jax.random.key(0), 4)
    params = [{"W": jax.random.normal(keys[0], (4, 6)), "b": jnp.zeros(6)},
              {"W": jax.random.normal(keys[1], (6, 3)), "b": jnp.zeros(3)}]
    xs = jax.random.normal(keys[2], (k, batch, 4))
    ys = jax.random.randint(keys[3], (k, batch), 0, 3)
    return params, xs, ys


def test_accumulated_gradients_equal_the_big_batch_gradient():
    loss_fn = reference_loss_fn(_apply)
    params, xs, ys = _setup()
    (loss, metrics), grads = jax.jit(reference_accumulate_grads(loss_fn))(params, xs, ys)
    (big_loss, big_metrics), big_grads = jax.value_and_grad(loss_fn, has_aux=True)(
        params, (xs.reshape(-1, 4), ys.reshape(-1)))
    np.testing.assert_allclose(loss, big_loss, rtol=1e-5)
    for key in ("loss", "accuracy"):
        np.testing.assert_allclose(metrics[key], big_metrics[key], rtol=1e-5)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(big_grads)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_accumulated_gradients_are_a_mean_not_a_sum_nor_the_last_micro_batch():
    loss_fn = reference_loss_fn(_apply)
    params, xs, ys = _setup(k=4)
    _, grads = reference_accumulate_grads(loss_fn)(params, xs, ys)
    each = [jax.grad(lambda p, b: loss_fn(p, b)[0])(params, (xs[i], ys[i])) for i in range(4)]
    summed = jax.tree.map(lambda *g: sum(g), *each)
    got, total, last = (optax.global_norm(t) for t in (grads, summed, each[-1]))
    assert float(got) == pytest.approx(float(optax.global_norm(jax.tree.map(lambda g: g / 4, summed))), rel=1e-5)
    assert not np.isclose(float(got), float(total)) and not np.isclose(float(got), float(last))
