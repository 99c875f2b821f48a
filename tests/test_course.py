"""The teacher's loop end to end (`jaxgrader demo`), and its failures: one line, nothing half-written."""

from __future__ import annotations

import csv
import html
import json
import shutil
import subprocess
import sys
import threading

import pytest

from .conftest import ROOT
from .short_lesson import preload_lesson1, short_lesson


def _course(tmp_path, assignments=("lesson1",), editions=(), short=False):
    """A course of ``assignments``; ``short``: lesson 1 cut after its third exercise (tests/short_lesson.py),
    for tests of how a run handles a file or a setting, which the lesson's length does not change."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    for a in assignments:
        for step in ["source", "release"] + [f"{lang}/{s}" for lang in editions for s in ("source", "release")]:
            shutil.copytree(ROOT / step / a, course / step / a)
    for lang in editions:
        shutil.copytree(ROOT / "i18n" / lang, course / "i18n" / lang)
    shutil.copytree(ROOT / "demo", course / "demo")
    if short:
        short_lesson(course)
    elif set(assignments) == {"lesson1"}:
        preload_lesson1(course)
    return course


def _jaxgrader(course, *args):
    return subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), *args],
                          capture_output=True, text=True, timeout=900)


# nbgrader's folders renamed: every path of a run must come from the configuration (format_path)
LAYOUT = """
c.CourseDirectory.submitted_directory = "incoming"
c.CourseDirectory.autograded_directory = "marked"
c.CourseDirectory.feedback_directory = "returned"
"""


def test_demo_grades_the_class(tmp_path):
    """`jaxgrader demo` end to end, on a course whose nbgrader_config.py renames submitted/,
    autograded/ and feedback/: submissions are written, graded and returned where nbgrader looks.
    The Korean student hana types cy's answers into the Korean release: cy's score, feedback in Korean."""
    course = _course(tmp_path, editions=("ko",))
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write(LAYOUT)
    run = _jaxgrader(course, "demo", "-a", "lesson1")
    assert run.returncode == 0, run.stderr[-2000:]
    assert not any((course / d).exists() for d in ("submitted", "autograded", "feedback"))
    assert (course / "incoming" / "ada" / "lesson1" / "pure_functions.ipynb").is_file()
    assert (course / "marked" / "ada" / "lesson1" / "pure_functions.ipynb").is_file()
    table = {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines() if line[:3] in ("ada", "bo ", "cy ")}
    ada, bo, cy = (table[s][0] for s in ("ada", "bo", "cy"))
    got = {s: float(v.split("/")[0]) for s, v in (("ada", ada), ("bo", bo), ("cy", cy))}
    out_of = float(ada.split("/")[1])
    auto_points = out_of - 3  # the written answer waits for a human
    assert got["ada"] == auto_points
    assert got["bo"] == 0
    assert 0 < got["cy"] < auto_points
    hana = next((line.split()[1:] for line in run.stdout.splitlines() if line.startswith("hana ")), run.stdout)
    assert hana[0] == cy, f"the same code in the Korean edition earns the same score: {run.stdout}"
    with open(course / "grades.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["student_id"] for r in rows} == {"ada", "bo", "cy", "hana"}
    for student in ("ada", "bo", "cy", "hana"):
        assert (course / "returned" / student / "lesson1" / "pure_functions.html").is_file()
    korean = (course / "returned" / "hana" / "lesson1" / "pure_functions.html").read_text(encoding="utf-8")
    english = (course / "returned" / "cy" / "lesson1" / "pure_functions.html").read_text(encoding="utf-8")
    assert "연습 1:" in korean and "점수:" in korean and "실패:" in korean, "headings, page words, verdict"
    assert "Score:" not in korean and "Exercise 1:" not in korean and "Student&#39;s answer" not in korean
    assert "공개 테스트 실패: " in korean, "a visible test's message, in the edition's words"
    assert "BEGIN HIDDEN TESTS" not in korean and "_report(" not in korean
    for name in _failed_part_names_in_korean(course / "marked" / "hana" / "lesson1" / "pure_functions.ipynb", korean):
        assert f"{name}: " in html.unescape(english), name
    assert "Exercise 1:" in english and "Score:" in english and "연습" not in english
    assert not (course / ".grading" / "gradebook.db").exists(), "the working copy of the gradebook was left behind"
    summary = {r["student"]: r for r in json.loads((course / "grading-summary.json").read_text())}
    parts = [p for cell in summary["ada"]["cells"]["pure_functions"].values() for p in cell["parts"]]
    # every part says what its points rest on; none of the course's on the kernel's word or a shape
    assert parts and {p["evidence"] for p in parts} <= {"reference", "artifact", "cost"}
    assert 0 <= summary["ada"]["kernel_points"] <= summary["ada"]["score"]


def _failed_part_names_in_korean(autograded, page: str) -> list[str]:
    """The failed parts a Korean feedback page shows (autograded: the graded notebook) are named in
    Korean, never by the hidden test's English; returns the English names."""
    from jaxgrader.grading.editions import catalogs as tc
    from jaxgrader.grading.editions.localize import Translator
    from jaxgrader.grading.course.notebooks import read_notebook
    from jaxgrader.grading.verdict.verdict import parts_of

    catalogs = tc.Edition(autograded.parents[3], "ko", ()).catalogs
    translator = Translator(tc.read_catalog(catalogs / "grader.po"),
                            tc.read_catalog(catalogs / "source" / "lesson1" / "pure_functions.po"))
    shown = [p["name"] for cell in read_notebook(autograded).cells
             for p in [q for q in parts_of(cell) if not q["passed"]][:3]]
    translated = [(n, translator.part(n)) for n in shown if translator.part(n) != n]
    assert translated, f"the mistakes fail parts with translatable names: {shown}"
    text = html.unescape(page)
    for name, ko in translated:
        assert f"{ko}: " in text and f"{name}: " not in text, name
    return [name for name, _ in translated]


