"""The trial students of an assignment: the instructor's answers, the blank release, the catalogue of wrong
answers packed into few students, the honest rewrites, the forger, each typed into every edition's release.

Wrong answers that replace different cells and claim different tests (except
the tests the file declares ``shared``, e.g. a final accuracy) are *packed* into one
trial student (``wrong-pack-<k>``, see ``pack``): that student must lose exactly the
union of their ``fails``. A class of 100 wrong answers
is then about as many autogrades as the exercise with the most wrong answers has, not 100.
``pack=False`` (``jaxgrader trials --each``) grades one student per answer, to
pin down which answer of a failing pack misbehaves.

A wrong-answer student's other cells are the instructor's answers, except those downstream of its wrong
answers that the honest rewrites change (``jaxgrader.grading.honest``): those it holds rewritten, bound to the
wrong function at definition (a module-level transform, a default argument, a factory, ``functools.partial``),
each such cell taking the styles in turn over the packs it is downstream in (``downstream_rewrites``). So every
pack shows both that a mistake loses exactly its own tests and that a correct later answer binding it early
loses nothing more (docs/authoring.md, "Isolation"). ``--each`` grades an answer alone with the rewrites its
pack held downstream of it.

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

import tomllib
from pathlib import Path

from .course.config import load_config
from .course.coursedir import coursedir_of, edition_coursedir, folder, source_notebooks
from .course.notebooks import grade_id, is_solution, read_notebook, solutions_of
from .forger import FORGER, forged
from .honest import STYLES, downstream, honest_answers, mixed_answers, pack_styles


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
            if fits(group, answer, shared):
                group.append(answer)
                break
        else:
            groups.append([answer])
    return groups


def fits(group: list[dict], answer: dict, shared: set[str] = frozenset()) -> bool:
    """Whether ``answer`` can join ``group`` (``pack``): another cell, no test in common but shared ones, and every
    member still keeps a failing test of its own."""
    merged = group + [answer]
    return (all(a["cell"] != answer["cell"] and not (set(a["fails"]) & set(answer["fails"])) - set(shared)
                for a in group)
            and all(own_tests(a, merged, shared) for a in merged))


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
    rewrites: dict[str, tuple[list, dict[str, dict[str, str]]]] = {}  # notebook -> (its code cells, honest_answers)
    for nb in notebooks:
        cells = [(grade_id(c) or "", c.source, is_solution(c))
                 for c in read_notebook(source / f"{nb}.ipynb").cells if c.cell_type == "code"]
        by_style = honest_answers(cells, solutions[nb])
        rewrites[nb] = (cells, by_style)
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
    shared = shared_tests(root, assignment)
    packs = spread(pack(answers, shared), shared, rewrites, solutions)
    styled = downstream_rewrites(packs, solutions, rewrites)
    pack_of = {a["name"]: k for k, group in enumerate(packs) for a in group}
    groups = packs if packed else [[a] for a in answers]
    holds: dict[str, list[dict]] = {}
    for k, group in enumerate(groups, 1):
        name = f"wrong-pack-{k}" if packed else f"wrong-{group[0]['name']}"
        if packed and turns[k % len(turns)]:
            name += f"-{turns[k % len(turns)]}"
        filled = {nb: dict(solutions[nb]) for nb in notebooks}
        for nb, rewritten in styled[pack_of[group[0]["name"]]].items():
            if not packed:  # --each: the cells downstream of this answer alone, in the styles its pack held them
                alone = group[0]
                later = downstream([(g, alone["code"] if g == alone["cell"] else src, sol)
                                    for g, src, sol in rewrites[nb][0]], {alone["cell"]})
                rewritten = {g: answer for g, answer in rewritten.items() if g in later}
            filled[nb].update(rewritten)
        for wrong in group:
            owner = next(nb for nb in notebooks if wrong["cell"] in solutions[nb])
            filled[owner][wrong["cell"]] = wrong["code"]
        students[name] = filled
        holds[name] = group
    return students, holds


def spread(groups: list[list[dict]], shared: set[str], rewrites: dict[str, tuple[list, dict]],
           solutions: dict[str, dict[str, str]], wanted: int = len(STYLES)) -> list[list[dict]]:
    """``pack``'s groups with a few answers moved so that each rewritten cell is held correct behind a mistake
    upstream of it in ``wanted`` groups (one per style) where the catalogue allows: the greedy packing puts the
    k-th answer of every cell together, so a later cell with as many wrong answers as an earlier one is never
    correct behind it. An answer moves from a group that holds the later cell wrong to one that holds it right
    and nothing upstream of it wrong, where it fits (another cell, no common test but shared ones, each keeping a
    test of its own) and where no rewritten cell loses what it had; of those moves, one that pairs it with fewest
    answers along its chain that claim a shared test with it (two mistakes on one chain can cancel, and a shared
    end-to-end test would then keep its points). As many groups as before; the rest of the greedy packing, against
    which the catalogue is tried, stays."""
    later = {(nb, gid): downstream(cells, {gid}) for nb, (cells, _) in rewrites.items() for gid in solutions[nb]}
    rewritable = [(nb, gid) for nb, (_, by_style) in rewrites.items() for gid in next(iter(by_style.values()), {})]

    def cells(group):
        return {(next((nb for nb in solutions if a["cell"] in solutions[nb]), None), a["cell"]) for a in group}

    def covered(group, target):
        held = cells(group)
        return target not in held and any(target[1] in later.get(x, ()) for x in held if x[0] == target[0])

    def coverage(grouping):
        return {t: min(wanted, sum(covered(g, t) for g in grouping)) for t in rewritable}

    def chained(a, b):
        return any(b["cell"] in later.get((nb, a["cell"]), ()) or a["cell"] in later.get((nb, b["cell"]), ())
                   for nb in solutions) and set(a["fails"]) & set(b["fails"]) & set(shared)

    groups = [list(g) for g in groups]
    for target in rewritable:
        while coverage(groups)[target] < wanted:
            now, moves = coverage(groups), []
            for p, source in enumerate(groups):
                for answer in (a for a in source if (target in cells(source)
                                                     and target[1] in later.get((target[0], a["cell"]), ()))):
                    for q, dest in enumerate(groups):
                        if q == p or target in cells(dest) or covered(dest, target) or not fits(dest, answer, shared):
                            continue
                        trial = [[a for a in g if a is not answer] + ([answer] if k == q else [])
                                 for k, g in enumerate(groups)]
                        after = coverage(trial)
                        if after[target] > now[target] and all(after[t] >= now[t] for t in rewritable):
                            moves.append((sum(bool(chained(a, answer)) for a in dest), q, p, trial))
            if not moves:
                break
            groups = min(moves, key=lambda m: m[:3])[3]
    return groups


def downstream_rewrites(packs: list[list[dict]], solutions: dict[str, dict[str, str]],
                        rewrites: dict[str, tuple[list, dict]]) -> list[dict[str, dict[str, str]]]:
    """For each pack of wrong answers, notebook -> {grade_id: honest rewrite} of the cells downstream of its wrong
    answers (``honest.pack_styles``): a correct later answer that binds a wrong one at definition must lose nothing
    for it, so the pack holds those cells bound early, each taking the styles in turn over the packs it is
    downstream in. ``rewrites``: notebook -> (its code cells, ``honest_answers`` of them)."""
    out: list[dict[str, dict[str, str]]] = [{} for _ in packs]
    for nb, (cells, by_style) in rewrites.items():
        if by_style:
            held = [{a["cell"]: a["code"] for a in group if a["cell"] in solutions[nb]} for group in packs]
            for k, answers in enumerate(pack_styles(cells, by_style, held)):
                out[k][nb] = answers
    return out


def early_bound(students: dict[str, dict[str, dict | None]], holds: dict[str, list[dict]]) -> dict[str, list[str]]:
    """Wrong-answer student -> the cells it holds rewritten downstream of its mistakes (``downstream_rewrites``),
    for the trials' summary: where a pack lost exactly its answers' tests, those correct later answers, bound to
    the wrong functions at definition, cost nothing more. ``trial_students``'s result."""
    solution = students["solution"]
    out = {}
    for student, group in holds.items():
        own = {w["cell"] for w in group}
        cells = [gid for nb, answers in students[student].items() for gid, code in (answers or {}).items()
                 if gid not in own and code != (solution[nb] or {}).get(gid)]
        if cells:
            out[student] = cells
    return out


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
