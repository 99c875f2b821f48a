"""Values for a Keras model's and optimizer's variables, drawn from the grader's seed (lesson 5).

The stateless API takes variable *values*; drawing them afresh each run means a
hidden test checks the student's function on states nobody could precompute.
Values stay in realistic ranges (positive variances and scales, He-scaled
kernels, small optimizer moments) so losses and updates are well conditioned.
"""

from __future__ import annotations

import numpy as np


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


__all__ = ["draw_optimizer_variables", "draw_variables"]
