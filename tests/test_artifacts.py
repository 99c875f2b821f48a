"""Programs and parameters a kernel hands over, run by the grader on inputs the kernel never saw.

The kernel side (`jaxgrader.checks.programs.exported`) and the grader side
(`jaxgrader.grading.verdict.artifacts`, the bounded process of `jaxgrader.grading.sandbox.evaluator`)
are exercised together here, in this process standing in for both kernels: the same function passes;
a table of the run's answers, another function, a Hessian formed for a Hessian-vector product, an
unrolled loop, and a program that calls back into its kernel do not; trained parameters are scored
with the reference's model on data the grader holds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrader.checks.programs import exported
from jaxgrader.grading.sandbox.bwrap import check_sandbox
from jaxgrader.grading.verdict import artifacts
from jaxgrader.grading.verdict.judging import judge_cell

from .test_verdict import output, ref

pytestmark = pytest.mark.lane  # jax.export differs between JAX versions: both lanes run these

SANDBOXED = not check_sandbox()


def _judged(student_value, reference_value, rule="program", **kw):
    """Judge one part as the Verdict does: evaluate its artifacts, then the cell. A ``scores`` part is judged beside
    a value of its training that matches the reference's (it counts only there: tests/test_verdict.py)."""
    reference = [ref("p", reference_value, rule, **kw)]
    student = [output("p", student_value, rule, **{k: v for k, v in kw.items() if k in ("model", "data")})]
    (result,) = artifacts.evaluate([(reference[0], artifacts_report(student))], sandboxed=SANDBOXED)
    if rule == "scores":
        reference, student = reference + [ref("losses", [2.3, 2.1])], student + [output("losses", [2.3, 2.1])]
    parts = {part["name"]: part for part in judge_cell(student, reference, artifacts_judged={"p": result})}
    return parts["p"]


def artifacts_report(student_outputs):
    from jaxgrader.grading.verdict.reports import parse_reports

    reports, _ = parse_reports(student_outputs)
    return reports["p"][0]


def loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def hvp(w, x, v):
    return jax.jvp(jax.grad(lambda w: loss(w, x)), (w,), (v,))[1]


def test_the_same_function_passes_and_another_does_not():
    w, x = jnp.linspace(-1, 1, 12).reshape(4, 3), jnp.ones((5, 4))
    mine = exported(loss, w, x)
    assert _judged(exported(jax.jit(loss), w, x), mine, rtol=1e-5, atol=1e-6)["passed"]
    wrong = _judged(exported(lambda w, x: jnp.sum(jnp.tanh(x @ w)), w, x), mine, rtol=1e-5, atol=1e-6)
    assert not wrong["passed"] and "inputs the grader chose" in wrong["message"]
    other_shapes = _judged(exported(loss, w[:3], x[:, :3]), mine)
    assert not other_shapes["passed"] and "other inputs" in other_shapes["message"]
    assert not _judged({"program": np.frombuffer(b"not a program", np.uint8), "inputs": []}, mine)["passed"]


def test_a_table_of_the_runs_answers_does_not_pass():
    """A kernel that knows the run's inputs can compute the answer with code that lacks the property, and
    export a program returning that constant: the grader's own inputs give it away."""
    w, x = jnp.linspace(-1, 1, 12).reshape(4, 3), jnp.linspace(0, 1, 20).reshape(5, 4)
    answer = loss(w, x)
    forged = exported(lambda w, x: answer + 0 * jnp.sum(w) + 0 * jnp.sum(x), w, x)
    assert not _judged(forged, exported(loss, w, x), rtol=1e-5, atol=1e-6)["passed"]


def test_the_form_is_bounded_by_the_reference_programs():
    n = 64
    w, x, v = jnp.linspace(-1, 1, n * 4).reshape(n, 4), jnp.ones((3, n)), jnp.linspace(0, 1, n * 4).reshape(n, 4)
    mine = exported(hvp, w, x, v)
    assert _judged(exported(hvp, w, x, v), mine, rtol=1e-4, atol=1e-5, limits={"entries": 2})["passed"]
    formed = _judged(exported(lambda w, x, v: jnp.tensordot(jax.hessian(loss)(w, x), v, 2), w, x, v), mine,
                     rtol=1e-4, atol=1e-5, limits={"entries": 2})
    assert not formed["passed"] and "entries" in formed["message"]

    def scan_sum(xs):
        return jax.lax.scan(lambda c, x: (c + jnp.sin(x), None), jnp.zeros(()), xs)[0]

    def loop_sum(xs):
        total = jnp.zeros(())
        for i in range(xs.shape[0]):
            total = total + jnp.sin(xs[i])
        return total

    xs = jnp.linspace(0, 1, 40)
    assert _judged(exported(scan_sum, xs), exported(scan_sum, xs), limits={"ops": 4})["passed"]
    unrolled = _judged(exported(loop_sum, xs), exported(scan_sum, xs), rtol=1e-5, limits={"ops": 4})
    assert not unrolled["passed"] and "operations" in unrolled["message"]


