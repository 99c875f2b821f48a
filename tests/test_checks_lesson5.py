"""Lesson 5's kernel-side helpers (jaxgrader.checks.keras_variables) do what the hidden tests rely on."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")
keras = pytest.importorskip("keras")
pytestmark = pytest.mark.skipif(keras.backend.backend() != "jax", reason="Keras runs on another backend here")

from jaxgrader.checks import keras_variables as kv  # noqa: E402


def test_the_stand_in_model_has_the_exercises_variables_and_no_running_mean():
    model = kv.standin_centered_model(features=3, units=2)
    assert [v.name for v in model.non_trainable_variables] == ["count", "mean"]
    assert [v.name for v in model.trainable_variables] == ["kernel", "bias"]
    layer = model.layers[0]
    ntv = [v.value for v in layer.non_trainable_variables]
    rng = np.random.default_rng(0)
    seen = []
    for n in (4, 1, 7):
        x = rng.normal(size=(n, 3)).astype("float32")
        seen.append(x)
        out, ntv = layer.stateless_call([], ntv, x, training=True)
        assert float(ntv[0]) == len(np.concatenate(seen))
        np.testing.assert_allclose(out, x - np.asarray(ntv[1]), rtol=1e-5, atol=1e-6)
    # a moving average, not the exercise's running mean of every row
    assert not np.allclose(ntv[1], np.concatenate(seen).mean(axis=0), rtol=1e-3)
    assert float(layer.count.value) == 0.0  # stateless_call left the layer's own variables alone


def test_the_stand_in_model_runs_in_the_students_variable_order():
    model = kv.standin_centered_model()
    r = np.random.default_rng(1)
    tv, _ = kv.draw_variables(model, r)
    ntv = [np.float32(2.0), np.zeros(64, "float32")]
    x = r.normal(size=(5, 64)).astype("float32")
    y, new_ntv = model.stateless_call(tv, ntv, x, training=True)
    assert np.shape(y) == (5, 10)
    assert float(new_ntv[0]) == 7.0
