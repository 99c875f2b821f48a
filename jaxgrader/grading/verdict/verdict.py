"""The verdict: points from values the grader checks itself, outside the student's kernel.

nbgrader scores a test cell from its outputs (an error: zero; otherwise full
marks), and the student's code, running in the same kernel as the tests, can
write or suppress any output. So the outputs a kernel produced decide nothing
here. Instead:

1. hidden tests *report* the student's answers (``jaxgrader.checks.report``) on
   inputs drawn from the run's seed (``jaxgrader.grading.sandbox.seed``);
2. the instructor's solution is run with the same seed in a sandboxed kernel of
   its own (``reference``, once per notebook and run);
3. :class:`Verdict`, an nbgrader preprocessor that runs right after execution,
   parses what each test cell reported (``reports``: the one parser of kernel
   output, with size limits), judges it against the reference (``judging``), and
   *replaces* the cell's outputs by its own: a line saying the cell passed, or an
   error naming the parts that failed, with every part's result and evidence in the
   output's metadata. nbgrader's ``SaveAutoGrades`` then scores those outputs, which
   only the grader wrote.

A test cell passes when every part the reference reported was reported exactly
once by the student's run and satisfies its rule. A cell that did not run,
stopped early (a visible assert failed, an exception) or ran altered reports
fewer parts and scores zero.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Dict, Integer

from . import artifacts
from ..sandbox.marks import NONCE_MARK
from .judging import (KERNEL_RULES, artifact_pairs, compare, evidence_of, judge_cell, kernel_points,  # noqa: F401
                      kernel_points_of, weak_points)
from .reference import (ReferenceError, execute_reference, reference_reports,  # noqa: F401
                        reference_stderr)
from .reports import MIME, RULES, ReportError, Unencodable, parse_report, parse_reports  # noqa: F401

KERNEL_MEASURED = KERNEL_RULES  # the older name

PASS_LINE = "passed: {n} check{s} by the grader"


def _visible_message(cell, error_output) -> str:
    """The student-facing reason a test stopped, using only text from the visible test.

    The kernel's error text is the student's to control (it could quote hidden
    tests it read while they ran): it is shown only when it appears verbatim in
    the cell's visible part, e.g. an assert's message.
    """
    ename = str(error_output.get("ename", "Error"))[:60]
    evalue = str(error_output.get("evalue", ""))
    visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
    if ename in ("AssertionError",) and evalue and len(evalue) <= 300 and evalue in visible:
        return f"a visible test failed: {evalue}"
    if ename == "AssertionError":
        return "a visible test failed"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ename) and ename in _KNOWN_ERRORS:
        return f"the test stopped with {ename}"
    return "the test stopped with an error"


_KNOWN_ERRORS = {
    "NotImplementedError", "NameError", "TypeError", "ValueError", "IndexError", "KeyError", "AttributeError",
    "ZeroDivisionError", "RuntimeError", "ConcretizationTypeError", "TracerBoolConversionError",
    "UnexpectedTracerError", "TracerArrayConversionError", "TracerIntegerConversionError", "FloatingPointError",
    "NotebookTimeLimit", "NotebookMemoryLimit", "DeadKernelError", "CellTimeoutError", "RecursionError",
    "MemoryError", "SyntaxError", "IndentationError", "ImportError", "ModuleNotFoundError",
}


def _summary(text: str, parts: list[dict], stopped: str | None = None):
    """The grader's line, with every part's result in the output's metadata (for records)."""
    from nbformat import NotebookNode

    meta = {"parts": parts}
    if stopped:
        meta["stopped"] = stopped
    return NotebookNode(output_type="display_data", data={"text/plain": text}, metadata={"jaxgrader": meta})


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CELL_LINE = re.compile(r"Cell In\[(\d+)\], line (\d+)")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def stopped_in(source: str, error_output, execution_count: int | None = None) -> str:
    """Which part of a test cell raised: "visible", "hidden" or "unknown".

    Read from the traceback: in the last exception of a chain, the first frame in the
    test cell itself (``Cell In[<its execution count>]``) gives the line that raised.
    Used for statistics only (does a visible test catch this mistake, before the
    student submits?), never for scores: the traceback is kernel output.
    """
    frames = [_ANSI.sub("", str(t)) for t in error_output.get("traceback", [])]
    last = max((i for i, f in enumerate(frames) if any(m in f for m in _CHAINED)), default=-1)
    hidden_from = source.split("### BEGIN HIDDEN TESTS")[0].count("\n") + 1
    for frame in frames[last + 1:]:
        for match in _CELL_LINE.finditer(frame):
            if execution_count is None or int(match.group(1)) == execution_count:
                return "visible" if int(match.group(2)) < hidden_from else "hidden"
    return "unknown"


