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

Who the trial students are, and how wrong answers are packed, is :mod:`jaxgrader.grading.trial_students`.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from .course.config import load_config, make_api
from .course.coursedir import Course, coursedir_of, folder, source_notebooks
from .course.notebooks import autograded_tests, read_notebook, write_submission
from .trial_students import (PACKED, checked_only_by_the_solution, edition_release, editions_of,  # noqa: F401
                             forger_answers, independent_answers, is_packed, own_tests, pack, shared_tests,
                             trial_students, wrong_answers)

@dataclasses.dataclass
class TrialResult:
    """Points each auto-graded test cell earned, per notebook, for one trial student."""

    student: str
    scores: dict[str, dict[str, float]]  # notebook -> grade_id -> auto score
    error: str = ""
    visible: set[str] = dataclasses.field(default_factory=set)  # test cells that stopped in their visible part
    held: int = 0  # findings of code no answer needs (verdict/holds.py): held for review, or released (the forgers)

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
    release_forgers(course, assignment, [s for s in students if s.startswith("forged-")])
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
            int(h.get("count") or len(h.get("findings", []))) for h in r.held.values()))
    return {n: out[n] for n in students}


def release_forgers(course: Course, assignment: str, forgers: list[str]) -> None:
    """Record the forged students' code as read and released by the teacher (``classrun/releases.py``), before
    they are graded: their findings stay on the record (the trials require them), their parts count, so what
    stops the forger is the evidence alone, as where a scan missed it. (Held, every cost and artifact part of
    theirs would score 0 whatever the evidence, and the trials would prove nothing about it.)"""
    import json

    from .classrun.releases import releases_path
    from .verdict.holds import code_hash

    hashes = {}
    for student in forgers:
        for name in course.notebooks[assignment]:
            submitted = read_notebook(course.folder("submitted", student, assignment) / f"{name}.ipynb")
            hashes[code_hash(submitted, read_notebook(course.source(assignment, name)))] = {
                "student": student, "notebook": name, "released": "by the trials", "findings": 0}
    if hashes:
        path = releases_path(course.root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({assignment: hashes}, indent=1) + "\n", encoding="utf-8")


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
    """The forged students' code must be found (verdict/holds.py: held for review; the trials release it, so that
    the evidence alone is tried), every other's not: a problem, or ''."""
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
