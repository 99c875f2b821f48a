"""A Korean student's feedback is Korean in every lesson: no part name, no sentence left in English.

The demo's Korean student hana types cy's catalogued wrong answers (``demo = true``) into the Korean
release (jaxgrader/grading/demo.py). Her notebook is graded as autograde grades it: the English source's
test cells (hidden tests back in) around her solution cells, run the way a submission runs
(``execute_reference``: the course's kernel manager and limits), judged by the real ``Verdict`` against
the reference run, and written in Korean by the real ``localize`` from the repository's Korean release and
catalogs. Then:

* every part the hidden tests report (in the reference run: a part that passes for hana fails for
  someone else) is named by a unit of the notebook's catalog, with no English data in its f-string
  fields (a name built from ``("tiny", "small")`` or ``"on one device"`` would reach a Korean student
  in English), and no English word in its Korean rendering;
* every line of hana's feedback (the verdict's head, each failed part and its message, a visible test's
  message) has no English sentence.

Two kernel runs per lesson (the reference and hana's), side by side: 15-30 s a lesson on two busy cores
(lessons 1 and 2 idle: 9 and 12 s). A cell of hana's past 30 s is stopped, as the grader stops one at its limit.
"""

from __future__ import annotations

import ast
import copy
import re
import threading
from pathlib import Path

import pytest

from jaxgrader.grading.course.config import load_config
from jaxgrader.grading.course.coursedir import assignments_in, source_notebooks
from jaxgrader.grading.course.notebooks import fill_answers, grade_id, is_solution, read_notebook
from jaxgrader.grading.demo import EDITION_STUDENTS, answers_for
from jaxgrader.grading.editions import catalogs as tc
from jaxgrader.grading.editions.localize import Translator, localize
from jaxgrader.grading.editions.sentences import GRADER
from jaxgrader.grading.sandbox.seed import seed_of, with_seed
from jaxgrader.grading.verdict.reference import execute_reference, reference_reports

from .conftest import ROOT

LANGUAGE, LIKE = "ko", EDITION_STUDENTS["hana"][1]
EDITION = tc.load_edition(ROOT, LANGUAGE)
ASSIGNMENTS = [a for a in assignments_in(ROOT) if f"source/{a}/" in " ".join(EDITION.files)]

# English words that say a line was not translated (function words, and the words part names were
# once built from: "on one device", "(stand-in dropout)", "the tiny workload", "inactive").
ENGLISH = re.compile(r"\b(the|of|on|in|at|with|after|before|for|from|by|and|to|than|instead|not|expected|is|are|"
                     r"its|their|no|one|each|every|draw|steps|stand-in|workload|tiny|small|large|active|inactive|"
                     r"device|devices|data-parallel|reference|run|differs?|missing|reported)\b", re.IGNORECASE)
# code in a line: calls, dotted and snake_case names, quoted text, brackets, numbers, single letters
CODE = re.compile(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\b\w+\([^()]*(\([^()]*\)[^()]*)*\)|\b\w*[_.]\w*\b|"
                  r"\b\d[\w.]*\b|\b[A-Za-z]\b")


def english_in(text: str) -> list[str]:
    """The English words of ``text`` outside code."""
    return ENGLISH.findall(CODE.sub(" ", text))


def english_data(value: str) -> bool:
    """A value an f-string field put into a part name that is English text, not a value: numbers, shapes,
    tuples, None, dtypes and names of code are values; "tiny", "on one device" are not."""
    try:
        ast.literal_eval(value)
        return False
    except (ValueError, SyntaxError):
        pass
    return bool(re.search(r"(?<![\w.])[a-z]{3,}(?![\w.(])", re.sub(r"\b(b?float|u?int|complex|bool)\d*\b", "", value)))


def hana_graded(assignment: str, notebook: str):
    """hana's notebook as autograde runs it: her typed solution cells (cy's demo answers in the Korean
    release) inside the English source's locked and test cells, which nbgrader restores by grade id."""
    release = read_notebook(ROOT / LANGUAGE / "release" / assignment / f"{notebook}.ipynb")
    typed = {grade_id(c): c.source for c in fill_answers(release, answers_for(ROOT, assignment, notebook, LIKE)).cells
             if is_solution(c)}
    graded = read_notebook(ROOT / "source" / assignment / f"{notebook}.ipynb")
    for cell in graded.cells:
        if is_solution(cell) and grade_id(cell) in typed:
            cell.source = typed[grade_id(cell)]
    return graded