def stopped_part(cell) -> str | None:
    """Where a judged test cell stopped (see stopped_in), or None if it ran to the end."""
    for output in cell.get("outputs", []):
        meta = output.get("metadata", {}) if output.get("output_type") == "display_data" else {}
        if isinstance(meta, dict) and isinstance(meta.get("jaxgrader"), dict):
            return meta["jaxgrader"].get("stopped")
    return None


def parts_of(cell) -> list[dict]:
    """The parts the verdict recorded in a judged test cell (empty if none)."""
    for output in cell.get("outputs", []):
        meta = output.get("metadata", {}) if output.get("output_type") == "display_data" else {}
        parts = meta.get("jaxgrader", {}).get("parts") if isinstance(meta, dict) else None
        if isinstance(parts, list):
            return parts
    return []


def _error(message: str):
    from nbformat import NotebookNode

    return NotebookNode(output_type="error", ename="TestFailed", evalue=message, traceback=[f"TestFailed: {message}"])


def _source_of(config, info) -> Path:
    """The instructor's notebook that nbgrader is grading a submission of."""
    from nbgrader.coursedir import CourseDirectory

    coursedir = CourseDirectory(config=config)
    return Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"])) / f"{info['notebook']}.ipynb"


class StartReferenceRun(NbGraderPreprocessor):
    """Start the reference run of the notebook in the background, before the submission executes.

    Without precomputed references (a plain ``nbgrader autograde``; ``jaxgrader grade``
    computes them once per class run and hands them over), the Verdict would run the
    instructor's notebook only after the student's: two kernels one after the other.
    Started here, both run at once (each kernel is a process of its own, mostly on one
    core), and the Verdict waits for the result where it needs it. Once per notebook,
    seed and process, as before. If the background run fails, the Verdict runs it again
    and reports the error.
    """

    def preprocess(self, nb, resources):
        info = resources.get("nbgrader", {})
        verdict = self.config.get("Verdict", {})
        if not verdict.get("enabled", True) or info.get("notebook") in verdict.get("references", {}):
            return nb, resources
        source = _source_of(self.config, info)
        if source.is_file():
            threading.Thread(target=_reference_in_background, args=(source, self.config), daemon=True,
                             name=f"reference run of {source.name}").start()
        return nb, resources


def _reference_in_background(source: Path, config) -> None:
    try:
        reference_reports(source, config)
    except Exception:  # noqa: BLE001  the Verdict's own call runs it again and reports why
        pass


class Verdict(NbGraderPreprocessor):
    """Score hidden tests from reported values checked against the reference run (see module doc)."""

    enabled = Bool(True, help="Judge test cells from reported values (off: nbgrader's own output rule).").tag(
        config=True)
    references = Dict(
        {}, help="Precomputed reference reports, notebook name -> grade_id -> reports (set by jaxgrader grade; "
        "empty: run the instructor's notebook once per process).").tag(config=True)
    max_failed_parts_shown = Integer(3).tag(config=True)

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        self._reference = self._reference_for(resources)
        self._parts = resources.setdefault("jaxgrader", {}).setdefault("parts", {})
        self._artifacts = self._evaluate_artifacts(nb)
        return super().preprocess(nb, resources)

    def _evaluate_artifacts(self, nb) -> dict[str, dict]:
        """grade_id -> part name -> what evaluating its artifacts gave: every ``program`` and ``scores``
        part of the notebook in one run of the bounded process (``artifacts``)."""
        pairs, owners = [], []
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                found = artifact_pairs(cell.get("outputs", []), self._reference.get(meta.get("grade_id"), []))
                pairs += found
                owners += [(meta.get("grade_id"), ref["name"]) for ref, _ in found]
        out: dict[str, dict] = {}
        for (gid, name), result in zip(owners, artifacts.evaluate(pairs, sandboxed=self._sandboxed(),
                                                                                config=self.config)):
            out.setdefault(gid, {})[name] = result
        return out

    def _sandboxed(self) -> bool:
        """Exported programs run in the kernels' sandbox whenever the course's kernels do."""
        from ..sandbox.bwrap import check_sandbox

        section = self.config.get("LimitedExecute", {})
        manager = str(section.get("kernel_manager_class") or self.config.get("Execute", {}).get("kernel_manager_class")
                      or "")
        isolation = self.config.get("SandboxedKernelManager", {}).get("isolation", "bubblewrap")
        return "Sandboxed" in manager and isolation != "none" and not check_sandbox()

    def _reference_for(self, resources) -> dict[str, list[dict]]:
        info = resources.get("nbgrader", {})
        notebook = info.get("notebook")
        if notebook in self.references:
            payloads = self.references[notebook]
        else:  # started by StartReferenceRun, if configured: this waits for it
            payloads = reference_reports(_source_of(self.config, info), self.config)
        return {gid: [parse_report(r) for r in reps] for gid, reps in payloads.items()}

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            return cell, resources
        gid = meta.get("grade_id")
        seconds = resources.get("jaxgrader", {}).get("cell_seconds", {}).get(index)
        passed = {g: all(p["passed"] for p in parts) for g, parts in self._parts.items()}
        passed.update({f"{g}::{p['name']}": p["passed"] for g, parts in self._parts.items() for p in parts})
        parts = judge_cell(cell.get("outputs", []), self._reference.get(gid, []), seconds, passed,
                           self._artifacts.get(gid, {}), fresh=NONCE_MARK in cell.source)
        self._parts[gid] = parts  # later cells build on what this cell's work earned, held or not
        hold = resources.get("jaxgrader", {}).get("hold")  # code no answer needs (holds.FindTampering)
        if hold:
            parts = [dict(p, passed=False, held=True, message=hold["message"])
                     if p["passed"] and p["evidence"] in hold["evidence"] else p for p in parts]
        failed = [p for p in parts if not p["passed"]]
        if not failed:
            cell.outputs = [_summary(PASS_LINE.format(n=len(parts), s="" if len(parts) == 1 else "s"), parts)]
            return cell, resources
        stopped = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        lines = [f"{p['name']}: {p['message']}" for p in failed[: self.max_failed_parts_shown]]
        if len(failed) > self.max_failed_parts_shown:
            lines.append(f"... and {len(failed) - self.max_failed_parts_shown} more")
        if stopped is not None:
            lines.insert(0, _visible_message(cell, stopped))
        passed = len(parts) - len(failed)
        where = stopped_in(cell.source, stopped, cell.get("execution_count")) if stopped is not None else None
        cell.outputs = [_summary(f"failed: {len(failed)} of {len(parts)} checks ({passed} passed)", parts, where),
                        _error("; ".join(lines))]
        return cell, resources


