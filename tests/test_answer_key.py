"""No answer in the exam room: nothing a grading kernel can reach earns a point as a graded exercise's answer.

The kernel can import all of ``jaxgrader`` (it is installed where the kernel runs) and
sees every name a hidden test defined. A student who has read the course's public
repository could alias any of them as an exercise (``from jaxgrader.checks.mlp import
... as mlp_apply``). This sweep tries every callable reachable that way, as the answer to
every graded exercise, and fails if one earns a point.

How, cheaply: per lesson, one kernel runs the instructor's notebook (its test cells'
reports are the reference, as in grading: same code, same seed), then lists the
candidates it can reach: every function and class defined in a module of
``jaxgrader.checks``, what those return when called with no arguments, and every name a
hidden test defined. Then, in the same kernel, for each test cell and each exercise it
grades (a catalogued wrong answer to that exercise loses it), the test cell runs again
once per candidate bound to that exercise's name, and ``judge_cell`` (the verdict's own
judging) compares its reports with the reference's. Two filters keep it cheap: a
candidate whose signature cannot take the exercise's required arguments is not tried
(the call would raise), nor one that raises or returns another structure, shapes or
kinds of numbers than the exercise on the test's own (recorded, concrete) calls.
"""

from __future__ import annotations

import ast
import json
import os
import textwrap
import tomllib
from collections import Counter

import nbformat
import pytest
from nbclient import NotebookClient

from jaxgrader.grading.verdict.judging import judge_cell
from jaxgrader.grading.verdict.reports import parse_report, payloads

from .conftest import ASSIGNMENTS, ROOT

HIDDEN = "### BEGIN HIDDEN TESTS"
# Rules judged on what only a class run has: the grader's clock (cell_time) and its evaluator of exported
# programs and trained parameters (program, scores). ``judge_cell`` here fails them, so a test cell with one
# scores nothing whatever is bound: running its candidates would cost minutes and could find nothing. Its
# other parts are values compared with the reference's, and the exercise's other test cells are swept.
GRADER_ONLY = {"cell_time", "program", "scores"}
SEED = "20261126"


def _defined(source: str) -> set[str]:
    """Top-level names a piece of code defines (functions, classes, assignments, imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _used(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def _is_test(cell):
    return cell.cell_type == "code" and _meta(cell).get("grade") and not _meta(cell).get("solution")


LIST_CANDIDATES = '''
import importlib as __i, inspect as __insp, json as __json, pkgutil as __pk
import jaxgrader.checks as __checks

__exercises = {__n: globals()[__n] for __n in %(exercises)r if callable(globals().get(__n))}
__candidates = {}
for __m in __pk.iter_modules(__checks.__path__):
    __mod = __i.import_module("jaxgrader.checks." + __m.name)
    for __a, __v in vars(__mod).items():
        if callable(__v) and getattr(__v, "__module__", None) == __mod.__name__:
            __expr = "__import__('jaxgrader.checks.%%s', fromlist=['_'])" %% __m.name + ".%%s" %% __a
            __candidates[__expr] = __v
            try:
                __sig = __insp.signature(__v)
                __sig.bind()
            except (TypeError, ValueError):
                continue
            if not __insp.isclass(__v) and __a not in ("report",):
                try:
                    __r = __v()
                except Exception:
                    continue
                if callable(__r):
                    __candidates[__expr + "()"] = __r
for __n in %(hidden)r:
    __v = globals().get(__n)
    # a hidden test keeping the student's own function aside (`_student_apply = mlp_apply`, or
    # `_fn = jax.jit(compute_loss_and_updates)`) holds no key: it is the student's own code
    __u = __insp.unwrap(__v) if callable(__v) else __v
    if callable(__v) and not __insp.ismodule(__v) and not any(__u is __f or __v is __f for __f in __exercises.values()):
        __candidates["globals()[%%r]" %% __n] = __v
_sweep_candidates = __candidates


def __required(f):
    try:
        return sum(1 for p in __insp.signature(f).parameters.values()
                   if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    except (TypeError, ValueError):
        return None


def __fits(c, n):
    try:
        __insp.signature(c).bind(*[None] * n)
        return True
    except TypeError:
        return False
    except ValueError:
        return True


print(__json.dumps({__e: [__x for __x, __c in __candidates.items()
                          if __required(__f) is None or __fits(__c, __required(__f))]
                    for __e, __f in __exercises.items()}))
'''

HELPERS = '''import copy as _sweep_copy, json as _sweep_json
import jax as _sweep_jax
import numpy as _sweep_np


class _SweepRecorder:
    """Calls the exercise and keeps its first concrete calls (arguments and result)."""

    def __init__(self, f):
        self.__dict__.update(f=f, calls=[])

    def __call__(self, *args, **kwargs):
        out = self.f(*args, **kwargs)
        try:
            concrete = not any(isinstance(v, _sweep_jax.core.Tracer) for v in _sweep_jax.tree.leaves((args, kwargs, out)))
            if concrete and len(self.calls) < 3:
                self.calls.append((_sweep_copy.deepcopy(args), _sweep_copy.deepcopy(kwargs), out))
        except Exception:
            pass
        return out

    def __getattr__(self, name):
        return getattr(self.f, name)


def _sweep_shape(tree):
    leaves, treedef = _sweep_jax.tree.flatten(tree)

    def leaf(v):
        try:
            a = _sweep_np.asarray(v)
            if a.dtype.kind in "biuf":
                return ("array", a.shape, a.dtype.kind)
        except Exception:
            pass
        return ("object", type(v).__name__)

    return str(treedef), [leaf(v) for v in leaves]


def _sweep_plausible(exprs, calls):
    """The candidates whose results have the structure, shapes and kinds of the exercise's on its recorded calls."""
    found = []
    for expr in exprs:
        try:
            c = _sweep_candidates[expr]
            if all(_sweep_shape(c(*_sweep_copy.deepcopy(a), **_sweep_copy.deepcopy(k))) == _sweep_shape(out)
                   for a, k, out in calls):
                found.append(expr)
        except Exception:
            pass
    return found
