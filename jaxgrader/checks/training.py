"""Lesson 4's kernel-side helpers: stand-ins and a compile count.

A test of one exercise reports the student's own chain (judged when the exercises it builds on
passed) and the same computation with stand-ins swapped in for ``loss_fn``, ``optimizer``,
``train_step`` or ``accumulate_grads`` (judged when one of them failed), so that one mistake
costs one part. The stand-ins keep the exercises' signatures and output structure but compute
something else (a squared error, not a cross-entropy; hidden tests use a plain ``optax.adam``
or ``optax.sgd`` for the optimizer): this module is importable in the student's kernel, so
nothing here may answer a graded exercise (``tests/test_answer_key.py`` tries). Nothing here
judges: hidden tests report, the grader compares.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_compiles = [0]
_listening = [False]


def standin_loss_fn(apply_fn):
    """``loss_fn(params, (x, y)) -> (loss, {"loss", "accuracy"})`` with a squared error between softmax and one-hot."""
    def loss_fn(params, batch):
        x, y = batch
        logits = apply_fn(params, x)
        loss = jnp.mean(jnp.sum((jax.nn.softmax(logits) - jax.nn.one_hot(y, logits.shape[-1])) ** 2, axis=-1))
        return loss, {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, axis=-1) == y)}

    return loss_fn


def same_values(a, b) -> bool:
    """Same tree structure and bit-identical leaves."""
    import numpy as np

    return (jax.tree.structure(a) == jax.tree.structure(b)
            and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))))


def _count(event, duration, **kwargs):
    if event == COMPILE_EVENT:
        _compiles[0] += 1


def compilations() -> int:
    """How many XLA compilations this process has run since the first call (``jax.monitoring``'s
    compile events). Hidden tests use it only to stop a workload early (a stopped workload reports
    fewer steps than the reference's, and loses its part), never as evidence."""
    if not _listening[0]:
        jax.monitoring.register_event_duration_secs_listener(_count)
        _listening[0] = True
    return _compiles[0]


__all__ = ["compilations", "same_values", "standin_loss_fn"]
