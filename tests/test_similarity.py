"""Similar submissions (jaxgrader/grading/teacher/similarity.py): the demo class plus generated students.

``ada``, ``cy`` and ``hana`` type the instructor's solution (``cy`` with some wrong answers, ``hana`` in the
Korean edition) and ``ed`` hands in ``ada``'s answers renamed, recommented and reordered: every pair of the
four is a near-copy and must be listed. ``bo`` (the blank release), ``dee`` (the release with its starter
comments edited: only starter code in common) and ``indie`` (lessons 1 and 3 solved on their own, correctly:
the trials' ``honest-independent`` student) must not be in any pair (tests/similar_students.py).
"""

from __future__ import annotations

import ast
import itertools
import shutil

import nbformat
import pytest

from .conftest import ASSIGNMENTS, ROOT
from .similar_students import APART, NEAR_COPIES, class_answers, write_class


def _course(base):
    """A course with what similarity reads: config, source/, release/, the Korean edition, lectures, demo/."""
    course = base / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    for name in ("source", "release", "demo", "ko", "i18n", "notebooks"):
        shutil.copytree(ROOT / name, course / name)
    return course


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return _course(tmp_path_factory.mktemp("similarity"))


def _pairs(found) -> set[frozenset]:
    return {frozenset((p.a, p.b)) for p in found.pairs}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_near_copies_are_listed_and_the_others_are_not(course, assignment, capsys):
    from jaxgrader.grading.cli import main
    from jaxgrader.grading.teacher.similarity import find_pairs

    students = write_class(course, assignment)
    assert {"ada", "cy", "ed", "bo", "dee"} <= set(students)  # hana where the Korean edition has the assignment
    found = find_pairs(course, assignment)
    assert sorted(found.compared) == sorted(students) and found.unreadable == []
    expected = {frozenset(p) for p in itertools.combinations(NEAR_COPIES & set(students), 2)}
    assert _pairs(found) == expected, [(p.a, p.b, round(p.score, 2)) for p in found.pairs]
    for pair in found.pairs:
        assert any("<mark>" in a and "<mark>" in b for _, a, b in pair.cells), (pair.a, pair.b)
    copied = next(p for p in found.pairs if {p.a, p.b} == {"ada", "ed"})
    assert copied.score >= 0.95  # renamed, recommented, reordered: the same work
    # the command prints the same pairs and writes the page
    assert main(["--root", str(course), "similarity", "-a", assignment]) == 0
    out = capsys.readouterr().out
    assert f"{len(students)} submissions compared" in out and f"{len(expected)} pairs over 50%" in out
    page = (course / "reports" / f"{assignment}-similarity.html").read_text()
    assert page.count("<details class='pair'") == len(expected)
    assert not any(f"<b>{name}</b>" in page for name in APART)


def test_the_generated_copy_changes_what_copying_changes_cheaply(course):
    """ed's answers are not ada's text: local names, comments and the order of definitions differ, and every
    code cell still parses (a copier keeps the function names and parameters the tests call)."""
    from jaxgrader.grading.course.notebooks import grade_id, is_solution
    from jaxgrader.grading.demo import answers_for

    source = nbformat.read(course / "source" / "lesson3" / "pytree_mlp.ipynb", as_version=4)
    code = [grade_id(c) for c in source.cells if is_solution(c) and c.cell_type == "code"]
    ada = answers_for(course, "lesson3", "pytree_mlp", "ada")
    ed = class_answers(course, "lesson3", "pytree_mlp")["ed"]
    for gid in code:
        ast.parse(ed[gid])
        assert ed[gid] != ada[gid] and "#" in ed[gid], gid
    def names(text):
        return {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}

    renamed = {"leaves", "total_norm", "factor"}  # clip_grads' locals; its signature is kept
    assert renamed <= names(ada["clip_grads"]) and not renamed & names(ed["clip_grads"])
    assert "def clip_grads(grads, max_norm=1.0):" in ed["clip_grads"]
    # three definitions and a statement: the definitions in reverse order, the statement after them
    assert ed["clip_gradient"].index("def _clip_bwd") < ed["clip_gradient"].index("def clip_gradient")
    assert ed["clip_gradient"].rstrip().endswith("clip_gradient.defvjp(_clip_fwd, _clip_bwd)")


def test_passages_a_whole_class_shares_are_left_out(tmp_path):
    """c.Similarity.common (MOSS's -m): with 2, the solution ada, cy, hana and ed all typed is ignored; what
    only two of them share (cy's wrong answers, hana's copy of them; ada's solution where cy has a wrong one,
    ed's copy of it) still makes a pair."""
    from jaxgrader.grading.teacher.similarity import find_pairs

    course = _course(tmp_path)
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write("\nc.Similarity.common = 2\n")
    write_class(course, "lesson2")
    found = find_pairs(course, "lesson2")
    assert found.ignored > 0
    assert _pairs(found) == {frozenset(("cy", "hana")), frozenset(("ada", "ed"))}


def test_the_teacher_sets_the_threshold_and_a_misspelt_setting_is_one_line(tmp_path, capsys):
    from jaxgrader.grading.cli import main
    from jaxgrader.grading.teacher.similarity import find_pairs

    course = _course(tmp_path)
    write_class(course, "lesson1")
    config = course / "nbgrader_config.py"
    text = config.read_text()
    config.write_text(text + "\nc.Similarity.threshold = 0.99\n")  # only the verbatim copies
    assert _pairs(find_pairs(course, "lesson1")) == {frozenset(("cy", "hana")), frozenset(("ada", "ed"))}
    config.write_text(text + "\nc.Similarity.treshold = 0.9\n")
    assert main(["--root", str(course), "similarity", "-a", "lesson1"]) == 2
    err = capsys.readouterr().err
    assert "c.Similarity.treshold is not a setting (did you mean threshold?)" in err and err.count("\n") == 1
    config.write_text(text)
    assert main(["--root", str(course), "similarity", "-a", "lesson9"]) == 2  # one line, no traceback
    assert "lesson9: missing (no such assignment)" in capsys.readouterr().err


