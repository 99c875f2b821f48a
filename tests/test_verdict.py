"""The verdict's parser and comparisons, without kernels: what a kernel sends is data, checked here."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrader.checks.report import MIME, encode
from jaxgrader.grading.verdict import programs
from jaxgrader.grading.verdict.verdict import ReportError, judge_cell, parse_report, parse_reports


def output(name, value, rule="close", **kw):
    payload = {"name": name, "rule": rule, "rtol": kw.get("rtol", 1e-5), "atol": kw.get("atol", 1e-6),
               "bound": kw.get("bound"), "value": encode(value)}
    payload.update({k: kw[k] for k in ("against", "evidence", "if_passed", "if_failed", "limits") if k in kw})
    payload.update({k: encode(kw[k]) for k in ("model", "data") if k in kw})
    return {"output_type": "display_data", "data": {MIME: payload}, "metadata": {}}


def ref(name, value, rule="close", **kw):
    return parse_report(output(name, value, rule, **kw)["data"][MIME])


def judge(student_outputs, reference, seconds=None, passed=None, artifacts=None):
    return {p["name"]: p for p in judge_cell(student_outputs, reference, seconds, passed, artifacts)}


def test_pytrees_round_trip_through_the_encoding():
    tree = [{"W": jnp.ones((2, 3)), "b": np.arange(3, dtype=np.int32)}, (1, 2.5, True, None, "x"),
            {"key": jnp.float32(2.0), "nan": float("nan")}]
    parsed = parse_report(output("t", tree)["data"][MIME])["value"]
    assert np.array_equal(parsed[0]["W"], np.ones((2, 3))) and parsed[0]["b"].dtype == np.int32
    assert parsed[1] == [1, 2.5, True, None, "x"]
    assert np.isnan(parsed[2]["nan"])


def test_close_values_pass_and_wrong_ones_name_the_leaf():
    reference = [ref("grads", [{"W": np.ones((2, 2)), "b": np.zeros(2)}])]
    assert judge([output("grads", [{"W": np.ones((2, 2)) + 1e-7, "b": np.zeros(2)}])], reference)["grads"]["passed"]
    bad = judge([output("grads", [{"W": np.ones((2, 2)), "b": np.full(2, 0.5)}])], reference)["grads"]
    assert not bad["passed"] and "[0]['b']" in bad["message"]


@pytest.mark.parametrize("student", [
    np.ones(3),                      # wrong shape
    {"V": np.ones((2, 2))},          # wrong structure
    [np.ones((2, 2))],               # list vs dict
    "np.ones((2, 2))",               # a string
    np.ones((2, 2), dtype=bool),     # booleans
    np.full((2, 2), np.nan),         # nan
])
def test_plausible_wrong_values_fail(student):
    reference = [ref("x", {"W": np.ones((2, 2))})]
    assert not judge([output("x", student)], reference)["x"]["passed"]


def test_missing_and_duplicated_reports_fail():
    reference = [ref("a", 1.0), ref("b", 2.0)]
    parts = judge([output("a", 1.0)], reference)
    assert parts["a"]["passed"] and not parts["b"]["passed"]
    parts = judge([output("a", 1.0), output("a", 1.0), output("b", 2.0)], reference)
    assert not parts["a"]["passed"] and "more than once" in parts["a"]["message"]


def test_rules_and_tolerances_come_from_the_reference_not_the_student():
    reference = [ref("x", np.ones(3), rtol=1e-6, atol=0.0)]
    forged = output("x", np.ones(3) * 2, rule="true", rtol=10.0, atol=10.0)
    assert not judge([forged], reference)["x"]["passed"]
    reference = [ref("compiles", 1, rule="at_most", bound=1)]
    assert judge([output("compiles", 1, rule="at_most", bound=1)], reference)["compiles"]["passed"]
    assert not judge([output("compiles", 3, rule="at_most", bound=99)], reference)["compiles"]["passed"]
    reference = [ref("fact", True, rule="true")]
    assert not judge([output("fact", 1, rule="true")], reference)["fact"]["passed"]
    assert not judge([output("fact", "True", rule="true")], reference)["fact"]["passed"]


def test_a_cell_without_reference_scores_nothing():
    assert not judge_cell([output("x", 1.0)], [])[0]["passed"]


@pytest.mark.parametrize("payload, why", [
    ({"name": "x", "rule": "close", "value": {"$list": [{"$list": []}]}}, None),
    ({"name": "x", "rule": "sudo", "value": 1}, "unknown rule"),
    ({"name": "", "rule": "close", "value": 1}, "name"),
    ({"name": "x", "rule": "close", "rtol": "1e9", "value": 1}, "rtol"),
    ({"name": "x", "rule": "close", "value": {"$array": {"dtype": "O", "shape": [1], "data": ""}}}, "malformed"),
    ({"name": "x", "rule": "close", "value": {"$array": {"dtype": "f4", "shape": [1000], "data": "AAAA"}}},
     "does not match"),
    ({"name": "x", "rule": "close", "value": {"$array": {"dtype": "f4", "shape": [10**9], "data": ""}}}, "more than"),
    ({"name": "x", "rule": "close", "value": {"$eval": "__import__('os')"}}, "malformed"),
])
def test_the_parser_refuses_what_it_cannot_use(payload, why):
    if why is None:
        parse_report(payload)
        return
    with pytest.raises(ReportError, match=why):
        parse_report(payload)


def test_deep_and_huge_reports_are_refused_without_crashing():
    deep = 1.0
    for _ in range(5000):
        deep = {"$list": [deep]}
    reports, problems = parse_reports([{"output_type": "display_data", "data": {MIME: json.loads(
        json.dumps({"name": "x", "rule": "close", "value": {"$list": []}}))}}] +
        [{"output_type": "display_data", "data": {MIME: {"name": "y", "rule": "close", "value": deep}}}])
    assert "x" in reports and problems
    huge = {"name": "z", "rule": "close", "value": "a" * (5 * 2**20)}
    reports, problems = parse_reports([{"output_type": "display_data", "data": {MIME: huge}}])
    assert not reports and problems
    many = [output(f"n{i}", 1.0) for i in range(500)]
    reports, problems = parse_reports(many)
    assert len(reports) == 200 and problems


def _imports(path):
    import ast

    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or "")


def test_the_package_is_split_along_the_trust_boundary():
    """grading/ never imports checks/ (kernel code) and checks/ never imports grading/."""
    from pathlib import Path

    import jaxgrader
    from jaxgrader.checks import report
    from jaxgrader.grading.verdict import verdict

    package = Path(jaxgrader.__file__).parent
    for path in (package / "grading").glob("*.py"):
        bad = [m for m in _imports(path) if "checks" in m]
        assert not bad, f"{path.name} imports kernel-side code: {bad}"
    for path in (package / "checks").glob("*.py"):
        bad = [m for m in _imports(path) if "grading" in m]
        assert not bad, f"{path.name} imports grader code: {bad}"
    assert report.MIME == verdict.MIME and report.RULES == verdict.RULES


def test_where_a_test_cell_stopped_is_read_from_its_own_line():
    from jaxgrader.grading.verdict.verdict import stopped_in

    source = "x = f(1)\nassert x == 2, 'f(1) should be 2'\n### BEGIN HIDDEN TESTS\n_report('f', f(3))\n### END HIDDEN TESTS"
    frame = "\x1b[0;32mCell In[7], line {}\x1b[0m\n----> {} ..."
    inner = "Cell In[3], line 9, in f(x)\n----> 9 raise ValueError"
    assert stopped_in(source, {"traceback": ["---", frame.format(2, 2)]}) == "visible"
    assert stopped_in(source, {"traceback": ["---", frame.format(4, 4), inner]}) == "hidden"
    assert stopped_in(source, {"traceback": ["KeyError: 'x'"]}) == "unknown"
    # a chained exception: the first one raised in another cell (e.g. the setup cell's helper)
    setup = "Cell In[1], line 40, in helper()\n----> 40 raise ValueError"
    chained = [setup, "ValueError: x", "\nDuring handling of the above exception, another exception occurred:\n",
               frame.format(2, 2), "AssertionError: f(1) should be 2"]
    assert stopped_in(source, {"traceback": chained}, execution_count=7) == "visible"
    # a frame of a function defined in an earlier cell is not the test cell's line
    assert stopped_in(source, {"traceback": [inner, frame.format(4, 4)]}, execution_count=7) == "hidden"


# --------------------------------------------------------------------------- evidence the grader checks


def _passes(rule, student, reference, seconds=None, **kw):
    return judge([output("p", student, rule, **kw)], [ref("p", reference, rule, **kw)], seconds)["p"]["passed"]


def test_every_part_says_what_its_points_rest_on_and_kernel_points_count_them():
    from jaxgrader.grading.verdict.judging import kernel_points

    from jaxgrader.grading.verdict.judging import weak_points

    reference = [ref("v", 1.0), ref("fact", True, rule="true"), ref("n", 2, rule="equal", evidence="kernel"),
                 ref("losses", [1.0, 0.1], rule="falls", bound=0.5), ref("t", 0.0, rule="cell_time", bound=3),
                 ref("p", {"program": np.zeros(3, np.uint8), "inputs": []}, rule="program")]
    parts = judge([], reference)
    assert {n: p["evidence"] for n, p in parts.items()} == {"v": "reference", "fact": "kernel", "n": "kernel",
                                                            "losses": "shape", "t": "cost", "p": "artifact"}
    assert kernel_points(list(parts.values()), 3) == 3
    assert kernel_points([parts["v"], parts["losses"]], 3) == 0
    assert weak_points([parts["v"], parts["losses"]], 3) == (3, "shape")
    assert weak_points([parts["v"], parts["t"], parts["p"]], 3) == (0, None)
    # what a kernel says about the evidence is ignored: the reference's report decides
    assert judge([output("v", 1.0, evidence="kernel")], [ref("v", 1.0)])["v"]["evidence"] == "reference"


def test_which_parts_count_follows_the_earlier_cells():
    """An own-chain part counts when the cells it builds on passed; its stand-in twin when one failed."""
    reference = [ref("own", 1.0, if_passed=["test_a", "test_b"]), ref("standin", 2.0, if_failed=["test_a", "test_b"]),
                 ref("always", 3.0)]
    student = [output("own", 1.0), output("standin", 0.0), output("always", 3.0)]
    both = judge(student, reference, passed={"test_a": True, "test_b": True})
    assert set(both) == {"own", "always"} and all(p["passed"] for p in both.values())
    one_failed = judge(student, reference, passed={"test_a": True, "test_b": False})
    assert set(one_failed) == {"standin", "always"} and not one_failed["standin"]["passed"]
    assert set(judge(student, reference, passed={})) == {"standin", "always"}  # not judged yet: failed
    by_part = [ref("own", 1.0, if_passed=["test_a::values"]), ref("standin", 2.0, if_failed=["test_a::values"])]
    assert set(judge(student, by_part, passed={"test_a": False, "test_a::values": True})) == {"own"}


def test_a_cell_costs_what_the_grader_timed_against_the_reference():
    reference = [ref("work", 1.0), ref("t", 2.0, rule="cell_time", bound=3.0)]  # the reference's cell took 2 s
    done = output("work", 1.0)
    assert judge([done, output("t", 1e9, rule="cell_time")], reference, seconds=6.5)["t"]["passed"]  # 3 x 2 + 1 s slack
    assert not judge([done, output("t", 0.0, rule="cell_time")], reference, seconds=7.5)["t"]["passed"]
    assert not judge([done, output("t", 0.0, rule="cell_time")], reference, seconds=None)["t"]["passed"]
    assert not judge([done], reference, seconds=1.0)["t"]["passed"]  # the cell must report it: it ran to the end


def test_a_cell_time_counts_only_with_checked_work():
    """A fast cell that skipped its work proves nothing: where no part of the cell compared with the reference (or
    evaluated by the grader) counts, because the exercises it builds on failed and no stand-in twin stands in, the
    time fails whatever it was; a part the kernel vouches for, or one judged by its own shape, is no check."""
    from jaxgrader.grading.verdict.judging import UNCHECKED_WORK, UNREPORTED_WORK

    reference = [ref("own chain", 1.0, if_passed=["test_a"]), ref("t", 2.0, rule="cell_time", bound=3.0)]
    student = [output("own chain", 1.0), output("t", 0.0, rule="cell_time")]
    assert judge(student, reference, seconds=0.1, passed={"test_a": True})["t"]["passed"]
    unchecked = judge(student, reference, seconds=0.1, passed={"test_a": False})
    assert set(unchecked) == {"t"} and unchecked["t"]["message"] == UNCHECKED_WORK
    twin = reference + [ref("stand-in chain", 2.0, if_failed=["test_a"])]
    assert judge(student + [output("stand-in chain", 2.0)], twin, seconds=0.1, passed={"test_a": False})["t"]["passed"]
    for weak in (ref("count", 400, rule="equal", evidence="kernel"), ref("curve", [1.0, 0.5], rule="falls", bound=0.9)):
        parts = judge(student + [output(weak["name"], weak["value"], weak["rule"])], reference + [weak], seconds=0.1,
                      passed={"test_a": False})
        assert parts["t"]["message"] == UNCHECKED_WORK, weak["name"]
    # a test that reports no result of its work at all: its author's mistake, said as such, for every submission
    alone = judge([output("t", 0.0, rule="cell_time")], [ref("t", 2.0, rule="cell_time", bound=3.0)], seconds=0.1)
    assert alone["t"]["message"] == UNREPORTED_WORK


def test_scores_count_only_beside_checked_values_of_the_training():
    """Parameters the grader scores on held-out data show that some parameters classify well, not that the loop
    under test made them (a kernel can fit them another way and hand them over): a ``scores`` part counts only
    where a value of the same cell's training, compared with the reference's, counts too; a count the kernel
    vouches for is no such value."""
    from jaxgrader.grading.verdict.judging import UNCHECKED_TRAINING, UNREPORTED_TRAINING

    scores = ref("scored", [np.ones(2)], rule="scores", bound=0.15)
    reference = [ref("first losses", [2.3, 2.1], if_passed=["test_a"]), scores]
    student = [output("first losses", [2.3, 2.1]), output("scored", [np.ones(2)], rule="scores", bound=0.15)]
    kept = judge(student, reference, passed={"test_a": True})
    assert kept["scored"]["message"] not in (UNCHECKED_TRAINING, UNREPORTED_TRAINING)
    assert judge(student, reference, passed={"test_a": False})["scored"]["message"] == UNCHECKED_TRAINING
    vouched = ref("steps taken", 400, rule="equal", evidence="kernel")
    alone = judge(student + [output("steps taken", 400, rule="equal")], [vouched, scores], passed={})
    assert not alone["scored"]["passed"] and alone["scored"]["message"] == UNREPORTED_TRAINING


def test_a_cell_time_counts_only_where_the_cell_draws_from_its_nonce():
    """A timed cell whose work the run's seed decides could have been done by an earlier cell (a memo answers the
    timed calls): its time is no evidence, for the solution too, whatever it was. The mark is read from the cell's
    source, which the grader holds; the kernel's own code cannot add it."""
    from jaxgrader.grading.verdict.judging import UNFRESH_WORK

    reference = [ref("work", 1.0), ref("t", 2.0, rule="cell_time", bound=3.0)]
    student = [output("work", 1.0), output("t", 0.0, rule="cell_time")]
    assert judge_cell(student, reference, 0.1, fresh=True)[1]["passed"]
    stale = judge_cell(student, reference, 0.1, fresh=False)
    assert stale[0]["passed"] and stale[1]["message"] == UNFRESH_WORK


