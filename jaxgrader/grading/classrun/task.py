"""Grade one submission as a pure task: everything in, one record out.

:func:`grade_submission` takes a :class:`~jaxgrader.grading.classrun.records.Task` (the
submission's notebooks) and its assignment's :class:`~jaxgrader.grading.classrun.records.Shared`
payload (the course's ``nbgrader_config.py`` text, an SQLite gradebook in which
``generate_assignment`` already ran, the reference run's reports, the seed) and returns
a :class:`~jaxgrader.grading.classrun.records.Record`: scores per cell and notebook, the
autograded notebooks, notes, held findings, timings, the isolation the kernel had, or a
one-line error.

It builds a private course directory in a temporary folder, runs nbgrader's own
``NbGraderAPI.autograde`` there (the course's preprocessors, so the points are
the ones plain ``nbgrader autograde`` gives), reads the scores back from that
private gradebook, and deletes the folder. It never touches the course's
gradebook and needs no shared file system, so it runs in a local process pool or
on any Dask worker that has the course's environment (and bubblewrap). The
coordinator (:mod:`jaxgrader.grading.classrun.run`) is the only writer of the real
gradebook. The seed and the execution log travel in the private course's
configuration (``c.JaxGrader.seed``, ``c.LimitedExecute.run_log``), not in globals.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import warnings
from pathlib import Path

from .records import MAX_MESSAGE, Record, Shared, Task, one_line  # noqa: F401  (one_line: imported from here)

LIMIT_ERRORS = ("NotebookTimeLimit", "NotebookMemoryLimit", "DeadKernelError", "CellTimeoutError")

# Caps on what a record carries back (the coordinator holds records in memory,
# Dask ships them over the network). Autograded notebooks are output-capped by
# LimitedExecute already; their size is the submission's (<= 64 MiB) plus that.
MAX_NOTEBOOK_CHARS = 80 * 2**20
MAX_LINES = 20
MAX_PARTS = 50
GRACE_S = 60.0  # after the hard limit: kernels killed; this much later, the process itself exits

_LOCK = threading.Lock()  # one grading per process at a time: nbgrader's apps and the watchdog are per process


# --------------------------------------------------------------------------- hashes


def digest(*parts: bytes | str) -> str:
    """sha256 over length-prefixed parts (so ('ab', 'c') and ('a', 'bc') differ)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def submission_hash(assignment_hash: str, notebooks: dict[str, str], timestamp: str | None) -> str:
    """What decides whether a submission must be graded again: its files, its timestamp, the assignment."""
    parts = [assignment_hash, timestamp or ""]
    for name in sorted(notebooks):
        parts += [name, notebooks[name]]
    return digest(*parts)


# --------------------------------------------------------------------------- notes


