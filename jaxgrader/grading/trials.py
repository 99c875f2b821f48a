"""Trial submissions: grade known answers with the real nbgrader, cell by cell.

For one assignment this builds, in a scratch copy of the course:

* ``solution``: every solution cell holds the instructor's answer;
* ``release``: the student version, untouched;
* ``wrong-<name>``: the instructor's answers with one cell replaced by a
  wrong-but-plausible answer from ``demo/wrong-answers/<assignment>.toml``;
* for each edition of the course (``ko``): ``solution-ko`` and ``release-ko``, typed into
  the edition's release, and every other wrong-answer student (``trial_students``).
* ``honest-<style>``: the instructor's answers rewritten to bind what they build on in another
  style (a transform built at module level, a default argument, a factory, ``functools.partial``:
  ``honest.py``), which must keep full marks like the solution; packed, ``honest-mixed-<k>``, whose
  rewritten cells take the styles in turn;
* ``honest-independent``: the answers a second author wrote on their own, correctly and differently
  (``demo/independent/<assignment>.toml``, where there is one), which must keep full marks too;
* ``forged-release`` and ``forged-lacking``: the informed forger (``forger.py``) typed into the
  blank release (must score nothing) and into the answers the wrong-answers file lists under
  ``forger = [...]`` (must lose every test those answers lose: the forger gains no point).

and grades them all as one class run of that scratch course: the same tasks, the same
gradebook writer and the same verdict as ``jaxgrader grade`` (:func:`grade_class`), so
the trials test the path teachers run. The test suite then
checks that the solution earns every auto-graded point, the release none, and
each wrong answer loses the points of exactly the test cells it names in
``fails`` and no others.

Wrong answers that replace different cells and claim different tests (except
the tests the file declares ``shared``, e.g. a final accuracy) are *packed* into one
trial student (``wrong-pack-<k>``, see ``pack``): that student must lose exactly the
union of their ``fails``. A class of 100 wrong answers
is then about as many autogrades as the exercise with the most wrong answers has, not 100.
``pack=False`` (``jaxgrader trials --each``) grades one student per answer, to
pin down which answer of a failing pack misbehaves.

Each answer also says whether a *visible* test catches it: by default some test
cell in its ``fails`` must stop in its visible part (the student sees the mistake
before submitting); ``visible = false`` declares a mistake only hidden tests catch.

A wrong-answers file looks like::

    shared = ["test_accuracy"]       # optional: end-to-end tests many answers may share in a pack

    [[answer]]
    name = "relu-on-logits"          # short, unique
    cell = "mlp_apply"               # grade_id of the solution cell it replaces
    fails = ["test_mlp_apply"]       # grade_ids of test cells that must score 0
    demo = true                      # optional: the demo student 'cy' makes this mistake
    visible = false                  # optional: no visible test catches it (default true)
    why = "ReLU applied to the output layer too"
    code = '''
    def mlp_apply(params, x): ...
    '''
"""

from __future__ import annotations

import dataclasses
import shutil
import tomllib
from pathlib import Path

from .course.config import load_config, make_api
from .course.coursedir import Course, coursedir_of, edition_coursedir, folder, source_notebooks
from .course.notebooks import autograded_tests, grade_id, is_solution, read_notebook, solutions_of, write_submission
from .forger import FORGER, forged
from .honest import honest_answers, mixed_answers


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
    visible: set[str] = dataclasses.field(default_factory=set)  # test cells that stopped in their visible part
    held: int = 0  # findings of code no answer needs, its cost and artifact parts held for review (verdict/holds.py)

    @property
    def lost(self) -> set[str]:
        """Test cells that scored nothing."""
        return {gid for scores in self.scores.values() for gid, pts in scores.items() if pts == 0}


def scratch_course(root: Path, dest: Path, assignment: str) -> Path:
    """Copy what grading needs (config, the assignment's source folder) into ``dest``."""
    root, dest = Path(root), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(root / "nbgrader_config.py", dest / "nbgrader_config.py")
    config = load_config(root)
    shutil.copytree(folder(coursedir_of(config), "source", ".", assignment),
                    folder(coursedir_of(load_config(dest)), "source", ".", assignment), dirs_exist_ok=True)
    return dest