def test_a_program_that_calls_back_into_its_kernel_is_not_run():
    """A host callback is a custom call pointing into the kernel's memory. jax.export refuses to serialize
    one, but a forger could write the bytes by hand: the grader reads the module before running it."""
    from jaxgrader.grading.sandbox.evaluator import refusal

    x = jnp.ones(3)

    def callback(x):
        return jax.pure_callback(lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    assert "calls out of XLA" in refusal(jax.jit(callback).lower(x).as_text())
    assert "host transfer" in refusal('%0 = "stablehlo.outfeed"(%arg0, %tok)')
    assert refusal(jax.jit(lambda x: x * 2).lower(x).as_text()) == ""


def test_trained_parameters_are_scored_with_the_references_model_on_its_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5)).astype(np.float32)
    true_w = rng.normal(size=(5, 3)).astype(np.float32)
    y = np.argmax(x @ true_w, axis=1)

    def predict(params, x):
        return x @ params["w"] + params["b"]

    trained = {"w": jnp.asarray(true_w), "b": jnp.zeros(3)}
    model = exported(predict, trained, x)
    data = {"x": x, "y": y}
    good = jax.tree.leaves(trained)
    assert _judged(good, good, rule="scores", bound=0.05, model=model, data=data)["passed"]
    untrained = jax.tree.leaves({"w": jnp.zeros((5, 3)), "b": jnp.zeros(3)})
    part = _judged(untrained, good, rule="scores", bound=0.05, model=model, data=data)
    assert not part["passed"] and "held-out" in part["message"]
    misshapen = _judged([np.zeros((4, 3), np.float32), np.zeros(3, np.float32)], good, rule="scores", bound=0.05,
                        model=model, data=data)
    assert not misshapen["passed"]


def test_held_inputs_keep_kinds_and_change_values():
    inputs = [np.linspace(1, 2, 10, dtype=np.float32), np.arange(10, dtype=np.int32), np.zeros((), np.int32)]
    held = artifacts.held_inputs(inputs, "part")
    assert [h.dtype for h in held] == [i.dtype for i in inputs] and [h.shape for h in held] == [i.shape for i in inputs]
    assert not np.allclose(held[0], inputs[0]) and np.all(np.sign(held[0]) == np.sign(inputs[0]))
    assert sorted(held[1]) == sorted(inputs[1]) and not np.array_equal(held[1], inputs[1])
    assert artifacts.held_inputs(inputs, "part")[0].tolist() == held[0].tolist()  # the same within a process



EXPORT_SHARDED = '''
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp, numpy as np
from functools import partial
from jax.sharding import NamedSharding, PartitionSpec as P
from jaxgrader.checks.programs import exported
mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
shard_map = getattr(jax, "shard_map", None) or __import__("jax.experimental.shard_map", fromlist=["_"]).shard_map

def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)

grad = jax.jit(jax.grad(loss))

@jax.jit
def by_hand(w, x, y):  # each device the gradient's sum over its slice, then the sum over devices
    def local(w, x, y):
        return jax.lax.psum(2 * x.T @ (x @ w - y), "data") / 16
    return shard_map(local, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P())(w, x, y)

@jax.jit
def whole_on_each(w, x, y):  # the right values, but every device works on the whole batch
    def local(w, x, y):
        return 2 * x.T @ (x @ w - y) / 16
    return shard_map(local, mesh=mesh, in_specs=(P(), P(), P()), out_specs=P())(w, x, y)

@jax.jit
def gathered(w, x, y):  # the batch split, then gathered whole onto every device: the full gradient everywhere
    def local(w, x, y):
        x, y = jax.lax.all_gather(x, "data", tiled=True), jax.lax.all_gather(y, "data", tiled=True)
        return 2 * x.T @ (x @ w - y) / 16
    unchecked = {"check_vma": False} if hasattr(jax, "shard_map") else {"check_rep": False}
    return shard_map(local, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P(), **unchecked)(w, x, y)

def restored(state):  # what a restore returns, judged by its layout
    return jax.tree.map(lambda a: a + 0, state)

w, x, y = jnp.linspace(0, 1, 4), jnp.arange(64.0).reshape(16, 4) / 64, jnp.ones(16)
split = NamedSharding(mesh, P("data"))
found = {"sharded": exported(grad, w, jax.device_put(x, split), jax.device_put(y, split)),
         "replicated": exported(grad, w, jax.device_put(x, NamedSharding(mesh, P())), jax.device_put(y, NamedSharding(mesh, P()))),
         "by_hand": exported(by_hand, w, jax.device_put(x, split), jax.device_put(y, split)),
         "whole_on_each": exported(whole_on_each, w, jax.device_put(x, split), jax.device_put(y, split)),
         "gathered": exported(gathered, w, jax.device_put(x, split), jax.device_put(y, split)),
         "restored_on_mesh": exported(restored, [jax.device_put(w, NamedSharding(mesh, P())), jax.device_put(x, split)]),
         "restored_on_one": exported(restored, [jax.device_put(w), jax.device_put(x)])}
arrays = {}
for k, v in found.items():
    arrays[f"{k}_program"] = v["program"]
    for part in ("inputs", "outputs"):
        arrays[f"{k}_{part}_n"] = np.asarray(len(v[part]))
        arrays.update({f"{k}_{part}{i}": a for i, a in enumerate(v[part])})
np.savez(sys.argv[1], **arrays)
'''


