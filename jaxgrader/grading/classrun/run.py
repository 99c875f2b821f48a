"""The class run: the teacher's loop on an nbgrader course directory, as named phases.

generate (source/ -> release/ + gradebook) -> autograde (submitted/ -> autograded/)
-> feedback (feedback/*.html) -> export (grades.csv) -> summary table.

nbgrader does each step; a class run adds what it lacks for a large class: one
entry point, checks that fail early with one line naming the missing thing,
grading as independent tasks on a local process pool or a Dask cluster
(:mod:`jaxgrader.grading.classrun.task`, :mod:`jaxgrader.grading.classrun.backends`), one writer
of the gradebook, progress with an ETA, a machine-readable summary, and reruns
that grade only what is new or changed.

:func:`grade_class` runs the phases on one :class:`Run`:

1. open the course (:class:`~jaxgrader.grading.course.coursedir.Course`): missing folders, the
   kernel sandbox, a misspelt setting: a one-line CourseError, nothing written;
2. :func:`intake`: decorated notebook names fixed, unreadable submissions are errors
   for that student only; a submission unchanged since it was last graded (the ledger)
   is kept; the rest become tasks;
3. :func:`prepare`: workers start; per assignment with something to grade, the
   reference run and a template gradebook (:mod:`~jaxgrader.grading.classrun.references`), once;
   ``generate_assignment`` into the course;
4. :func:`grade`: tasks go to the backend; each record is written as it arrives, one
   transaction per submission (:mod:`~jaxgrader.grading.classrun.gradebook`), then the ledger.
   An interrupted run keeps every record written before the interruption;
5. :func:`finish`: feedback, grades.csv (nbgrader's CSV export), grading-summary.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from ..course.config import CourseError, load_config, make_api  # noqa: F401  (imported from here by others)
from ..course.coursedir import (Course, assignments_in, gradebook_url, open_gradebook, source_notebooks,  # noqa: F401
                        sqlite_file)
from .gradebook import export_grades, result_of, write_record
from .intake import normalise_names
from .ledger import LEDGER, WORK, Ledger, kept
from .records import Result, Shared, Task, one_line
from .releases import released_hashes
from .references import (assignment_hash, generate, last_line, limit_s,  # noqa: F401
                         references_side_by_side, template_gradebook)
from ..sandbox.marks import draw_run_key
from ..sandbox.seed import draw_seed
from ..course.settings import settings_of
from .table import format_table, write_summary  # noqa: F401
from .task import submission_hash


@dataclasses.dataclass
class Options:
    """How to run: from the command line, else ``c.JaxGrader`` (:mod:`jaxgrader.grading.course.settings`)."""

    feedback: bool = True
    progress: bool = True
    workers: int | None = None
    dask: str | None = None
    unsandboxed: bool = False
    regrade: bool = False
    pin: bool | None = None
    seed: int | None = None


@dataclasses.dataclass
class Run:
    """One class run's state, handed from phase to phase."""

    course: Course
    options: Options
    students: list[str]
    seed: int
    backend: object = None
    started: float = dataclasses.field(default_factory=time.monotonic)
    info: dict = dataclasses.field(default_factory=dict)  # -> .grading/last-run.json
    results: list[Result] = dataclasses.field(default_factory=list)
    tasks: list[Task] = dataclasses.field(default_factory=list)
    shared: dict[str, Shared] = dataclasses.field(default_factory=dict)
    renamed: dict[tuple[str, str], list[str]] = dataclasses.field(default_factory=dict)
    ledger: Ledger | None = None
    graded: int = 0

    def say(self, line: str) -> None:
        if self.options.progress:
            from tqdm.auto import tqdm

            tqdm.write(f"jaxgrader: {line}", file=sys.stderr)


