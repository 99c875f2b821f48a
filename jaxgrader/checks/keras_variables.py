"""Values for a Keras model's and optimizer's variables, drawn from the grader's seed (lesson 5).

The stateless API takes variable *values*; drawing them afresh each run means a
hidden test checks the student's function on states nobody could precompute.
Values stay in realistic ranges (positive variances and scales, He-scaled
kernels, small optimizer moments) so losses and updates are well conditioned.

Also the workload of the hidden tests' cost parts (``cell_time``): :func:`batches` drawn from the
seed and :func:`run_steps`, many calls of the student's step in a row, each on the state the call
before returned. The grader times the whole cell on its own clock; the values the chain ends with
are reported too, so a chain cut short (or skipped) does not pass for a fast one.
"""

from __future__ import annotations

import numpy as np

from . import workloads


def draw_variables(model, r: np.random.Generator):
    """``(trainable, non_trainable)`` float32 arrays shaped like ``model``'s variables."""
    def draw(v):
        if v.name in ("gamma", "moving_variance"):
            return r.uniform(0.5, 1.5, size=v.shape).astype("float32")
        if v.name == "kernel":
            return (r.normal(size=v.shape) * np.sqrt(2.0 / v.shape[0])).astype("float32")
        return (0.1 * r.normal(size=v.shape)).astype("float32")

    return [draw(v) for v in model.trainable_variables], [draw(v) for v in model.non_trainable_variables]


def draw_optimizer_variables(optimizer, r: np.random.Generator):
    """Arrays shaped like ``optimizer.variables`` (a built Keras optimizer): step count, moments."""
    def draw(v):
        if v.name == "iteration":
            return np.asarray(r.integers(1, 50), dtype="int32")
        if v.name == "learning_rate":
            return np.asarray(1e-2, dtype="float32")
        if v.name.endswith("velocity"):
            return r.uniform(1e-5, 1e-3, size=v.shape).astype("float32")
        return (0.01 * r.normal(size=v.shape)).astype("float32")

    return [draw(v) for v in optimizer.variables]


def standin_centered_model(features: int = 64, units: int = 10):
    """A model shaped like lesson 5's ``centered_model`` (a centering layer, then Dense), with a stand-in centering layer.

    Why it exists: ``test_centered_step`` swaps it in for the student's model while it
    grades ``centered_step``, so that a wrong ``RunningMean`` (graded by its own test) does not
    also cost the step's points. Its layer keeps the same non-trainable variables, ``[count,
    mean]``, but updates the mean as an exponential moving average (not the exercise's running
    mean of every row): this module is importable in the student's kernel, so nothing here may
    answer a graded exercise. Variables: trainable ``[kernel, bias]``, non-trainable ``[count, mean]``.
    """
    import keras

    class MovingCenter(keras.layers.Layer):
        def build(self, input_shape):
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False, name="count")
            self.mean = self.add_weight(shape=(input_shape[-1],), initializer="zeros", trainable=False, name="mean")

        def call(self, inputs, training=False):
            if training:
                self.count.assign(self.count + keras.ops.cast(keras.ops.shape(inputs)[0], "float32"))
                self.mean.assign(0.9 * self.mean + 0.1 * keras.ops.mean(inputs, axis=0))
            return inputs - self.mean

    return keras.Sequential([keras.Input(shape=(features,)), MovingCenter(), keras.layers.Dense(units)])


def batches(x, y, size: int, n: int, r: np.random.Generator):
    """``n`` batches ``(x[i:i + size], y[i:i + size])`` of consecutive rows, starting at rows drawn with ``r``."""
    starts = r.integers(0, len(x) - size + 1, size=n)
    return [(x[i:i + size], y[i:i + size]) for i in starts]


def run_steps(step, state, data, seconds: float = workloads.SECONDS):
    """``step(state, batch)`` for each batch of ``data`` in turn, each call on the state the call before
    returned: ``(state, outputs)``, the last state and every call's first output (a loss).

    The workload of a cost part: compiled once, hundreds of calls of a small step take a fraction of a
    second; a step that is not compiled runs every operation of every call one by one, and one that
    compiles again on every call compiles hundreds of times. It stops calling after ``seconds`` (as
    every workload in ``jaxgrader.checks.workloads``: such a step would otherwise run for minutes): the
    state it then returns is not the one after every batch, and the values reported from it say so.
    """
    def swapped(state, batch):  # a Keras step returns (outputs, state); the workload chains (state, outputs)
        out, state = step(state, batch)
        return state, out

    return workloads.chain(swapped, state, data, seconds)


__all__ = ["batches", "draw_optimizer_variables", "draw_variables", "run_steps", "standin_centered_model"]
