"""What travels in a class run: tasks and their shared payload out, records back, results kept.

A :class:`Task` (one student's one assignment) and its assignment's :class:`Shared`
payload go to a grading process (a local worker or a Dask worker: plain dataclasses of
JSON types and bytes, picklable, no closures); a :class:`Record` comes back. The
coordinator writes the record to the gradebook and keeps a :class:`Result`, which is
what ``grading-summary.json``, the ledger and the table are made of.
"""

from __future__ import annotations

import dataclasses
import os
import socket

from ..course.config import MAX_MESSAGE, one_line  # noqa: F401  (imported from here by the class run)


@dataclasses.dataclass
class Task:
    """One submission to grade."""

    student: str
    assignment: str
    notebooks: dict[str, str]  # notebook name -> submitted JSON text
    timestamp: str | None = None  # text of timestamp.txt
    hash: str = ""  # submission_hash: what the ledger keeps
    shared: str = ""  # key of its Shared payload (the assignment)


@dataclasses.dataclass
class Shared:
    """What every task of one assignment needs, sent once per assignment (not once per task)."""

    config_text: str  # the course's nbgrader_config.py
    template_gradebook: bytes  # SQLite gradebook in which generate_assignment ran
    references: dict | None  # notebook -> grade_id -> reference reports (None: the course has no verdict)
    seed: int  # c.JaxGrader.seed of the run
    isolation: str = "bubblewrap"  # or "none"
    limit_s: float = 3600.0  # hard limit for one submission
    run_key: str = ""  # c.JaxGrader.run_key of the run (the grader's secret: nonces, held-out examples)
    released: list = dataclasses.field(default_factory=list)  # code hashes a teacher released (jaxgrader review)


@dataclasses.dataclass
class Record:
    """What grading one submission produced (never raises: ``status`` "error" says why in ``error``)."""

    student: str
    assignment: str
    hash: str = ""
    status: str = "error"  # "graded" or "error"
    error: str = ""
    score: float = 0.0
    max_score: float = 0.0
    scores: dict = dataclasses.field(default_factory=dict)  # notebook -> {score, max_score}
    cells: dict = dataclasses.field(default_factory=dict)  # notebook -> grade_id -> {score, ..., parts}
    notebooks: dict = dataclasses.field(default_factory=dict)  # notebook -> autograded notebook, JSON text
    notes: list = dataclasses.field(default_factory=list)
    held: dict = dataclasses.field(default_factory=dict)  # notebook -> {findings, hash, released} (verdict.holds)
    isolation: str = "none"
    timings: dict = dataclasses.field(default_factory=dict)
    host: str = dataclasses.field(default_factory=socket.gethostname)
    pid: int = dataclasses.field(default_factory=os.getpid)

    @classmethod
    def of(cls, task: Task, isolation: str = "none") -> Record:
        return cls(task.student, task.assignment, task.hash, isolation=isolation)

    @classmethod
    def failed(cls, task: Task, reason: str) -> Record:
        """A record for a submission that could not be graded (the backend gave up on it)."""
        return cls(task.student, task.assignment, task.hash, error=one_line(reason), host="", pid=0)


@dataclasses.dataclass
class Result:
    """One student's one assignment, as the class run reports it (grading-summary.json)."""

    student: str
    assignment: str
    status: str  # "graded" or "error"
    score: float = 0.0
    max_score: float = 0.0
    error: str = ""
    seconds: float = 0.0
    notebooks: dict = dataclasses.field(default_factory=dict)  # name -> {"score", "max_score"}
    notes: list = dataclasses.field(default_factory=list)  # limits hit, renamed files, feedback failures
    isolation: str = ""  # "bubblewrap" or "none": what the grading kernel ran in
    cells: dict = dataclasses.field(default_factory=dict)  # notebook -> grade_id -> {score, max_score, message, parts}
    kept: bool = False  # unchanged since the last run: not graded again
    timings: dict = dataclasses.field(default_factory=dict)  # seconds: total, setup, autograde, execute, ...
    host: str = ""  # where it was graded
    kernel_points: float = 0.0  # points earned in test cells with a part whose evidence is "kernel"
    # notebook -> {"findings": [{cell, where, line, text, what}], "hash", "released"}: code no answer needs, whose
    # cost and artifact parts are held for review until released (verdict/holds.py, `jaxgrader review`)
    held: dict = dataclasses.field(default_factory=dict)

    @property
    def is_held(self) -> bool:
        """Whether some notebook's parts are held for review (findings a teacher has not released)."""
        return any(h.get("findings") and not h.get("released") for h in self.held.values())

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        """A Result from its JSON form (the ledger), ignoring keys it does not know."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def kernel_points(cells: dict) -> float:
    """Points earned in test cells that contain at least one part whose evidence is "kernel" (a value the
    student's kernel measured, such as a timing, rather than one the grader checked)."""
    return float(sum(cell.get("score", 0.0) for per_nb in cells.values() for cell in per_nb.values()
                     if any(p.get("evidence") == "kernel" for p in cell.get("parts", []))))