def test_student_code_is_escaped_and_unreadable_submissions_are_named(tmp_path):
    """What a student typed reaches the teacher's page as text; a notebook that cannot be read is named."""
    from jaxgrader.grading.course.notebooks import read_notebook, solutions_of, write_submission
    from jaxgrader.grading.teacher.similarity import find_pairs, render_section

    course = _course(tmp_path)
    answers = solutions_of(read_notebook(course / "source" / "lesson1" / "pure_functions.ipynb"))
    evil = 'print("</pre><script>alert(1)</script>")  # <img src=x onerror=alert(1)>'
    answers["count_traces"] += "\n" + evil
    answers["written_function_data"] += "\n<script>alert(2)</script>"
    for student in ("eve", "mallory"):
        write_submission(course / "release" / "lesson1", course / "submitted" / student / "lesson1",
                         {"pure_functions": answers})
    broken = course / "submitted" / "trudy" / "lesson1"
    broken.mkdir(parents=True)
    (broken / "pure_functions.ipynb").write_text("{not json")
    found = find_pairs(course, "lesson1")
    assert _pairs(found) == {frozenset(("eve", "mallory"))}
    assert [who for who, _ in found.unreadable] == ["trudy"] and "not valid JSON" in found.unreadable[0][1]
    page = render_section(found)
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert "Not compared: trudy" in page


def test_an_edition_placed_beside_the_assignment_is_compared_with_it(tmp_path):
    """``jaxgrader translate side-by-side ko`` places ``lesson1-ko``: hana submits there, cy in ``lesson1``;
    her copy of cy's answers is found from either assignment's report."""
    from jaxgrader.grading.course.notebooks import write_submission
    from jaxgrader.grading.demo import answers_for
    from jaxgrader.grading.teacher.similarity import find_pairs

    course = _course(tmp_path)
    for step in ("source", "release"):  # what side_by_side places (without generating the gradebook entry)
        shutil.copytree(course / "ko" / step / "lesson1", course / step / "lesson1-ko")
    cy = {"pure_functions": answers_for(course, "lesson1", "pure_functions", "cy")}
    write_submission(course / "release" / "lesson1", course / "submitted" / "cy" / "lesson1", cy)
    write_submission(course / "release" / "lesson1-ko", course / "submitted" / "hana" / "lesson1-ko", cy)
    assert _pairs(find_pairs(course, "lesson1")) == {frozenset(("cy", "hana (lesson1-ko)"))}
    assert _pairs(find_pairs(course, "lesson1-ko")) == {frozenset(("cy (lesson1)", "hana"))}


# A helper cell passed round a class: longer than anything a class writes alike by itself (not the course's code).
PASTED = '''def describe_tree(tree, indent=0):
    """Print a pytree's structure with the shape and dtype of every leaf, one line each."""
    lines = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        name = "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
        lines.append(" " * indent + f"{name}: {getattr(leaf, 'shape', ())} {getattr(leaf, 'dtype', type(leaf).__name__)}")
    for line in sorted(lines):
        print(line)
    total = sum(int(np.prod(getattr(leaf, "shape", ()))) for leaf in jax.tree_util.tree_leaves(tree))
    print(f"{len(lines)} leaves, {total} numbers in all")
    return len(lines)
'''


def test_a_long_cell_many_submissions_share_is_listed_once_with_who_has_it(tmp_path, capsys):
    """Twelve students paste the same helper cell (more than c.Similarity.common = 10): it is left out of every
    pair's score, so they pair with nobody, and it is listed once, as a long cell many submissions share, with
    the twelve names; the demo class, who did not paste it, is not on it."""
    from nbformat.v4 import new_code_cell

    from jaxgrader.grading.cli import main
    from jaxgrader.grading.course.notebooks import read_notebook
    from jaxgrader.grading.teacher.similarity import find_pairs

    course = _course(tmp_path)
    write_class(course, "lesson1")
    pasters = [f"p{k:02d}" for k in range(12)]
    for k, student in enumerate(pasters):
        nb = read_notebook(course / "release" / "lesson1" / "pure_functions.ipynb")
        nb.cells.insert(2 + k % 3, new_code_cell(f"# from the group chat\n{PASTED}"))
        (course / "submitted" / student / "lesson1").mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / student / "lesson1" / "pure_functions.ipynb")
    found = find_pairs(course, "lesson1")
    assert not {s for p in found.pairs for s in (p.a, p.b)} & set(pasters)  # pairs are scored as before
    assert _pairs(found) == {frozenset(p) for p in itertools.combinations(NEAR_COPIES & set(found.compared), 2)}
    assert len(found.passages) == 1, [(p.label, p.students) for p in found.passages]
    passage = found.passages[0]
    assert sorted(passage.students) == pasters and passage.length >= 200
    assert "def describe_tree(tree, indent=0):" in passage.text and "return len(lines)" in passage.text
    assert main(["--root", str(course), "similarity", "-a", "lesson1"]) == 0
    assert f"a long passage many share: 12 submissions share {passage.length} characters" in capsys.readouterr().out
    page = (course / "reports" / "lesson1-similarity.html").read_text()
    assert "a long cell many submissions share: read it" in page and page.count("<details class='passage'") == 1
    assert html_escape("def describe_tree(tree, indent=0):") in page
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write("\nc.Similarity.long_passage = 0\n")
    assert find_pairs(course, "lesson1").passages == []


def html_escape(text: str) -> str:
    import html

    return html.escape(text)
