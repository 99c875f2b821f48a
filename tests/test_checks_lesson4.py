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


def _form(fn, *args):
    """(the program_form of ``fn``'s exported program, its outputs run as the grader runs them)."""
    from jax import export

    from jaxgrader.checks.programs import exported
    from jaxgrader.grading.sandbox.evaluator import program_form

    found = exported(fn, *args)
    program = export.deserialize(bytearray(found["program"].tobytes()))
    return program_form(program.mlir_module()), [np.asarray(o) for o in program.call(*found["inputs"])]


@jax.jit
def _step(w, x):
    """A jitted step with enough operations that a copy of it outweighs a loop's bookkeeping."""
    g = jax.grad(lambda w: jnp.sum(jnp.tanh(jnp.tanh(jnp.tanh(jnp.tanh(x @ w) @ w.T) @ w) @ w.T) ** 2))(w)
    return w - 0.1 * g / (1.0 + jnp.sqrt(jnp.sum(g * g))), jnp.sum(g)


@jax.jit
def _scanned(w, xs):
    return jax.lax.scan(_step, w, xs)


@jax.jit
def _unrolled(w, xs):
    outs = []
    for i in range(xs.shape[0]):
        w, out = _step(w, xs[i])
        outs.append(out)
    return w, jnp.stack(outs)


def test_a_python_loop_of_jitted_steps_counts_a_step_per_call_and_a_scan_one():
    """A Python loop over a jitted step is exported as one private function and a call of it per iteration; the
    grader's count of operations writes each call out (``evaluator.operations``), so the loop holds a copy of the
    step per iteration while the scan's body stays one copy. Values are the function's own."""
    w, xs = jnp.linspace(-1, 1, 12).reshape(4, 3), jnp.linspace(0, 1, 8 * 5 * 4).reshape(8, 5, 4)
    (scan_form, scan_out), (loop_form, loop_out) = _form(_scanned, w, xs), _form(_unrolled, w, xs)
    assert loop_form["ops"] > 4 * scan_form["ops"] and scan_form["whiles"] == 1 and loop_form["whiles"] == 0
    for got, want in zip(scan_out, loop_out):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for got, want in zip(scan_out, jax.tree.leaves(_scanned(w, xs))):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6, atol=1e-6)


def test_compilations_counts_each_new_program_once():
    from jaxgrader.checks.training import compilations

    before = compilations()
    f = jax.jit(lambda x: jnp.sin(x) * 3.0 + x)
    f(jnp.ones(7)).block_until_ready()
    once = compilations()
    f(jnp.ones(7)).block_until_ready()
    assert once > before and compilations() == once
    f(jnp.ones(8)).block_until_ready()  # another shape: compiled again
    assert compilations() > once