def test_values_are_judged_by_the_grader():
    assert _passes("finite", [1.0, 2.0], [0.0]) and not _passes("finite", [1.0, float("nan")], [0.0])
    assert not _passes("finite", True, True) and not _passes("finite", "1.0", "1.0")
    assert _passes("falls", [2.0, 1.5, 0.9, 0.8, 0.7, 0.6, 0.5], [1.0], bound=0.5)
    assert not _passes("falls", [2.0, 2.0, 1.9, 1.9, 1.8, 1.8], [1.0], bound=0.5)
    assert not _passes("falls", [2.0, float("inf"), 0.1], [1.0], bound=0.5) and not _passes("falls", 0.0, 1.0, bound=0.5)
    masks = np.arange(12).reshape(3, 4) % 2 == 0
    assert _passes("all_equal", [masks, masks.copy()], [masks, masks], rtol=0.0, atol=0.0)
    assert not _passes("all_equal", [masks, ~masks], [masks, masks], rtol=0.0, atol=0.0)
    assert _passes("all_equal", [1.0, 1.0 + 1e-7], [0.0, 0.0], rtol=0.0, atol=1e-6)
    assert _passes("all_distinct", list(np.eye(3)), [0.0, 1.0]) and not _passes("all_distinct", [masks, masks], [0, 1])
    assert _passes("ratio_at_least", [0.5, 0.01], [1.0, 1.0], bound=5.0)
    assert not _passes("ratio_at_least", [0.04, 0.01], [1.0, 1.0], bound=5.0)
    assert not _passes("ratio_at_least", [1.0, 0.0], [1.0, 1.0], bound=5.0)
    assert _passes("within_factor", 0.3, 0.1, bound=10.0) and not _passes("within_factor", 1e-4, 0.1, bound=10.0)
    assert not _passes("within_factor", 1e9, 0.1, bound=10.0) and not _passes("within_factor", -1.0, 0.1, bound=10.0)


