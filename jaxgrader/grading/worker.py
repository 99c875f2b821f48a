"""Grade one student's one assignment in a process of its own (``python -m jaxgrader.worker``).

The class run starts one of these per submission, several at a time, so a
submission that crashes nbgrader, hangs, or eats memory takes down only its own
process. It prints one JSON line: status, scores per notebook, and notes about
cells that hit a limit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LIMIT_ERRORS = ("NotebookTimeLimit", "NotebookMemoryLimit", "DeadKernelError", "CellTimeoutError")


def limit_notes(autograded: Path) -> list[str]:
    """One note per notebook that hit a limit, naming the first cell that did not finish."""
    import nbformat

    notes = []
    for path in sorted(autograded.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            hit = [o for o in cell.get("outputs", []) if o.get("output_type") == "error" and o.get("ename") in LIMIT_ERRORS]
            if hit:
                notes.append(f"{path.name} cell {index}: {hit[0]['ename']}: {hit[0].get('evalue', '')}".strip())
                break
    return notes


def grade(root: Path, db_url: str, student: str, assignment: str) -> dict:
    from nbgrader.api import Gradebook

    from .course import load_config, make_api

    config = load_config(root)
    config.CourseDirectory.db_url = db_url
    api = make_api(config)
    result = api.autograde(assignment, student, force=True, create=True)
    if not result["success"]:
        text = (result.get("error") or result.get("log") or "").strip()
        return {"status": "error", "error": "nbgrader autograde failed: " + (text.splitlines()[-1] if text else "?")}
    notebooks = {}
    with Gradebook(db_url) as gb:
        submission = gb.find_submission(assignment, student)
        for nb in submission.notebooks:
            notebooks[nb.name] = {"score": float(nb.score), "max_score": float(nb.max_score)}
        total = (float(submission.score), float(submission.max_score))
    notes = limit_notes(Path(root) / "autograded" / student / assignment)
    return {"status": "graded", "score": total[0], "max_score": total[1], "notebooks": notebooks, "notes": notes}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--db-url", required=True)
    parser.add_argument("--student", required=True)
    parser.add_argument("--assignment", required=True)
    args = parser.parse_args()
    try:
        out = grade(args.root, args.db_url, args.student, args.assignment)
    except Exception as exc:  # report, never crash silently: the parent reads this line
        out = {"status": "error", "error": f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    print("JAXGRADER-RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
