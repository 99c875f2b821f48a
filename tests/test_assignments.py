"""Every assignment, graded by the real nbgrader: its solution, its release, its wrong answers.

* the instructor's solution earns every auto-graded point;
* the untouched release earns none;
* each wrong-but-plausible answer (demo/wrong-answers/) loses exactly the test
  cells it names and no others, and a visible test catches it unless it says
  ``visible = false``; at least 70% of a lesson's wrong answers are caught visibly,
  and every exercise is tried by at least four.
"""

from __future__ import annotations

import ast
import os

import pytest

from jaxgrader.grading.course.config import load_config
from jaxgrader.grading.course.notebooks import autograded_tests, is_autograded_test, read_notebook
from jaxgrader import course_style
from jaxgrader.grading.trials import (checked_only_by_the_solution, editions_of, forger_answers, outcomes, rates,
                                      run_trials, wrong_answers)
from jaxgrader.grading.sandbox.seed import draw_seed
from jaxgrader.grading.verdict.verdict import reference_stderr
from jaxgrader.simulated.accelerator import simulated_kernels

from .conftest import ASSIGNMENTS, ROOT


def _source_notebooks(assignment):
    return sorted((ROOT / "source" / assignment).glob("*.ipynb"))


def _problems(assignment, results, names):
    return [f"{o.name}: {o.problem or f'lost {sorted(o.lost)}, expected {sorted(o.expected)}'}"
            for o in outcomes(ROOT, assignment, results) if o.name in names and not o.ok]


_TRIALS: dict[str, dict] = {}
TRIALS_SIMULATE = os.environ.get("JAXGRADER_TRIALS_SIMULATE", "bfloat16,one-device")  # "": a plain CPU
# One seed for this process's trials, drawn afresh each run: their reference runs are then the ones
# test_source_test_cells_write_nothing_to_stderr reads (cached by notebook and seed), not second runs.
TRIALS_SEED = draw_seed()


def _trials(request, assignment, tmp_path_factory):
    """All trial students of ``assignment`` graded in one class run, shared by the tests below.

    One reference run and one nbgrader process per worker for the solution, the
    release and every wrong answer, instead of one run per test. When the
    wrong-answer test is not selected (the version lanes), only a solution and the
    releases are graded (an edition's solution where there is one).
    """
    if assignment not in _TRIALS:
        wanted = f"test_each_wrong_answer_loses_exactly_its_part[{assignment}]"
        everyone = any(item.name == wanted for item in request.session.items)
        # An edition's solution and release are the English ones typed into another release (the code
        # is the same: tests/test_translation.py). The main lane grades the English ones and every
        # other wrong-answer pack in the edition; the version lanes (JAX 0.7.2, Colab's) the edition's
        # solution and release, where there is an edition. `jaxgrader trials` grades them all.
        editions = editions_of(ROOT, assignment)
        skip = [f"{kind}-{lang}" for lang in editions for kind in ("solution", "release")] if everyone else None
        # Nor the solution where the other trial students hold each of its answers as written and must keep
        # its points (checked_only_by_the_solution): the version lanes grade it whole (an edition's).
        if everyone and editions and not checked_only_by_the_solution(ROOT, assignment):
            skip.append("solution")
        only = None if everyone else [f"{kind}-{lang}" for kind in ("solution", "release") for lang in editions] or [
            "solution", "release"]
        # Under `pytest -n`, every core already runs a test group: one kernel at a time here.
        workers = 1 if os.environ.get("PYTEST_XDIST_WORKER") else None
        # Graded as on a one-TPU host (bfloat16 matmuls, one device; jaxgrader/simulated), where the
        # grader's kernels compute float32 matmuls in full (SandboxedKernelManager.matmul_precision).
        with simulated_kernels(tmp_path_factory.mktemp(f"kernels-{assignment}"), TRIALS_SIMULATE):
            _TRIALS[assignment] = run_trials(ROOT, assignment, tmp_path_factory.mktemp(f"trials-{assignment}"),
                                             only=only, workers=workers, skip=skip, seed=TRIALS_SEED)
    return _TRIALS[assignment]