def test_an_accuracy_is_computed_by_the_grader_against_the_references_labels():
    labels = np.arange(100, dtype=np.int32) % 10
    right = labels.copy()
    right[:5] = (right[:5] + 1) % 10  # 95% right
    reference = [ref("labels", labels, "equal"), ref("pred", labels, "agrees", against="labels", bound=0.9)]
    def judged(student_labels, pred):
        return judge([output("labels", student_labels, "equal"), output("pred", pred, "agrees", against="labels",
                                                                        bound=0.0)], reference)["pred"]
    assert judged(labels, right)["passed"]
    assert not judged(labels, np.zeros(100, np.int32))["passed"]
    # the labels the kernel reports are not the ones it is judged against
    assert not judged(np.zeros(100, np.int32), np.zeros(100, np.int32))["passed"]
    assert not judged(labels, right.astype(np.float32))["passed"]


def test_claimed_seconds_must_fit_in_the_cells_wall_time_on_the_graders_clock():
    assert _passes("within_cell_time", [0.2, 0.3], [0.1], seconds=1.0)
    assert not _passes("within_cell_time", [0.2, 1e9], [0.1], seconds=1.0)
    assert not _passes("within_cell_time", [0.2], [0.1], seconds=None)
    assert not _passes("within_cell_time", [-5.0, 0.2], [0.1], seconds=1.0)


