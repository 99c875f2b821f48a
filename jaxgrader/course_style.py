"""One convention for every lesson: the texts notebooks must share, checked by tests/test_conventions.py.

Students never import this module (Colab does not have it): the notebooks carry
these texts themselves, and the test keeps every copy identical to the one here.
docs/authoring.md explains each convention.
"""

from __future__ import annotations

import re

# Where the course is published. The "Open in Colab" badges point here; a course
# published elsewhere changes this one line and the badges in the first cells.
REPOSITORY = "open-jax-course/jax-course"
BRANCH = "main"

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"

# The first code cell of every lecture and assignment. On Colab it installs nothing
# (Colab ships all of these); on a bare JupyterLab it installs what is missing; in the
# grading sandbox (no network) everything is present, so it only checks.
SETUP_CELL = '''\
# Setup (Colab or JupyterLab): install only what this runtime lacks.
import importlib.util
import subprocess
import sys

_needed = {"jax": "jax", "optax": "optax", "keras": "keras", "sklearn": "scikit-learn",
           "matplotlib": "matplotlib", "tqdm": "tqdm"}
_missing = [pip_name for module, pip_name in _needed.items() if importlib.util.find_spec(module) is None]
if _missing:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *_missing], check=True)'''

# The quick-run switch: heavy demos and final training runs shrink under CI and grading.
FAST_LINE = 'FAST = bool(os.environ.get("CI") or os.environ.get("NBGRADER_EXECUTION"))'

# The one train/test split of the digits (lessons that train on them): a fixed shuffle,
# the first 1500 images for training, the last 297 for testing.
DIGITS_SPLIT = '''\
digits = load_digits()
order = np.random.default_rng(0).permutation(len(digits.target))
X = (digits.data[order] / 16.0).astype(np.float32)  # (1797, 64), pixels scaled to [0, 1]
y = digits.target[order].astype(np.int32)  # (1797,), labels 0..9
X_train, y_train, X_test, y_test = X[:1500], y[:1500], X[1500:], y[1500:]'''

# Assignment prompts: "## Exercise 3: the title (4 points)"; the points are the sum of the
# graded cells up to the next exercise heading.
EXERCISE_HEADING = re.compile(r"^## Exercise (\d+): .+ \((\d+) points?\b[^)]*\)\s*$", re.MULTILINE)

# Section headings every lecture has, in this order (the last three close the notebook).
LECTURE_SECTIONS = ("## Objectives", "## Summary", "## Exercises", "## Further reading")


def colab_url(path: str) -> str:
    """The Colab address of a notebook in the course repository (``path`` relative to its root)."""
    return f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/{path}"


def badge(path: str) -> str:
    """The "Open in Colab" badge (markdown) for a notebook in the course repository."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(path)})"


def exercises(nb) -> list[tuple[int | None, int, list]]:
    """An assignment's cells grouped by exercise heading: ``(number, points claimed, cells)``.

    Cells before the first heading come first, as ``(None, 0, cells)``. One walker for
    the convention test (numbering, points) and the wrong-answer test (four per exercise).
    """
    groups: list[tuple[int | None, int, list]] = [(None, 0, [])]
    for cell in nb.cells:
        match = EXERCISE_HEADING.search(cell.source) if cell.cell_type == "markdown" else None
        if match:
            groups.append((int(match.group(1)), int(match.group(2)), []))
        groups[-1][2].append(cell)
    return groups