def independent_answers(root: Path, assignment: str) -> dict[str, str] | None:
    """grade_id -> an answer written independently of the instructor's, correct in another way
    (``demo/independent/<assignment>.toml``, ``[[answer]]`` entries with ``cell`` and ``code``), or None."""
    path = Path(root) / "demo" / "independent" / f"{assignment}.toml"
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        return {a["cell"]: a["code"].strip("\n") for a in tomllib.load(fh).get("answer", [])}


def forger_answers(root: Path, assignment: str) -> list[dict]:
    """The wrong answers the forger is typed over (top-level ``forger = ["name", ...]``): each lacks what a
    test is named for (not jitted, recompiling, unrolled, not training, ...)."""
    path = Path(root) / "demo" / "wrong-answers" / f"{assignment}.toml"
    if not path.exists():
        return []
    with path.open("rb") as fh:
        names = tomllib.load(fh).get("forger", [])
    by_name = {a["name"]: a for a in wrong_answers(root, assignment)}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"{path}: forger names no wrong answer {unknown}")
    return [by_name[n] for n in names]


def shared_tests(root: Path, assignment: str) -> set[str]:
    """Tests the wrong-answers file declares shared (top-level ``shared = [...]``): end-to-end
    tests, such as a final accuracy, that mistakes in many different cells break."""
    path = Path(root) / "demo" / "wrong-answers" / f"{assignment}.toml"
    if not path.exists():
        return set()
    with path.open("rb") as fh:
        return set(tomllib.load(fh).get("shared", []))


def own_tests(answer: dict, group: list[dict], shared: set[str] = frozenset()) -> set[str]:
    """The failing tests ``answer`` claims that are not shared and no other answer in ``group`` claims
    (alone in its group: every test it claims)."""
    if len(group) == 1:
        return set(answer["fails"])
    others = set().union(*(set(a["fails"]) for a in group if a is not answer))
    return set(answer["fails"]) - others - set(shared)


def pack(answers: list[dict], shared: set[str] = frozenset()) -> list[list[dict]]:
    """Wrong answers grouped into trial students whose mistakes can be told apart.

    In a group no two answers replace the same cell, claim the same test unless it is
    declared shared (an end-to-end accuracy test that any broken part fails), and every
    answer keeps a failing test of its own that is not shared, so each is seen to lose
    points. The group must still lose its shared tests, but which member lost them is
    only told by ``--each``. Greedy, in file order.
    """
    groups: list[list[dict]] = []
    for answer in answers:
        for group in groups:
            merged = group + [answer]
            if (all(a["cell"] != answer["cell"] and not (set(a["fails"]) & set(answer["fails"])) - set(shared)
                    for a in group)
                    and all(own_tests(a, merged, shared) for a in merged)):
                group.append(answer)
                break
        else:
            groups.append([answer])
    return groups


def editions_of(root: Path, assignment: str) -> list[str]:
    """The languages whose edition has this assignment's release (``<lang>/release/<assignment>``)."""
    from .editions.catalogs import languages

    coursedir = coursedir_of(load_config(root))
    return [lang for lang in languages(Path(root))
            if folder(edition_coursedir(coursedir, lang), "release", ".", assignment).is_dir()]


def edition_release(root: Path, assignment: str, student: str) -> Path | None:
    """The edition's release a trial student starts from (``solution-ko``, ``wrong-pack-2-ko``: the
    Korean one), or None for the English."""
    for lang in editions_of(root, assignment):
        if student.endswith(f"-{lang}"):
            return folder(edition_coursedir(coursedir_of(load_config(root)), lang), "release", ".", assignment)
    return None


PACKED = ("wrong-pack-", "honest-mixed-")  # names of students that exist only packed


def is_packed(packed: bool, only: list[str] | None) -> bool:
    """Whether a run asked for ``only`` these students grades packed ones: with ``only``, each wrong
    answer and each style is a student of its own, unless a packed one is named."""
    return packed and (only is None or any(name.startswith(PACKED) for name in only))


