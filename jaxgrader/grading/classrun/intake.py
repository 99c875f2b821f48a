"""Submission intake: the names browsers, Colab and LMS downloads give notebooks.

Students download ``Copy of pure_functions.ipynb`` from Colab, browsers save a
second download as ``pure_functions (1).ipynb``, and Canvas appends ``-1`` to a
resubmission. nbgrader looks for the released name only, so such a submission
would be graded as missing. Before grading, each student's folder is checked:
a missing notebook is taken from the one file whose name reduces to the
expected name, and the rename is reported.

LMS downloads go through ``nbgrader zip_collect`` first; ``nbgrader_config.py``
sets the file-name pattern (see docs/grading.md).
"""

from __future__ import annotations

import re
from pathlib import Path

_DECORATIONS = (
    re.compile(r"^(copy[ _]of[ _])+", re.I),          # Colab: "Copy of lesson"
    re.compile(r"[ _]*\(\d+\)$"),                       # browsers: "lesson (1)"
    re.compile(r"[ _-]+copy([ _]\d+)?$", re.I),         # file managers: "lesson - Copy", "lesson copy 2"
    re.compile(r"-\d+$"),                               # Canvas resubmission: "lesson-1"
    re.compile(r"-checkpoint$"),                        # Jupyter: "lesson-checkpoint"
)


def canonical(stem: str) -> str:
    """A notebook's name with download decorations removed, lower case, spaces as underscores."""
    name = stem.strip()
    changed = True
    while changed:
        changed = False
        for pattern in _DECORATIONS:
            new = pattern.sub("", name).strip()
            if new != name:
                name, changed = new, True
    return re.sub(r"\s+", "_", name).lower()


def normalise_names(folder: Path, expected: list[str]) -> list[str]:
    """Rename decorated notebooks in ``folder`` to the ``expected`` stems; return notes.

    Only a missing notebook is filled, and only from exactly one candidate; with
    several candidates the newest is taken and the note says so.
    """
    notes = []
    folder = Path(folder)
    if not folder.is_dir():
        return notes
    for stem in expected:
        target = folder / f"{stem}.ipynb"
        if target.exists():
            continue
        candidates = sorted((p for p in folder.glob("*.ipynb") if p.stem != stem and canonical(p.stem) == canonical(stem)),
                            key=lambda p: p.stat().st_mtime)
        if not candidates:
            continue
        chosen = candidates[-1]
        chosen.rename(target)
        extra = f" (newest of {len(candidates)})" if len(candidates) > 1 else ""
        notes.append(f"renamed '{chosen.name}' to '{target.name}'{extra}")
    return notes
