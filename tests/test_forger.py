"""The informed forger (jaxgrader/grading/forger.py) against each kind of evidence, in one small course.

The course's own lessons are tried against the forger by their trials (tests/test_assignments.py:
`test_the_informed_forger_gains_no_point`). This test shows the forger is worth fearing: in an
assignment whose tests judge the same three properties twice, once by shape-only evidence (program
text the kernel printed, a value judged by its own form) and once by evidence the grader checks
(the cell's cost on its clock, values against the reference's, parameters it scores itself), the
forger buys back every shape-only part for an answer that lacks the property, and none of the others.
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
    return new_code_cell("### BEGIN HIDDEN TESTS\nfrom jaxgrader.checks.report import key as _key, report as _report\n"
                         "from jaxgrader.checks.programs import exported as _exported, lowered as _lowered\n"
                         + hidden + "\n### END HIDDEN TESTS", metadata=_meta(grade=True, locked=True, points=points,
                                                                         grade_id=gid))


SETUP = "import jax\nimport jax.numpy as jnp\nimport numpy as np"
# 40 rounds of three operations: 3000 calls run 360,000 operations one by one when not jitted (seconds, many
# times the compiled program's 3000 dispatches, on any machine), well past the bound
STEP = ("@jax.jit\ndef step(x):\n    for _ in range(40):\n        x = jnp.sin(x) * 0.99 + 0.01\n    return x")
MASKS = "def masks(key):\n    return jnp.stack([jax.random.bernoulli(k, 0.5, (8, 8)) for k in jax.random.split(key, 3)])"
TRAIN = '''def train(x, y, steps=60):
    w = jnp.zeros((x.shape[1], 3))
    grad = jax.jit(jax.grad(lambda w: -jnp.mean(jax.nn.log_softmax(x @ w)[jnp.arange(len(y)), y])))
    losses = []
    for _ in range(steps):
        w = w - 0.5 * grad(w)
        losses.append(float(-jnp.mean(jax.nn.log_softmax(x @ w)[jnp.arange(len(y)), y])))
    return w, losses'''
DATA = '''_r = np.random.default_rng(0)
_x = _r.normal(size=(300, 5)).astype(np.float32)
_y = np.argmax(_x @ _r.normal(size=(5, 3)), axis=1)'''


def _course(root):
    cells = [new_code_cell(SETUP, metadata=_meta(locked=True, grade_id="setup"))]
    for gid, code in (("step", STEP), ("masks", MASKS), ("train", TRAIN)):
        cells.append(new_markdown_cell(f"## Exercise: {gid} (2 points)"))
        cells.append(new_code_cell("### BEGIN SOLUTION\n" + code + "\n### END SOLUTION",
                                   metadata=_meta(solution=True, grade_id=gid)))
    cells += [
        _test("test_step_text", 1, '_report("the program of step", _lowered(step, jnp.ones(4)), rule="jitted")'),
        _test("test_step_cost", 1, "_ys = np.stack(jax.device_get([step(jnp.ones(4) * _i) for _i in range(3000)]))\n"
                                   '_report("what 3000 calls of step computed", _ys)\n'  # the timed work, checked
                                   '_report("3000 calls of step", None, rule="cell_time", bound=4)'),
        _test("test_masks_shape", 1, '_report("masks of two keys", [masks(_key(0)), masks(_key(1))], rule="all_distinct")'),
        _test("test_masks_values", 1, '_report("masks of a key", masks(_key(0)), rule="equal")'),
        _test("test_train_shape", 1, DATA + '\n_w, _l = train(_x, _y)\n_report("losses", _l, rule="falls", bound=0.8)'),
        _test("test_train_scores", 1, DATA + '\n_w, _l = train(_x, _y)\n_report("weights", [_w], rule="scores", bound=0.05, '
                                             'model=_exported(lambda w, x: x @ w, _w, _x), data={"x": _x, "y": _y})'),
    ]
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    (root / "source" / "tiny").mkdir(parents=True)
    nbformat.write(nb, root / "source" / "tiny" / "tiny.ipynb")
    (root / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(root), "release", "-a", "tiny"], check=True,
                   capture_output=True)


LACKING = {  # each answer lacks what the tests are named for
    "step": STEP.replace("@jax.jit\n", ""),  # not jitted: 3000 calls op by op
    "masks": "def masks(key):\n    k = jax.random.key(0)\n    return jnp.stack([jax.random.bernoulli(k, 0.5, (8, 8))] * 3)",
    "train": TRAIN.replace("w = w - 0.5 * grad(w)", "w = w"),  # does not train
}


def test_the_forger_buys_shape_only_parts_and_nothing_else(tmp_path):
    root = tmp_path / "class"
    _course(root)
    release = read_notebook(root / "release" / "tiny" / "tiny.ipynb")
    for student, answers in (("lacking", LACKING), ("forged", forged(LACKING, "step"))):
        folder = root / "submitted" / student / "tiny"
        folder.mkdir(parents=True)
        nbformat.write(fill_answers(release, answers), folder / "tiny.ipynb")
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(root), "grade", "-a", "tiny"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    summary = {r["student"]: r["cells"]["tiny"] for r in json.loads((root / "grading-summary.json").read_text())}
    scores = {s: {gid: c["score"] for gid, c in cells.items()} for s, cells in summary.items()}
    shape_only = {"test_step_text", "test_masks_shape", "test_train_shape"}
    assert all(score == 0 for score in scores["lacking"].values()), scores["lacking"]
    assert {gid for gid, score in scores["forged"].items() if score > 0} == shape_only, scores["forged"]