@pytest.mark.lane
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_full_marks_release_zero(assignment, request, tmp_path_factory):
    results = _trials(request, assignment, tmp_path_factory)
    problems = _problems(assignment, results, {o for o in results if o.startswith(("solution", "release"))})
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_wrong_answer_loses_exactly_its_part(assignment, request, tmp_path_factory):
    answers = wrong_answers(ROOT, assignment)
    names = [f"wrong-{a['name']}" for a in answers]
    assert len(set(names)) == len(names), "wrong-answer names must be unique"
    problems = _problems(assignment, _trials(request, assignment, tmp_path_factory), set(names))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_honest_rewrites_keep_full_marks(assignment, request, tmp_path_factory):
    """The instructor's answers binding what they build on at definition (a transform built at module
    level, a default argument, a factory, functools.partial: jaxgrader/grading/honest.py) keep every
    point, also where a hidden test isolates an exercise with stand-ins."""
    results = _trials(request, assignment, tmp_path_factory)
    honest = {name for name in results if name.startswith("honest-")}
    isolating = [read_notebook(path) for path in _source_notebooks(assignment)
                 if "if_failed=" in path.read_text(encoding="utf-8")]
    assert honest or not isolating, f"{assignment} isolates exercises, but no solution cell was rewritten"
    problems = _problems(assignment, results, honest)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_informed_forger_gains_no_point(assignment, request, tmp_path_factory):
    """The forger of jaxgrader/grading/forger.py, typed over the answers the wrong-answers file lists under
    `forger = [...]` (each lacks what a test is named for), loses every test they lose; typed into the
    blank release, it scores nothing (tests/test_forger.py shows what it buys where evidence is shape-only)."""
    assert forger_answers(ROOT, assignment), (
        f"demo/wrong-answers/{assignment}.toml lists no answers under forger = [...] (not jitted, recompiling, ...)")
    results = _trials(request, assignment, tmp_path_factory)
    problems = _problems(assignment, results, {"forged-release", "forged-lacking"})
    assert {"forged-release", "forged-lacking"} <= set(results) and not problems, "\n".join(problems)
    # its code is held for review (verdict/holds.py), and nobody else's: outcomes() says so for every trial
    assert results["forged-release"].held and results["forged-lacking"].held
    assert not [s for s, r in results.items() if r.held and not s.startswith("forged-")]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_tests_catch_what_each_answer_says(assignment, request, tmp_path_factory):
    """A wrong answer is caught by a visible test (the student finds out before submitting)
    unless it declares ``visible = false``; and at least 70% of a lesson's are caught."""
    found = [o for o in outcomes(ROOT, assignment, _trials(request, assignment, tmp_path_factory))
             if o.name.startswith("wrong-")]
    wrong = [f"{o.name}: {'caught' if o.visible else 'not caught'} by a visible test, declares visible = "
             f"{str(o.declared_visible).lower()}" for o in found if o.visible != o.declared_visible]
    assert not wrong, "\n".join(wrong)
    r = rates(found)
    assert r["flagged_visibly_rate"] >= 0.7, (
        f"{assignment}: visible tests catch {r['flagged_visibly']} of {r['answers']} wrong answers (goal: 70%)")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_exercise_is_tried_by_four_wrong_answers(assignment):
    answers = wrong_answers(ROOT, assignment)
    for path in _source_notebooks(assignment):
        nb = read_notebook(path)
        graded = set(autograded_tests(nb))
        for number, _, group in course_style.exercises(nb)[1:]:
            cells = {c.metadata.get("nbgrader", {}).get("grade_id") for c in group}
            if not cells & graded:
                continue  # a written answer, graded by hand
            tried = [a["name"] for a in answers if a["cell"] in cells]
            assert len(tried) >= 4, f"{path.name}: Exercise {number} is tried by {len(tried)} wrong answers {tried}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_test_cell_is_tried_by_a_wrong_answer(assignment):
    tried = {gid for a in wrong_answers(ROOT, assignment) for gid in a["fails"]}
    for path in _source_notebooks(assignment):
        untried = set(autograded_tests(read_notebook(path))) - tried
        assert not untried, f"{path.name}: no wrong answer fails {sorted(untried)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_assignment_shape(assignment):
    """At least four auto-graded exercises and one hand-graded written answer."""
    for path in _source_notebooks(assignment):
        nb = read_notebook(path)
        assert len(autograded_tests(nb)) >= 4, f"{path.name}: fewer than four auto-graded tests"
        written = [c for c in nb.cells if c.cell_type == "markdown"
                   and c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"].get("solution")]
        assert written, f"{path.name}: no manually graded written answer"


def _last_statement_gives_a_grade(source: str) -> bool:
    """True if nbgrader would read the cell's last line as a score.

    A trailing expression is displayed and nbgrader takes its value as the grade
    (True or Array(False) = full marks). Calls to assert_* helpers and to
    ``report`` (the hidden tests' hand-over to the grader) return None and
    display no value, so they are allowed.
    """
    body = ast.parse(source).body
    if not body or not isinstance(body[-1], ast.Expr):
        return False
    value = body[-1].value
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return not (name.startswith("assert") or name.lstrip("_") == "report")
    return True


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_test_cells_end_in_a_statement(assignment):
    for path in _source_notebooks(assignment):
        for cell in read_notebook(path).cells:
            if is_autograded_test(cell):
                gid = cell.metadata.nbgrader.grade_id
                assert not _last_statement_gives_a_grade(cell.source), (
                    f"{path.name}:{gid} ends in an expression; nbgrader would take its value as the grade")


def test_the_rule_catches_a_trailing_expression():
    assert _last_statement_gives_a_grade("x = 1\nx == 1")
    assert _last_statement_gives_a_grade("jnp.allclose(a, b)")
    assert not _last_statement_gives_a_grade("assert x == 1")
    assert not _last_statement_gives_a_grade("assert_trees_close(a, b)")
    assert not _last_statement_gives_a_grade('report("loss", loss_fn(p, x))')
    assert _last_statement_gives_a_grade('reported("loss")')


@pytest.mark.lane
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_test_cells_write_nothing_to_stderr(assignment):
    """A warning in a test cell on the solution is noise students see when they run the visible tests.

    (It no longer costs points: the verdict replaces test cells' outputs.) Read from
    the reference run the trials above already made in this process: no second run.
    A test cell that fails on the solution stops that run with ReferenceError.
    """
    config = load_config(ROOT)
    for path in _source_notebooks(assignment):
        for gid, noise in reference_stderr(path, config, seed=TRIALS_SEED).items():
            assert not noise, f"{path.name}:{gid} writes to stderr: {noise[:300]}"


@pytest.mark.lane
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_tests_fail_on_the_release_stubs(assignment, request, tmp_path_factory):
    """Every test cell stops in its *visible* part on the untouched release, so a student
    who runs it before answering sees a failure, not a pass. Read from the trials' grading
    of the release (the same nbgrader run, no second execution): the English one where this lane grades
    it, else the edition's (the same code)."""
    results = _trials(request, assignment, tmp_path_factory)
    release = results.get("release") or next(r for name, r in results.items() if name.startswith("release-"))
    assert not release.error, release.error
    tests = {gid for scores in release.scores.values() for gid in scores}
    assert tests - release.visible == set(), (
        f"{assignment}: test cells that do not fail visibly on the release stub: {sorted(tests - release.visible)}")


def test_wrong_answer_files_name_real_cells():
    for assignment in ASSIGNMENTS:
        cells = set()
        for path in _source_notebooks(assignment):
            nb = read_notebook(path)
            cells |= {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
        for answer in wrong_answers(ROOT, assignment):
            assert answer["cell"] in cells, f"{assignment}: {answer['name']} replaces unknown cell {answer['cell']}"
            unknown = set(answer["fails"]) - cells
            assert not unknown, f"{assignment}: {answer['name']} names unknown tests {sorted(unknown)}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_test_cell_reports_to_the_grader(assignment):
    """Points come from reported values only: a test cell without reports could earn nothing."""
    for path in _source_notebooks(assignment):
        for cell in read_notebook(path).cells:
            if is_autograded_test(cell):
                parts = cell.source.split("### BEGIN HIDDEN TESTS")
                gid = cell.metadata.nbgrader.grade_id
                assert len(parts) == 2 and "report(" in parts[1], f"{path.name}:{gid} has no hidden block that reports"


def test_packing_keeps_answers_that_could_mask_each_other_apart():
    from jaxgrader.grading.trials import pack

    a = {"name": "a", "cell": "f", "fails": ["test_f"]}
    b = {"name": "b", "cell": "f", "fails": ["test_f"]}                   # same cell as a
    c = {"name": "c", "cell": "g", "fails": ["test_f", "test_g"]}         # claims a's and b's test too
    d = {"name": "d", "cell": "h", "fails": ["test_h", "test_accuracy"]}
    e = {"name": "e", "cell": "i", "fails": ["test_i", "test_accuracy"]}  # shares only the end-to-end test
    f = {"name": "f", "cell": "j", "fails": ["test_accuracy"]}            # nothing of its own: alone
    groups = [[x["name"] for x in g] for g in pack([a, b, c, d, e, f], shared={"test_accuracy"})]
    assert groups == [["a", "d", "e"], ["b"], ["c"], ["f"]]
    strict = [[x["name"] for x in g] for g in pack([a, b, c, d, e, f])]
    assert strict == [["a", "d"], ["b", "e"], ["c", "f"]]


def test_spreading_moves_an_earlier_mistake_behind_a_correct_later_cell_and_keeps_the_packs():
    """The greedy packing puts the k-th answers of every cell together, so `b` (which calls `a`) is never held
    correct behind a wrong `a`; `spread` moves one answer to `a` into the group where `b` is right, and no more."""
    from jaxgrader.grading.honest import honest_answers
    from jaxgrader.grading.trials import pack
    from jaxgrader.grading.trial_students import spread

    cells = [("a", "def a(x):\n    return x", True), ("b", "def b(x):\n    return a(x) + 1", True),
             ("c", "def c(x):\n    return 2 * x", True)]
    solutions = {"nb": {gid: src for gid, src, _ in cells}}
    answers = [{"name": f"{cell}{k}", "cell": cell, "fails": [f"test_{cell}"], "code": "..."}
               for cell, n in (("a", 2), ("b", 2), ("c", 3)) for k in range(n)]
    greedy = pack(answers)
    assert [[x["name"] for x in g] for g in greedy] == [["a0", "b0", "c0"], ["a1", "b1", "c1"], ["c2"]]
    moved = spread(greedy, set(), {"nb": (cells, honest_answers(cells, solutions["nb"]))}, solutions)
    assert [[x["name"] for x in g] for g in moved] == [["b0", "c0"], ["a1", "b1", "c1"], ["c2", "a0"]]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_wrong_answers_meet_the_styles_downstream_and_each_keeps_its_packs(assignment):
    """Packed, a wrong-answer student holds rewritten exactly the rewritten cells downstream of its mistakes; graded
    alone (--each), an answer holds those of its pack that are downstream of it. Spreading answers over the packs
    makes no more packs than the greedy packing."""
    from jaxgrader.grading.course.notebooks import grade_id, is_solution
    from jaxgrader.grading.honest import downstream, honest_answers
    from jaxgrader.grading.trials import pack, shared_tests, trial_students

    from jaxgrader.grading.trial_students import early_bound

    packed, holds = trial_students(ROOT, assignment)
    alone, _ = trial_students(ROOT, assignment, packed=False)
    seen: dict[str, set[str]] = {}
    answers = wrong_answers(ROOT, assignment)
    assert len(holds) == len(pack(answers, shared_tests(ROOT, assignment)))
    for path in _source_notebooks(assignment):
        nb, cells = path.stem, [(grade_id(c) or "", c.source, is_solution(c))
                                for c in read_notebook(path).cells if c.cell_type == "code"]
        rewritable = set(next(iter(honest_answers(cells, packed["solution"][nb]).values()), {}))
        for student, group in holds.items():
            mine = {w["cell"]: w["code"] for w in group if w["cell"] in packed["solution"][nb]}
            later = downstream([(g, mine.get(g, src), sol) for g, src, sol in cells], set(mine)) & rewritable
            rewritten = {g for g, code in packed[student][nb].items()
                         if g not in mine and code != packed["solution"][nb][g]}
            assert rewritten == later - set(mine), (student, sorted(rewritten), sorted(later))
            seen.setdefault(student, set()).update(rewritten)
            for w in group:
                if w["cell"] not in mine:
                    continue
                own = {g: code for g, code in alone[f"wrong-{w['name']}"][nb].items()
                       if g != w["cell"] and code != packed["solution"][nb][g]}
                assert all(packed[student][nb][g] == code for g, code in own.items()), w["name"]
    # what the trials' summary counts ("N wrong-answer students hold correct later answers bound early")
    assert {s: set(cells) for s, cells in early_bound(packed, holds).items()} == {s: c for s, c in seen.items() if c}
