"""Informed attacks on the evidence, in one small course: each a cell one student writes once and a class pastes.

The course's own lessons are tried against the informed forger by their trials (tests/test_assignments.py:
`test_the_informed_forger_gains_no_point`). Here, in an assignment whose tests judge the same properties twice, once
by shape-only evidence (program text the kernel printed, a value judged by its own form) and once by evidence the
grader checks (the cell's cost on its clock with inputs from the cell's nonce, values against the reference's, a
program it runs and counts itself, parameters it scores on digits no kernel holds), answers that lack the properties
are submitted bare, under the informed forger (jaxgrader/grading/forger.py), and under each class of attack an
informed student has tried (issue 40):

* staging: an IPython hook that sees a timed cell coming and jits the slow answer for it alone;
* a precomputed chain: an earlier cell replays the timed workload from the grading seed, a memo answers it;
* an export swap: the program export patched to hand over a correct helper's program;
* a patched helper: the workload runner patched to skip the work;
* fitted scores: parameters fitted with NumPy to the data the kernel holds, with no working training loop;
* a checkpointed nested loop: a loop unrolled as calls of a jitted, checkpointed step, no patching at all.

None of them gains a point the bare answers lack (the forger gains only the shape-only parts, which no lesson
uses), and each that uses what no answer needs is held for review, in the record and the class report.
"""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from jaxgrader.grading.course.notebooks import fill_answers, read_notebook
from jaxgrader.grading.forger import forged

from .conftest import ROOT

pytestmark = pytest.mark.slow


def _meta(**kw):
    return {"nbgrader": {"schema_version": 3, "task": False, "grade": False, "solution": False, "locked": False, **kw}}


def _test(gid, points, hidden):
    return new_code_cell("### BEGIN HIDDEN TESTS\nfrom jaxgrader.checks import workloads as _workloads\n"
                         "from jaxgrader.checks.report import key as _key, report as _report, rng as _rng\n"
                         "from jaxgrader.checks.programs import exported as _exported, lowered as _lowered\n"
                         + hidden + "\n### END HIDDEN TESTS", metadata=_meta(grade=True, locked=True, points=points,
                                                                         grade_id=gid))


SETUP = ("import jax\nimport jax.numpy as jnp\nimport numpy as np\nfrom sklearn.datasets import load_digits\n"
         "digits = load_digits()\nX = (digits.data / 16.0).astype(np.float32)\ny = digits.target.astype(np.int32)")
# 40 rounds of three operations: 2000 calls run 240,000 operations one by one when not jitted (seconds, many
# times the compiled program's 2000 dispatches, on any machine), well past the bound
STEP = "@jax.jit\ndef step(x):\n    for _ in range(40):\n        x = jnp.sin(x) * 0.99 + 0.01\n    return x"
MASKS = "def masks(key):\n    return jnp.stack([jax.random.bernoulli(k, 0.5, (8, 8)) for k in jax.random.split(key, 3)])"
TRAIN = '''def train(x, y, steps=60):
    loss = lambda w: -jnp.mean(jax.nn.log_softmax(x @ w)[jnp.arange(len(y)), y])
    grad = jax.jit(jax.value_and_grad(loss))
    w, losses = jnp.zeros((x.shape[1], 10)), []
    for _ in range(steps):
        value, g = grad(w)
        w = w - 0.5 * g
        losses.append(value)
    return w, jnp.stack(losses)'''
CUMULATIVE = '''def cumulative(xs):
    return jax.lax.scan(lambda c, x: (c + jnp.sin(x) * c * 0.1 + x, c), jnp.zeros(xs.shape[1:]), xs)[1]'''