def test_facts_about_programs_are_read_from_the_program_text():
    import jax

    def step(params, x, lr):
        return params - lr * x

    x, p = jnp.ones(3), jnp.zeros(3)
    jitted = jax.jit(step).lower(p, x, 0.1).as_text()
    static = jax.jit(step, static_argnums=2).lower(p, x, 0.1).as_text()
    as_float64 = jax.jit(step).lower(p.astype(jnp.int32), x, 0.1).as_text()
    assert _passes("jitted", jitted, jitted) and not _passes("jitted", None, jitted)
    assert not _passes("jitted", static, jitted), "a static learning rate is not a traced argument"
    assert not _passes("jitted", "module @jit_step { func.func public @main() -> () {", jitted)
    assert _passes("same_program", [jitted, jitted], [jitted, jitted])
    assert not _passes("same_program", [jitted, as_float64], [jitted, jitted])
    assert not _passes("same_program", [jitted], [jitted, jitted])

    def unrolled(x, n):
        for _ in range(n):
            x = jnp.sin(x)
        return x

    def scanned(xs):
        return jax.lax.scan(lambda c, x: (c + jnp.sin(x), c), 0.0, xs)

    grows = [str(jax.make_jaxpr(unrolled, static_argnums=1)(x, n)) for n in (2, 6)]
    flat = [str(jax.make_jaxpr(scanned)(jnp.ones(n))) for n in (2, 6)]
    assert _passes("no_growth", flat, flat) and not _passes("no_growth", grows, flat)
    assert not _passes("no_growth", ["", ""], flat)


