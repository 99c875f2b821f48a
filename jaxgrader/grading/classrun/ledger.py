"""What was written to the gradebook, per submission: its hash and its Result (``.grading/ledger.json``).

A rerun grades only what is new, changed or missing: a submission whose hash (its
files, timestamp, the assignment's source and the configuration) is the ledger's, and
whose autograded files and gradebook entry are still there, is kept (:func:`kept`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ..course.coursedir import Course
from .records import Result

WORK = ".grading"  # the coordinator's own files in the course; kernels never see the course directory
LEDGER = "ledger.json"


class Ledger:
    """Lives in ``<course>/.grading/`` (the kernels never see the course), rewritten
    atomically after each record, so it never claims more than the gradebook holds."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.entries = json.loads(self.path.read_text())
            if not isinstance(self.entries, dict):
                self.entries = {}
        except (OSError, ValueError):
            self.entries = {}

    def get(self, student: str, assignment: str) -> dict | None:
        entry = self.entries.get(f"{assignment}/{student}")
        return entry if isinstance(entry, dict) else None

    def put(self, result: Result, hash_: str) -> None:
        self.entries[f"{result.assignment}/{result.student}"] = {"hash": hash_, "result": dataclasses.asdict(result)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.entries))
        os.replace(tmp, self.path)


def kept(entry: dict | None, hash_: str, course: Course, gb, student: str, assignment: str) -> Result | None:
    """The previous Result if this submission need not be graded again, else None."""
    if not entry or entry.get("hash") != hash_:
        return None
    data = entry.get("result") or {}
    if data.get("status") != "graded":
        return None
    if course.isolation == "bubblewrap" and data.get("isolation") != "bubblewrap":
        return None  # graded without the sandbox before: grade again with it
    where = course.folder("autograded", student, assignment)
    if not all((where / f"{nb}.ipynb").is_file() for nb in data.get("notebooks", {})):
        return None
    if gb is None:
        return None
    from nbgrader.api import MissingEntry

    try:
        gb.find_submission(assignment, student)
    except MissingEntry:
        return None
    result = Result.from_dict(data)
    result.kept = True
    return result
