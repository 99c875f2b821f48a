"""Once per assignment and run: the reference run of the instructor's solution and a template gradebook.

The reference run's reports (what the solution computes on the run's seed) are what
every submission's hidden tests are compared with (:mod:`jaxgrader.grading.verdict.verdict`);
the template gradebook (``generate_assignment`` into a private SQLite file) is what each
grading task autogrades into. Both are computed by the coordinator and handed to the
tasks in their :class:`~jaxgrader.grading.classrun.records.Shared` payload.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from traitlets.config import Config

from ..course.config import CourseError, load_config, make_api
from ..course.coursedir import GRADEBOOK, Course, cache_alembic_version, coursedir_of, folder
from .records import one_line
from .task import digest


def assignment_hash(course: Course, assignment: str) -> str:
    """Changes when the assignment's source notebooks or the course configuration change."""
    parts = [course.config_text]
    for name in course.notebooks[assignment]:
        parts += [name, course.source(assignment, name).read_bytes()]
    return digest(*parts)


def generate(api, assignments: list[str]) -> None:
    """``nbgrader generate_assignment`` for each: writes release/ and the gradebook."""
    cache_alembic_version()
    for assignment in assignments:
        result = api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"source/{assignment}: nbgrader generate_assignment failed: {last_line(result)}")


def last_line(result: dict) -> str:
    text = (result.get("error") or result.get("log") or "").strip()
    return text.splitlines()[-1] if text else "no message"


def template_gradebook(course: Course, assignment: str) -> bytes:
    """An SQLite gradebook holding only ``assignment``, made by nbgrader's generate_assignment."""
    with tempfile.TemporaryDirectory(prefix="jaxgrader-template-") as tmp:
        (Path(tmp) / "nbgrader_config.py").write_text(course.config_text, encoding="utf-8")
        config = load_config(Path(tmp), Path(tmp) / GRADEBOOK)
        shutil.copytree(course.folder("source", ".", assignment), folder(coursedir_of(config), "source", ".", assignment))
        generate(make_api(config), [assignment])
        return (Path(tmp) / GRADEBOOK).read_bytes()


def uses_verdict(config: Config) -> bool:
    steps = config.Autograde.get("autograde_preprocessors") or []
    named = any("Verdict" in (s if isinstance(s, str) else getattr(s, "__name__", "")) for s in steps)
    return named and config.Verdict.get("enabled", True)


def references_for(course: Course, assignment: str, seed: int) -> dict | None:
    """notebook -> grade_id -> reports of the instructor's solution with ``seed`` (None: no verdict)."""
    if not uses_verdict(course.config):
        return None
    from ..verdict.verdict import ReferenceError, reference_reports

    try:
        return {nb: reference_reports(course.source(assignment, nb), course.config, seed)
                for nb in course.notebooks[assignment]}
    except ReferenceError as exc:
        raise CourseError(one_line(str(exc), 400)) from None
    except Exception as exc:  # the kernel did not start, ...: a course problem, not a student's
        raise CourseError(f"source/{assignment}: the reference run failed: "
                          f"{one_line(f'{exc.__class__.__name__}: {exc}', 300)}") from None


def references_side_by_side(course: Course, assignments: list[str], seed: int,
                            shares: list[tuple[int, ...]] = ()) -> tuple[dict[str, dict | None], dict[str, float]]:
    """``references_for`` every assignment, one reference run per core at a time (each run is a
    kernel of its own, mostly on one core), and the seconds each took. The first failure is raised.

    ``shares``: the grading workers' CPUs. Each reference kernel is kept on one worker's share, so the
    cells it times (``cell_time`` parts) ran on the CPUs a submission's kernel gets.
    """
    import itertools
    import threading
    from concurrent.futures import ThreadPoolExecutor

    turn, lock = itertools.count(), threading.Lock()

    def timed(assignment):
        share = [s for s in shares if s]
        if share and hasattr(os, "sched_setaffinity"):
            with lock:
                cpus = share[next(turn) % len(share)]
            os.sched_setaffinity(0, cpus)  # this thread, and the kernel it starts
        t0 = time.monotonic()
        return references_for(course, assignment, seed), round(time.monotonic() - t0, 2)

    with ThreadPoolExecutor(max_workers=max(1, min(len(assignments), os.cpu_count() or 1))) as pool:
        done = dict(zip(assignments, pool.map(timed, assignments)))
    return {a: refs for a, (refs, _) in done.items()}, {a: s for a, (_, s) in done.items()}


def limit_s(config: Config, notebooks: int) -> float:
    """Hard limit for one submission: every notebook's wall-clock limit, plus two minutes for nbgrader."""
    return float(config.LimitedExecute.get("notebook_timeout", 600)) * notebooks + 120.0
