"""Trial submissions: grade known answers with the real nbgrader, cell by cell.

For one assignment this builds, in a scratch copy of the course:

* ``solution``: every solution cell holds the instructor's answer;
* ``release``: the student version, untouched;
* ``wrong-<name>``: the instructor's answers with one cell replaced by a
  wrong-but-plausible answer from ``demo/wrong-answers/<assignment>.toml``.

and autogrades them all with ``nbgrader autograde``. The test suite then
checks that the solution earns every auto-graded point, the release none, and
each wrong answer loses the points of exactly the test cells it names in
``fails`` and no others.

A wrong-answers file looks like::

    [[answer]]
    name = "relu-on-logits"          # short, unique
    cell = "mlp_apply"               # grade_id of the solution cell it replaces
    fails = ["test_mlp_apply"]       # grade_ids of test cells that must score 0
    demo = true                      # optional: the demo student 'cy' makes this mistake
    why = "ReLU applied to the output layer too"
    code = '''
    def mlp_apply(params, x): ...
    '''
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import tomllib
from pathlib import Path

from .config import load_config, make_api
from .course import source_notebooks
from .notebooks import autograded_tests, read_notebook, solutions_of, write_submission
from .seed import run_seed


def wrong_answers(root: Path, assignment: str) -> list[dict]:
    """The wrong-but-plausible answers for ``assignment`` (each: name, cell, fails, code)."""
    path = Path(root) / "demo" / "wrong-answers" / f"{assignment}.toml"
    if not path.exists():
        return []
    with path.open("rb") as fh:
        answers = tomllib.load(fh).get("answer", [])
    for a in answers:
        missing = {"name", "cell", "fails", "code"} - set(a)
        if missing:
            raise ValueError(f"{path}: answer {a.get('name', '?')!r} lacks {', '.join(sorted(missing))}")
    return answers


@dataclasses.dataclass
class TrialResult:
    """Points each auto-graded test cell earned, per notebook, for one trial student."""

    student: str
    scores: dict[str, dict[str, float]]  # notebook -> grade_id -> auto score
    error: str = ""


def scratch_course(root: Path, dest: Path, assignment: str, references: dict | None = None) -> Path:
    """Copy what grading needs (config, source/<assignment>) into ``dest``.

    ``references`` (notebook -> grade_id -> reports), when given, are the reference
    run's reports: every scratch course uses them instead of running its own.
    """
    root, dest = Path(root), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "nbgrader_config.py", dest / "nbgrader_config.py")
    shutil.copytree(root / "source" / assignment, dest / "source" / assignment, dirs_exist_ok=True)
    if references is not None:
        (dest / "references.json").write_text(json.dumps(references))
        with open(dest / "nbgrader_config.py", "a") as fh:
            fh.write("\n# trials: the reference run's reports, computed once for every trial course\n"
                     "import json as _json\n"
                     f"c.Verdict.references = _json.loads(open({str(dest / 'references.json')!r}).read())\n")
    return dest


def reference_of(root: Path, assignment: str) -> dict:
    """notebook -> the reference run's reports, with this process's seed (one run per notebook)."""
    from .verdict import reference_reports

    config = load_config(root)
    return {nb: reference_reports(Path(root) / "source" / assignment / f"{nb}.ipynb", config)
            for nb in source_notebooks(root, assignment)}


def trial_students(root: Path, assignment: str) -> dict[str, dict[str, dict[str, str] | None]]:
    """student -> notebook -> answers (None = release as is)."""
    notebooks = source_notebooks(root, assignment)
    solutions = {nb: solutions_of(read_notebook(Path(root) / "source" / assignment / f"{nb}.ipynb"))
                 for nb in notebooks}
    students: dict[str, dict[str, dict[str, str] | None]] = {
        "solution": dict(solutions),
        "release": {nb: None for nb in notebooks},
    }
    for wrong in wrong_answers(root, assignment):
        owner = [nb for nb in notebooks if wrong["cell"] in solutions[nb]]
        if not owner:
            raise ValueError(f"wrong answer {wrong['name']!r}: no solution cell {wrong['cell']!r} in {assignment}")
        answers = {nb: dict(solutions[nb]) for nb in notebooks}
        answers[owner[0]][wrong["cell"]] = wrong["code"]
        students[f"wrong-{wrong['name']}"] = answers
    return students


def _grade_share(root: str, assignment: str, workdir: str, students: dict,
                 references: dict | None = None, seed: int | None = None) -> dict[str, TrialResult]:
    """One worker: a scratch course of its own (own gradebook), grading its share of students."""
    from nbgrader.api import Gradebook

    if seed is not None:
        os.environ["JAXGRADER_SEED"] = str(seed)
    course = scratch_course(Path(root), Path(workdir), assignment, references)
    config = load_config(course, course / "gradebook.db")
    api = make_api(config)
    result = api.generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"generate_assignment {assignment} failed:\n{result.get('error') or result.get('log')}")
    for student, notebooks in students.items():
        write_submission(course / "release" / assignment, course / "submitted" / student / assignment, notebooks)

    out: dict[str, TrialResult] = {}
    db_url = config.CourseDirectory.db_url
    for student in students:
        graded = api.autograde(assignment, student, force=True, create=True)
        if not graded["success"]:
            out[student] = TrialResult(student, {}, graded.get("error") or graded.get("log") or "failed")
            continue
        per_nb = {}
        with Gradebook(db_url) as gb:
            for nb_name in students[student]:
                source = read_notebook(course / "source" / assignment / f"{nb_name}.ipynb")
                per_nb[nb_name] = {
                    gid: float(gb.find_grade(gid, nb_name, assignment, student).auto_score or 0.0)
                    for gid in autograded_tests(source)
                }
        out[student] = TrialResult(student, per_nb)
    return out


def run_trials(root: Path, assignment: str, workdir: Path, only: list[str] | None = None,
               workers: int | None = None) -> dict[str, TrialResult]:
    """Autograde every trial student of ``assignment`` with real nbgrader.

    Students are shared out over ``workers`` processes (default: CPU count),
    each with its own scratch course and SQLite gradebook under ``workdir``.
    The reference run happens once, here, and every worker uses its reports.
    """
    from concurrent.futures import ProcessPoolExecutor

    students = trial_students(root, assignment)
    if only is not None:
        students = {k: v for k, v in students.items() if k in only}
    workers = max(1, min(workers or os.cpu_count() or 1, len(students)))
    names = list(students)
    shares = [{n: students[n] for n in names[i::workers]} for i in range(workers)]
    seed = run_seed()
    references = reference_of(root, assignment)
    if workers == 1:
        return _grade_share(str(root), assignment, str(Path(workdir) / "w0"), shares[0], references, seed)
    out: dict[str, TrialResult] = {}
    # spawn, not fork: the parent may already run JAX's threads.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_grade_share, str(root), assignment, str(Path(workdir) / f"w{i}"), share,
                               references, seed)
                   for i, share in enumerate(shares)]
        for future in futures:
            out.update(future.result())
    return {n: out[n] for n in names}


def expected_failures(root: Path, assignment: str) -> dict[str, set[str]]:
    """trial student -> grade_ids that must score 0 (solution: none; release: all)."""
    notebooks = source_notebooks(root, assignment)
    all_tests = set()
    for nb in notebooks:
        all_tests |= set(autograded_tests(read_notebook(Path(root) / "source" / assignment / f"{nb}.ipynb")))
    expected = {"solution": set(), "release": all_tests}
    for wrong in wrong_answers(root, assignment):
        expected[f"wrong-{wrong['name']}"] = set(wrong["fails"])
    return expected
