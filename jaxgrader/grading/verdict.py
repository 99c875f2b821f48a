"""The verdict: points from values the grader checks itself, outside the student's kernel.

nbgrader scores a test cell from its outputs (an error: zero; otherwise full
marks), and the student's code, running in the same kernel as the tests, can
write or suppress any output. So the outputs a kernel produced decide nothing
here. Instead:

1. hidden tests *report* the student's answers (``jaxgrader.checks.report``) on
   inputs drawn from the run's seed (``jaxgrader.grading.seed``);
2. the instructor's solution is run with the same seed in a sandboxed kernel of
   its own (:func:`reference_reports`, once per notebook and run);
3. :class:`Verdict`, an nbgrader preprocessor that runs right after execution,
   parses what each test cell reported (:func:`parse_reports`: the one parser of
   kernel output, with size limits), compares it with the reference, and
   *replaces* the cell's outputs by its own: a line saying the cell passed, or an
   error naming the parts that failed. nbgrader's ``SaveAutoGrades`` then scores
   those outputs, which only the grader wrote.

A test cell passes when every part the reference reported was reported exactly
once by the student's run and satisfies its rule. A cell that did not run,
stopped early (a visible assert failed, an exception) or ran altered reports
fewer parts and scores zero. Rules, tolerances and bounds come from the
reference run, never from the student's kernel.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import threading
from pathlib import Path

import numpy as np
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Dict, Integer

from .seed import seed_of, with_seed

MIME = "application/vnd.jaxgrader.report.v1+json"  # same string as jaxgrader.checks.report.MIME
RULES = ("close", "equal", "true", "at_most", "at_least")
KERNEL_MEASURED = ("true", "at_most", "at_least")

MAX_REPORT_BYTES = 4 * 2**20  # one reported value, as JSON
MAX_CELL_REPORTS = 200
MAX_DEPTH = 40
MAX_NODES = 200_000
MAX_ARRAY_ELEMENTS = 8 * 2**20
DTYPES = {"bool", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"}


class ReportError(ValueError):
    """A reported value the grader will not use (too big, malformed)."""


class ReferenceError(RuntimeError):
    """The instructor's solution did not run cleanly: a course problem, not a student's."""


# --------------------------------------------------------------------------- parsing


def _decode(node, budget: list[int], depth: int = 0):
    if depth > MAX_DEPTH:
        raise ReportError(f"nested more than {MAX_DEPTH} levels")
    budget[0] -= 1
    if budget[0] < 0:
        raise ReportError(f"more than {MAX_NODES} values")
    if node is None or isinstance(node, (bool, str)):
        if isinstance(node, str) and len(node) > 10_000:
            raise ReportError("a string longer than 10000 characters")
        return node
    if isinstance(node, int):
        return node
    if isinstance(node, float):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (tag, body), = node.items()
        if tag == "$float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "$list" and isinstance(body, list):
            return [_decode(v, budget, depth + 1) for v in body]
        if tag == "$dict" and isinstance(body, list):
            out = {}
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                    raise ReportError("malformed dict entry")
                if item[0] in out:
                    raise ReportError(f"duplicate key {item[0][:40]!r}")
                out[item[0]] = _decode(item[1], budget, depth + 1)
            return out
        if tag == "$array" and isinstance(body, dict):
            return _decode_array(body)
        if tag == "$unencodable":
            return Unencodable(str(body)[:200])
    raise ReportError("malformed value")


class Unencodable:
    """A value the kernel could not express as numbers (never equal to anything)."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self):
        return f"<{self.what}>"


def _decode_array(body: dict) -> np.ndarray:
    dtype, shape, data = body.get("dtype"), body.get("shape"), body.get("data")
    if dtype not in DTYPES or not isinstance(shape, list) or not isinstance(data, str):
        raise ReportError("malformed array")
    if len(shape) > 16 or not all(isinstance(n, int) and 0 <= n for n in shape):
        raise ReportError("malformed array shape")
    count = math.prod(shape)
    if count > MAX_ARRAY_ELEMENTS:
        raise ReportError(f"an array of more than {MAX_ARRAY_ELEMENTS} elements")
    np_dtype = np.dtype(bool) if dtype == "bool" else np.dtype("<" + dtype)
    if len(data) > 4 * (count * np_dtype.itemsize + 2) // 3 + 4:
        raise ReportError("array data longer than its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise ReportError("array data is not base64") from None
    if len(raw) != count * np_dtype.itemsize:
        raise ReportError("array data does not match its shape")
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape)


