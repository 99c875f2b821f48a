"""The grader-side checks must pass right answers and fail wrong ones, with useful messages."""

import functools

import jax
import jax.numpy as jnp
import warnings

import pytest

from jaxgrader.checks.budgets import BUDGETS, budget
from jaxgrader.checks.compiles import count_compilations
from jaxgrader.checks.gradients import agrees_with_finite_differences, enable_x64
from jaxgrader.checks.jaxprs import count_eqns, shard_map_inputs
from jaxgrader.checks.mlp import away_from_kinks, reference_batch_loss
from jaxgrader.checks.timing import measure
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
    assert agrees_with_finite_differences(reference_batch_loss, (params, X, Y))

    @jax.custom_vjp
    def bad_relu(z):
        return jax.nn.relu(z)

    bad_relu.defvjp(lambda z: (jax.nn.relu(z), z), lambda z, g: (jnp.ones_like(z) * g,))  # slope 1 where it is 0

    assert not agrees_with_finite_differences(lambda v: jnp.sum(bad_relu(v)), (jnp.array([-0.5, -0.7, 0.4]),))


def test_kinks_are_avoided():
    params, x = away_from_kinks([5, 7, 3], seed=3)
    pre = x @ params[0]["W"] + params[0]["b"]
    assert float(jnp.min(jnp.abs(pre))) > 0.05


def test_jaxpr_size_grows_with_an_unrolled_loop_not_with_scan():
    def unrolled(xs):
        total = 0.0
        for i in range(xs.shape[0]):
            total = total + jnp.sin(xs[i])
        return total

    def scanned(xs):
        return jax.lax.scan(lambda c, x: (c + jnp.sin(x), None), 0.0, xs)[0]

    sizes = {f.__name__: [count_eqns(jax.make_jaxpr(f)(jnp.ones(n)).jaxpr) for n in (2, 6)] for f in (unrolled, scanned)}
    assert sizes["unrolled"][1] > sizes["unrolled"][0]
    assert sizes["scanned"][1] == sizes["scanned"][0]


def test_shard_map_inputs_show_what_each_device_sees():
    from jax.sharding import PartitionSpec as P

    try:
        shard_map = jax.shard_map
    except AttributeError:  # JAX < 0.7.1
        from jax.experimental.shard_map import shard_map
    mesh = jax.make_mesh((1,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    f = shard_map(lambda a, b: jax.lax.psum(jnp.sum(a) + jnp.sum(b), "data"), mesh=mesh,
                  in_specs=(P("data"), P()), out_specs=P())
    pairs = shard_map_inputs(jax.make_jaxpr(jax.jit(f))(jnp.ones((4, 2)), jnp.ones(3)).jaxpr)
    assert sorted(pairs) == [((3,), (3,)), ((4, 2), (4, 2))]


def test_enable_x64_is_scoped():
    with enable_x64():
        assert jnp.ones(1).dtype == jnp.float64
    assert jnp.ones(1).dtype == jnp.float32


def test_compile_counts_are_exact():
    def square_sum(x):
        return jnp.sum(x ** 2)

    f = jax.jit(square_sum)
    with count_compilations(f) as c:
        for n in (1, 100, 1000):
            f(jnp.ones(n))
        f(jnp.ones(1))
    assert c.count == 3 and c.traces == 3
    with count_compilations(f) as again:
        f(jnp.ones(1))
    assert again.count == 0


def test_compile_counter_sees_weak_type_recompile():
    def step(state):
        return state + 1

    f = jax.jit(step)
    with count_compilations("step") as c:
        f(0)  # Python int: weakly typed int32
        f(jnp.int32(0))  # strongly typed: a second compilation
    assert c.count == 2


def test_compile_counter_follows_partial_and_static_args():
    @functools.partial(jax.jit, static_argnames="k")
    def scaled(x, k):
        return x * k

    with count_compilations(scaled) as c:
        scaled(jnp.ones(2), k=2)
        scaled(jnp.ones(2), k=3)
        scaled(jnp.ones(2), k=2)
    assert c.count == 2


def test_measure_separates_compile_from_run():
    def heavy(x):
        for _ in range(20):
            x = jnp.sin(x) @ x
        return x

    t = measure(jax.jit(heavy), jnp.ones((8, 8)), repeats=3)
    assert t.first_call_s > 0 and t.run_s > 0
    assert t.compile_s > t.run_s  # compiling 20 matmuls dwarfs running them at 8x8


def test_measure_rejects_zero_repeats():
    with pytest.raises(ValueError):
        measure(jnp.sin, jnp.ones(2), repeats=0)


def test_budgets_have_the_same_keys_on_every_backend():
    assert set(BUDGETS) == {"cpu", "gpu", "tpu"}
    measured = {backend: set(row) for backend, row in BUDGETS.items() if row is not None}
    assert all(keys == measured["cpu"] for keys in measured.values())
    assert budget("max_benchmark_s", "cpu") > 0
    with pytest.raises(KeyError, match="no budget"):
        budget("no_such_budget", "cpu")


def test_an_unmeasured_backend_uses_the_cpu_budgets_and_warns_once():
    from jaxgrader.checks import budgets

    unmeasured = [b for b, row in BUDGETS.items() if row is None]
    if not unmeasured:
        pytest.skip("every backend's budgets are measured")
    budgets._warned.discard(unmeasured[0])
    with pytest.warns(UserWarning, match="not measured yet; the CPU budgets are in use"):
        assert budget("max_benchmark_s", unmeasured[0]) == budget("max_benchmark_s", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        budget("max_benchmark_s", unmeasured[0])  # once per kernel