def limit_notes(autograded: Path) -> list[str]:
    """One note per notebook that hit a limit, naming the first cell that did not finish."""
    import nbformat

    notes = []
    for path in sorted(Path(autograded).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            hit = [o for o in cell.get("outputs", [])
                   if o.get("output_type") == "error" and o.get("ename") in LIMIT_ERRORS]
            if hit:
                notes.append(one_line(f"{path.name} cell {index}: {hit[0]['ename']}: {hit[0].get('evalue', '')}"))
                break
    return notes


def _why(result: dict) -> str:
    """One line from a failed nbgrader API call: the first specific error it logged, else its traceback's end."""
    log = (result.get("log") or "").splitlines()
    generic = ("There was an error processing", "Please see the error log", "Skipping")
    for i, line in enumerate(log):
        if line.startswith(("[ERROR]", "[CRITICAL]")) and not any(g in line for g in generic):
            message = line.split("]", 1)[1].strip()
            if message.startswith("Traceback"):  # a logged traceback: its last line names the error
                end = next((j for j in range(i + 1, len(log)) if log[j].startswith("[")), len(log))
                message = next((t.strip() for t in reversed(log[i + 1:end]) if t.strip()), message)
            return one_line(KNOWN_FAILURES.get(message, message))
    text = (result.get("error") or "").strip().splitlines()
    return one_line(text[-1] if text else "no message")


# nbgrader's own words for a submission it cannot read, and what they mean to a teacher
KNOWN_FAILURES = {
    "KeyError: 'grade_id'": "a cell's nbgrader metadata has no grade_id (the notebook was edited outside Jupyter, "
                            "or belongs to another version of the assignment): KeyError: 'grade_id'",
}


# --------------------------------------------------------------------------- the hard limit


class _Watchdog(threading.Thread):
    """At ``limit_s``: kill the kernels this task started; ``GRACE_S`` later: end the process.

    A backstop above the notebooks' own limits (LimitedExecute): it fires only when
    something outside the student's code hangs. Ending the process makes the
    backend retry the task elsewhere (at most twice) and then record an error.
    """

    def __init__(self, limit_s: float):
        super().__init__(daemon=True, name="jaxgrader-watchdog")
        self.limit_s, self.fired = limit_s, False
        self.started_at = time.time()
        self._done = threading.Event()

    def run(self) -> None:
        if self._done.wait(self.limit_s):
            return
        self.fired = True
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                if child.create_time() >= self.started_at - 1:
                    child.kill()
            except psutil.Error:
                pass
        if not self._done.wait(GRACE_S):
            os.kill(os.getpid(), signal.SIGKILL)

    def stop(self) -> None:
        self._done.set()


# --------------------------------------------------------------------------- the task


def grade_submission(task: Task, shared: Shared) -> Record:
    """Autograde one submission in a private course directory; return its record (never raises)."""
    # nbgrader 0.9 trips SQLAlchemy's autoflush warnings on every autograde; they are nobody's concern
    warnings.filterwarnings("ignore", message=".*not in session.*")
    start = time.monotonic()
    record = Record.of(task, shared.isolation)
    with _LOCK:
        waited = time.monotonic() - start
        watchdog = _Watchdog(float(shared.limit_s or 3600))
        watchdog.start()
        try:
            _grade(task, shared, record)
        except Exception as exc:  # the record says what went wrong; the run goes on
            record.status = "error"
            record.error = one_line(f"{exc.__class__.__name__}: {exc}")
        finally:
            watchdog.stop()
        if watchdog.fired:
            record.notes.append(f"grading passed its hard limit of {watchdog.limit_s:.0f} s: "
                                "its kernels were killed")
    record.timings["total"] = round(time.monotonic() - start, 3)
    if waited > 0.01:
        record.timings["waiting"] = round(waited, 3)
    return _capped(record)


def _grade(task: Task, shared: Shared, record: Record) -> None:
    from ..course.config import load_config, make_api
    from ..course.coursedir import coursedir_of, folder
    from ..sandbox.kerneldirs import TASK_DIR_PREFIX
    from ..sandbox.limits import RunLog

    student, assignment = task.student, task.assignment
    timings = record.timings
    t0 = time.monotonic()

    # named after this process: if it is killed, the next sweep on the host removes the directory
    tmp = Path(tempfile.mkdtemp(prefix=f"{TASK_DIR_PREFIX}{os.getpid()}-"))
    try:
        (tmp / "nbgrader_config.py").write_text(shared.config_text, encoding="utf-8")
        db_path = tmp / "gradebook.db"
        db_path.write_bytes(shared.template_gradebook)
        config = load_config(tmp, db_path)
        isolation = _isolation(config, shared.isolation)
        record.isolation = isolation
        if isolation == "bubblewrap":
            from ..sandbox.bwrap import check_sandbox

            reason = check_sandbox()
            if reason:
                record.error = one_line(f"cannot sandbox the kernel on {socket.gethostname()}: {reason}")
                return
        if shared.references is not None:
            config.Verdict.references = shared.references
        if shared.released:  # code a teacher reviewed and released (jaxgrader review): its parts count
            config.FindTampering.released = list(shared.released)
        config.JaxGrader.seed = shared.seed
        if shared.run_key:
            config.JaxGrader.run_key = shared.run_key
        log = config.LimitedExecute.run_log = RunLog()
        coursedir = coursedir_of(config)
        submitted = folder(coursedir, "submitted", student, assignment)
        submitted.mkdir(parents=True)
        for name, text in task.notebooks.items():
            (submitted / f"{name}.ipynb").write_text(text, encoding="utf-8")
        if task.timestamp:
            (submitted / "timestamp.txt").write_text(task.timestamp, encoding="utf-8")
        api = make_api(config)
        timings["setup"] = round(time.monotonic() - t0, 3)

        t1 = time.monotonic()
        result = api.autograde(assignment, student, force=True, create=True)
        record.notes += [one_line(note) for note in log.reruns]
        for kind, count in log.kernels.items():  # how this submission's kernels started (prepared kernels)
            timings[f"kernels_{kind}"] = count
        timings["autograde"] = round(time.monotonic() - t1, 3)
        if log.execute_seconds:
            timings["execute"] = round(log.execute_seconds, 3)
        if not result["success"]:
            record.error = "nbgrader autograde failed: " + _why(result)
            return

        t2 = time.monotonic()
        out_dir = folder(coursedir, "autograded", student, assignment)
        _read_back(config.CourseDirectory.db_url, assignment, student, out_dir, record)
        record.notes += limit_notes(out_dir)
        timings["read_back"] = round(time.monotonic() - t2, 3)
        record.status = "graded"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _isolation(config, wanted: str) -> str:
    """What the kernels of this task get: 'bubblewrap' only with the sandboxed kernel manager configured."""
    km = config.LimitedExecute.get("kernel_manager_class") or config.Execute.get("kernel_manager_class")
    name = km if isinstance(km, str) else getattr(km, "__name__", "")
    if not name or not name.endswith("SandboxedKernelManager"):
        return "none"
    config.SandboxedKernelManager.isolation = wanted
    return wanted


def _read_back(db_url: str, assignment: str, student: str, out_dir: Path, record: Record) -> None:
    """Scores from the private gradebook; messages and parts from the autograded notebooks."""
    import nbformat
    from nbgrader.api import Gradebook

    from ..verdict.holds import tampering_of
    from ..verdict.verdict import parts_of

    with Gradebook(db_url) as gb:
        submission = gb.find_submission(assignment, student)
        for nb in submission.notebooks:
            record.scores[nb.name] = {"score": float(nb.score), "max_score": float(nb.max_score)}
            record.cells[nb.name] = {
                g.name: {"score": float(g.score or 0.0), "max_score": float(g.max_score or 0.0),
                         "auto_score": None if g.auto_score is None else float(g.auto_score),
                         "needs_manual_grade": bool(g.needs_manual_grade), "message": "", "parts": []}
                for g in nb.grades
            }
        record.score, record.max_score = float(submission.score), float(submission.max_score)
    for name in record.scores:
        path = out_dir / f"{name}.ipynb"
        text = path.read_text(encoding="utf-8")
        record.notebooks[name] = text
        nb = nbformat.reads(text, as_version=4)
        found = tampering_of(nb)
        if found:
            record.held[name] = {"hash": str(found.get("hash", "")), "released": bool(found.get("released")),
                                 "count": int(found.get("count") or len(found["findings"])),
                                 "findings": found["findings"][:MAX_PARTS]}
        for cell in nb.cells:
            gid = (cell.get("metadata", {}).get("nbgrader", {}) or {}).get("grade_id")
            entry = record.cells[name].get(gid)
            if entry is None or cell.cell_type != "code":
                continue
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if errors:
                entry["message"] = one_line(f"{errors[0].get('ename', 'Error')}: {errors[0].get('evalue', '')}")
            entry["parts"] = [{"name": one_line(p.get("name", ""), 200), "passed": bool(p.get("passed")),
                               "message": one_line(p.get("message", ""), 300), "evidence": _evidence(p),
                               **({"held": True} if p.get("held") else {})}
                              for p in parts_of(cell)[:MAX_PARTS] if isinstance(p, dict)]


def _evidence(part: dict) -> str:
    """What the verdict says the part rests on (``judging.EVIDENCE``)."""
    return str(part.get("evidence") or "reference")


def _capped(record: Record) -> Record:
    """Bound what the record carries: lines, and notebooks (outputs of non-test cells go first)."""
    record.notes = [one_line(n, 300) for n in record.notes[:MAX_LINES]]
    for name, text in list(record.notebooks.items()):
        if len(text) <= MAX_NOTEBOOK_CHARS:
            continue
        import nbformat

        nb = nbformat.reads(text, as_version=4)
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
            if cell.cell_type == "code" and not (meta.get("grade") and not meta.get("solution")):
                cell.outputs = []
        text = nbformat.writes(nb)
        if len(text) > MAX_NOTEBOOK_CHARS:
            record.status, record.notebooks = "error", {}
            record.error = (f"{name}.ipynb: the autograded notebook is larger than "
                            f"{MAX_NOTEBOOK_CHARS // 2**20} MiB even without outputs")
            return record
        record.notebooks[name] = text
        record.notes.append(f"{name}.ipynb: outputs of non-test cells dropped (notebook over "
                               f"{MAX_NOTEBOOK_CHARS // 2**20} MiB)")
    return record


def warm_up() -> int:
    """Import what grading needs (once per worker process); returns the process id."""
    import nbclient  # noqa: F401
    import nbformat  # noqa: F401
    from nbgrader.apps import NbGraderAPI  # noqa: F401

    from ..sandbox import limits

    from . import preprocessors

    from ..verdict import verdict  # noqa: F401
    from ..sandbox.kerneldirs import sweep_stale_kernels

    sweep_stale_kernels()  # a worker that replaces a killed one cleans up after it at once
    return os.getpid()
