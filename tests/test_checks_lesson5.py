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


def test_batches_are_consecutive_rows_drawn_from_the_seed():
    x = np.arange(40, dtype="float32").reshape(20, 2)
    y = np.arange(20, dtype="int32")
    drawn = kv.batches(x, y, 4, 50, np.random.default_rng(3))
    assert len(drawn) == 50
    for xb, yb in drawn:
        assert xb.shape == (4, 2) and yb.shape == (4,)
        assert np.array_equal(np.diff(yb), np.ones(3)) and np.array_equal(xb[:, 0], 2 * yb)
    assert {int(yb[0]) for _, yb in drawn} <= set(range(17))  # every batch is a full one
    again = kv.batches(x, y, 4, 50, np.random.default_rng(3))
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(drawn, again))


def test_run_steps_chains_the_state_and_stops_after_its_time():
    def step(state, batch):
        return state + batch, state + batch

    state, outputs = kv.run_steps(step, 0, range(1, 11))
    assert state == 55 and outputs == [1, 3, 6, 10, 15, 21, 28, 36, 45, 55]

    import time

    def slow(state, batch):
        time.sleep(0.05)
        return None, state + 1

    state, outputs = kv.run_steps(slow, 0, range(100), seconds=0.2)
    assert 1 <= state < 20 and len(outputs) == state  # cut short: the state says how many steps ran


@pytest.mark.lane  # jax.export of a Keras model differs between JAX and Keras versions: both lanes run it
def test_a_keras_models_stateless_predict_exports_and_scores_trained_variables():
    """test_accuracy exports ``predict(trainable, non_trainable, x)`` built on ``model.stateless_call``; the grader
    runs that program on a student's variable values (batch norm's statistics included) and the test images."""
    import jax

    from jaxgrader.checks.programs import exported
    from jaxgrader.grading.sandbox.bwrap import check_sandbox
    from jaxgrader.grading.verdict import artifacts

    from .test_verdict import ref

    inputs = keras.Input(shape=(6,))
    hidden = keras.layers.BatchNormalization()(keras.layers.Dense(8, use_bias=False)(inputs))
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Activation("relu")(hidden)))

    def predict(trainable_variables, non_trainable_variables, x):
        return model.stateless_call(trainable_variables, non_trainable_variables, x, training=False)[0]

    r = np.random.default_rng(0)
    x = r.normal(size=(50, 6)).astype("float32")
    tv, ntv = kv.draw_variables(model, r)
    y = np.argmax(np.asarray(predict(tv, ntv, x)), axis=-1)  # these variables classify every example right
    program = exported(predict, tv, ntv, x)
    data = {"x": x, "y": y}
    reference = ref("p", jax.tree.leaves([tv, ntv]), "scores", bound=0.05, model=program, data=data)
    other_stats = [ntv[0] + 3.0, ntv[1] * 4.0]  # the same weights with other batch-norm statistics
    for leaves, passes in ((jax.tree.leaves([tv, ntv]), True), (jax.tree.leaves([tv, other_stats]), False)):
        got = ref("p", leaves, "scores")
        (mine, theirs, problem, labels), = artifacts.evaluate([(reference, got)], sandboxed=not check_sandbox())
        assert not mine.error and not theirs.error, (mine.error, theirs.error)
        assert (artifacts.judge_scores(reference, mine, theirs, problem, labels) == "") is passes