def grade_class(
    root: Path,
    assignments: list[str] | None = None,
    students: list[str] | None = None,
    **options,
) -> list[Result]:
    """Grade every submission in the course's submitted/ folder and return one Result per pair.

    ``options`` are :class:`Options`' fields. Tasks run on ``workers`` local processes
    (default: ``c.JaxGrader.workers``, else the CPU count; each kept on its share of the
    CPUs unless ``pin`` or ``c.JaxGrader.pin_workers`` is False), or on the Dask cluster
    whose scheduler is at ``dask`` (default: ``c.JaxGrader.dask_scheduler``). Fails with
    CourseError, before anything is written, when a folder is missing, the kernel sandbox
    cannot run (unless ``unsandboxed``), the Dask scheduler cannot be reached, or the
    instructor's solution fails its own tests. A submission that cannot be read, or whose
    grading fails, is an error for that student only.

    Records are written to the gradebook as they arrive, one transaction each; an
    interrupted run keeps them, and the next run grades only submissions that are new,
    changed, or not graded yet (``regrade``: all of them).
    """
    started = time.monotonic()
    opts = Options(**options)
    course = Course.open(root, assignments, unsandboxed=opts.unsandboxed)
    chosen = course.students(students)
    settings = settings_of(course.config)
    opts.dask = opts.dask or settings.dask_scheduler or None
    opts.workers = opts.workers or settings.workers or os.cpu_count() or 1
    opts.pin = settings.pin_workers if opts.pin is None else opts.pin
    seed = next(s for s in (opts.seed, settings.seed, draw_seed()) if s is not None) % 2**31
    course.config.JaxGrader.seed = seed  # the reference run's kernels get it from here
    course.config.JaxGrader.run_key = settings.run_key or draw_run_key()  # the reference run's nonces too
    run = Run(course, opts, chosen, seed, started=started)
    with _run_lock(course.root):
        start_backend(run)
        try:
            intake(run)
            prepare(run)
            grade(run)
        finally:
            run.backend.close()
        return finish(run)