def _abstract_mesh(n):
    """A mesh of n devices to trace on (no devices needed): JAX 0.7.2 and newer spell it differently."""
    from jax.sharding import AbstractMesh, AxisType

    try:
        return AbstractMesh((n,), ("data",), axis_types=(AxisType.Auto,))
    except TypeError:
        return AbstractMesh((("data", n),))


@pytest.mark.lane  # JAX 0.7.2 prints jaxprs differently from the newest: both are parsed
def test_what_each_device_sees_is_read_from_the_program_text():
    import jax
    from jax.sharding import PartitionSpec as P

    shard_map = getattr(jax, "shard_map", None) or __import__("jax.experimental.shard_map", fromlist=["_"]).shard_map
    mesh = _abstract_mesh(8)

    def loss(p, x, y):
        return jnp.mean((x @ p - y) ** 2)

    def closing_over_params(p, x, y):  # honest too: params captured, only the batch passed in
        return shard_map(lambda x, y: jax.lax.pmean(loss(p, x, y), "data"), mesh=mesh,
                         in_specs=(P("data"), P("data")), out_specs=P())(x, y)

    def program(specs, *args):
        fn = shard_map(lambda p, x, y: jax.lax.pmean(loss(p, x, y), "data"), mesh=mesh, in_specs=specs, out_specs=P())
        return str(jax.make_jaxpr(jax.jit(jax.grad(fn)))(*args))

    data = (np.ones(5, np.float32), np.ones((24, 5), np.float32), np.ones(24, np.float32))
    split = program((P(), P("data"), P("data")), *data)
    assert ((24, 5), (3, 5)) in programs.shard_map_shapes(split)
    assert _passes("shard_shapes", split, split)
    assert _passes("shard_shapes", str(jax.make_jaxpr(jax.jit(jax.grad(closing_over_params)))(*data)), split)
    assert not _passes("shard_shapes", program((P(), P(), P()), *data), split), "a replicated batch"
    assert not _passes("shard_shapes", str(jax.make_jaxpr(jax.grad(loss))(*data)), split), "no shard_map"
    other = (np.ones(5, np.float32), np.ones((40, 5), np.float32), np.ones(40, np.float32))
    assert not _passes("shard_shapes", program((P(), P("data"), P("data")), *other), split), "other inputs"
    assert not _passes("shard_shapes", None, split) and not _passes("shard_shapes", "a made-up text", split)
    # text from a student's kernel: a dimension too long for int() and a flood of shard_maps are read, not fatal
    made_up = "{ lambda ; a:f32[" + "9" * 5000 + "]. let\n" + "b:f32[1] = shard_map[jaxpr=x] a\n" * 20000 + "in (b,) }"
    assert programs.shard_map_shapes(made_up) == [] and not _passes("shard_shapes", made_up, split)
    assert programs.largest_value(made_up) == 1
    assert programs.jaxpr_inputs("{ lambda a:f32[3]\n" * 100_000) is None


