"""The teacher's loop on an nbgrader course directory, through nbgrader's own API.

generate (source/ -> release/ + gradebook) -> autograde (submitted/ -> autograded/)
-> feedback (feedback/*.html) -> export (grades.csv) -> summary table.

nbgrader does each step; this module adds what it lacks: one entry point,
checks that fail early with one line naming the missing thing, parallel
grading with one process per submission, progress bars, a machine-readable
summary, and a gradebook that is never left half-written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from traitlets.config import Config

from .config import CourseError, load_config, make_api
from .intake import normalise_names
from .notebooks import NotebookError, read_notebook

GRADEBOOK = "gradebook.db"


@dataclasses.dataclass
class Result:
    """One student's one assignment."""

    student: str
    assignment: str
    status: str  # "graded" or "error"
    score: float = 0.0
    max_score: float = 0.0
    error: str = ""
    seconds: float = 0.0
    notebooks: dict = dataclasses.field(default_factory=dict)  # name -> {"score", "max_score"}
    notes: list = dataclasses.field(default_factory=list)  # limits hit, feedback failures


def assignments_in(root: Path) -> list[str]:
    source = Path(root) / "source"
    if not source.is_dir():
        raise CourseError(f"{source}: missing (no assignments to grade)")
    return sorted(p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))


def source_notebooks(root: Path, assignment: str) -> list[str]:
    folder = Path(root) / "source" / assignment
    if not folder.is_dir():
        raise CourseError(f"{folder}: missing (no such assignment)")
    names = sorted(p.stem for p in folder.glob("*.ipynb"))
    if not names:
        raise CourseError(f"{folder}: holds no notebook")
    return names


def check_submission(root: Path, student: str, assignment: str) -> str:
    """'' if the submission can be graded, else a one-line reason naming the file."""
    folder = Path(root) / "submitted" / student / assignment
    if not folder.is_dir():
        return f"{folder}: missing (no submission for {assignment})"
    for notebook in source_notebooks(root, assignment):
        try:
            read_notebook(folder / f"{notebook}.ipynb")
        except NotebookError as exc:
            return str(exc)
    return ""


def generate(api, assignments: list[str]) -> None:
    """``nbgrader generate_assignment`` for each: writes release/ and the gradebook."""
    for assignment in assignments:
        result = api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"source/{assignment}: nbgrader generate_assignment failed: {_last_line(result)}")


def _last_line(result: dict) -> str:
    text = (result.get("error") or result.get("log") or "").strip()
    return text.splitlines()[-1] if text else "no message"


