"""One convention for every lesson: the texts notebooks must share, checked by tests/test_conventions.py.

Students never import this module (Colab does not have it): the notebooks carry
these texts themselves, and the test keeps every copy identical to the one here.
docs/authoring.md explains each convention.
"""

from __future__ import annotations

import json
import re

# Where the course is published. The "Open in Colab" badges point here; a course
# published elsewhere changes this one line and the badges in the first cells.
REPOSITORY = "open-jax-course/jax-course"
BRANCH = "main"

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"

# The oldest versions the course is tested with (Colab's: the colab lane of .ci/run pins them,
# .ci/colab-constraints.txt). The setup cell warns below them.
OLDEST = {"jax": "0.7.2", "optax": "0.2.8", "keras": "3.13.2"}

# The first code cell of every lecture and assignment. On Colab it installs nothing
# (Colab ships all of these); on a bare JupyterLab it installs what is missing; in the
# grading sandbox (no network) everything is present, so it only checks. It prints the
# versions (a student's question starts there) and defines two helpers:
# `matmul_tolerance` (visible tests compare float32 results with float64 references within
# the precision this runtime's matmuls really have: TPUs and recent GPUs multiply float32
# at bfloat16/TF32 precision by default; measured on first use, not here, so that a notebook
# can still configure JAX's devices after this cell) and `fails_on_purpose` (a demo that
# raises shows its error and "Run all" goes on; Colab ignores the `raises-exception` tag).
SETUP_CELL = '''\
# Setup (Colab or JupyterLab): install only what this runtime lacks, and say what it has.
import importlib.metadata
import importlib.util
import re
import subprocess
import sys

_needed = {"jax": "jax", "optax": "optax", "keras": "keras", "sklearn": "scikit-learn",
           "matplotlib": "matplotlib", "tqdm": "tqdm"}
_missing = [pip_name for module, pip_name in _needed.items() if importlib.util.find_spec(module) is None]
if _missing:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *_missing], check=True)
_versions = {name: importlib.metadata.version(name) for name in _needed.values()}
print("Python", sys.version.split()[0], "|", ", ".join(f"{name} {v}" for name, v in _versions.items()))
for _name, _oldest in %(oldest)s.items():  # the oldest versions this course is tested with
    if [int(n) for n in re.findall(r"\\d+", _versions[_name])[:3]] < [int(n) for n in _oldest.split(".")]:
        print(f"WARNING: {_name} {_versions[_name]} is older than {_oldest}, the oldest this course is "
              f"tested with; run: pip install -U {_name}")

_matmul_error = None


def matmul_tolerance(rtol, atol=0.0):
    """Tolerances (for np.allclose) that a float32 result computed with matmuls meets on this runtime.

    TPUs and recent GPUs multiply float32 at reduced precision by default (bfloat16 or TF32,
    relative errors near 1e-3); a CPU does not, and there they are returned unchanged.
    Measured once, on a random 64x64 matmul."""
    global _matmul_error
    if _matmul_error is None:
        import jax.numpy as jnp
        import numpy as np

        a = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)
        exact = a.astype(np.float64) @ a.T.astype(np.float64)
        _matmul_error = float(np.max(np.abs(np.asarray(jnp.dot(a, a.T), np.float64) - exact)) / np.max(np.abs(exact)))
    if _matmul_error < 1e-5:  # float32 itself: ~1e-7
        return {"rtol": rtol, "atol": atol}
    return {"rtol": max(rtol, 4 * _matmul_error), "atol": max(atol, _matmul_error)}


class fails_on_purpose:
    """`with fails_on_purpose():` runs a demo that raises, prints its error and goes on."""

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is not None:  # the message's first line: later ones may name this machine's paths
            lines = str(error).strip().splitlines() or [""]
            print(f"{kind.__name__}: {lines[0]}" + (" [...]" if len(lines) > 1 else ""))
        return True''' % {"oldest": json.dumps(OLDEST)}

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
