"""``jaxgrader review``: the submissions held for review, and the teacher's release of them.

    jaxgrader review lesson3               # list what is held, finding by finding
    jaxgrader review lesson3 ada bo        # release these two, and grade them again
    jaxgrader review lesson3 --all         # release every held submission of lesson3

A submission is held when its code uses what no answer in the course needs (``verdict/holds.py``): its
cost and artifact parts are at 0 until a teacher has read the code. Releasing records the hash of the
code that was read (``classrun/releases.py``, ``.grading/released.json``) and grades the submission
again, with its parts counting: the gradebook, feedback, ``grades.csv`` and the class report update as
after any grade. A resubmission with other code is scanned and held again.
"""

from __future__ import annotations

from pathlib import Path

from .classrun.ledger import LEDGER, WORK, Ledger
from .classrun.records import Result
from .classrun.releases import read_releases, release
from .classrun.table import format_table, held_lines
from .course.config import load_config


def held_submissions(root: Path, assignment: str) -> list[Result]:
    """The graded submissions of ``assignment`` whose parts are held (from the ledger: every submission's last
    result, whichever run graded it)."""
    ledger = Ledger(Path(root) / WORK / LEDGER)
    held = []
    for key, entry in sorted(ledger.entries.items()):
        if key.startswith(f"{assignment}/") and isinstance(entry, dict):
            result = Result.from_dict(entry.get("result") or {})
            if result.status == "graded" and result.is_held:
                held.append(result)
    return held


def command(root: Path, assignment: str, students: list[str], everyone: bool = False) -> int:
    """List (no students), or release and grade again; exit 1 if a named student has nothing held or a
    regrade failed."""
    load_config(root)  # a course, or a one-line CourseError
    held = held_submissions(root, assignment)
    if not students and not everyone:
        print(f"{assignment}: {len(held)} submission{'s' * (len(held) != 1)} held for review"
              + (" (release: jaxgrader review " + assignment + " STUDENT ...)" if held else ""))
        for result in held:
            print("\n".join(held_lines(result, most=20)))
        released = read_releases(root).get(assignment, {})
        if released:
            print(f"released before: " + ", ".join(sorted({f"{r.get('student')}/{r.get('notebook')}"
                                                           for r in released.values()})))
        return 0
    chosen = [r for r in held if everyone or r.student in students]
    missing = sorted(set(students) - {r.student for r in chosen})
    for student in missing:
        print(f"jaxgrader review: {student}/{assignment}: nothing held for review")
    if not chosen:
        return 1 if missing else 0
    for result in chosen:
        notebooks = release(root, assignment, result.student, result.held)
        print(f"released {result.student}/{assignment}: {', '.join(n + '.ipynb' for n in notebooks)}; grading again")
    from .classrun.run import grade_class
    from .teacher.class_report import after_grading

    results = grade_class(root, [assignment], [r.student for r in chosen], regrade=True)
    print(format_table(results))
    print(after_grading(root, [assignment]))
    return 1 if missing or any(r.status == "error" for r in results) else 0
