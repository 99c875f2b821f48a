"""Lesson 4's kernel-side stand-in loss: the exercise's signature and metrics, another loss."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxgrader.checks.training import same_values, standin_loss_fn

pytestmark = pytest.mark.lane


def _apply(params, x):
    return jnp.tanh(x @ params[0]["W"] + params[0]["b"]) @ params[1]["W"] + params[1]["b"]


def test_the_stand_in_loss_has_the_exercises_outputs_and_is_no_cross_entropy():
    keys = jax.random.split(jax.random.key(0), 4)
    params = [{"W": jax.random.normal(keys[0], (4, 6)), "b": jnp.zeros(6)},
              {"W": jax.random.normal(keys[1], (6, 3)), "b": jnp.zeros(3)}]
    x, y = jax.random.normal(keys[2], (5, 4)), jax.random.randint(keys[3], (5,), 0, 3)
    loss, metrics = standin_loss_fn(_apply)(params, (x, y))
    assert set(metrics) == {"loss", "accuracy"} and jnp.shape(loss) == ()
    logits = _apply(params, x)
    assert float(metrics["accuracy"]) == float(jnp.mean(jnp.argmax(logits, -1) == y))
    assert not np.isclose(float(loss), float(optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()))
    assert same_values(params, params) and not same_values(params, params[::-1])
