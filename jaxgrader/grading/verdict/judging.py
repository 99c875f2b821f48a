"""Judging one test cell: each reported part against the reference run's, by its rule.

Rules, tolerances and bounds come from the reference run (the instructor's solution
with the same seed); what a student's kernel sends for them is ignored. Every part
says what its points rest on (``evidence``, :data:`EVIDENCE`):

``reference``  the value compared with the reference's, computed on inputs drawn for this
               run (``close``, ``equal``; ``within_factor``: a measurement against the
               reference's measurement of the same work).
``artifact``   something the grader evaluates itself on data the kernel never saw
               (``program``, ``scores``: ``artifacts``).
``cost``       what the grader measures on its own clock (``cell_time``: the cell's wall
               time against the reference's, judged only where a ``reference`` or ``artifact``
               part of the same cell counts, so that the timed work is checked work:
               :data:`UNCHECKED_WORK`; ``within_cell_time``: claimed seconds against it).
``shape``      the reported value judged by its own form (``finite``, ``falls``,
               ``all_equal``, ``all_distinct``, ``ratio_at_least``, ``agrees``, and program
               text a kernel could print for another function: ``jitted``, ``same_program``,
               ``no_growth``, ``shard_shapes``, ``largest_value``). A student who controls the
               kernel can send such a value without doing the work; kept for older tests.
``kernel``     the kernel's word: ``true``, ``at_most``, ``at_least``, or any part whose
               reference report says ``evidence="kernel"``.

:func:`weak_points` counts the points of an assignment that rest on the last two.
Which parts count at all can depend on earlier cells (``if_passed`` / ``if_failed``:
:func:`counts`).
"""

from __future__ import annotations

import math

import numpy as np

from .reports import parse_reports
from .rules import CHECKS
from .values import compare_values

KERNEL_RULES = ("true", "at_most", "at_least")
EVIDENCE = {"close": "reference", "equal": "reference", "within_factor": "reference",
            "program": "artifact", "scores": "artifact", "cell_time": "cost", "within_cell_time": "cost",
            **{rule: "shape" for rule in ("finite", "falls", "all_equal", "all_distinct", "ratio_at_least", "agrees",
                                          "jitted", "same_program", "no_growth", "shard_shapes", "largest_value")},
            **{rule: "kernel" for rule in KERNEL_RULES}}
WEAK = ("shape", "kernel")  # evidence a kernel can produce without doing the work
CHECKED = ("reference", "artifact")  # evidence that the work was done
VALUE_RULES = ("close", "equal")  # a value compared with the reference's, computed in the cell
# A cell's time on the grader's clock is evidence of how the work was done only where the work's results are
# checked too: a kernel that skips the work is fast. Where no part of the cell that is compared with the
# reference (or evaluated by the grader) counts in a submission (an earlier exercise it builds on failed, and no
# stand-in twin stands for it), its ``cell_time`` part fails with this message.
UNCHECKED_WORK = ("no result of this cell's work is checked in this submission (it builds on an exercise that "
                  "failed), so the time it took is no evidence")
# ... and where the test reports no such part at all, whatever passed: the hidden test's author has to add one.
UNREPORTED_WORK = "this test reports no result of the work it times, so its time is no evidence; ask your teacher"
# ... and where the timed work's inputs are not drawn from the cell's nonce (``sandbox.marks``): an earlier cell
# could have computed them from the run's seed, and a memo answered the timed calls.
UNFRESH_WORK = ("this test's timed work does not draw its inputs from the cell's nonce, so it could have been "
                "done before the cell ran and its time is no evidence; ask your teacher")
# Parameters scored by the grader show that *some* parameters classify well, not that the loop under test made
# them: a kernel can fit them another way (a few hundred NumPy steps) and hand them over. So a ``scores`` part counts
# only where values of the same cell's training (its first losses, its first steps' parameters) are compared with
# the reference's and count in that submission.
UNCHECKED_TRAINING = ("no result of the training that made these parameters is checked in this submission (it "
                      "builds on an exercise that failed), so their scores are no evidence of it")
UNREPORTED_TRAINING = ("this test reports no result of the training that made these parameters, so their scores "
                       "are no evidence of it; ask your teacher")


def evidence_of(ref: dict) -> str:
    """What the points of reference part ``ref`` rest on (see :data:`EVIDENCE`)."""
    return "kernel" if ref.get("evidence") == "kernel" else EVIDENCE.get(ref["rule"], "shape")


def valued(ref: dict) -> bool:
    """Whether part ``ref`` is a value of the cell's own computation compared with the reference's (not one the
    kernel vouches for): what a ``scores`` part of the cell needs beside it to count."""
    return ref["rule"] in VALUE_RULES and evidence_of(ref) == "reference"


def counts(ref: dict, passed: dict[str, bool]) -> bool:
    """Whether part ``ref`` is judged, given which earlier test cells passed in this submission
    (a cell not judged yet counts as failed): ``if_passed`` needs all of them passed, ``if_failed``
    one of them failed."""
    needs, unless = ref.get("if_passed") or [], ref.get("if_failed") or []
    return all(passed.get(g, False) for g in needs) and (not unless or not all(passed.get(g, False) for g in unless))