'''


def _grading_xla_flags(assignment: str) -> str:
    """XLA_FLAGS as the course's grading kernels get them (nbgrader_config.py): LLVM's optimisations
    off, which the sweep's many small programs compile faster without (lesson 3: 35 -> 31 s)."""
    from jaxgrader.grading.course.config import load_config
    from jaxgrader.grading.sandbox.sandbox import SandboxedKernelManager

    return SandboxedKernelManager(config=load_config(ROOT)).xla_flags_for(assignment)


def _code(source):
    return nbformat.v4.new_code_cell(source)


class Sweep:
    """One kernel: the instructor's notebook, then test cells again with candidates bound."""

    def __init__(self, nb, cwd, assignment):
        self.nb = nb
        env = {"JAXGRADER_SEED": SEED, "NBGRADER_EXECUTION": "1", "KERAS_BACKEND": "jax",
               "XLA_FLAGS": _grading_xla_flags(assignment)}
        os.environ.update(env)  # the kernel inherits them
        self.client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(cwd)}})

    def run(self, source):
        cell = _code(source)
        self.nb.cells.append(cell)
        self.client.execute_cell(cell, len(self.nb.cells) - 1)
        return cell

    def passes(self, name, candidate, test_source, reference) -> bool:
        """Whether the test cell passes with ``candidate`` bound to ``name`` (restored after, in one cell)."""
        cell = self.run(f"__sweep_saved = {name}\n{name} = {candidate}\ntry:\n"
                        + textwrap.indent(test_source, "    ") + f"\n    pass\nfinally:\n    {name} = __sweep_saved\n")
        return all(p["passed"] for p in judge_cell(cell.outputs, reference))

    def plausible(self, name, candidates, test_source) -> list[str]:
        """The candidates worth a full run: recorded calls of ``name`` in the test, each candidate on them.

        A candidate that raises, or returns another structure, shapes or kinds of numbers than
        the exercise did on the test's own concrete calls, cannot pass its checks. A test
        whose calls are all traced records none: then every candidate gets a full run.
        """
        self.run(f"_sweep_recorder = _SweepRecorder({name})")
        self.passes(name, "_sweep_recorder", test_source, [])
        cell = self.run(f"print(_sweep_json.dumps(_sweep_plausible({candidates!r}, _sweep_recorder.calls)))")
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        return json.loads(text.strip().splitlines()[-1]) if text.strip() else list(candidates)


def _graded_by(assignment, source_nb) -> dict[str, set[str]]:
    """test grade_id -> the exercise names it grades.

    A test grades the names that the most catalogued wrong answers losing it (demo/wrong-answers)
    define otherwise than the solution, where the test's code names them. A name fewer change is
    an earlier exercise the test only runs (a downstream test whose visible part calls it), and
    an end-to-end test the catalogue declares shared (a final accuracy) grades none: any running
    version of such an exercise, right or wrong, passes them, so passing one proves no answer key.
    """
    with (ROOT / "demo" / "wrong-answers" / f"{assignment}.toml").open("rb") as fh:
        catalogue = tomllib.load(fh)
    solutions = {_meta(c).get("grade_id"): c.source for c in source_nb.cells
                 if c.cell_type == "code" and _meta(c).get("solution")}
    counts: dict[str, Counter] = {}
    for answer in catalogue.get("answer", []):
        for test in answer["fails"]:
            counts.setdefault(test, Counter()).update(_changed(solutions.get(answer["cell"], ""), answer["code"]))
    used = {_meta(c)["grade_id"]: _used(c.source) for c in source_nb.cells if _is_test(c)}
    graded = {}
    for test, count in counts.items():
        if test not in catalogue.get("shared", []) and count:
            most = max(count.values())
            graded[test] = {name for name, n in count.items() if n == most} & used.get(test, set())
    return graded


def _changed(solution: str, wrong: str) -> set[str]:
    """The top-level names a wrong answer defines otherwise than the solution cell (or not at all)."""
    def definitions(source):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return {}
        found = {}
        for node in tree.body:
            for name in _defined(ast.unparse(node)) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [node.name]:
                found[name] = ast.dump(node)
        return found

    mine, theirs = definitions(solution), definitions(wrong)
    return {name for name in mine if theirs.get(name) != mine[name]}


def _sweep(assignment, tmp_path):
    (path,) = sorted((ROOT / "source" / assignment).glob("*.ipynb"))
    source_nb = nbformat.read(path, as_version=4)
    exercises = sorted(set().union(*(_defined(c.source) for c in source_nb.cells
                                     if c.cell_type == "code" and _meta(c).get("solution"))))
    hidden = sorted(set().union(*(_defined(c.source.split(HIDDEN, 1)[1]) for c in source_nb.cells
                                  if _is_test(c) and HIDDEN in c.source)) - set(exercises))
    tests = [c for c in source_nb.cells if _is_test(c)]
    cwd = tmp_path / assignment
    cwd.mkdir()
    nb = nbformat.v4.new_notebook(metadata=source_nb.metadata)
    nb.cells = [nbformat.from_dict(dict(c)) for c in source_nb.cells]
    earned, tried = [], 0  # tried: candidates that got a full run
    sweep = Sweep(nb, cwd, assignment)
    with sweep.client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            sweep.client.execute_cell(cell, index)
        reference = {}
        for cell in nb.cells:
            if _is_test(cell):
                found, problems = payloads(cell.outputs)
                assert found and not problems, f"{_meta(cell)['grade_id']} reports nothing on the solution"
                reference[_meta(cell)["grade_id"]] = [parse_report(p) for p in found]
        listed = sweep.run(LIST_CANDIDATES % {"exercises": exercises, "hidden": hidden})
        text = "".join(o.get("text", "") for o in listed.outputs if o.get("name") == "stdout")
        assert text, f"listing the candidates failed: {listed.outputs}"
        candidates = json.loads(text.strip().splitlines()[-1])
        sweep.run(HELPERS)
        graded = _graded_by(assignment, source_nb)
        for test in tests:
            gid = _meta(test)["grade_id"]
            if any(ref["rule"] in GRADER_ONLY for ref in reference[gid]):
                continue  # judged here, it could not pass with any candidate (see GRADER_ONLY)
            for name in sorted(graded.get(gid, set()) & set(candidates)):
                for candidate in sweep.plausible(name, candidates[name], test.source):
                    tried += 1
                    if sweep.passes(name, candidate, test.source, reference[gid]):
                        earned.append(f"{gid}: {name} = {candidate}")
    return earned, tried, candidates


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_nothing_the_kernel_can_reach_answers_a_graded_exercise(assignment, tmp_path):
    earned, tried, candidates = _sweep(assignment, tmp_path)
    assert any(candidates.values()), "no candidate was tried: the sweep is broken"
    assert not earned, f"{len(earned)} of {tried} tries earned a test's points:\n" + "\n".join(earned)
