"""Examples the grader holds out of every grading kernel: trained parameters are scored on them.

A ``scores`` part (``jaxgrader.checks.report``) has the grader score a student's trained parameters itself, with
the reference's model. On examples a kernel holds, that proves little: a kernel can fit parameters to them
directly (a few hundred steps of NumPy on the notebook's own ``X_test``, no working training loop). So the
examples come from the grader: for the digits every lesson trains on (scikit-learn's ``load_digits``, which reads
``sklearn/datasets/data/digits.csv.gz``), each class run draws :data:`HELD_OUT` rows from the run's key
(``marks.run_key_of``: never given to a kernel), and every grading kernel of that run, the reference's included,
sees that file with those rows replaced by copies of other rows (bound read-only over it in the sandbox,
``SandboxedKernelManager.hold_out``). The notebooks run as before, on 1,797 digits; the held-out ones exist only
here, where the verdict scores on them (:func:`held_out`).

A kernel graded unsandboxed (``isolation = "none"``) reads the real file: it holds those examples too.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import hashlib
import importlib.util
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .marks import run_key_of

HELD_OUT = 300  # of the 1,797 digits (17%): the reference's accuracy on them is measured to about 1.3 points
DATASETS = ("digits",)


def digits_file() -> Path | None:
    """scikit-learn's digits file in this environment (the kernels' too), or None where scikit-learn is absent."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "digits.csv.gz"
    return path if path.is_file() else None


@functools.lru_cache(maxsize=4)
def _table(path: str) -> np.ndarray:
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",")


def _rng(run_key: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{run_key}|held-out digits".encode()).digest()
    return np.random.default_rng(list(digest))


def held_out_rows(config) -> np.ndarray:
    """The rows of the digits file this run holds out (sorted)."""
    path = digits_file()
    n = len(_table(str(path))) if path is not None else 0
    if n <= HELD_OUT:
        return np.arange(0)
    return np.sort(_rng(run_key_of(config)).choice(n, HELD_OUT, replace=False))


def held_out(config, dataset: str = "digits") -> dict | None:
    """{"x", "y"}: the held-out examples as the course's notebooks prepare them (``course_style.DIGITS_SPLIT``:
    pixels / 16 as float32, int32 labels); None where the dataset is not here."""
    path = digits_file()
    if dataset != "digits" or path is None:
        return None
    table, rows = _table(str(path)), held_out_rows(config)
    return {"x": (table[rows, :-1] / 16.0).astype(np.float32), "y": table[rows, -1].astype(np.int32)}


_folder: list[str] = []


def masked_files(config) -> list[tuple[str, str]]:
    """(masked copy, the file it stands for) for each dataset file kernels of this run read: bound read-only over
    the real one in the sandbox. Written once per run key and process, in a folder removed at exit."""
    path = digits_file()
    rows = held_out_rows(config)
    if path is None or not len(rows):
        return []
    if not _folder:
        _folder.append(tempfile.mkdtemp(prefix="jaxgrader-heldout-"))
        atexit.register(shutil.rmtree, _folder[0], True)
    run = hashlib.sha256(run_key_of(config).encode()).hexdigest()[:16]
    masked = Path(_folder[0]) / f"digits-{run}.csv.gz"
    if not masked.exists():
        table = _table(str(path)).copy()
        kept = np.setdiff1d(np.arange(len(table)), rows)
        table[rows] = table[_rng(run_key_of(config) + "|copies").choice(kept, len(rows))]
        text = io.StringIO()
        np.savetxt(text, table, delimiter=",", fmt="%d")
        # A name of its own per writer: kernels start concurrently (the prepared one and the grading one), and
        # each writes the same bytes; the last rename wins and no reader ever sees a half-written file.
        fd, partial = tempfile.mkstemp(dir=_folder[0], suffix=".partial")
        with os.fdopen(fd, "wb") as raw, gzip.open(raw, "wt") as f:
            f.write(text.getvalue())
        os.chmod(partial, 0o644)
        os.replace(partial, masked)
    return [(str(masked), str(path))]


__all__ = ["DATASETS", "HELD_OUT", "digits_file", "held_out", "held_out_rows", "masked_files"]