def compare(got, ref: dict, context: dict | None = None) -> str:
    """'' if ``got`` (a student's parsed report, or None) satisfies reference ``ref``; else why not.

    ``context``: what some rules judge against besides ``ref``: ``"reference"`` (the cell's
    reference parts by name, for ``agrees``) and ``"seconds"`` (the cell's wall time on the
    grader's clock, for ``within_cell_time``).
    """
    if got is None:
        return "not reported (the test stopped before this check)"
    rule, value, want = ref["rule"], got["value"], ref["value"]
    if rule in CHECKS:
        return CHECKS[rule](value, ref, context or {})
    if rule == "true":
        return "" if value is True else "not true"
    if rule in ("at_most", "at_least"):
        bound = ref["bound"]
        if isinstance(value, np.ndarray) and value.shape == ():
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"not a number: {value!r:.60}"
        ok = value <= bound if rule == "at_most" else value >= bound
        return "" if ok else f"{value:.4g} is {'above' if rule == 'at_most' else 'below'} {bound:.4g}"
    return compare_values(value, want, rule, ref.get("rtol") or 0.0, ref.get("atol") or 0.0)


# --------------------------------------------------------------------------- a cell


def judge_cell(outputs, reference: list[dict], seconds: float | None = None, passed: dict[str, bool] | None = None,
               artifacts_judged: dict | None = None, fresh: bool = True) -> list[dict]:
    """One record per reference part that counts: {name, passed, message, evidence, kernel_measured}.

    ``seconds``: the cell's wall time on the grader's clock (None: not timed); ``passed``: which
    earlier test cells of this submission passed (for ``if_passed`` / ``if_failed``);
    ``artifacts_judged``: part name -> (reference's, student's outcome, problem), from :func:`artifact_pairs`
    evaluated (``artifacts.evaluate``); ``fresh``: whether the cell draws from its nonce (its source has the
    mark), without which its time is no evidence (:data:`UNFRESH_WORK`).
    """
    reports, problems = parse_reports(outputs)
    reported_work = any(evidence_of(ref) in CHECKED for ref in reference)
    reported_values = any(valued(ref) for ref in reference)
    reference = [ref for ref in reference if counts(ref, passed or {})]
    context = {"reference": {ref["name"]: ref for ref in reference}, "seconds": seconds,
               "artifacts": artifacts_judged or {}}
    parts = []
    checked = any(evidence_of(ref) in CHECKED for ref in reference)
    trained = any(valued(ref) for ref in reference)
    for ref in reference:
        got = reports.get(ref["name"], [])
        if len(got) > 1:
            message = "reported more than once"
        elif ref["rule"] == "cell_time" and not checked:
            message = UNCHECKED_WORK if reported_work else UNREPORTED_WORK
        elif ref["rule"] == "cell_time" and not fresh:
            message = UNFRESH_WORK
        elif ref["rule"] == "scores" and not trained:
            message = UNCHECKED_TRAINING if reported_values else UNREPORTED_TRAINING
        else:
            message = compare(got[0] if got else None, ref, context)
        evidence = evidence_of(ref)
        parts.append({"name": ref["name"], "passed": not message, "message": message, "evidence": evidence,
                      "kernel_measured": evidence == "kernel"})
    if not reference:
        parts.append({"name": "(no trusted check)", "passed": False, "evidence": "reference", "kernel_measured": False,
                      "message": "the reference run reported nothing for this test; ask your teacher"})
    for problem in problems[:3]:
        parts.append({"name": "(report)", "passed": False, "message": problem, "evidence": "reference",
                      "kernel_measured": False})
    return parts


def artifact_pairs(outputs, reference: list[dict]) -> list[tuple[dict, dict | None]]:
    """(reference part, the student's single report of it or None) for each ``program`` / ``scores`` part."""
    reports, _ = parse_reports(outputs)
    out = []
    for ref in reference:
        if ref["rule"] in ("program", "scores"):
            got = reports.get(ref["name"], [])
            out.append((ref, got[0] if len(got) == 1 else None))
    return out


def kernel_points(parts: list[dict], points: float) -> float:
    """The points of a test cell that rest on the kernel's word: all of them if any part does.

    A cell scores all or nothing, so one part taken on the kernel's word is enough for a
    student who controls the kernel to buy the cell with an answer that lacks that property.
    """
    return float(points) if any(p.get("evidence") == "kernel" for p in parts) else 0.0


def weak_points(parts: list[dict], points: float) -> tuple[float, str | None]:
    """(points, the weakest evidence) of a test cell that rest on evidence a kernel can produce
    without doing the work (``shape`` or ``kernel``): all of them if any part does, as above."""
    found = {p.get("evidence") for p in parts}
    weakest = "kernel" if "kernel" in found else "shape" if "shape" in found else None
    return (float(points) if weakest else 0.0), weakest


def kernel_points_of(source_nb, references: dict[str, list]) -> dict[str, float]:
    """grade_id -> points resting on kernel evidence, for one notebook and its reference reports.

    ``references``: grade_id -> report payloads, as the reference run sent them
    (``reference.reference_reports``). Only cells with such points are listed.
    """
    from .reports import parse_report

    out = {}
    for cell in source_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in references:
            parts = [{"evidence": evidence_of(parse_report(p))} for p in references[gid]]
            points = kernel_points(parts, meta.get("points") or 0)
            if points:
                out[gid] = points
    return out


__all__ = ["CHECKED", "CHECKS", "EVIDENCE", "KERNEL_RULES", "UNCHECKED_TRAINING", "UNCHECKED_WORK", "UNFRESH_WORK",
           "UNREPORTED_TRAINING", "UNREPORTED_WORK", "VALUE_RULES", "WEAK", "valued",
           "artifact_pairs", "compare", "counts", "evidence_of", "judge_cell", "kernel_points", "kernel_points_of",
           "weak_points"]
