"""The grader-side checks must pass right answers and fail wrong ones, with useful messages."""

import jax
import jax.numpy as jnp
import warnings

import pytest

from jaxgrader.checks.budgets import BUDGETS, budget
from jaxgrader.checks.gradients import agrees_with_finite_differences, directional_derivatives, enable_x64
from jaxgrader.checks.mlp import away_from_kinks, standin_batch_loss
from jaxgrader.checks.programs import jaxpr, lowered
from jaxgrader.checks.trees import assert_trees_close, assert_trees_equal, global_norm

pytestmark = pytest.mark.lane

PARAMS = [{"W": jnp.ones((2, 3)), "b": jnp.zeros(3)}, {"W": jnp.ones((3, 1)), "b": jnp.zeros(1)}]


def test_trees_close_accepts_rounding_noise():
    noisy = jax.tree.map(lambda x: x * (1 + 1e-7), PARAMS)
    assert_trees_close(noisy, PARAMS)


def test_trees_close_names_structure_mismatch():
    swapped = [(layer["b"], layer["W"]) for layer in PARAMS]
    with pytest.raises(AssertionError, match="wrong structure"):
        assert_trees_close(swapped, PARAMS, name="grads")


def test_trees_close_names_the_leaf_that_differs():
    wrong = jax.tree.map(lambda x: x, PARAMS)
    wrong[1] = {"W": PARAMS[1]["W"], "b": PARAMS[1]["b"] + 0.1}
    with pytest.raises(AssertionError, match=r"grads\[1\]\['b'\] differs.*max abs error 0\.1"):
        assert_trees_close(wrong, PARAMS, name="grads")


def test_trees_close_names_shape_mismatch():
    wrong = [{"W": layer["W"].T, "b": layer["b"]} for layer in PARAMS]
    with pytest.raises(AssertionError, match=r"\[0\]\['W'\] has shape \(3, 2\)"):
        assert_trees_close(wrong, PARAMS)


def test_trees_equal_is_bit_exact():
    assert_trees_equal(PARAMS, jax.tree.map(jnp.array, PARAMS))
    nudged = jax.tree.map(lambda x: x + 1e-7, PARAMS)
    with pytest.raises(AssertionError, match="expected to be unchanged"):
        assert_trees_equal(nudged, PARAMS)


def test_global_norm():
    assert global_norm({"a": jnp.array([3.0]), "b": jnp.array([4.0])}) == pytest.approx(5.0)


def _loss(params, x):
    h = jnp.tanh(x @ params[0]["W"] + params[0]["b"])
    return jnp.sum(h @ params[1]["W"] + params[1]["b"])


def test_finite_differences_pass_a_smooth_function_and_fail_a_wrong_custom_gradient():
    x = jnp.array([[0.3, -0.2]])
    assert agrees_with_finite_differences(_loss, (PARAMS, x))

    @jax.custom_vjp
    def bad_tanh(z):
        return jnp.tanh(z)

    bad_tanh.defvjp(lambda z: (jnp.tanh(z), z), lambda z, g: (g * 2.0,))  # wrong derivative

    assert not agrees_with_finite_differences(lambda v: jnp.sum(bad_tanh(v)), (jnp.array([0.1, 0.4]),))


def test_finite_difference_verdict_is_true_for_the_mlp_and_false_for_a_wrong_gradient():
    params, X = away_from_kinks([3, 4, 2], seed=0, batch=2)
    Y = jnp.eye(2)[jnp.array([0, 1])]
    assert agrees_with_finite_differences(standin_batch_loss, (params, X, Y))
    numerical, analytic = directional_derivatives(standin_batch_loss, (params, X, Y))
    assert numerical == pytest.approx(analytic, rel=1e-6)

    @jax.custom_vjp
    def bad_relu(z):
        return jax.nn.relu(z)

    bad_relu.defvjp(lambda z: (jax.nn.relu(z), z), lambda z, g: (jnp.ones_like(z) * g,))  # slope 1 where it is 0

    assert not agrees_with_finite_differences(lambda v: jnp.sum(bad_relu(v)), (jnp.array([-0.5, -0.7, 0.4]),))


def test_kinks_are_avoided():
    params, x = away_from_kinks([5, 7, 3], seed=3)
    pre = x @ params[0]["W"] + params[0]["b"]
    assert float(jnp.min(jnp.abs(pre))) > 0.05


def test_enable_x64_is_scoped():
    with enable_x64():
        assert jnp.ones(1).dtype == jnp.float64
    assert jnp.ones(1).dtype == jnp.float32


def test_program_text_is_what_jit_builds_and_none_without_jit():
    def step(p, x, lr):
        return p - lr * x

    text = lowered(jax.jit(step), jnp.zeros(3), jnp.ones(3), 0.1)
    assert text.startswith("module @jit_step") and "func.func public @main(" in text
    assert lowered(step, jnp.zeros(3), jnp.ones(3), 0.1) is None
    assert lowered(jax.vmap(jax.jit(step), in_axes=(None, 0, None)), jnp.zeros(3), jnp.ones((2, 3)), 0.1) is None
    assert "sin" in jaxpr(jnp.sin, jnp.ones(2))


def test_budgets_have_the_same_keys_on_every_backend():
    assert set(BUDGETS) == {"cpu", "gpu", "tpu"}
    measured = {backend: set(row) for backend, row in BUDGETS.items() if row is not None}
    assert all(keys == measured["cpu"] for keys in measured.values())
    assert budget("run_remeasure_tolerance", "cpu") > 0
    with pytest.raises(KeyError, match="no budget"):
        budget("no_such_budget", "cpu")


def test_an_unmeasured_backend_uses_the_cpu_budgets_and_warns_once():
    from jaxgrader.checks import budgets

    unmeasured = [b for b, row in BUDGETS.items() if row is None]
    if not unmeasured:
        pytest.skip("every backend's budgets are measured")
    budgets._warned.discard(unmeasured[0])
    with pytest.warns(UserWarning, match="not measured yet; the CPU budgets are in use"):
        assert budget("run_remeasure_tolerance", unmeasured[0]) == budget("run_remeasure_tolerance", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        budget("run_remeasure_tolerance", unmeasured[0])  # once per kernel


def test_a_workload_at_a_slow_pace_stops_early_and_one_slow_call_does_not_stop_it():
    """``workloads``: calls that keep a pace which ends past ``seconds`` stop once a quarter of them has
    passed (not at the cap); a first call that compiles and one busy moment later do not set the pace."""
    import time

    from jaxgrader.checks import workloads

    slow = workloads.calls(lambda i: time.sleep(0.02) or i, [(i,) for i in range(400)], seconds=2.0)
    assert 10 < len(slow) < 60, len(slow)  # 400 x 20 ms = 8 s: stopped near 0.5 s (25 calls), not at 2 s (100)

    def honest(i):  # compiles at the first call, meets a busy moment at the 50th
        if i in (0, 50):
            time.sleep(0.3)
        return i

    assert workloads.calls(honest, [(i,) for i in range(200)], seconds=2.0) == list(range(200))
    state, outputs = workloads.chain(lambda s, b: (s + b, s), 0, [1] * 300, seconds=2.0, until=lambda: False)
    assert (state, len(outputs)) == (300, 300)
    made = []  # `until` stops it before a call, as a test stops a step that compiles at every call
    state, outputs = workloads.chain(lambda s, b: (made.append(b) or s + b, s), 0, [1] * 300,
                                     until=lambda: len(made) >= 5)
    assert (state, len(outputs)) == (5, 5)