def _cell_evidence(notebooks):
    """(grade_id, points, {evidence kinds of its parts}) of every auto-graded test cell, read from the hidden tests'
    report calls (their ``rule=`` and ``evidence=``, written as literals, as the course's tests do)."""
    import ast

    for nb in notebooks:
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            hidden = cell.source.split("### BEGIN HIDDEN TESTS", 1)[-1]
            try:
                calls = [n for n in ast.walk(ast.parse(hidden)) if isinstance(n, ast.Call)]
            except SyntaxError:
                continue
            kinds = set()
            for call in calls:
                words = {k.arg: k.value.value for k in call.keywords
                         if k.arg in ("rule", "evidence") and isinstance(k.value, ast.Constant)}
                if words or (isinstance(call.func, ast.Name) and call.func.id == "_report"):
                    kinds.add(evidence_of({"rule": words.get("rule", "close"), "evidence": words.get("evidence")}))
            yield meta.get("grade_id"), float(meta.get("points") or 0), kinds


def kernel_points_summary(assignment: str, notebooks) -> str:
    """One line for ``jaxgrader trials``: how many of an assignment's automatic points rest on the kernel's
    word or on shape-only evidence (``judging.WEAK``), and in which cells.

    ``notebooks``: the assignment's source notebooks. Read from the hidden tests' report calls, so it
    costs no run; ``grading-summary.json`` has every part's evidence per record.
    """
    total, weak, cells = 0.0, {"kernel": 0.0, "shape": 0.0}, []
    for gid, points, kinds in _cell_evidence(notebooks):
        total += points
        points_weak, weakest = weak_points([{"evidence": k} for k in kinds], points)
        if weakest:
            weak[weakest] += points_weak
            cells.append(f"{gid} ({points:g}, {weakest})")
    return (f"{assignment}: {weak['kernel']:g} of {total:g} automatic points rest on the kernel's word, "
            f"{weak['shape']:g} on shape-only evidence" + (f": {', '.join(cells)}" if cells else ""))


def evidence_summary(assignment: str, notebooks) -> str:
    """One line for ``jaxgrader trials``: the automatic points that rest on each kind of evidence the grader checks
    outside the kernel. A test cell scores all or nothing, so its points rest on every kind its parts have: values
    compared with the reference's, artifacts the grader evaluates itself (programs, scores), the grader's clock."""
    total, by = 0.0, {"reference": 0.0, "artifact": 0.0, "cost": 0.0}
    for _, points, kinds in _cell_evidence(notebooks):
        total += points
        for kind in by:
            by[kind] += points if kind in kinds else 0.0
    return (f"{assignment}: of {total:g} automatic points, {by['reference']:g} rest on values compared with the "
            f"reference's, {by['artifact']:g} on artifacts the grader evaluates (programs, scores), "
            f"{by['cost']:g} on the grader's clock")