@pytest.mark.lane
def test_the_largest_value_is_read_from_the_program_text():
    import jax

    def f(x):
        return jnp.sum(jnp.sin(x) * jnp.cos(x[::-1]))

    def by_jvp(x, v):
        return jax.jvp(jax.grad(f), (x,), (v,))[1]

    def by_hessian(x, v):
        return jax.hessian(f)(x) @ v

    def traced(fn, n):
        return str(jax.make_jaxpr(fn)(jnp.ones(n), jnp.ones(n)))

    reference = traced(by_jvp, 50)
    assert programs.largest_value(reference) == 50 and programs.largest_value(traced(by_hessian, 50)) == 2500
    assert _passes("largest_value", traced(by_jvp, 50), reference)
    assert not _passes("largest_value", traced(by_hessian, 50), reference)
    assert not _passes("largest_value", traced(by_jvp, 8), reference), "a program traced on other inputs"
    assert not _passes("largest_value", None, reference)
    coloured = jax.make_jaxpr(by_hessian)(jnp.ones(50), jnp.ones(50)).pretty_print(use_color=True)
    assert programs.largest_value(coloured) == 2500, "a jaxpr printed with terminal colours reads the same"
    captured = jnp.arange(50.0)  # a captured array prints as a constant before the inputs: { lambda a:f32[50]; b c. ...
    assert _passes("largest_value", traced(lambda x, v: by_jvp(x, v) + captured, 50), reference)