def trial_students(root: Path, assignment: str, packed: bool = True
                   ) -> tuple[dict[str, dict[str, dict[str, str] | None]], dict[str, list[dict]]]:
    """(student -> notebook -> answers (None = release as is), student -> the wrong answers it holds).

    Where the course has editions of the assignment (docs/translating.md), each also gets a
    solution and a release student (``solution-ko``, ``release-ko``), and the packed wrong-answer
    students take turns: every other one types its answers into an edition's release
    (``wrong-pack-2-ko``). An edition's code is the English code (tests/test_translation.py), so its
    wrong answers are not graded twice; each is graded once, in one edition or the other.
    """
    notebooks = source_notebooks(root, assignment)
    source = folder(coursedir_of(load_config(root)), "source", ".", assignment)
    solutions = {nb: solutions_of(read_notebook(source / f"{nb}.ipynb")) for nb in notebooks}
    editions = editions_of(root, assignment)
    students: dict[str, dict[str, dict[str, str] | None]] = {
        "solution": dict(solutions),
        "release": {nb: None for nb in notebooks},
    }
    for lang in editions:
        students[f"solution-{lang}"] = dict(solutions)
        students[f"release-{lang}"] = {nb: None for nb in notebooks}
    turn = 0
    for nb in notebooks:
        cells = [(grade_id(c) or "", c.source, is_solution(c))
                 for c in read_notebook(source / f"{nb}.ipynb").cells if c.cell_type == "code"]
        by_style = honest_answers(cells, solutions[nb])
        if packed and by_style:
            by_style, turn = mixed_answers(by_style, turn)
        for style, answers in by_style.items():
            students.setdefault(f"honest-{style}", {n: dict(solutions[n]) for n in notebooks})[nb].update(answers)
    independent = independent_answers(root, assignment)
    if independent:
        students["honest-independent"] = {nb: {**solutions[nb], **{g: a for g, a in independent.items()
                                                                   if g in solutions[nb]}} for nb in notebooks}
    first = next(((nb, grade_id(c)) for nb in notebooks for c in read_notebook(source / f"{nb}.ipynb").cells
                  if is_solution(c) and c.cell_type == "code"), None)
    lacking = forger_answers(root, assignment)
    if first is not None:
        nb0, gid0 = first
        students["forged-release"] = {nb: ({gid0: FORGER} if nb == nb0 else None) for nb in notebooks}
        if lacking:
            filled = {nb: dict(solutions[nb]) for nb in notebooks}
            for wrong in lacking:
                owner = next(nb for nb in notebooks if wrong["cell"] in solutions[nb])
                filled[owner][wrong["cell"]] = wrong["code"]
            filled[nb0] = forged(filled[nb0], gid0)
            students["forged-lacking"] = filled
    turns = [None] + editions
    answers = wrong_answers(root, assignment)
    for wrong in answers:
        if not any(wrong["cell"] in solutions[nb] for nb in notebooks):
            raise ValueError(f"wrong answer {wrong['name']!r}: no solution cell {wrong['cell']!r} in {assignment}")
    groups = pack(answers, shared_tests(root, assignment)) if packed else [[a] for a in answers]
    holds: dict[str, list[dict]] = {}
    for k, group in enumerate(groups, 1):
        name = f"wrong-pack-{k}" if packed else f"wrong-{group[0]['name']}"
        if packed and turns[k % len(turns)]:
            name += f"-{turns[k % len(turns)]}"
        filled = {nb: dict(solutions[nb]) for nb in notebooks}
        for wrong in group:
            owner = next(nb for nb in notebooks if wrong["cell"] in solutions[nb])
            filled[owner][wrong["cell"]] = wrong["code"]
        students[name] = filled
        holds[name] = group
    return students, holds