HIDDEN_STEP_COST = '''_nonce = "{jaxgrader-nonce}"  # the grader writes a fresh value here as it runs this cell
_xs = _rng(0, _nonce).normal(size=(2000, 4)).astype(np.float32)
_ys = np.stack(jax.device_get(_workloads.calls(step, [(_x,) for _x in _xs])))
_report("what 2000 calls of step computed", _ys)
_report("2000 calls of step", None, rule="cell_time", bound=4)'''
HIDDEN_TRAIN_SCORES = '''_idx = _rng(2).choice(len(X), 900, replace=False)
_w, _l = train(X[_idx], y[_idx])
_report("the first five losses", _l[:5], rtol=1e-4, atol=1e-5)
_report("weights, scored by the grader on held-out digits", [_w], rule="scores", bound=0.05,
        model=_exported(lambda w, x: x @ w, _w, X[:20]), data="digits")'''
HIDDEN_PROGRAM = '''_xs = jax.device_put(_rng(3).normal(size=(24, 5)).astype(np.float32))
_report("cumulative(xs)", cumulative(_xs), rtol=1e-5, atol=1e-6)
_report("the program of cumulative, run by the grader: a scan", _exported(cumulative, _xs), rule="program",
        rtol=1e-5, atol=1e-6, limits={"ops": 3})'''


def _course(root):
    cells = [new_code_cell(SETUP, metadata=_meta(locked=True, grade_id="setup"))]
    for gid, code in (("step", STEP), ("masks", MASKS), ("train", TRAIN), ("cumulative", CUMULATIVE)):
        cells.append(new_markdown_cell(f"## Exercise: {gid} (2 points)"))
        cells.append(new_code_cell("### BEGIN SOLUTION\n" + code + "\n### END SOLUTION",
                                   metadata=_meta(solution=True, grade_id=gid)))
    cells += [
        _test("test_step_text", 1, '_report("the program of step", _lowered(step, jnp.ones(4)), rule="jitted")'),
        _test("test_step_cost", 1, HIDDEN_STEP_COST),
        _test("test_masks_shape", 1, '_report("masks of two keys", [masks(_key(0)), masks(_key(1))], rule="all_distinct")'),
        _test("test_masks_values", 1, '_report("masks of a key", masks(_key(0)), rule="equal")'),
        _test("test_train_shape", 1, '_w, _l = train(X[:300], y[:300])\n_report("losses", list(_l), rule="falls", bound=0.8)'),
        _test("test_train_scores", 1, HIDDEN_TRAIN_SCORES),
        _test("test_cumulative", 1, HIDDEN_PROGRAM),
    ]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    (root / "source" / "tiny").mkdir(parents=True)
    nbformat.write(nb, root / "source" / "tiny" / "tiny.ipynb")
    (root / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text()
                                             + "\nc.SandboxedKernelManager.preload = ['jax', 'jax.numpy', "
                                               "'jaxgrader.checks', 'sklearn.datasets']\n")
    subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(root), "release", "-a", "tiny"], check=True,
                   capture_output=True)


LACKING = {  # each answer lacks what the tests are named for
    "step": STEP.replace("@jax.jit\n", ""),  # not jitted: 2000 calls op by op
    "masks": "def masks(key):\n    k = jax.random.key(0)\n    return jnp.stack([jax.random.bernoulli(k, 0.5, (8, 8))] * 3)",
    "train": TRAIN.replace("w = w - 0.5 * g", "w = w"),  # does not train
    "cumulative": '''def cumulative(xs):
    c, out = jnp.zeros(xs.shape[1:]), []
    for x in xs:  # a Python loop: unrolled when traced
        out.append(c)
        c = c + jnp.sin(x) * c * 0.1 + x
    return jnp.stack(out)''',
}