def reported_names(reports: dict[str, list[dict]]) -> list[tuple[str, str]]:
    return [(gid, r["name"]) for gid, reps in reports.items() for r in reps if isinstance(r, dict) and r.get("name")]


def feedback_lines(cell) -> list[str]:
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "display_data" and "jaxgrader" in output.get("metadata", {}):
            lines.append(output["data"].get("text/plain", ""))
        elif output.get("output_type") == "error" and output.get("ename") == "TestFailed":
            lines += output["evalue"].split("; ")
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_hana_reads_every_part_and_verdict_in_korean(assignment):
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from jaxgrader.grading.verdict.verdict import Verdict

    config = with_seed(load_config(ROOT), seed_of(load_config(ROOT)))
    as_submission = copy.deepcopy(config)  # a cell past its time is interrupted and fails, as nbgrader's Execute does
    as_submission.NotebookClient.interrupt_on_timeout = True
    # The course's 120 s per cell, cut to 30 here: the reference's slowest cell takes a few seconds, and a cell
    # of hana's that runs past it (a benchmark that never blocks) shows the same Korean timeout line after 30 s
    # as after 120.
    as_submission.Execute.timeout = 30
    grader = tc.read_catalog(EDITION.catalogs / f"{GRADER}.po")
    found = []
    for notebook in source_notebooks(ROOT, assignment):
        source = ROOT / "source" / assignment / f"{notebook}.ipynb"
        runs = {}
        reference = threading.Thread(target=lambda: runs.update(reference=reference_reports(source, config)))
        reference.start()  # the reference run and hana's side by side
        runs["hana"] = execute_reference(hana_graded(assignment, notebook), as_submission, assignment, notebook)
        reference.join()
        assert "reference" in runs, f"{assignment}: the reference run failed"

        catalog = tc.read_catalog(EDITION.catalog_path(f"source/{assignment}/{notebook}.ipynb"))
        translator = Translator(grader, catalog)
        for gid, name in reported_names(runs["reference"]):
            match = next((m for m in (p.fullmatch(name) for p, _ in translator.parts) if m), None)
            where = f"{assignment} {gid}: part {name!r}"
            if match is None and re.search(r"[A-Za-z]{2,}", name) and not name.startswith("("):
                found.append(f"{where} is named by no unit of the catalog (a name built at run time?)")
            elif match is not None and any(english_data(v) for v in match.groupdict().values()):
                found.append(f"{where} carries English data into its name: {match.groupdict()}")
            elif english_in(translator.part(name)):
                found.append(f"{where} reads {translator.part(name)!r} in Korean")

        nb = runs["hana"]
        cfg = Config()
        cfg.Verdict.references = {notebook: runs["reference"]}
        Verdict(config=cfg).preprocess(nb, {"nbgrader": {"notebook": notebook, "assignment": assignment,
                                                          "student": "hana"}})
        failed = [c for c in nb.cells if any(o.get("ename") == "TestFailed" for o in c.get("outputs", []))]
        assert failed, f"{assignment}: hana's answers fail no test (demo = true wrong answers?)"
        coursedir = CourseDirectory(root=str(ROOT))
        localize(nb, coursedir, LANGUAGE, assignment, notebook)
        for cell in failed:
            for line in feedback_lines(cell):
                if english_in(line):
                    found.append(f"{assignment} {grade_id(cell)}: hana reads {line[:160]!r}")
    assert not found, f"{len(found)} English fragments in Korean feedback:\n" + "\n".join(found[:40])


def test_english_data_and_words_are_told_from_code():
    """The two judgements the feedback test rests on, on names it must pass and names it must refuse."""
    assert not any(english_data(v) for v in ["3", "(64, 10)", "None", "0.25", "[5, 5, 5]", "float32", "bfloat16"])
    assert all(english_data(v) for v in ["tiny", "on one device", "data-parallel", " (stand-in dropout)"])
    assert english_in("3 step의 loss, on one device: 기대한 값과 다릅니다") == ["on", "one", "device"]
    assert english_in("학습 중의 mlp_apply(params, x, key), 대체 dropout으로: 기대한 값과 다릅니다 (결과 1, 기댓값 2)") == []
    assert english_in("jax.grad(deep_loss)의 프로그램: `in_specs`를 확인하세요") == []