@pytest.fixture(scope="module")
def over_devices(tmp_path_factory):
    """Programs exported on eight simulated devices, in a process of its own (a JAX backend starts once)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("devices") / "programs.npz"
    subprocess.run([sys.executable, "-c", EXPORT_SHARDED, str(out)], check=True, capture_output=True, timeout=300)
    with np.load(out) as data:
        names = {k.rsplit("_program", 1)[0] for k in data.files if k.endswith("_program")}
        return {k: {"program": data[f"{k}_program"],
                    **{part: [data[f"{k}_{part}{i}"] for i in range(int(data[f"{k}_{part}_n"]))]
                       for part in ("inputs", "outputs")}} for k in names}


def test_programs_over_devices_are_run_there_and_their_layout_bounded(over_devices):
    """A data-parallel gradient exported on eight simulated devices runs in the grader's process on eight devices;
    a batch left replicated is told apart from a split one, a shard_map's collective from none, and a shard_map that
    gives every device the whole batch from one that splits it."""
    found = over_devices
    assert _judged(found["sharded"], found["sharded"], rtol=1e-5, atol=1e-6, limits={"shardings": True})["passed"]
    replicated = _judged(found["replicated"], found["sharded"], rtol=1e-5, atol=1e-6, limits={"shardings": True})
    assert not replicated["passed"] and "laid out over devices" in replicated["message"]
    assert _judged(found["by_hand"], found["by_hand"], rtol=1e-5, atol=1e-6, limits={"collectives": True})["passed"]
    no_collective = _judged(found["whole_on_each"], found["by_hand"], rtol=1e-5, atol=1e-6, limits={"collectives": True})
    assert not no_collective["passed"] and "across devices" in no_collective["message"]
    assert _judged(found["by_hand"], found["by_hand"], limits={"split_over": True})["passed"]
    whole = _judged(found["whole_on_each"], found["by_hand"], rtol=1e-5, atol=1e-6, limits={"split_over": True})
    assert not whole["passed"] and "no input is split" in whole["message"], whole


def test_each_limit_fails_a_program_that_breaks_only_it(over_devices):
    """Item by item, a program with the right values that breaks one limit loses the part, the reference keeps
    it. Collectives: every kind the reference's program has must be there (a program that all-gathers the batch
    and computes the whole gradient on every device has a collective, but not the reference's all-reduce).
    Layouts: a state restored onto the default device is not one laid out over the mesh, even where every leaf is
    replicated."""
    found = over_devices
    gathered = _judged(found["gathered"], found["by_hand"], rtol=1e-5, atol=1e-6, limits={"collectives": True})
    assert not gathered["passed"] and "all_reduce" in gathered["message"], gathered
    assert _judged(found["restored_on_mesh"], found["restored_on_mesh"], limits={"shardings": True})["passed"]
    on_one = _judged(found["restored_on_one"], found["restored_on_mesh"], limits={"shardings": True})
    assert not on_one["passed"] and "device" in on_one["message"], on_one

    # operations, counted with every call written out: three spellings of an unrolled loop
    @jax.jit
    def step(c):
        return jnp.sin(c) * 0.9 + 0.1

    def rolled(x):
        return jax.lax.scan(lambda c, _: (step(c), None), x, None, length=12)[0]

    def python_loop_of_jitted_steps(x):
        for _ in range(12):
            x = step(x)
        return x

    def scan_unrolled(x):
        return jax.lax.scan(lambda c, _: (step(c), None), x, None, length=12, unroll=True)[0]

    def checkpointed_nested(x):
        for _ in range(12):
            x = jax.jit(jax.checkpoint(lambda c: jnp.sin(c) * 0.9 + 0.1))(x)
        return x

    x = jnp.linspace(0, 1, 5)
    mine = exported(rolled, x)
    assert _judged(exported(rolled, x), mine, rtol=1e-5, atol=1e-6, limits={"ops": 3})["passed"]
    for unrolled in (python_loop_of_jitted_steps, scan_unrolled, checkpointed_nested):
        part = _judged(exported(unrolled, x), mine, rtol=1e-5, atol=1e-6, limits={"ops": 3})
        assert not part["passed"] and "operations" in part["message"], (unrolled.__name__, part)

    # donation, read off the program: the inputs a jitted step donates (donate_argnums) stay donated in its export
    donating = jax.jit(lambda s, x: (s * 0.9 + x, jnp.sum(s)), donate_argnums=0)
    keeping = jax.jit(lambda s, x: (s * 0.9 + x, jnp.sum(s)))
    s, xx = jnp.ones(64), jnp.linspace(0, 1, 64)
    mine = exported(donating, s, xx)
    assert _judged(exported(donating, s, xx), mine, rtol=1e-6, atol=1e-6, limits={"donation": True})["passed"]
    kept = _judged(exported(keeping, s, xx), mine, rtol=1e-6, atol=1e-6, limits={"donation": True})
    assert not kept["passed"] and "donates 0" in kept["message"], kept
    assert not s.is_deleted()  # exported gave the step copies: the test's own arrays stay

    # temporary memory, as XLA computes it: a deep scan's gradient that keeps every block's activations
    def block(h, w):
        return jnp.tanh(h @ w), None

    def remat_loss(ws, h):
        return jnp.sum(jax.lax.scan(jax.checkpoint(block), h, ws)[0])

    def kept_loss(ws, h):
        return jnp.sum(jax.lax.scan(block, h, ws)[0])

    ws, h = jnp.ones((16, 64, 64)) * 0.01, jnp.ones((256, 64))
    mine = exported(jax.grad(remat_loss), ws, h)
    assert _judged(exported(jax.grad(remat_loss), ws, h), mine, rtol=1e-4, atol=1e-6, limits={"memory": 1.3})["passed"]
    kept = _judged(exported(jax.grad(kept_loss), ws, h), mine, rtol=1e-4, atol=1e-6, limits={"memory": 1.3})
    assert not kept["passed"] and "temporary memory" in kept["message"], kept


def test_the_program_judged_is_the_one_the_function_runs():
    """The grader runs the exported program on the inputs the test called the function with, too: a function that
    hands over a better program than it runs (here, one that behaves otherwise when traced) loses the part."""
    w, x = jnp.linspace(-1, 1, 12).reshape(4, 3), jnp.ones((5, 4))

    class TwoFaced:
        def __call__(self, w, x):
            if isinstance(w, jax.core.Tracer):
                return loss(w, x)
            return loss(w, x) * 1.5

    mine = exported(loss, w, x)
    part = _judged(exported(TwoFaced(), w, x), mine, rtol=1e-5, atol=1e-6)
    assert not part["passed"] and "not the program the function runs" in part["message"], part
    bare = dict(exported(loss, w, x))
    del bare["outputs"]  # a report without the function's own outputs: nothing ties it
    assert not _judged(bare, mine, rtol=1e-5, atol=1e-6)["passed"]


def _program_bytes(fn, *args) -> bytes:
    """``fn``'s program, exported without calling ``fn`` (``exported`` calls it, as a hidden test does)."""
    from jax import export

    return bytes(export.export(jax.jit(fn))(*args).serialize())


def test_a_program_that_never_ends_or_grows_without_bound_is_stopped():
    """A program is untrusted code: a wall-clock limit and a memory limit, watched from outside, stop it;
    the failure is that part's (and the other programs of the same run still report theirs)."""
    from jaxgrader.grading.sandbox.evaluator import Job, run_programs

    x = jnp.ones(3)
    forever = _program_bytes(lambda x: jax.lax.while_loop(lambda c: c[0] > -1.0, lambda c: c + 1.0, x), x)
    (outcome,) = run_programs([Job(forever, [np.ones(3, np.float32)])], sandboxed=SANDBOXED, timeout_s=15)
    assert "ran past 15 s" in outcome.error
    big = _program_bytes(lambda x: jnp.broadcast_to(x[0], (16000, 16000)) * jnp.arange(16000.0), x)  # 1 GiB out
    (outcome,) = run_programs([Job(big, [np.ones(3, np.float32)])], sandboxed=SANDBOXED, timeout_s=120,
                              memory_mb=600)
    assert "more than 600 MiB" in outcome.error