def checked_only_by_the_solution(root: Path, assignment: str) -> list[str]:
    """The instructor's answers that no other trial student holds as written where it must keep their points:
    empty when the ``solution`` student would grade nothing the others do not.

    An honest rewrite must keep every point, so it checks each answer it leaves as written; a wrong-answer
    pack must keep every test its wrong answers do not claim, so it checks an answer it holds as written
    when that cell's tests (those its catalogued wrong answers lose) are not all claimed. The cells
    checked are those with catalogued wrong answers (every graded exercise has four or more).
    """
    students, holds = trial_students(root, assignment)
    tests_of: dict[str, set[str]] = {}
    for wrong in wrong_answers(root, assignment):
        tests_of.setdefault(wrong["cell"], set()).update(wrong["fails"])
    unchecked = []
    for nb, answers in students["solution"].items():
        for cell, code in answers.items():
            if cell not in tests_of:
                continue
            keepers = [s for s, notebooks in students.items() if (notebooks.get(nb) or {}).get(cell) == code and (
                s.startswith("honest-") or s in holds and tests_of[cell] - set().union(*(set(w["fails"])
                                                                                      for w in holds[s])))]
            if not keepers:
                unchecked.append(cell)
    return unchecked


def run_trials(root: Path, assignment: str, workdir: Path, only: list[str] | None = None,
               workers: int | None = None, packed: bool = True, seed: int | None = None,
               skip: list[str] | None = None) -> dict[str, TrialResult]:
    """Grade every trial student of ``assignment`` as one class run of a scratch course under ``workdir``.

    Exactly what ``jaxgrader grade`` does (``grade_class``: one reference run, tasks on
    ``workers`` local processes, the one gradebook writer), without feedback. ``only``: just
    these trial students (each wrong answer alone); ``skip``: all but these (packed).
    """
    from .classrun.run import grade_class
    from .classrun.references import generate
    from .verdict.verdict import stopped_part

    packed = is_packed(packed, only)
    everyone, _ = trial_students(root, assignment, packed=packed)
    students = {k: v for k, v in everyone.items() if k not in (skip or [])}
    if only is not None:
        students = {k: v for k, v in students.items() if k in only}
        unknown = set(only) - set(students)
        if unknown:
            raise ValueError(f"no trial student {sorted(unknown)} in {assignment} (names: {sorted(everyone)})")
    course_root = scratch_course(Path(root), Path(workdir) / "course", assignment)
    generate(make_api(load_config(course_root)), [assignment])  # release/: what students start from
    course = Course.open(course_root, [assignment])
    for student, notebooks in students.items():
        release = edition_release(root, assignment, student) or course.folder("release", ".", assignment)
        write_submission(release, course.folder("submitted", student, assignment), notebooks)
    results = grade_class(course_root, [assignment], list(students), feedback=False, progress=False,
                          workers=workers, seed=seed)
    tests = {nb: set(autograded_tests(read_notebook(course.source(assignment, nb)))) for nb in course.notebooks[assignment]}
    out: dict[str, TrialResult] = {}
    for r in results:
        if r.status != "graded":
            out[r.student] = TrialResult(r.student, {}, r.error or "failed")
            continue
        scores = {nb: {gid: float(cell.get("auto_score") or 0.0) for gid, cell in r.cells.get(nb, {}).items()
                       if gid in tests[nb]} for nb in tests}
        visible = set()
        for nb in tests:
            graded = read_notebook(course.folder("autograded", r.student, assignment) / f"{nb}.ipynb")
            visible |= {c.metadata.nbgrader.grade_id for c in graded.cells
                        if c.metadata.get("nbgrader", {}).get("grade") and stopped_part(c) == "visible"}
        out[r.student] = TrialResult(r.student, scores, visible=visible, held=sum(
            int(h.get("count") or len(h.get("findings", []))) for h in r.held.values() if not h.get("released")))
    return {n: out[n] for n in students}


def all_tests(root: Path, assignment: str) -> set[str]:
    """grade_ids of every auto-graded test cell of ``assignment``."""
    tests: set[str] = set()
    source = folder(coursedir_of(load_config(root)), "source", ".", assignment)
    for nb in source_notebooks(root, assignment):
        tests |= set(autograded_tests(read_notebook(source / f"{nb}.ipynb")))
    return tests


