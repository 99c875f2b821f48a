"""A teacher's releases of held submissions (``.grading/released.json``), kept between runs.

A submission whose code has tampering findings (``verdict/holds.py``) has its cost and artifact parts held
for review. ``jaxgrader review lessonN STUDENT`` records that the teacher read that code and released it:
the hash of the code that was read (``holds.code_hash``), so a resubmission with other code is scanned and
held again. The class run hands each assignment's released hashes to its tasks (``Shared.released``), and
``FindTampering`` then lets their parts count; the findings stay on the record, marked released.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

from .ledger import WORK

RELEASED = "released.json"


def releases_path(root: Path) -> Path:
    """Where a course keeps its releases (beside the ledger, where kernels never look)."""
    return Path(root) / WORK / RELEASED


def read_releases(root: Path) -> dict:
    """assignment -> code hash -> {student, notebook, released (a time), findings (how many)}."""
    try:
        data = json.loads(releases_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {a: h for a, h in data.items() if isinstance(h, dict)} if isinstance(data, dict) else {}


def released_hashes(root: Path, assignment: str) -> list[str]:
    """The code hashes released for ``assignment`` (what its tasks are told)."""
    return sorted(read_releases(root).get(assignment, {}))


def release(root: Path, assignment: str, student: str, held: dict) -> list[str]:
    """Record the release of a submission's held notebooks (``held``: a Result's ``held``); the notebooks
    released, written atomically."""
    releases = read_releases(root)
    done = []
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for notebook, entry in sorted(held.items()):
        if entry.get("findings") and entry.get("hash") and not entry.get("released"):
            releases.setdefault(assignment, {})[entry["hash"]] = {
                "student": student, "notebook": notebook, "released": stamp,
                "findings": int(entry.get("count") or len(entry["findings"]))}
            done.append(notebook)
    if done:
        path = releases_path(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(releases, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return done