@contextlib.contextmanager
def _run_lock(root: Path):
    """One class run per course at a time: the gradebook has one writer."""
    import fcntl

    work = Path(root) / WORK
    work.mkdir(exist_ok=True)
    fh = open(work / "run.lock", "a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            other = fh.read().strip() or "?"
            raise CourseError(f"{root}: another jaxgrader grade is running on this course (pid {other})") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()


def start_backend(run: Run) -> None:
    """Connect to where tasks run (a Dask scheduler that cannot be reached is a CourseError)."""
    from .backends import make_backend

    try:
        run.backend = make_backend(run.options.workers, run.options.dask, run.options.pin)
    except ConnectionError as exc:
        raise CourseError(str(exc)) from None
    run.info.update(backend=run.backend.describe(), isolation=run.course.isolation)
    if getattr(run.backend, "previous_allowed_failures", None) is not None:
        run.info["dask_allowed_failures_before"] = run.backend.previous_allowed_failures


def intake(run: Run) -> None:
    """Fix names, check, read and hash every submission; keep what is unchanged; the rest become tasks."""
    course, regrade = run.course, run.options.regrade
    hashes = {a: assignment_hash(course, a) for a in course.assignments}
    ledger = run.ledger = Ledger(course.root / WORK / LEDGER)
    live_file = sqlite_file(course.db_url)
    reader = (None if regrade or (live_file is not None and not live_file.exists())
              else open_gradebook(course.db_url, course.course_id))
    try:
        for assignment, names in course.notebooks.items():
            for student in run.students:
                where = course.folder("submitted", student, assignment)
                notes = run.renamed[student, assignment] = normalise_names(where, names)
                problem = course.check_submission(student, assignment)
                if problem:
                    run.results.append(Result(student, assignment, "error", error=problem, notes=list(notes)))
                    continue
                texts = {nb: (where / f"{nb}.ipynb").read_text(encoding="utf-8") for nb in names}
                stamp = where / "timestamp.txt"
                timestamp = stamp.read_text(encoding="utf-8") if stamp.is_file() else None
                hash_ = submission_hash(hashes[assignment], texts, timestamp)
                previous = None if regrade else kept(ledger.get(student, assignment), hash_, course, reader,
                                                     student, assignment)
                if previous is not None:
                    run.results.append(previous)
                    continue
                run.tasks.append(Task(student, assignment, texts, timestamp, hash_, shared=assignment))
    finally:
        if reader is not None:
            reader.close()


def prepare(run: Run) -> None:
    """Start the workers (they import nbgrader meanwhile); reference runs and template gradebooks, once per
    assignment with something to grade; ``generate_assignment`` into the course."""
    course, info = run.course, run.info
    if run.tasks:
        problems = run.backend.start(len(run.tasks)) or []
        info["backend"] = run.backend.describe()
        if run.options.dask and problems and len(problems) >= len(run.backend.client.nthreads()):
            raise CourseError(problems[0])  # no worker can grade
        if problems:
            info["worker_problems"] = problems
            for line in problems:
                run.say(line)

    to_grade = sorted({t.assignment for t in run.tasks})
    shares = run.backend.shares() if run.tasks and hasattr(run.backend, "shares") else []
    references, seconds = references_side_by_side(course, to_grade, run.seed, shares)
    if seconds:
        info["reference_seconds"] = seconds
    for assignment in to_grade:
        t0 = time.monotonic()
        template = template_gradebook(course, assignment)
        info.setdefault("template_seconds", {})[assignment] = round(time.monotonic() - t0, 2)
        run.shared[assignment] = Shared(course.config_text, template, references[assignment], run.seed,
                                        course.isolation, limit_s(course.config, len(course.notebooks[assignment])),
                                        course.config.JaxGrader.run_key,
                                        released=released_hashes(course.root, assignment))
    info["seed"] = run.seed
    t0 = time.monotonic()
    generate(make_api(course.config), course.assignments)
    info["generate_seconds"] = round(time.monotonic() - t0, 2)
    if run.tasks:
        refs = ", ".join(f"{a} {s:.0f} s" for a, s in info.get("reference_seconds", {}).items())
        kept_ = sum(r.kept for r in run.results)
        run.say(f"{len(run.tasks)} to grade on {run.backend.describe()}"
                + (f", {kept_} unchanged kept" if kept_ else "") + (f"; reference run: {refs}" if refs else ""))


def grade(run: Run) -> None:
    """Hand the tasks to the backend; write each record as it arrives (the gradebook's only writer)."""
    from tqdm.auto import tqdm

    course, backend, info = run.course, run.backend, run.info
    timestamps = {(t.student, t.assignment): t.timestamp for t in run.tasks}
    ledger = run.ledger
    t0 = time.monotonic()
    writing = 0.0  # the coordinator's own time in the gradebook, over the run
    with open_gradebook(course.db_url, course.course_id) as gb, \
            tqdm(total=len(run.tasks), desc=f"autograde ({backend.describe()})", unit="submission",
                 disable=not run.options.progress or not run.tasks, file=sys.stderr) as bar:
        for record in backend.run(run.tasks, run.shared):
            key = (record.student, record.assignment)
            extra = []
            if record.status == "graded":
                try:
                    t_write = time.monotonic()
                    extra = write_record(gb, course, record, timestamps.get(key))
                    writing += time.monotonic() - t_write
                except Exception as exc:  # the gradebook refused it: this student only
                    record.status, record.error = "error", one_line(
                        f"could not write to the gradebook: {exc.__class__.__name__}: {exc}")
            result = result_of(record, gb, run.renamed.get(key, []), extra)
            if result.status == "graded":
                ledger.put(result, record.hash)
            run.graded += 1
            run.results.append(result)
            bar.set_postfix_str(f"{backend.status()} last: {result.student}".strip(), refresh=False)
            bar.update(1)
            if result.status == "error":
                run.say(f"{result.student}/{result.assignment}: {result.error}")
    info["grade_seconds"] = round(time.monotonic() - t0, 2)
    info["write_seconds"] = round(writing, 2)


def finish(run: Run) -> list[Result]:
    """Feedback (new or missing), then grades.csv, grading-summary.json and .grading/last-run.json."""
    from tqdm.auto import tqdm

    course, results = run.course, run.results
    if run.options.feedback:
        api = make_api(course.config)
        todo = [r for r in results if r.status == "graded"
                and (not r.kept or not course.has_feedback(r.student, r.assignment, r.notebooks))]
        for r in tqdm(todo, desc="feedback", unit="submission", disable=not run.options.progress or not todo,
                      file=sys.stderr):
            out = api.generate_feedback(r.assignment, r.student, force=True)
            if not out["success"]:
                r.notes.append(f"feedback failed: {last_line(out)}")
    results.sort(key=lambda r: (r.student, r.assignment))
    work = course.root / WORK
    work.mkdir(exist_ok=True)
    export_grades(course.db_url, work / "grades.csv")
    write_summary(results, work / "grading-summary.json")
    os.replace(work / "grades.csv", course.root / "grades.csv")
    os.replace(work / "grading-summary.json", course.root / "grading-summary.json")
    run.info.update(seconds=round(time.monotonic() - run.started, 2), graded=run.graded,
                    kept=sum(r.kept for r in results), errors=sum(r.status == "error" for r in results))
    (work / "last-run.json").write_text(json.dumps(run.info, indent=2) + "\n")
    return results
