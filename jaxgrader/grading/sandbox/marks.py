"""What the grader writes into a test cell's source as it runs it: the cell's nonce, and the sources of cells a
stand-in rebuilds.

The kernel gets a test cell's code only when it runs that cell. Two marks in the hidden part of a test cell are
filled in then, on the way to the kernel (the notebook keeps the cell as written):

``"{jaxgrader-nonce}"``      a fresh value per cell and class run (:func:`nonce`): a timed workload draws its
                             inputs from it (``jaxgrader.checks.report.rng(i, nonce)``), so no earlier cell can
                             compute them, and no memo made before the cell can answer its calls. The run's seed
                             is in the kernel's environment from the start; this value is not, anywhere, before the
                             cell runs. The reference run gets the same value for the same cell, so the workload's
                             results still compare.
``"{jaxgrader-cells:a,b}"``  (with its quotes) the submitted sources of the solution cells ``a`` and ``b`` of the
                             notebook being run, as a string literal of a JSON list: a stand-in twin runs them
                             again with the stand-in bound (``jaxgrader.checks.standins.swapped``), so an answer
                             that bound an earlier function at definition time sees the stand-in too.

Nonces derive from the run's key (``c.JaxGrader.run_key``: drawn by the coordinator once per class run and handed to
every task, as the seed is; never given to a kernel; one per process for a plain ``nbgrader autograde``) with the
seed, the notebook and the cell's grade id. The mark strings are also written in ``jaxgrader.checks.report`` (the
kernel side imports nothing of the grader); tests/test_verdict.py keeps the two equal.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import secrets

from .seed import seed_of

NONCE_MARK = "{jaxgrader-nonce}"
CELLS_MARK = re.compile(r'"\{jaxgrader-cells:([\w\s,-]*)\}"')


def draw_run_key() -> str:
    return secrets.token_hex(16)


@functools.lru_cache(maxsize=None)
def _process_run_key() -> str:
    """For a plain ``nbgrader autograde`` only: no coordinator drew one."""
    return draw_run_key()


def run_key_of(config) -> str:
    """``c.JaxGrader.run_key`` of ``config``; unset: this process's own (see the module doc)."""
    key = config.get("JaxGrader", {}).get("run_key") if config is not None else None
    return str(key) if key else _process_run_key()


def nonce(config, notebook: str, grade_id: str) -> str:
    """The nonce of test cell ``grade_id`` of ``notebook`` (``assignment/name``) in this run: 32 hex digits."""
    text = f"{run_key_of(config)}|{seed_of(config)}|{notebook}|{grade_id}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def sources_by_grade_id(nb) -> dict[str, str]:
    """grade_id -> source of each solution cell of ``nb`` (the last copy where a student duplicated one)."""
    out = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
            out[str(meta["grade_id"])] = cell.get("source", "")
    return out


def filled(source: str, *, config, notebook: str, grade_id: str, cells: dict[str, str]) -> str:
    """``source`` with its marks filled in (see the module doc); unchanged where it has none."""
    if NONCE_MARK in source:
        source = source.replace(NONCE_MARK, nonce(config, notebook, grade_id))
    if "{jaxgrader-cells:" in source:
        def sources(match):
            names = [n.strip() for n in match.group(1).split(",") if n.strip()]
            return repr(json.dumps([cells[n] for n in names if n in cells]))
        source = CELLS_MARK.sub(sources, source)
    return source


def filled_cell(cell, nb, *, config, notebook: str) -> str | None:
    """What the kernel is sent for ``cell`` of ``nb``: its source with the marks filled in, for a test cell
    that has any; None for every other cell (sent as it is)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    source = cell.get("source", "")
    if (cell.get("cell_type") != "code" or not meta.get("grade") or meta.get("solution")
            or "{jaxgrader-" not in source):
        return None
    return filled(source, config=config, notebook=notebook, grade_id=str(meta.get("grade_id")),
                  cells=sources_by_grade_id(nb))


__all__ = ["CELLS_MARK", "NONCE_MARK", "draw_run_key", "filled", "filled_cell", "nonce", "run_key_of",
           "sources_by_grade_id"]