def test_an_edition_placed_side_by_side_has_its_own_column(tmp_path):
    """`jaxgrader translate side-by-side ko -a lesson1` places the Korean lesson 1 as assignment lesson1-ko.
    A Korean student who submits there is graded in that column, scoring what the same code scores (the
    demo catalogue's cy: every cell one of its answers breaks is lost, nothing else), in Korean feedback."""
    from jaxgrader.grading.demo import answers_for
    from jaxgrader.grading.course.notebooks import read_notebook, write_submission
    from jaxgrader.grading.trials import wrong_answers

    course = _course(tmp_path, editions=("ko",))
    placed = _jaxgrader(course, "translate", "side-by-side", "ko", "-a", "lesson1")
    assert placed.returncode == 0, placed.stderr[-2000:]
    release = course / "release" / "lesson1-ko"
    assert (course / "source" / "lesson1-ko" / "pure_functions.ipynb").is_file()
    assert "BEGIN HIDDEN TESTS" not in (release / "pure_functions.ipynb").read_text(encoding="utf-8")
    assert "연습 1" in (release / "pure_functions.ipynb").read_text(encoding="utf-8")
    unknown = _jaxgrader(course, "translate", "side-by-side", "ko", "-a", "lesson9")
    assert unknown.returncode == 2 and "ko/source: the edition has no lesson9 (it has: lesson1" in unknown.stderr

    write_submission(release, course / "submitted" / "hana" / "lesson1-ko",
                     {"pure_functions": answers_for(course, "lesson1", "pure_functions", "cy")})
    run = _jaxgrader(course, "grade", "-a", "lesson1-ko")
    assert run.returncode == 0, run.stderr[-2000:]
    tests = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
             for c in read_notebook(course / "source" / "lesson1" / "pure_functions.ipynb").cells
             if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}
    broken = {g for w in wrong_answers(course, "lesson1") if w.get("demo") for g in w["fails"]}
    with open(course / "grades.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["assignment"], r["student_id"]) for r in rows] == [("lesson1-ko", "hana")]
    assert float(rows[0]["score"]) == sum(tests.values()) - sum(tests[g] for g in broken) > 0
    page = (course / "feedback" / "hana" / "lesson1-ko" / "pure_functions.html").read_text(encoding="utf-8")
    assert "연습 1:" in page and "점수:" in page and "실패:" in page and "Score:" not in page
    _failed_part_names_in_korean(course / "autograded" / "hana" / "lesson1-ko" / "pure_functions.ipynb", page)


def test_a_misspelt_setting_is_one_line_naming_it(tmp_path):
    course = _course(tmp_path)
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write("\nc.JaxGrader.wokers = 2\n")
    run = _jaxgrader(course, "grade", "-a", "lesson1")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "c.JaxGrader.wokers" in lines[0] and "nbgrader_config.py" in lines[0], lines
    assert "workers" in lines[0].replace("wokers", "")  # the setting it probably meant


def test_missing_source_folder_is_one_line_and_writes_nothing(tmp_path):
    course = _course(tmp_path)
    run = _jaxgrader(course, "grade", "-a", "lesson9")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "source/lesson9" in lines[0] and "missing" in lines[0]
    assert not (course / "gradebook.db").exists()


def test_missing_submitted_folder_is_one_line(tmp_path):
    course = _course(tmp_path)
    run = _jaxgrader(course, "grade", "-a", "lesson1")
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "submitted" in run.stderr
    assert not (course / "gradebook.db").exists()


def test_corrupt_submission_costs_only_that_student(tmp_path):
    """Also: an unsandboxed run says so, and code no answer needs is held for review (and graded)."""
    import json

    import nbformat

    from jaxgrader.grading.course.notebooks import fill_answers, grade_id, is_solution

    course = _course(tmp_path, short=True)
    for student, text in (("zed", "{not json"), ("yan", None)):
        folder = course / "submitted" / student / "lesson1"
        folder.mkdir(parents=True)
        if text is not None:
            (folder / "pure_functions.ipynb").write_text(text)
    ok = course / "submitted" / "ada" / "lesson1"
    ok.mkdir(parents=True)
    release = nbformat.read(course / "release" / "lesson1" / "pure_functions.ipynb", as_version=4)
    first = next(grade_id(c) for c in release.cells if is_solution(c) and c.cell_type == "code")
    nbformat.write(fill_answers(release, {first: "import gc\nraise NotImplementedError()"}),
                   ok / "pure_functions.ipynb")
    edited = course / "submitted" / "xi" / "lesson1"  # a cell's grade_id deleted: nbgrader alone says KeyError
    edited.mkdir(parents=True)
    stripped = nbformat.read(course / "release" / "lesson1" / "pure_functions.ipynb", as_version=4)
    next(c for c in stripped.cells if is_solution(c)).metadata["nbgrader"].pop("grade_id")
    nbformat.write(stripped, edited / "pure_functions.ipynb")
    run = _jaxgrader(course, "grade", "-a", "lesson1", "--no-feedback", "--unsandboxed")
    assert run.returncode == 1
    assert "zed" in run.stdout and "not valid JSON" in run.stdout and "pure_functions.ipynb" in run.stdout
    assert "xi" in run.stdout and "without a grade_id" in run.stdout
    assert "yan" in run.stdout and "no such file" in run.stdout
    assert "graded without the kernel sandbox" in run.stdout
    held = run.stdout.split("held for review")[1]
    assert "ada/lesson1" in held and "gc" in held
    assert (course / "gradebook.db").exists()
    rows = list(csv.DictReader(open(course / "grades.csv")))
    assert any(r["student_id"] == "ada" for r in rows)
    summary = {r["student"]: r for r in json.loads((course / "grading-summary.json").read_text())}
    assert summary["ada"]["status"] == "graded" and summary["ada"]["isolation"] == "none"
    assert summary["ada"]["held"]["pure_functions"]["findings"] and summary["zed"]["status"] == "error"


def test_no_sandbox_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    from jaxgrader.grading.classrun import run as course_module
    from jaxgrader.grading.sandbox import sandbox

    course = _course(tmp_path)
    (course / "submitted" / "ada" / "lesson1").mkdir(parents=True)
    monkeypatch.setattr(sandbox, "check_sandbox", lambda: "bubblewrap (bwrap) is not installed")
    with pytest.raises(course_module.CourseError) as info:
        course_module.grade_class(course, ["lesson1"], progress=False)
    message = str(info.value)
    assert "\n" not in message and "bwrap" in message and "--unsandboxed" in message
    assert not (course / "gradebook.db").exists() and not (course / ".grading").exists()


def test_skip_execution_tags_do_not_earn_points(tmp_path):
    """A blank release with `skip-execution` on every cell must still score zero."""
    import nbformat

    course = _course(tmp_path, short=True)
    folder = course / "submitted" / "mallory" / "lesson1"
    folder.mkdir(parents=True)
    nb = nbformat.read(course / "release" / "lesson1" / "pure_functions.ipynb", as_version=4)
    for cell in nb.cells:
        cell.metadata["tags"] = ["skip-execution", "raises-exception"]
    nbformat.write(nb, folder / "pure_functions.ipynb")
    run = _jaxgrader(course, "grade", "-a", "lesson1", "--no-feedback")
    assert run.returncode == 0, run.stderr[-2000:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("mallory"))
    assert row.split()[1].startswith("0/"), row


def _started_reference_runs():
    return [t for t in threading.enumerate() if t.name.startswith("reference run of ")]


def test_a_plain_autograde_starts_the_reference_run_beside_the_submission(monkeypatch):
    """Without precomputed references, StartReferenceRun (first autograde step) starts the
    instructor's run in the background; the Verdict then uses that run instead of a second."""
    from jaxgrader.grading.verdict import reference, verdict
    from jaxgrader.grading.course.config import load_config

    runs = []
    real = reference.execute_reference  # counted where the reference run looks it up
    monkeypatch.setattr(reference, "execute_reference", lambda nb, config, **kw: runs.append(1) or real(nb, config, **kw))
    config = load_config(ROOT)
    config.JaxGrader.seed = 424242  # a seed of its own: nothing cached by other tests
    resources = {"nbgrader": {"notebook": "pure_functions", "assignment": "lesson1", "student": "x"}}

    verdict.StartReferenceRun(config=config).preprocess(None, resources)
    started = _started_reference_runs()
    assert [t.name for t in started] == ["reference run of pure_functions.ipynb"]
    reports = verdict.Verdict(config=config)._reference_for(resources)  # waits for the background run
    assert reports and runs == [1]
    for t in started:
        t.join(timeout=60)

    config.Verdict.references = {"pure_functions": {}}  # what jaxgrader grade hands over: nothing to start
    verdict.StartReferenceRun(config=config).preprocess(None, resources)
    assert _started_reference_runs() == []




def test_the_reference_run_sees_what_a_submissions_kernel_sees():
    """A class run computes its references before nbgrader autogrades anything: its kernel must still see
    NBGRADER_EXECUTION (notebooks shrink their work under grading: FAST), as every submission's does."""
    import os

    import nbformat

    from jaxgrader.grading.course.config import load_config
    from jaxgrader.grading.verdict.reference import execute_reference

    assert "NBGRADER_EXECUTION" not in os.environ, "run this test outside nbgrader"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nprint(os.environ.get('NBGRADER_EXECUTION'))")])
    ran = execute_reference(nb, load_config(ROOT), "lesson1")
    assert "".join(o.get("text", "") for o in ran.cells[0].outputs).strip() == "autograde"


def test_a_failed_autograde_is_told_by_its_error_not_by_traceback_s_first_line():
    """nbgrader logs a failing notebook's traceback as indented lines under one `[ERROR] Traceback ...`:
    the teacher's one line is the error at its end (with what it means, where nbgrader's words are cryptic)."""
    from jaxgrader.grading.classrun.task import _why

    log = ("[ERROR] There was an error processing assignment: submitted/ada/lesson2\n"
           "[ERROR] Traceback (most recent call last):\n"
           '      File "nbgrader/preprocessors/overwritecells.py", line 118, in add_missing_grade_cells\n'
           '        submitted_cell_idxs[cell.metadata.nbgrader["grade_id"]] = idx\n'
           "    KeyError: 'grade_id'\n    \n"
           "[ERROR] There was an error processing assignment 'lesson2' for student 'ada'\n")
    assert _why({"log": log}).startswith("a cell's nbgrader metadata has no grade_id")
    assert _why({"log": log.replace("KeyError: 'grade_id'", "ValueError: bad cell")}) == "ValueError: bad cell"
    assert _why({"log": "[ERROR] the file is not a notebook\n"}) == "the file is not a notebook"
    assert _why({"error": "Traceback (most recent call last):\n  x\nOSError: disk full"}) == "OSError: disk full"


def test_an_nbgrader_cell_without_its_grade_id_is_one_line_naming_the_cell(tmp_path):
    """nbgrader itself fails on such a submission with a bare KeyError: 'grade_id'."""
    import nbformat
    import pytest

    from jaxgrader.grading.course.notebooks import NotebookError, read_notebook

    release = nbformat.read(ROOT / "release" / "lesson1" / "pure_functions.ipynb", as_version=4)
    index = next(i for i, c in enumerate(release.cells) if c.metadata.get("nbgrader", {}).get("solution"))
    del release.cells[index].metadata["nbgrader"]["grade_id"]
    path = tmp_path / "pure_functions.ipynb"
    nbformat.write(release, path, version=4)
    with pytest.raises(NotebookError, match=rf"pure_functions.ipynb: cell {index + 1} is an nbgrader cell without a grade_id"):
        read_notebook(path)
