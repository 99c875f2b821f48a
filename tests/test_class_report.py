"""The class report and the named feedback, on the demo class graded once (lesson 1 only).

The demo class is known: ``ada`` answers everything right, ``bo`` submits the blank release
(every test stops in its visible asserts), ``cy`` gives the wrong answers marked ``demo = true``
in ``demo/wrong-answers/lesson1.toml`` (each caught by a visible test). So every number in
the report follows from those files, and is asserted here from them.
"""

from __future__ import annotations

import base64
import csv
import html
import shutil
import subprocess
import sys

import nbformat
import pytest

from .conftest import ROOT
from .short_lesson import preload_lesson1

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "lesson1", "pure_functions"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course holding lesson 1, its demo class graded by ``jaxgrader demo`` (which also writes the report)."""
    course = tmp_path_factory.mktemp("report") / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    preload_lesson1(course)
    for folder in ("source", "release"):
        shutil.copytree(ROOT / folder / ASSIGNMENT, course / folder / ASSIGNMENT)
    shutil.copytree(ROOT / "demo", course / "demo")
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "demo", "-a", ASSIGNMENT],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "class report:" in run.stdout, run.stdout[-2000:]
    return course


def _demo_failures() -> set[str]:
    """The test cells cy's wrong answers fail (demo/wrong-answers/lesson1.toml)."""
    from jaxgrader.grading.trials import wrong_answers

    return {test for a in wrong_answers(ROOT, ASSIGNMENT) if a.get("demo") for test in a["fails"]}


def _tests_and_headings() -> dict[str, str]:
    """grade_id -> '## Exercise ...' heading (points dropped) of each test cell, read straight from the source."""
    import re

    nb = nbformat.read(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    out, heading = {}, None
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and cell.source.startswith("## Exercise"):
            heading = re.sub(r"\s*\([^()]*points?[^()]*\)$", "", cell.source.splitlines()[0][3:])
        elif cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            out[meta["grade_id"]] = heading
    return out


def test_report_counts_the_demo_class(course):
    from jaxgrader.grading.teacher.class_report import collect

    report = collect(course, ASSIGNMENT)
    tests, fails = _tests_and_headings(), _demo_failures()
    assert fails and fails < set(tests)
    parts = {p.grade_id: p for p in report.parts}
    assert set(parts) == set(tests)
    for gid, part in parts.items():
        assert part.name == tests[gid]
        expected_failures = 1 + (gid in fails)  # bo always; cy where a demo wrong answer fails it
        assert (part.passed, part.failed) == (3 - expected_failures, expected_failures), gid
        assert part.warned == expected_failures, f"{gid}: every demo failure is caught by a visible test"
        assert sum(part.messages.values()) == expected_failures
    # cy's mutating sgd_step is stopped by the visible assert, and the report quotes it
    assert any("sgd_step changed the dict it was given" in m for m in parts["test_sgd_step"].messages)
    assert any("NotImplementedError" in m for m in parts["test_sgd_step"].messages)  # bo's blank release
    # every check of a test the blank release stops at is failed once more than it is passed by cy
    for check in parts["test_sgd_step"].checks.values():
        assert (check.passed, check.failed) == (1, 2)
    auto = sum(p.points for p in report.parts)
    assert report.scores["ada"] == auto and report.scores["bo"] == 0
    assert report.scores["cy"] == auto - sum(p.points for p in report.parts if p.grade_id in fails)
    assert [w[2] for w in report.written] == [2]  # ada's and cy's written answers wait for a human
    assert sorted(s for s, _, _ in report.times) == ["ada", "bo", "cy"] and report.times[0][1] >= report.times[-1][1]
    assert report.errors == [] and report.missing == []


def test_report_files_after_grading(course):
    page = (course / "reports" / f"{ASSIGNMENT}.html").read_text()
    plot = page.split("id='score-plot' alt='score distribution' src='data:image/png;base64,")[1].split("'")[0]
    assert base64.b64decode(plot)[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.escape("Exercise 2: update without mutating") in page
    with open(course / "reports" / f"{ASSIGNMENT}.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["check"] == ""]
    by_test = {r["test"]: r for r in rows}
    assert set(by_test) == set(_tests_and_headings())
    assert (by_test["test_sgd_step"]["passed"], by_test["test_sgd_step"]["warned"]) == ("1", "2")
    assert by_test["test_predict"]["pass_rate"] == "0.667"


def test_report_command_rewrites_the_report(course):
    from jaxgrader.grading.cli import main

    shutil.rmtree(course / "reports")
    assert main(["--root", str(course), "report", "-a", ASSIGNMENT]) == 0
    assert (course / "reports" / f"{ASSIGNMENT}.html").is_file() and (course / "reports" / f"{ASSIGNMENT}.csv").is_file()
    assert main(["--root", str(course), "report", "-a", "lesson9"]) == 2  # one line, no traceback


def test_report_escapes_what_came_from_students(tmp_path):
    from jaxgrader.grading.teacher.class_report import Part, Report, render_html, write_csv

    evil = "<img src=x onerror=alert(1)>"
    part = Part(NOTEBOOK, "test_x", "Exercise 1: <b>x</b>", 2.0, passed=0, failed=1, warned=1)
    part.messages[f"a visible test failed: {evil}"] += 1
    report = Report(ASSIGNMENT, 2.0, {evil: 0.0}, [evil], [part], [], errors=[(evil, evil)],
                    reruns=[], times=[(evil, 1.0, evil)], run={"seconds": 3, "backend": evil})
    page = render_html(report)
    assert "<img src=x" not in page and "<b>x</b>" not in page
    assert html.escape(evil) in page
    part.messages['=HYPERLINK("http://x")'] += 2  # the commonest reason: a spreadsheet must not run it
    write_csv(report, tmp_path / "report.csv")
    with open(tmp_path / "report.csv", newline="") as fh:
        assert next(csv.DictReader(fh))["most_common_reason"] == "'=HYPERLINK(\"http://x\")"


def test_feedback_names_every_part_and_hides_hidden_tests(course):
    tests = _tests_and_headings()
    page = (course / "feedback" / "cy" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    summary = page.split('id="toc"')[1].split("</ol>")[0]
    for gid, heading in tests.items():
        assert f'<a href="#{gid}">{html.escape(heading, quote=False)}</a>' in summary, gid
    assert "Test cell" not in summary
    assert "(written answer)" in summary and "(Score: 0.0 / 2.0)" in summary  # cy's sgd_step: 0 of 2
    assert "BEGIN HIDDEN TESTS" not in page and "hidden tests are not shown" in page


def test_a_report_that_cannot_be_written_never_fails_grading(tmp_path):
    from jaxgrader.grading.teacher.class_report import after_grading

    (tmp_path / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    line = after_grading(tmp_path, [ASSIGNMENT])  # no gradebook: the grades were not the report's to write
    assert line.startswith("class report not written: ") and "no gradebook" in line and "\n" not in line


def test_report_lists_similar_submissions(course):
    """ada and cy typed the same solutions (cy with his demo mistakes): the similarity section pairs them, their
    answers side by side with the common passages marked; bo's blank release is in no pair (tests/test_similarity.py
    tries near-copies and independent solutions)."""
    page = (course / "reports" / f"{ASSIGNMENT}.html").read_text()
    section = page.split("<h2 id='similarity'>Similar submissions</h2>")[1]
    assert section.count("<details class='pair'") == 1
    assert "<b>ada</b> and <b>cy</b>" in section and "<b>bo</b>" not in section
    assert "<mark>" in section and html.escape("Exercise 2: update without mutating") in section
