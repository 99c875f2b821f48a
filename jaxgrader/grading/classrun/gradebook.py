"""The gradebook's one writer: a graded record goes in as one transaction, through nbgrader's own steps.

What ``nbgrader autograde`` does after executing (the student and the submission with its
timestamp, then ``SaveAutoGrades`` and ``AssignLatePenalties`` on each autograded
notebook), done by the coordinator for a record a grading task sent back; the
autograded files are swapped into place first. Also nbgrader's CSV export.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from ..course.coursedir import Course
from .records import Record, Result, kernel_points


class _Deferred:
    """A gradebook session whose commits only flush: the caller commits once, for the whole record."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def __getattr__(self, name):
        return getattr(self._session, name)


class _Borrowed:
    """The writer's open gradebook, lent to an nbgrader preprocessor that would open its own."""

    def __init__(self, gb):
        self._gb = gb

    def __enter__(self):
        return self._gb

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name):
        return getattr(self._gb, name)


@contextlib.contextmanager
def _one_transaction(gb):
    """Everything nbgrader writes inside is one transaction: committed at the end, or rolled back."""
    from nbgrader.preprocessors import latesubmissions, saveautogrades

    session = gb.db
    saved = saveautogrades.Gradebook, latesubmissions.Gradebook
    gb.db = _Deferred(session)
    saveautogrades.Gradebook = latesubmissions.Gradebook = lambda *a, **k: _Borrowed(gb)
    try:
        yield
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        saveautogrades.Gradebook, latesubmissions.Gradebook = saved
        gb.db = session


def write_record(gb, course: Course, record: Record, timestamp: str | None) -> list[str]:
    import warnings

    with warnings.catch_warnings():
        # nbgrader 0.9 trips SQLAlchemy's autoflush warnings on every submission; they are nobody's concern
        warnings.filterwarnings("ignore", message=".*not in session.*")
        return _write_record(gb, course, record, timestamp)


def _write_record(gb, course: Course, record: Record, timestamp: str | None) -> list[str]:
    """Write one graded record: autograded/ files, then the gradebook (one transaction). Returns notes.

    The gradebook part is what ``nbgrader autograde`` does after executing: the
    student and the submission (with its timestamp), then nbgrader's own
    SaveAutoGrades and AssignLatePenalties on each autograded notebook.
    """
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
    from nbgrader.utils import find_all_files, parse_utc

    student, assignment = record.student, record.assignment
    notebooks = {name: nbformat.reads(text, as_version=4) for name, text in record.notebooks.items()}
    config, db_url = course.config, course.db_url

    # files: staged next to their place, then swapped in
    dest = course.folder("autograded", student, assignment)
    parent = dest.parent
    staging = parent / f".{dest.name}.jaxgrader-new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    submitted = course.folder("submitted", student, assignment)
    ignore = list(course.coursedir.ignore)
    for path in find_all_files(str(submitted), ignore + ["*.ipynb"]):  # as nbgrader does: other files come along
        target = staging / os.path.relpath(path, submitted)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    for name, text in record.notebooks.items():
        (staging / f"{name}.ipynb").write_text(text, encoding="utf-8")
    old = parent / f".{dest.name}.jaxgrader-old"
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        os.replace(dest, old)
    os.replace(staging, dest)
    shutil.rmtree(old, ignore_errors=True)

    with _one_transaction(gb):
        gb.update_or_create_student(student)
        when = parse_utc(timestamp.strip()) if timestamp and timestamp.strip() else None
        if when is not None:
            gb.update_or_create_submission(assignment, student, timestamp=when)
        else:
            gb.update_or_create_submission(assignment, student)
        for name, nb in notebooks.items():
            resources = {"nbgrader": {"db_url": db_url, "assignment": assignment, "notebook": name, "student": student}}
            SaveAutoGrades(config=config).preprocess(nb, resources)
            AssignLatePenalties(config=config).preprocess(nb, resources)

    notes = []
    for name, cells in record.cells.items():
        sub_nb = gb.find_submission_notebook(name, assignment, student)
        live = {g.name: g.auto_score for g in sub_nb.grades}
        differ = [gid for gid, c in cells.items() if c.get("auto_score") != (None if live.get(gid) is None
                                                                          else float(live[gid]))]
        if differ:
            notes.append(f"{name}.ipynb: gradebook scores differ from the grading task's for {', '.join(differ[:5])}")
    return notes


def result_of(record: Record, gb, renamed: list[str], notes: list[str]) -> Result:
    """The Result of a record just written (scores as the gradebook now holds them)."""
    result = Result(record.student, record.assignment, record.status, error=record.error,
                    seconds=float(record.timings.get("total", 0.0)), notes=list(renamed) + list(record.notes) + notes,
                    isolation=record.isolation, held=record.held, cells=record.cells,
                    timings=record.timings, host=record.host, kernel_points=kernel_points(record.cells))
    if record.status == "graded":
        submission = gb.find_submission(result.assignment, result.student)
        result.score, result.max_score = float(submission.score), float(submission.max_score)
        result.notebooks = {nb.name: {"score": float(nb.score), "max_score": float(nb.max_score)}
                            for nb in submission.notebooks}
    return result


def export_grades(db_url: str, path: Path) -> None:
    """nbgrader's own CSV export (one row per student and assignment)."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    with Gradebook(db_url) as gb:
        CsvExportPlugin(to=str(path)).export(gb)
