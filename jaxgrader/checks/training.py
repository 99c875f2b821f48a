"""Known-good pieces of lesson 4's training loop, for hidden tests that isolate one exercise.

``train_step`` (and ``accumulate_step``) uses the ``loss_fn`` and ``optimizer`` in the notebook's scope; a
test of ``train_step`` swaps in these so that a wrong ``loss_fn`` or
``make_optimizer`` loses only its own points. Built from the notebook's own
constants and ``mlp_apply`` (passed in), so they follow the lesson if it changes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def reference_loss_fn(apply_fn):
    """``loss_fn(params, (x, y)) -> (loss, {"loss", "accuracy"})``: mean cross-entropy on integer labels."""
    def loss_fn(params, batch):
        x, y = batch
        logits = apply_fn(params, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, axis=-1) == y)}

    return loss_fn


def weights_only(params):
    """Decay mask for list-of-dicts parameters: weights (``"W"``) yes, biases no."""
    return [{name: name == "W" for name in layer} for layer in params]


def reference_optimizer(max_norm, learning_rate, weight_decay):
    """Clip by global norm, then AdamW with decoupled decay on the weights only."""
    return optax.chain(optax.clip_by_global_norm(max_norm),
                       optax.adamw(learning_rate, weight_decay=weight_decay, mask=weights_only))


def reference_train_step(loss_fn, optimizer):
    """A jitted ``train_step(state, batch) -> (state, loss, metrics)`` for a ``TrainState`` NamedTuple."""
    @jax.jit
    def train_step(state, batch):
        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return state._replace(step=state.step + 1, params=params, opt_state=opt_state), loss, metrics

    return train_step


def reference_accumulate_grads(loss_fn):
    """``accumulate_grads(params, xs, ys) -> ((loss, metrics), grads)``, averaged over ``k`` micro-batches.

    ``xs``: ``(k, B, ...)``, ``ys``: ``(k, B)``. A hidden test of ``accumulate_step`` swaps this in for
    the student's ``accumulate_grads``, so that a wrong accumulation loses only its own points. With
    equal micro-batches and a mean loss it equals ``value_and_grad`` on the concatenated batch.
    """
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def accumulate_grads(params, xs, ys):
        def add(total, batch):
            return jax.tree.map(jnp.add, total, grad_fn(params, batch)), None

        shapes = jax.eval_shape(grad_fn, params, (xs[0], ys[0]))
        total, _ = jax.lax.scan(add, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes), (xs, ys))
        return jax.tree.map(lambda t: t / xs.shape[0], total)

    return accumulate_grads


def same_values(a, b) -> bool:
    """Same tree structure and bit-identical leaves."""
    import numpy as np

    return (jax.tree.structure(a) == jax.tree.structure(b)
            and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))))


__all__ = ["reference_accumulate_grads", "reference_loss_fn", "reference_optimizer", "reference_train_step", "same_values", "weights_only"]