@dataclasses.dataclass
class Outcome:
    """What happened to one trial: a wrong answer (or the solution / the release)."""

    name: str  # "solution", "release" (an edition's "solution-ko", "release-ko"), "honest-<style>" or "wrong-<answer name>"
    student: str  # the trial student it was graded as
    ok: bool  # lost exactly what it should (for a packed answer: its pack did)
    lost: set[str]
    expected: set[str]
    visible: bool | None = None  # a visible test caught it (wrong answers only)
    declared_visible: bool | None = None
    problem: str = ""


def outcomes(root: Path, assignment: str, results: dict[str, TrialResult], packed: bool = True) -> list[Outcome]:
    """One outcome per trial (solution, release, each wrong answer) from graded trial students."""
    _, holds = trial_students(root, assignment, packed=packed)
    shared = shared_tests(root, assignment) if packed else set()
    tests = all_tests(root, assignment)
    out = []
    kinds = [(f"{kind}{suffix}", expected) for suffix in [""] + [f"-{lang}" for lang in editions_of(root, assignment)]
             for kind, expected in (("solution", set()), ("release", tests))]
    kinds += [(name, set()) for name in results if name.startswith("honest-")]
    if "forged-release" in results:
        kinds.append(("forged-release", tests))
    if "forged-lacking" in results:  # at least what the lacking answers lose; losing more is not a gain
        lost_without = set().union(*(set(a["fails"]) for a in forger_answers(root, assignment)))
        r = results["forged-lacking"]
        gained = lost_without - r.lost
        problem = _last(r.error) or (f"the forger gained {sorted(gained)}" if gained else "") or _held(r)
        out.append(Outcome("forged-lacking", "forged-lacking", not problem, r.lost, lost_without, problem=problem))
    for name, expected in kinds:
        if name in results:
            r = results[name]
            problem = _last(r.error) or (f"lost {sorted(r.lost - expected)}" if r.lost - expected else
                                         f"kept the points of {sorted(expected - r.lost)}" if expected - r.lost else
                                         _held(r))
            out.append(Outcome(name, name, not problem, r.lost, expected, problem=problem))
    for student, group in holds.items():
        if student not in results:
            continue
        r = results[student]
        union = set().union(*(set(a["fails"]) for a in group))
        extra = r.lost - union
        for answer in group:
            fails = set(answer["fails"])
            problem = _last(r.error) or _held(r)
            if not problem and not fails <= r.lost:
                problem = f"kept the points of {sorted(fails - r.lost)}"
            others = [a["name"] for a in group if a is not answer]
            if not problem and extra:
                problem = (f"its trial student also lost {sorted(extra)}"
                           + (f" (packed with {', '.join(others)}: `jaxgrader trials --each` tells which)"
                              if others else ""))
            # a visible stop in a test other members also claim is not this answer's doing
            out.append(Outcome(f"wrong-{answer['name']}", student, not problem, r.lost, fails,
                               visible=bool(own_tests(answer, group, shared) & r.visible),
                               declared_visible=bool(answer.get("visible", True)), problem=problem))
    return out


def _held(r: TrialResult) -> str:
    """The forged students' code must be held for review (verdict/holds.py), every other's not: a problem, or ''."""
    if r.student.startswith("forged-"):
        return "" if r.held else "not held for review"
    return f"held for review ({r.held} findings of code no answer needs)" if r.held else ""


def _last(error: str) -> str:
    return error.strip().splitlines()[-1] if error and error.strip() else ""


def rates(found: list[Outcome]) -> dict[str, float | int]:
    """Counts over the wrong answers: how many lose points on hidden tests, how many a visible test flags."""
    wrong = [o for o in found if o.name.startswith("wrong-")]
    n = len(wrong)
    hidden = sum(1 for o in wrong if o.expected and o.expected <= o.lost)
    seen = sum(1 for o in wrong if o.visible)
    return {"answers": n, "lose_points": hidden, "flagged_visibly": seen,
            "lose_points_rate": hidden / n if n else 0.0, "flagged_visibly_rate": seen / n if n else 0.0}
