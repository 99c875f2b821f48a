"""Hostile submissions: no edit of a notebook may raise its grade above what its answers earn.

One class of attackers is graded once (lesson 1, real nbgrader, parallel workers);
each test then reads one student's score. Every attacker starts from the blank
release (honest score 0) unless it says otherwise, and adds one trick.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from jaxgrader.grading.notebooks import fill_answers, grade_id, is_autograded_test, read_notebook, solutions_of

from .conftest import ROOT

ASSIGNMENT, NOTEBOOK = "lesson1", "pure_functions"


def _tests(nb):
    return [c for c in nb.cells if is_autograded_test(c)]


def _blank(nb):
    return nb


def _with_answer(cell_id, code):
    """The blank release, one solution cell answered with ``code``."""
    def make(nb):
        return fill_answers(nb, {cell_id: code})
    return make


def _edit_tests(nb):
    for cell in _tests(nb):
        cell.source = "pass"
    return nb


def _delete_tests(nb):
    nb.cells = [c for c in nb.cells if not is_autograded_test(c)]
    return nb


def _duplicate_tests_first(nb):
    """Copies of every test cell, emptied, placed at the top: the copies carry the ids."""
    copies = []
    for cell in _tests(nb):
        dup = copy.deepcopy(cell)
        dup.source = "pass"
        copies.append(dup)
    nb.cells = copies + nb.cells
    return nb


def _points_and_types(nb):
    for cell in _tests(nb):
        cell.metadata.nbgrader["points"] = 100
    for cell in _tests(nb)[:3]:
        cell.cell_type = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    return nb


def _skip_tags(nb):
    for cell in nb.cells:
        cell.metadata["tags"] = ["skip-execution", "raises-exception"]
    return nb


def _schema_and_unknown_keys(nb):
    for cell in nb.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata.nbgrader["schema_version"] = 99
            cell.metadata.nbgrader["extra_credit"] = True
    return nb


def _all_solutions(nb):
    source = read_notebook(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    return fill_answers(nb, solutions_of(source))


def _solutions_and(edit):
    return lambda nb: edit(_all_solutions(nb))


def _solutions_but(cell_id, code):
    def make(nb):
        source = read_notebook(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
        answers = solutions_of(source)
        answers[cell_id] = code
        return fill_answers(nb, answers)
    return make


FAKE_PASS = "lambda *args, **kwargs: None"
ATTACKERS = {
    # edits to cells and metadata
    "tests-edited": _edit_tests,
    "tests-deleted": _delete_tests,
    "tests-duplicated": _duplicate_tests_first,
    "points-and-types": _points_and_types,
    "skip-tags": _skip_tags,
    "schema-edited": _schema_and_unknown_keys,
    # code that runs before the tests
    "patch-numpy": _with_answer("predict", f"np.allclose = {FAKE_PASS.replace('None', 'True')}\n"
                                           f"np.testing.assert_allclose = {FAKE_PASS}"),
    "patch-jax": _with_answer("predict", "jax.jit = lambda f, **kw: (lambda *a, **k: None)"),
    "patch-grader": _with_answer("predict", f"import jaxgrader.trees\njaxgrader.trees.assert_trees_close = {FAKE_PASS}"),
    "patch-alias-at-call": _with_answer(
        "predict", f"def predict(params, x):\n    m = np\n    m.allclose = {FAKE_PASS.replace('None', 'True')}\n"
                   "    return x"),
    "patch-setattr": _with_answer("predict", f"setattr(np, 'allclose', {FAKE_PASS.replace('None', 'True')})"),
    "patch-builtins": _with_answer("predict", "__builtins__.AssertionError = Warning"),
    "patch-kernel": _with_answer("predict", "get_ipython().showtraceback = lambda *a, **k: None"),
    "fake-print": _with_answer("predict", "print('All tests passed! Score: 16/16')"),
    "write-file": _with_answer("predict", "open('jaxgrader.py', 'w').write('def assert_trees_close(*a, **k): pass')"),
    "read-hidden-tests": _with_answer(
        "predict", "import sqlite3, glob\nrows = sqlite3.connect(glob.glob('../../../*.db')[0])"
                   ".execute('select source from source_cell').fetchall()"),
    # noise is not failure, errors still are (full solutions, honest score: all auto points)
    "noise-float64": _solutions_but(
        "predict", "def predict(params, x):\n    return jnp.asarray(params['W'] @ x + params['b'], dtype=jnp.float64)"),
    "real-error": _solutions_but("predict", "def predict(params, x):\n    raise ValueError('not done')"),
    "schema-edited-solutions": _solutions_and(_schema_and_unknown_keys),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("class")
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    release = read_notebook(ROOT / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    for student, make in ATTACKERS.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(make(copy.deepcopy(release)), folder / f"{NOTEBOOK}.ipynb")
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "-a", ASSIGNMENT],
                         capture_output=True, text=True, timeout=1800)
    summary = json.loads((course / "grading-summary.json").read_text())
    return run, {r["student"]: r for r in summary}, course


def _auto_points():
    source = read_notebook(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    return sum(float(c.metadata.nbgrader.points) for c in _tests(source)), {
        grade_id(c): float(c.metadata.nbgrader.points) for c in _tests(source)}


def test_the_class_run_completes(graded):
    run, summary, _ = graded
    assert set(summary) == set(ATTACKERS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


@pytest.mark.parametrize("student", [s for s in ATTACKERS if not s.startswith(("noise", "real", "schema-edited-"))])
def test_attack_earns_nothing(graded, student):
    _, summary, _ = graded
    record = summary[student]
    assert record["status"] == "graded", record["error"]
    assert record["score"] == 0, f"{student} scored {record['score']} with no honest answer"


def test_edited_metadata_does_not_abort_an_honest_student(graded):
    _, summary, _ = graded
    total, _ = _auto_points()
    assert summary["schema-edited-solutions"]["score"] == total


def test_known_warnings_cost_nothing(graded):
    _, summary, _ = graded
    total, _ = _auto_points()
    assert summary["noise-float64"]["score"] == total


def test_real_errors_still_fail(graded):
    _, summary, _ = graded
    total, points = _auto_points()
    assert summary["real-error"]["score"] == total - points["test_predict"]


def test_refused_cells_say_why_in_the_autograded_notebook(graded):
    _, _, course = graded
    nb = read_notebook(course / "autograded" / "patch-numpy" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    cell = next(c for c in nb.cells if grade_id(c) == "predict")
    assert "did not run this cell" in cell.source and "np.allclose" in cell.source


def test_feedback_holds_no_hidden_test(graded):
    _, _, course = graded
    source = read_notebook(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    hidden_lines = set()
    for cell in _tests(source):
        text = cell.source
        if "### BEGIN HIDDEN TESTS" in text:
            block = text.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
            hidden_lines |= {ln.strip() for ln in block.splitlines() if len(ln.strip()) > 20}
    assert hidden_lines
    html_files = list((course / "feedback").rglob("*.html"))
    assert len(html_files) == len(ATTACKERS)
    for path in html_files:
        html = path.read_text()
        import html as html_lib

        text = html_lib.unescape(html)
        assert "BEGIN HIDDEN TESTS" not in text
        leaked = [ln for ln in hidden_lines if ln in text]
        assert not leaked, f"{path}: hidden test line in feedback: {leaked[0]}"