# Each a cell a class could paste at the top of its answers (over LACKING).
ATTACKS = {
    "staging-hook": '''def _stage(info):
    if "cell_time" in (info.raw_cell or ""):
        globals()["_slow"], globals()["step"] = step, jax.jit(step)
def _unstage(result):
    if "_slow" in globals():
        globals()["step"] = globals().pop("_slow")
get_ipython().events.register("pre_run_cell", _stage)
get_ipython().events.register("post_run_cell", _unstage)''',
    "precomputed-chain": '''import os
_memo = {}
_seed = int(os.environ.get("JAXGRADER_SEED", "0")) % 2**31
for _x in np.random.default_rng([_seed, 0]).normal(size=(2000, 4)).astype(np.float32):
    _y = _x
    for _ in range(40):
        _y = np.sin(_y) * 0.99 + 0.01
    _memo[_x.tobytes()] = _y.astype(np.float32)''',
    "export-swap": '''import jaxgrader.checks.programs as _programs
_export = _programs.exported
def _good(xs):
    return jax.lax.scan(lambda c, x: (c + jnp.sin(x) * c * 0.1 + x, c), jnp.zeros(xs.shape[1:]), xs)[1]
def _swap(fn, *args, **kwargs):
    return _export(_good if getattr(fn, "__name__", "") == "cumulative" else fn, *args, **kwargs)
_programs.exported = _swap''',
    "patched-helper": '''from jaxgrader.checks import workloads as _w
_w.calls = lambda fn, arguments, seconds=4.0, until=None: [fn(*a) for a in list(arguments)[:20]]''',
}
OWN = {  # attacks written as answers, with nothing no answer needs
    "fitted-scores": {"train": '''def train(x, y, steps=60):  # no training loop: least squares on the data at hand
    onehot = np.eye(10, dtype=np.float32)[np.asarray(y)]
    w, *_ = np.linalg.lstsq(np.asarray(x), onehot - 0.1, rcond=None)
    return jnp.asarray(w, jnp.float32), jnp.linspace(2.3, 0.2, steps)'''},
    "checkpointed-loop": {"cumulative": '''def cumulative(xs):
    body = jax.jit(jax.checkpoint(lambda c, x: c + jnp.sin(x) * c * 0.1 + x))
    c, out = jnp.zeros(xs.shape[1:]), []
    for x in xs:  # each step a call of a jitted, checkpointed function: still one copy per iteration
        out.append(c)
        c = body(c, x)
    return jnp.stack(out)'''},
}
SHAPE_ONLY = {"test_step_text", "test_masks_shape", "test_train_shape"}


def _students() -> dict[str, dict[str, str]]:
    out = {"lacking": dict(LACKING), "forged": forged(LACKING, "step")}
    for name, cell in ATTACKS.items():
        out[name] = {**LACKING, "step": cell + "\n" + LACKING["step"]}
    out["precomputed-chain"]["step"] += ("\n_slow_step = step\ndef step(x):\n"
                                         "    return _memo.get(np.asarray(x).tobytes(), None) if np.asarray(x).tobytes() "
                                         "in _memo else _slow_step(x)")
    for name, answers in OWN.items():
        out[name] = {**LACKING, **answers}
    return out


def test_informed_attacks_gain_nothing_and_what_no_answer_needs_is_held(tmp_path):
    root = tmp_path / "class"
    _course(root)
    release = read_notebook(root / "release" / "tiny" / "tiny.ipynb")
    students = _students()
    for student, answers in students.items():
        folder = root / "submitted" / student / "tiny"
        folder.mkdir(parents=True)
        nbformat.write(fill_answers(release, answers), folder / "tiny.ipynb")
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(root), "grade", "-a", "tiny",
                          "--workers", "2"], capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    records = {r["student"]: r for r in json.loads((root / "grading-summary.json").read_text())}
    scores = {s: {gid: c["score"] for gid, c in r["cells"]["tiny"].items()} for s, r in records.items()}
    assert all(score == 0 for score in scores["lacking"].values()), scores["lacking"]
    # the forger buys every shape-only part back, and nothing else
    assert {gid for gid, score in scores["forged"].items() if score > 0} == SHAPE_ONLY, scores["forged"]
    for student in [*ATTACKS, *OWN]:
        gained = {gid for gid, score in scores[student].items() if score > 0} - SHAPE_ONLY
        assert not gained, (student, gained, records[student]["cells"]["tiny"])
    held = {s for s, r in records.items() if any(h.get("findings") for h in (r.get("held") or {}).values())}
    assert held == {"forged", *ATTACKS}, held  # what answers never need; the answers written as answers are not
    report = (root / "reports" / "tiny.html").read_text()
    assert all(student in report for student in ATTACKS) and "Held for review" in report
