"""The reference run: the instructor's notebook, run with the run's seed in a kernel like the students'.

Its reports are what every submission's reports are judged against (``judging``).
Run once per notebook content and seed in a process, or computed once by the
coordinator and handed to every task (``c.Verdict.references``).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from .reports import parse_reports, payloads
from ..sandbox.marks import filled_cell, run_key_of
from ..sandbox.seed import seed_of, with_seed


class ReferenceError(RuntimeError):
    """The instructor's solution did not run cleanly: a course problem, not a student's."""


_reference_cache: dict[tuple[str, int, str], tuple[dict[str, list[dict]], dict[str, str]]] = {}
_reference_lock = threading.Lock()
_reference_locks: dict[tuple[str, int, str], threading.Lock] = {}


def reference_reports(source_path: Path, config, seed: int | None = None) -> dict[str, list[dict]]:
    """grade_id -> reports (as sent, JSON-able) of the instructor's notebook, run with the run's seed.

    JSON-able so that a coordinator can compute them once and hand them to every
    grading task (``c.Verdict.references``); :class:`Verdict` parses them.

    Runs in a kernel started the way student kernels are (the configured
    kernel manager, so sandboxed), once per notebook content, seed and run key per process.
    Raises ReferenceError when a test cell fails on the instructor's own solution.
    """
    return _reference_run(source_path, config, seed)[0]


def reference_stderr(source_path: Path, config, seed: int | None = None) -> dict[str, str]:
    """grade_id -> what the instructor's test cell wrote to stderr in the reference run.

    From the same (cached) run as :func:`reference_reports`, so a check on it costs
    no second execution of the notebook.
    """
    return _reference_run(source_path, config, seed)[1]


def _reference_run(source_path: Path, config, seed: int | None):
    """(reports, stderr) per test cell of one reference run, cached by notebook content, seed and run key."""
    import nbformat

    seed = seed_of(config) if seed is None else seed
    text = Path(source_path).read_text(encoding="utf-8")
    cache_key = (hashlib.sha256(text.encode()).hexdigest(), seed, run_key_of(config))
    with _reference_lock:  # one run per notebook, seed and run key; different notebooks run side by side
        lock = _reference_locks.setdefault(cache_key, threading.Lock())
    with lock:
        if cache_key in _reference_cache:
            return _reference_cache[cache_key]
        nb = nbformat.reads(text, as_version=4)
        executed = execute_reference(nb, with_seed(config, seed), assignment=Path(source_path).parent.name,
                                     notebook=Path(source_path).stem)
        result, stderr = {}, {}
        for index, cell in enumerate(executed.cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
                continue
            stderr[meta.get("grade_id")] = "".join(str(o.get("text", "")) for o in cell.get("outputs", [])
                                                   if o.get("name") == "stderr")
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if errors:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')} fails on the instructor's "
                                     f"solution: {errors[0].get('ename')}: {str(errors[0].get('evalue'))[:200]}")
            found, problems = payloads(cell.get("outputs", []))
            found = with_cell_time(found, cell.get("metadata", {}).get("jaxgrader_seconds"))
            reports, parse_problems = parse_reports(cell.get("outputs", []))
            problems += parse_problems
            if problems:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')}: {problems[0]}")
            duplicated = [name for name, got in reports.items() if len(got) > 1]
            if duplicated:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')} reports {duplicated[0]!r} twice")
            if not found:
                raise ReferenceError(f"{source_path}: test {meta.get('grade_id')} reports nothing: "
                                     "nothing for the grader to compare")
            result[meta["grade_id"]] = found
        _reference_cache[cache_key] = result, stderr
        return result, stderr


def with_cell_time(found: list, seconds: float | None) -> list:
    """The reference's reports with each ``cell_time`` part's value set to the cell's wall time on the
    grader's clock (what the kernel reported for it is ignored, as everywhere)."""
    return [{**payload, "value": seconds} if isinstance(payload, dict) and payload.get("rule") == "cell_time"
            else payload for payload in found]


def as_autograde(config):
    """``config`` whose kernels see ``NBGRADER_EXECUTION=autograde``, as a submission's kernel does.

    nbgrader sets that variable only while it autogrades; a class run computes its references before,
    outside autograde, and a notebook that shrinks its work under grading (``FAST``) would otherwise run
    the reference's long version against the students' short one.
    """
    import copy

    from traitlets.config import Config

    config = copy.deepcopy(config) if config is not None else Config()
    env = dict(config.SandboxedKernelManager.get("kernel_env", {}))
    env.setdefault("NBGRADER_EXECUTION", "autograde")
    config.SandboxedKernelManager.kernel_env = env
    return config


def execute_reference(nb, config, assignment: str | None = None, notebook: str | None = None):
    """Run ``nb`` the way LimitedExecute runs a submission (same kernel manager, limits, marks filled in).

    In a directory named after ``assignment``, as nbgrader runs a submission, so that
    per-assignment kernel settings (``SandboxedKernelManager.xla_defaults_for``) apply alike;
    ``notebook`` (its name) and ``assignment`` name the cells' nonces (``sandbox.marks``), as a
    submission's of the same notebook are named.
    """
    from nbclient import NotebookClient
    from traitlets.utils.importstring import import_item

    config = as_autograde(config)
    section = config.get("LimitedExecute", {}) if config is not None else {}
    kwargs = {}
    km_class = section.get("kernel_manager_class") or config.get("Execute", {}).get("kernel_manager_class")
    if km_class:
        kwargs["kernel_manager_class"] = import_item(km_class) if isinstance(km_class, str) else km_class
    import tempfile

    timeout = (config.get("Execute", {}).get("timeout") if config is not None else None) or 300
    with tempfile.TemporaryDirectory(prefix="jaxgrader-reference-") as tmp:
        cwd = os.path.join(tmp, assignment or "reference")
        os.mkdir(cwd)
        started, written = {}, {}
        where = f"{assignment or ''}/{notebook or ''}"

        def before(cell, cell_index, **_):
            sent = filled_cell(cell, nb, config=config, notebook=where)
            if sent is not None:  # as LimitedExecute sends a submission's
                written[cell_index], cell.source = cell.source, sent
            started[cell_index] = time.monotonic()

        def after(cell, cell_index, **_):  # each cell's wall time, as LimitedExecute times a submission's
            cell.metadata["jaxgrader_seconds"] = time.monotonic() - started.pop(cell_index, time.monotonic())
            if cell_index in written:
                cell.source = written.pop(cell_index)

        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                shutdown_kernel="immediate",  # as a submission's (LimitedExecute): all is in
                                resources={"metadata": {"path": cwd}}, config=config,
                                on_cell_execute=before, on_cell_executed=after, **kwargs)
        client.execute()
    return nb
