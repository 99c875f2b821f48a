"""A student who controls the kernel and rewrites what the kernel says about itself gains nothing.

The generic forger below knows no hidden test: it wraps ``jaxgrader.checks.report.report``
and rewrites the value of every report whose rule takes the kernel's word (``true`` ->
True, ``at_most`` -> 0, ``at_least`` -> 1e9), and turns every visible assert into one
that passes (an input transformer), so that the visible tests do not stop the cell first. Each lesson is graded by the real
``jaxgrader grade`` for two students with the same solution that lacks the properties
the tests are named for (not jitted, recompiling, not sharded, an unrolled loop, a loop
that does not train), one of them with the forger typed into its first answer cell. No
test cell may score more with the forger than without, and the lacking property's cells
score zero either way.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib

import nbformat
import pytest

from jaxgrader.grading.course.notebooks import fill_answers, grade_id, is_solution, read_notebook, solutions_of

from .conftest import ROOT

pytestmark = pytest.mark.slow

FORGER = '''
import jaxgrader.checks.report as _forge_module
_forge_report = _forge_module.report
def _forged(name, value, *, rule="close", **kwargs):
    value = {"true": True, "at_most": 0, "at_least": 1e9}.get(rule, value)
    return _forge_report(name, value, rule=rule, **kwargs)
_forge_module.report = _forged
def _no_asserts(lines):  # and the visible asserts pass whatever they test
    return [l.replace("assert ", "assert True or ", 1) if l.lstrip().startswith("assert ") else l for l in lines]
get_ipython().input_transformers_post.append(_no_asserts)
'''

# A lesson-5 loop that runs every step but keeps the state it started from: it does not train.
RUN_TRAINING_WITHOUT_TRAINING = '''
def run_training(x, y, epochs, batch_size=BATCH):
    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in optimizer.variables],
        train_acc_metric.stateless_reset_state(),
    )
    losses = []
    for _ in range(epochs):
        for start in range(0, len(x) - batch_size + 1, batch_size):
            loss, _ = train_step(state, (x[start:start + batch_size], y[start:start + batch_size]))
            losses.append(float(loss))
    return state, losses
'''

# lesson -> (wrong answers from demo/wrong-answers by name, extra answers by cell) and the test cells
# each lacking property must lose with and without the forger.
LACKING = {
    "lesson2": (["no-jit", "no-shard-map", "benchmark-warm-cache"], {},
                ["test_per_example_grads_compiles", "test_data_parallel_grad", "test_benchmark_compile"]),
    "lesson4": (["step-becomes-float", "epoch-python-loop", "loss-double-softmax"], {},
                ["test_compiles_once", "test_train_epoch", "test_loss_falls"]),
    "lesson5": ([], {"run_training": RUN_TRAINING_WITHOUT_TRAINING}, ["test_accuracy"]),
}


def _wrong_answers(assignment):
    with (ROOT / "demo" / "wrong-answers" / f"{assignment}.toml").open("rb") as fh:
        return {a["name"]: a for a in tomllib.load(fh)["answer"]}


def _submission(assignment, forged):
    (path,) = sorted((ROOT / "source" / assignment).glob("*.ipynb"))
    names, extra, _ = LACKING[assignment]
    answers = solutions_of(read_notebook(path))
    catalogue = _wrong_answers(assignment)
    for name in names:
        answers[catalogue[name]["cell"]] = catalogue[name]["code"]
    answers.update(extra)
    release = read_notebook(ROOT / "release" / assignment / path.name)
    if forged:
        first = next(grade_id(c) for c in release.cells if is_solution(c) and c.cell_type == "code")
        answers[first] = FORGER + "\n" + answers[first]
    return path.stem, fill_answers(release, answers)


@pytest.mark.parametrize("assignment", sorted(LACKING))
def test_the_generic_forger_gains_no_point(assignment, tmp_path):
    course = tmp_path / "class"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment)
    for student, forged in (("lacking", False), ("forged", True)):
        name, nb = _submission(assignment, forged)
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{name}.ipynb")
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "-a", assignment,
                          "-s", "lacking", "-s", "forged"], capture_output=True, text=True, timeout=900)
    summary = {r["student"]: r for r in json.loads((course / "grading-summary.json").read_text())}
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (cells_plain,), (cells_forged,) = summary["lacking"]["cells"].values(), summary["forged"]["cells"].values()
    gained = {gid: (cells_plain[gid]["score"], cell["score"]) for gid, cell in cells_forged.items()
              if cell["score"] > cells_plain[gid]["score"]}
    assert not gained, f"the forger gained points (without, with): {gained}"
    for gid in LACKING[assignment][2]:
        assert cells_plain[gid]["score"] == 0 and cells_forged[gid]["score"] == 0, (
            f"{gid} scored {cells_plain[gid]['score']} / {cells_forged[gid]['score']} (without / with the forger) "
            "for an answer that lacks its property")
    assert summary["forged"]["score"] <= summary["lacking"]["score"]