def export_grades(db_url: str, path: Path) -> None:
    """nbgrader's own CSV export (one row per student and assignment)."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    with Gradebook(db_url) as gb:
        CsvExportPlugin(to=str(path)).export(gb)


def grade_in_subprocess(root: Path, db_url: str, student: str, assignment: str, hard_limit_s: float) -> Result:
    """Autograde one submission in its own process (see ``jaxgrader.worker``).

    ``hard_limit_s`` is a backstop above the per-notebook limits: a worker still
    running then is killed with its whole process group (kernel included).
    """
    start = time.monotonic()
    cmd = [sys.executable, "-m", "jaxgrader.grading.worker", "--root", str(root), "--db-url", db_url,
           "--student", student, "--assignment", assignment]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=hard_limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return Result(student, assignment, "error", error=f"grading did not finish in {hard_limit_s:.0f} s; killed",
                      seconds=time.monotonic() - start)
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("JAXGRADER-RESULT ")), None)
    if line is None:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return Result(student, assignment, "error", error=f"grading process died (exit {proc.returncode}): {tail}",
                      seconds=time.monotonic() - start)
    data = json.loads(line.split(" ", 1)[1])
    return Result(student, assignment, data["status"], data.get("score", 0.0), data.get("max_score", 0.0),
                  data.get("error", ""), time.monotonic() - start, data.get("notebooks", {}), data.get("notes", []))


def gradebook_file(config: Config, root: Path) -> Path | None:
    """The SQLite file the course grades into, or None for a server database."""
    db_url = config.CourseDirectory.get("db_url", "")
    if not db_url:
        return Path(root) / GRADEBOOK  # nbgrader's default
    if db_url.startswith("sqlite:///"):
        return (Path(root) / db_url[len("sqlite:///"):].split("?")[0]).resolve()
    return None


def grade_class(
    root: Path,
    assignments: list[str] | None = None,
    students: list[str] | None = None,
    *,
    feedback: bool = True,
    progress: bool = True,
    workers: int | None = None,
) -> list[Result]:
    """Grade every submission in ``root/submitted`` and return one Result per pair.

    Submissions are graded in parallel, each in its own process (``workers``,
    default: the CPU count). Fails with CourseError before touching the
    gradebook when a folder is missing. A submission that cannot be read, or
    whose grading fails, is an error for that student only.

    With an SQLite gradebook (the default), grading runs against a copy that
    replaces the gradebook only when the run finishes, so an interrupted run
    leaves the old one as it was. A server gradebook (PostgreSQL, set as
    ``CourseDirectory.db_url``) is written in place, one transaction per step.
    Grading again regrades: nbgrader keys grades by student, assignment and
    cell, so nothing is duplicated.
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm.auto import tqdm

    root = Path(root).resolve()
    assignments = assignments or assignments_in(root)
    for assignment in assignments:
        source_notebooks(root, assignment)  # fails early, naming the folder
    submitted = root / "submitted"
    if not submitted.is_dir():
        raise CourseError(f"{submitted}: missing (no submissions to grade)")
    students = students or sorted(p.name for p in submitted.iterdir() if p.is_dir())
    if not students:
        raise CourseError(f"{submitted}: holds no student folder")
    for student in students:
        if not (submitted / student).is_dir():
            raise CourseError(f"{submitted / student}: missing (no such student)")

    config = load_config(root)
    live_db = gradebook_file(config, root)
    work = root / ".grading"
    work.mkdir(exist_ok=True)
    if live_db is not None:
        db_tmp = work / live_db.name
        if live_db.exists():
            shutil.copy2(live_db, db_tmp)
        elif db_tmp.exists():
            db_tmp.unlink()
        # Several worker processes share the file: each waits for the others' short transactions.
        config.CourseDirectory.db_url = f"sqlite:///{db_tmp}?timeout=120"
    db_url = config.CourseDirectory.db_url
    api = make_api(config)
    generate(api, assignments)

    workers = max(1, workers or os.cpu_count() or 1)
    limit_s = _hard_limit_s(config, root, assignments)
    results: list[Result] = []
    pending = []
    renamed: dict[tuple[str, str], list[str]] = {}
    for assignment in assignments:
        for student in students:
            renamed[student, assignment] = normalise_names(submitted / student / assignment,
                                                           source_notebooks(root, assignment))
            problem = check_submission(root, student, assignment)
            if problem:
                results.append(Result(student, assignment, "error", error=problem,
                                      notes=renamed[student, assignment]))
            else:
                pending.append((student, assignment))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(grade_in_subprocess, root, db_url, s, a, limit_s[a]) for s, a in pending]
        for future in tqdm(as_completed(futures), total=len(futures), desc=f"autograde ({workers} workers)",
                           unit="submission", disable=not progress):
            result = future.result()
            result.notes[:0] = renamed[result.student, result.assignment]
            results.append(result)
    if feedback:
        for r in tqdm([r for r in results if r.status == "graded"], desc="feedback", unit="submission",
                      disable=not progress):
            out = api.generate_feedback(r.assignment, r.student, force=True)
            if not out["success"]:
                r.notes.append(f"feedback failed: {_last_line(out)}")
    results.sort(key=lambda r: (r.student, r.assignment))
    export_grades(db_url, work / "grades.csv")
    write_summary(results, work / "grading-summary.json")
    # Everything succeeded: publish the gradebook and the reports, one atomic rename each.
    if live_db is not None:
        os.replace(db_tmp, live_db)
    os.replace(work / "grades.csv", root / "grades.csv")
    os.replace(work / "grading-summary.json", root / "grading-summary.json")
    return results


def _hard_limit_s(config: Config, root: Path, assignments: list[str]) -> dict[str, float]:
    """Per assignment: every notebook's wall-clock limit, plus two minutes for nbgrader itself."""
    per_notebook = float(config.LimitedExecute.get("notebook_timeout", 600))
    return {a: per_notebook * len(source_notebooks(root, a)) + 120.0 for a in assignments}


def write_summary(results: list[Result], path: Path) -> None:
    """Machine-readable summary: one record per student and assignment."""
    path.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2) + "\n")


def format_table(results: list[Result]) -> str:
    """Students down, assignments across, 'score/max' or 'ERROR' in each cell."""
    students = sorted({r.student for r in results})
    assignments = sorted({r.assignment for r in results})
    cell = {(r.student, r.assignment): r for r in results}
    width = max([len("student")] + [len(s) for s in students])
    col = max([11] + [len(a) for a in assignments])
    lines = ["student".ljust(width) + "".join(a.rjust(col + 2) for a in assignments) + "total".rjust(col + 2)]
    for s in students:
        row, got, out_of = s.ljust(width), 0.0, 0.0
        for a in assignments:
            r = cell.get((s, a))
            if r is None or r.status == "error":
                row += "ERROR".rjust(col + 2)
            else:
                row += f"{r.score:g}/{r.max_score:g}".rjust(col + 2)
                got, out_of = got + r.score, out_of + r.max_score
        lines.append(row + f"{got:g}/{out_of:g}".rjust(col + 2))
    errors = [f"  {r.student}/{r.assignment}: {note}" for r in results for note in ([r.error] if r.error else []) + r.notes]
    if errors:
        lines += ["", "problems:"] + errors
    return "\n".join(lines)