def parse_report(payload) -> dict:
    """One reported value -> {name, rule, rtol, atol, bound, value}; ReportError if unusable."""
    if not isinstance(payload, dict):
        raise ReportError("not a report")
    try:
        size = len(json.dumps(payload))
    except (RecursionError, TypeError, ValueError):
        raise ReportError("a report that is not plain JSON or is nested too deeply") from None
    if size > MAX_REPORT_BYTES:
        raise ReportError(f"a report larger than {MAX_REPORT_BYTES} bytes")
    name, rule = payload.get("name"), payload.get("rule")
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ReportError("a report without a usable name")
    if rule not in RULES:
        raise ReportError(f"unknown rule {str(rule)[:20]!r}")
    numbers = {}
    for field in ("rtol", "atol", "bound"):
        v = payload.get(field)
        if v is not None and not isinstance(v, (int, float)):
            raise ReportError(f"{field} is not a number")
        numbers[field] = v
    return {"name": name, "rule": rule, **numbers, "value": _decode(payload.get("value"), [MAX_NODES])}


def _payloads(outputs) -> tuple[list, list[str]]:
    found, problems = [], []
    for output in outputs or []:
        if output.get("output_type") not in ("display_data", "execute_result"):
            continue
        data = output.get("data") or {}
        if MIME not in data:
            continue
        if len(found) >= MAX_CELL_REPORTS:
            problems.append(f"more than {MAX_CELL_REPORTS} reports in one cell")
            break
        payload = data[MIME]
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except ValueError:
                problems.append("a report that is not JSON")
                continue
        found.append(payload)
    return found, problems


def parse_reports(outputs) -> tuple[dict[str, list[dict]], list[str]]:
    """The reports in one cell's outputs: name -> [reports], plus problems found.

    This is the only place the grader reads values produced by a kernel.
    """
    reports: dict[str, list[dict]] = {}
    payloads, problems = _payloads(outputs)
    for payload in payloads:
        try:
            parsed = parse_report(payload)
        except ReportError as exc:
            problems.append(str(exc))
            continue
        reports.setdefault(parsed["name"], []).append(parsed)
    return reports, problems


# --------------------------------------------------------------------------- comparing


def _leaves(value, path=""):
    if isinstance(value, dict):
        for k in value:
            yield from _leaves(value[k], f"{path}[{k!r}]")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _structure(value):
    if isinstance(value, dict):
        return {k: _structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_structure(v) for v in value]
    return None


def _as_array(value):
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float)):
        return np.asarray(value)
    return None


def compare(got, ref: dict) -> str:
    """'' if ``got`` (a student's parsed report, or None) satisfies reference ``ref``; else why not."""
    if got is None:
        return "not reported (the test stopped before this check)"
    rule, value, want = ref["rule"], got["value"], ref["value"]
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
    if _structure(value) != _structure(want):
        return "different structure (keys, lengths or nesting) than expected"
    for (path, a), (_, b) in zip(_leaves(value), _leaves(want)):
        where = f" at {path}" if path else ""
        if isinstance(a, Unencodable) or isinstance(b, Unencodable):
            return f"not a numeric value{where}: {a!r}"
        arr_a, arr_b = _as_array(a), _as_array(b)
        if arr_a is None or arr_b is None:
            if a != b or type(a) is not type(b):
                return f"{a!r:.60} instead of {b!r:.60}{where}"
            continue
        if arr_a.shape != arr_b.shape:
            return f"shape {arr_a.shape} instead of {arr_b.shape}{where}"
        if rule == "equal" or arr_b.dtype.kind == "b":
            if arr_a.dtype.kind != arr_b.dtype.kind and {arr_a.dtype.kind, arr_b.dtype.kind} != {"i", "u"}:
                return f"dtype kind {arr_a.dtype.kind!r} instead of {arr_b.dtype.kind!r}{where}"
            if not np.array_equal(arr_a, arr_b):
                return f"values differ from the expected ones{where}"
            continue
        if arr_a.dtype.kind == "b":
            return f"booleans where numbers were expected{where}"
        a64, b64 = arr_a.astype(np.float64), arr_b.astype(np.float64)
        if not np.allclose(a64, b64, rtol=ref["rtol"], atol=ref["atol"], equal_nan=True):
            diff = np.abs(a64 - b64)
            diff = np.where(np.isnan(diff), np.inf, diff)
            worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.shape else ()
            return (f"differs from the expected value{where}"
                    + (f" (largest difference {float(diff[worst]):.3g} at index {tuple(int(i) for i in worst)})"
                       if diff.shape else f" (got {float(a64):.6g}, expected {float(b64):.6g})"))
    return ""


