"""Grades in the gradebook import format of an LMS: ``jaxgrader export --format canvas|moodle|csv``.

One row per student of nbgrader's gradebook (its ``Student`` rows: id, first and last
name, email, ``lms_user_id``), one column per assignment, each score the assignment's
score less nbgrader's late penalty. A student without a submission gets an empty cell,
which both LMSs read as "no grade" (a 0 would be a grade).

Formats followed:

* **Canvas**, the Gradebook's CSV import (Canvas Instructor Guide, "How do I import grades
  in the Gradebook?"; the layout is that of Canvas's own Gradebook export): the columns
  ``Student`` ("Last, First"), ``ID`` (the Canvas user id: nbgrader's ``lms_user_id``),
  ``SIS User ID``, ``SIS Login ID``, ``Section``, then one column per assignment headed
  ``Name (assignment id)``. A column without an id creates a new assignment of that name on
  import; ``c.LmsExport.canvas_assignment_ids`` maps nbgrader's names to Canvas's ids. The
  second row, ``Points Possible``, gives each assignment's maximum, as Canvas's export does
  (Canvas reads it for new assignments and otherwise skips it). nbgrader's student id goes
  to ``SIS Login ID`` (the login that ``nbgrader zip_collect``'s pattern reads from Canvas's
  submission file names) or ``SIS User ID`` (``c.LmsExport.canvas_student_column``).
* **Moodle**, the gradebook's CSV import (MoodleDocs, "Grade import": the import format is
  the export's; on upload the teacher maps one identifier column to a user field, "Map
  from" / "Map to", and each other column to a grade item): ``First name``, ``Last name``,
  one identifier column (``Email address``, ``Username`` or ``ID number``:
  ``c.LmsExport.moodle_identifier``), then one column per assignment, named after it,
  scores with two decimals as Moodle exports them.
* **csv**: a long table, one row per student and assignment, with every id nbgrader holds.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from traitlets import Dict, Enum, Integer, Unicode
from traitlets.config import LoggingConfigurable

from ..course.config import CourseError, load_config

FORMATS = ("canvas", "moodle", "csv")
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTIFIERS = {"email": "Email address", "username": "Username", "idnumber": "ID number"}
MOODLE_KEYS = {"email": "email", "username": "id", "idnumber": "lms_user_id"}  # nbgrader's Student field each reads
LONG_COLUMNS = ["student_id", "first_name", "last_name", "email", "lms_user_id", "assignment", "score",
                "max_score", "submitted"]


class LmsExport(LoggingConfigurable):
    """Settings of ``jaxgrader export`` (``c.LmsExport.*`` in nbgrader_config.py)."""

    canvas_assignment_ids = Dict(
        key_trait=Unicode(), value_trait=Integer(), default_value={},
        help="Canvas's assignment id per nbgrader assignment, e.g. {'lesson1': 12345}: the column is then "
        "'lesson1 (12345)' and updates that assignment; without one Canvas creates an assignment on import.",
    ).tag(config=True)
    canvas_student_column = Enum(
        ["SIS Login ID", "SIS User ID"], default_value="SIS Login ID",
        help="The Canvas column that holds nbgrader's student id (the Canvas user id, column ID, comes from "
        "each student's lms_user_id).",
    ).tag(config=True)
    moodle_identifier = Enum(
        list(MOODLE_IDENTIFIERS), default_value="email",
        help="The student field Moodle matches rows by: email, username (nbgrader's student id) or idnumber "
        "(the student's lms_user_id). Choose the same one under 'Map from'/'Map to' when importing.",
    ).tag(config=True)


def _number(value: float) -> str:
    """Canvas's way: no trailing zeros ('13', '9.5')."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def read_grades(root: Path, assignments: list[str] | None = None):
    """(students, [(assignment, max_score)], {(student, assignment): score}) from the course's gradebook."""
    from .class_report import existing_gradebook

    config = load_config(root)
    with existing_gradebook(root, config) as gb:
        known = {a.name: a for a in gb.assignments}
        chosen = assignments or sorted(known, key=lambda name: (known[name].duedate is None, known[name].duedate,
                                                                name))
        unknown = [a for a in chosen if a not in known]
        if unknown:
            raise CourseError(f"{', '.join(unknown)}: not in the gradebook (known: {', '.join(sorted(known)) or 'none'})")
        students = [{"id": s.id, "first_name": s.first_name or "", "last_name": s.last_name or "",
                     "email": s.email or "", "lms_user_id": s.lms_user_id or ""} for s in gb.students]
        columns = [(name, float(known[name].max_score)) for name in chosen]
        scores = {}
        for name in chosen:
            for submission in known[name].submissions:
                penalty = float(submission.late_submission_penalty or 0.0)
                scores[submission.student.id, name] = max(0.0, float(submission.score) - penalty)
    students.sort(key=lambda s: (s["last_name"].lower(), s["first_name"].lower(), s["id"]))
    return students, columns, scores, config


