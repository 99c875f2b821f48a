"""The teacher's loop on an nbgrader course directory, through nbgrader's own API.

generate (source/ -> release/ + gradebook) -> autograde (submitted/ -> autograded/)
-> feedback (feedback/*.html) -> export (grades.csv) -> summary table.

nbgrader does each step; this module adds what it lacks: one entry point,
checks that fail early with one line naming the missing thing, progress bars,
and a gradebook that is never left half-written (grading runs against a copy,
which replaces ``gradebook.db`` only when the run finishes).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from .notebooks import NotebookError, read_notebook

GRADEBOOK = "gradebook.db"


class CourseError(RuntimeError):
    """A problem with the course directory; the message is one line for the teacher."""


@dataclasses.dataclass
class Result:
    """One student's one assignment."""

    student: str
    assignment: str
    status: str  # "graded" or "error"
    score: float = 0.0
    max_score: float = 0.0
    error: str = ""


def load_config(root: Path, db_path: Path | None = None) -> Config:
    """The course's ``nbgrader_config.py``, pointed at ``root`` (and a gradebook file)."""
    root = Path(root).resolve()
    config_file = root / "nbgrader_config.py"
    if not config_file.is_file():
        raise CourseError(f"{config_file}: missing (is {root} a course directory?)")
    config = PyFileConfigLoader(config_file.name, path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    if db_path is not None:
        config.CourseDirectory.db_url = f"sqlite:///{Path(db_path).resolve()}"
    return config


def make_api(config: Config):
    """nbgrader's Python API for this configuration."""
    from nbgrader.apps import NbGraderAPI

    # nbgrader shells out to `alembic` (gradebook migrations) and kernels start
    # `python`: both must be this environment's, even when the command was
    # started as .venv/bin/jaxgrader without activating the environment.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

    api = NbGraderAPI(config=config)
    api.log_level = "ERROR"
    return api


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


def scores(db_url: str, student: str, assignment: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        sub = gb.find_submission(assignment, student)
        return float(sub.score), float(sub.max_score)


def autograde(api, db_url: str, student: str, assignment: str) -> Result:
    result = api.autograde(assignment, student, force=True, create=True)
    if not result["success"]:
        return Result(student, assignment, "error", error=f"nbgrader autograde failed: {_last_line(result)}")
    score, max_score = scores(db_url, student, assignment)
    return Result(student, assignment, "graded", score, max_score)


def export_grades(db_url: str, path: Path) -> None:
    """nbgrader's own CSV export (one row per student and assignment)."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    with Gradebook(db_url) as gb:
        CsvExportPlugin(to=str(path)).export(gb)


def grade_class(
    root: Path,
    assignments: list[str] | None = None,
    students: list[str] | None = None,
    *,
    feedback: bool = True,
    progress: bool = True,
) -> list[Result]:
    """Grade every submission in ``root/submitted`` and return one Result per pair.

    Fails with CourseError before touching the gradebook when a folder is
    missing. A submission that cannot be read is reported as an error for that
    student only; the rest of the class is graded.
    """
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

    work = root / ".grading"
    work.mkdir(exist_ok=True)
    db_tmp = work / GRADEBOOK
    if (root / GRADEBOOK).exists():
        shutil.copy2(root / GRADEBOOK, db_tmp)
    elif db_tmp.exists():
        db_tmp.unlink()
    config = load_config(root, db_tmp)
    db_url = config.CourseDirectory.db_url
    api = make_api(config)

    results: list[Result] = []
    pairs = [(s, a) for a in assignments for s in students]
    generate(api, assignments)
    for student, assignment in tqdm(pairs, desc="autograde", unit="notebook", disable=not progress):
        problem = check_submission(root, student, assignment)
        if problem:
            results.append(Result(student, assignment, "error", error=problem))
            continue
        results.append(autograde(api, db_url, student, assignment))
    if feedback:
        for r in tqdm([r for r in results if r.status == "graded"], desc="feedback", unit="notebook",
                      disable=not progress):
            out = api.generate_feedback(r.assignment, r.student, force=True)
            if not out["success"]:
                r.error = f"feedback failed: {_last_line(out)}"
    export_grades(db_url, work / "grades.csv")
    # Everything succeeded: publish the gradebook and grades in one step each.
    os.replace(db_tmp, root / GRADEBOOK)
    os.replace(work / "grades.csv", root / "grades.csv")
    return results


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
    errors = [f"  {r.student}/{r.assignment}: {r.error}" for r in results if r.error]
    if errors:
        lines += ["", "problems:"] + errors
    return "\n".join(lines)