def judge_cell(outputs, reference: list[dict]) -> list[dict]:
    """One record per reference part: {name, passed, message, kernel_measured}."""
    reports, problems = parse_reports(outputs)
    parts = []
    for ref in reference:
        got = reports.get(ref["name"], [])
        if len(got) > 1:
            message = "reported more than once"
        else:
            message = compare(got[0] if got else None, ref)
        parts.append({"name": ref["name"], "passed": not message, "message": message,
                      "kernel_measured": ref["rule"] in KERNEL_MEASURED})
    if not reference:
        parts.append({"name": "(no trusted check)", "passed": False, "kernel_measured": False,
                      "message": "the reference run reported nothing for this test; ask your teacher"})
    for problem in problems[:3]:
        parts.append({"name": "(report)", "passed": False, "message": problem, "kernel_measured": False})
    return parts


# --------------------------------------------------------------------------- the reference run

_reference_cache: dict[tuple[str, int], tuple[dict[str, list[dict]], dict[str, str]]] = {}
_reference_lock = threading.Lock()
_reference_locks: dict[tuple[str, int], threading.Lock] = {}


def reference_reports(source_path: Path, config, seed: int | None = None) -> dict[str, list[dict]]:
    """grade_id -> reports (as sent, JSON-able) of the instructor's notebook, run with the run's seed.

    JSON-able so that a coordinator can compute them once and hand them to every
    grading task (``c.Verdict.references``); :class:`Verdict` parses them.

    Runs in a kernel started the way student kernels are (the configured
    kernel manager, so sandboxed), once per notebook content and seed per process.
    Raises ReferenceError when a test cell fails on the instructor's own solution.
    """
    return _reference_run(source_path, config, seed)[0]


def reference_stderr(source_path: Path, config, seed: int | None = None) -> dict[str, str]:
    """grade_id -> what the instructor's test cell wrote to stderr in the reference run.

    From the same (cached) run as :func:`reference_reports`, so a check on it costs
    no second execution of the notebook.
    """
    return _reference_run(source_path, config, seed)[1]


def _reference_run(source_path: Path, config, seed: int | None):
    """(reports, stderr) per test cell of one reference run, cached by notebook content and seed."""
    import nbformat

    seed = seed_of(config) if seed is None else seed
    text = Path(source_path).read_text(encoding="utf-8")
    cache_key = (hashlib.sha256(text.encode()).hexdigest(), seed)
    with _reference_lock:  # one run per notebook and seed; different notebooks run side by side
        lock = _reference_locks.setdefault(cache_key, threading.Lock())
    with lock:
        if cache_key in _reference_cache:
            return _reference_cache[cache_key]
        nb = nbformat.reads(text, as_version=4)
        executed = execute_reference(nb, with_seed(config, seed), assignment=Path(source_path).parent.name)
        result, stderr = {}, {}
        for index, cell in enumerate(executed.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            stderr[meta.get("grade_id")] = "".join(str(o.get("text", "")) for o in cell.get("outputs", [])
                                                   if o.get("name") == "stderr")
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if errors:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')} fails on the instructor's "
                                     f"solution: {errors[0].get('ename')}: {str(errors[0].get('evalue'))[:200]}")
            payloads, problems = _payloads(cell.get("outputs", []))
            reports, parse_problems = parse_reports(cell.get("outputs", []))
            problems += parse_problems
            if problems:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')}: {problems[0]}")
            duplicated = [name for name, got in reports.items() if len(got) > 1]
            if duplicated:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')} reports {duplicated[0]!r} twice")
            if not payloads:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')} reports nothing: "
                                     "nothing for the grader to compare")
            result[meta["grade_id"]] = payloads
        _reference_cache[cache_key] = result, stderr
        return result, stderr


def execute_reference(nb, config, assignment: str | None = None):
    """Run ``nb`` the way LimitedExecute runs a submission (same kernel manager, limits).

    In a directory named after ``assignment``, as nbgrader runs a submission, so that
    per-assignment kernel settings (``SandboxedKernelManager.xla_defaults_for``) apply alike.
    """
    from nbclient import NotebookClient
    from traitlets.utils.importstring import import_item

    section = config.get("LimitedExecute", {}) if config is not None else {}
    kwargs = {}
    km_class = section.get("kernel_manager_class") or config.get("Execute", {}).get("kernel_manager_class")
    if km_class:
        kwargs["kernel_manager_class"] = import_item(km_class) if isinstance(km_class, str) else km_class
    import tempfile

    timeout = (config.get("Execute", {}).get("timeout") if config is not None else None) or 300
    with tempfile.TemporaryDirectory(prefix="jaxgrader-reference-") as tmp:
        cwd = os.path.join(tmp, assignment or "reference")
        os.mkdir(cwd)
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": cwd}}, config=config, **kwargs)
        client.execute()
    return nb


# --------------------------------------------------------------------------- the preprocessor

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
        return super().preprocess(nb, resources)

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
        parts = judge_cell(cell.get("outputs", []), self._reference.get(gid, []))
        self._parts[gid] = parts
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