def canvas_rows(students, columns, scores, settings: LmsExport) -> list[list[str]]:
    ids = settings.canvas_assignment_ids
    header = CANVAS_IDENTITY + [f"{name} ({ids[name]})" if name in ids else name for name, _ in columns]
    rows = [header, ["Points Possible", "", "", "", ""] + [_number(points) for _, points in columns]]
    for s in students:
        name = ", ".join(p for p in (s["last_name"], s["first_name"]) if p) or s["id"]
        sis = {"SIS User ID": "", "SIS Login ID": ""} | {settings.canvas_student_column: s["id"]}
        grades = [_number(scores[s["id"], a]) if (s["id"], a) in scores else "" for a, _ in columns]
        rows.append([name, s["lms_user_id"], sis["SIS User ID"], sis["SIS Login ID"], ""] + grades)
    return rows


def moodle_rows(students, columns, scores, settings: LmsExport) -> list[list[str]]:
    field = settings.moodle_identifier
    key = MOODLE_KEYS[field]
    rows = [["First name", "Last name", MOODLE_IDENTIFIERS[field]] + [name for name, _ in columns]]
    for s in students:
        rows.append([s["first_name"], s["last_name"], s[key]]
                    + [f"{scores[s['id'], a]:.2f}" if (s["id"], a) in scores else "" for a, _ in columns])
    return rows


def long_rows(students, columns, scores, settings: LmsExport) -> list[list[str]]:
    rows = [LONG_COLUMNS]
    for s in students:
        for a, points in columns:
            got = scores.get((s["id"], a))
            rows.append([s["id"], s["first_name"], s["last_name"], s["email"], s["lms_user_id"], a,
                         "" if got is None else _number(got), _number(points), "yes" if got is not None else "no"])
    return rows


def render(fmt: str, students, columns, scores, settings: LmsExport) -> str:
    if fmt not in FORMATS:
        raise CourseError(f"--format {fmt}: unknown (one of {', '.join(FORMATS)})")
    rows = {"canvas": canvas_rows, "moodle": moodle_rows, "csv": long_rows}[fmt](students, columns, scores, settings)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def export_grades(root: Path, fmt: str, assignments: list[str] | None = None, output: Path | None = None) -> Path:
    """Write the gradebook in ``fmt`` (default file: ``grades-<fmt>.csv`` in the course); returns the path."""
    root = Path(root).resolve()
    students, columns, scores, config = read_grades(root, assignments)
    settings = LmsExport(config=config)
    text = render(fmt, students, columns, scores, settings)
    field = {"canvas": "lms_user_id", "moodle": MOODLE_KEYS[settings.moodle_identifier]}.get(fmt)
    unmatched = [s["id"] for s in students if field and not s[field]]
    if unmatched:
        how = ("Moodle cannot match them" if fmt == "moodle"
               else f"Canvas matches them by {settings.canvas_student_column}")
        print(f"jaxgrader export: no {field} for {', '.join(unmatched)}: {how}", file=sys.stderr)
    path = Path(output) if output else root / f"grades-{fmt}.csv"
    path.write_text(text, encoding="utf-8")
    return path
