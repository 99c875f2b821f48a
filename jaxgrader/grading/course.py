"""The teacher's loop on an nbgrader course directory, through nbgrader's own API.

generate (source/ -> release/ + gradebook) -> autograde (submitted/ -> autograded/)
-> feedback (feedback/*.html) -> export (grades.csv) -> summary table.

nbgrader does each step; this module adds what it lacks for a large class: one
entry point, checks that fail early with one line naming the missing thing,
grading as independent tasks on a local process pool or a Dask cluster
(:mod:`jaxgrader.grading.task`, :mod:`jaxgrader.grading.backends`), one writer
of the gradebook, progress with an ETA, a machine-readable summary, and reruns
that grade only what is new or changed.

How a run goes (:func:`grade_class`):

1. checks (missing folders, the kernel sandbox): a one-line CourseError, nothing written;
2. intake per student: decorated notebook names fixed, unreadable submissions are
   errors for that student only; a submission whose content and assignment are
   unchanged since it was last graded (``.grading/ledger.json``) is kept;
3. per assignment with something to grade: a template gradebook (generate_assignment
   into a private SQLite file) and the reference run, once;
4. ``generate_assignment`` into the course (release/ and the gradebook);
5. tasks go to the backend; each record is written as it arrives, one database
   transaction per submission, through nbgrader's Gradebook API and its own
   ``SaveAutoGrades``/``AssignLatePenalties`` steps, then the ledger. An interrupted
   run keeps every record written before the interruption;
6. feedback, grades.csv (nbgrader's CSV export) and grading-summary.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from traitlets.config import Config

from .config import CourseError, load_config, make_api
from .intake import normalise_names
from .notebooks import NotebookError, read_notebook
from .task import digest, one_line, submission_hash

GRADEBOOK = "gradebook.db"
WORK = ".grading"  # the coordinator's own files; kernels never see the course directory
LEDGER = "ledger.json"


@dataclasses.dataclass
class Result:
    """One student's one assignment."""

    student: str
    assignment: str
    status: str  # "graded" or "error"
    score: float = 0.0
    max_score: float = 0.0
    error: str = ""
    seconds: float = 0.0
    notebooks: dict = dataclasses.field(default_factory=dict)  # name -> {"score", "max_score"}
    notes: list = dataclasses.field(default_factory=list)  # limits hit, renamed files, feedback failures
    isolation: str = ""  # "bubblewrap" or "none": what the grading kernel ran in
    flags: list = dataclasses.field(default_factory=list)  # code a teacher may want to look at (graded normally)
    cells: dict = dataclasses.field(default_factory=dict)  # notebook -> grade_id -> {score, max_score, message, ...}
    kept: bool = False  # unchanged since the last run: not graded again
    timings: dict = dataclasses.field(default_factory=dict)  # seconds: total, setup, autograde, execute, ...
    host: str = ""  # where it was graded


def assignments_in(root: Path) -> list[str]:
    source = Path(root) / "source"
    if not source.is_dir():
        raise CourseError(f"{source}: missing (no assignments to grade)")
    return sorted(p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))


def source_notebooks(root: Path, assignment: str) -> list[str]:
    folder = Path(root) / "source" / assignment
    if not folder.is_dir():
        raise CourseError(f"{folder}: missing (no such assignment)")
    names = sorted(p.stem for p in folder.glob("*.ipynb"))
    if not names:
        raise CourseError(f"{folder}: holds no notebook")
    return names


def check_submission(root: Path, student: str, assignment: str) -> str:
    """'' if the submission can be graded, else a one-line reason naming the file."""
    folder = Path(root) / "submitted" / student / assignment
    if not folder.is_dir():
        return f"{folder}: missing (no submission for {assignment})"
    for notebook in source_notebooks(root, assignment):
        try:
            read_notebook(folder / f"{notebook}.ipynb")
        except NotebookError as exc:
            return str(exc)
    return ""


def generate(api, assignments: list[str]) -> None:
    """``nbgrader generate_assignment`` for each: writes release/ and the gradebook."""
    for assignment in assignments:
        result = api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"source/{assignment}: nbgrader generate_assignment failed: {_last_line(result)}")


def _last_line(result: dict) -> str:
    text = (result.get("error") or result.get("log") or "").strip()
    return text.splitlines()[-1] if text else "no message"


def export_grades(db_url: str, path: Path) -> None:
    """nbgrader's own CSV export (one row per student and assignment)."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    with Gradebook(db_url) as gb:
        CsvExportPlugin(to=str(path)).export(gb)


def gradebook_url(config: Config, root: Path) -> str:
    """The course's gradebook URL, with a relative SQLite path made relative to the course."""
    db_url = config.CourseDirectory.get("db_url", "")
    if not db_url:
        return f"sqlite:///{Path(root) / GRADEBOOK}"  # nbgrader's default
    if db_url.startswith("sqlite:///"):
        path, _, query = db_url[len("sqlite:///"):].partition("?")
        path = str((Path(root) / path).resolve()) if path and not os.path.isabs(path) else path
        return f"sqlite:///{path}" + (f"?{query}" if query else "")
    return db_url


def _shown(db_url: str) -> str:
    """The URL without its password, for messages."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(db_url).render_as_string(hide_password=True)
    except Exception:
        return "the configured gradebook"


def open_gradebook(db_url: str, course_id: str = ""):
    """nbgrader's Gradebook, or a one-line CourseError when the database cannot be opened."""
    from nbgrader.api import Gradebook

    try:
        return Gradebook(db_url, course_id)
    except Exception as exc:
        raise CourseError(f"cannot open the gradebook {_shown(db_url)}: "
                          f"{one_line(f'{exc.__class__.__name__}: {exc}', 300)}") from None


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


def _sqlite_file(db_url: str) -> Path | None:
    if db_url.startswith("sqlite:///"):
        return Path(db_url[len("sqlite:///"):].partition("?")[0])
    return None


# --------------------------------------------------------------------------- isolation


def course_isolation(config: Config, unsandboxed: bool) -> str:
    """'bubblewrap' or 'none' for this run's kernels; CourseError when the sandbox cannot run here."""
    km = config.LimitedExecute.get("kernel_manager_class") or config.Execute.get("kernel_manager_class")
    name = km if isinstance(km, str) else getattr(km, "__name__", "")
    if unsandboxed:
        config.SandboxedKernelManager.isolation = "none"
        return "none"
    if not name or not name.endswith("SandboxedKernelManager"):
        return "none"  # the course does not configure the sandbox (format_table says so)
    if config.SandboxedKernelManager.get("isolation", "bubblewrap") == "none":
        return "none"
    from .sandbox import check_sandbox

    reason = check_sandbox()
    if reason:
        raise CourseError(f"{reason}; pass --unsandboxed to grade without isolation")
    return "bubblewrap"


# --------------------------------------------------------------------------- per assignment


def assignment_hash(root: Path, assignment: str, config_text: str) -> str:
    """Changes when the assignment's source notebooks or the course configuration change."""
    parts = [config_text]
    for name in source_notebooks(root, assignment):
        parts += [name, (Path(root) / "source" / assignment / f"{name}.ipynb").read_bytes()]
    return digest(*parts)


def _cache_alembic_version() -> None:
    """nbgrader asks a fresh ``alembic heads`` process for every new gradebook (seconds each);
    the answer cannot change while this process runs."""
    import functools

    import nbgrader.api

    if not hasattr(nbgrader.api.get_alembic_version, "cache_info"):
        nbgrader.api.get_alembic_version = functools.lru_cache(maxsize=None)(nbgrader.api.get_alembic_version)


def template_gradebook(root: Path, assignment: str, config_text: str) -> bytes:
    """An SQLite gradebook holding only ``assignment``, made by nbgrader's generate_assignment."""
    _cache_alembic_version()
    with tempfile.TemporaryDirectory(prefix="jaxgrader-template-") as tmp:
        course = Path(tmp)
        (course / "nbgrader_config.py").write_text(config_text, encoding="utf-8")
        shutil.copytree(Path(root) / "source" / assignment, course / "source" / assignment)
        config = load_config(course, course / GRADEBOOK)
        result = make_api(config).generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"source/{assignment}: nbgrader generate_assignment failed: {_last_line(result)}")
        return (course / GRADEBOOK).read_bytes()


def _uses_verdict(config: Config) -> bool:
    steps = config.Autograde.get("autograde_preprocessors") or []
    named = any("Verdict" in (s if isinstance(s, str) else getattr(s, "__name__", "")) for s in steps)
    return named and config.Verdict.get("enabled", True)


def references_for(root: Path, assignment: str, config: Config, seed: int) -> dict | None:
    """notebook -> grade_id -> reports of the instructor's solution with ``seed`` (None: no verdict)."""
    if not _uses_verdict(config):
        return None
    from .verdict import ReferenceError, reference_reports

    try:
        return {nb: reference_reports(Path(root) / "source" / assignment / f"{nb}.ipynb", config, seed)
                for nb in source_notebooks(root, assignment)}
    except ReferenceError as exc:
        raise CourseError(one_line(str(exc), 400)) from None
    except Exception as exc:  # the kernel did not start, ...: a course problem, not a student's
        raise CourseError(f"source/{assignment}: the reference run failed: "
                          f"{one_line(f'{exc.__class__.__name__}: {exc}', 300)}") from None


def references_side_by_side(root: Path, assignments: list[str], config: Config, seed: int
                            ) -> tuple[dict[str, dict | None], dict[str, float]]:
    """``references_for`` every assignment, one reference run per core at a time (each run is a
    kernel of its own, mostly on one core), and the seconds each took. The first failure is raised."""
    from concurrent.futures import ThreadPoolExecutor

    def timed(assignment):
        t0 = time.monotonic()
        return references_for(root, assignment, config, seed), round(time.monotonic() - t0, 2)

    with ThreadPoolExecutor(max_workers=max(1, min(len(assignments), os.cpu_count() or 1))) as pool:
        done = dict(zip(assignments, pool.map(timed, assignments)))
    return {a: refs for a, (refs, _) in done.items()}, {a: s for a, (_, s) in done.items()}


def _limit_s(config: Config, notebooks: int) -> float:
    """Hard limit for one submission: every notebook's wall-clock limit, plus two minutes for nbgrader."""
    return float(config.LimitedExecute.get("notebook_timeout", 600)) * notebooks + 120.0


# --------------------------------------------------------------------------- the ledger


class Ledger:
    """What was written to the gradebook, per submission: its hash and its Result.

    Lives in ``<course>/.grading/`` (the kernels never see the course), rewritten
    atomically after each record, so it never claims more than the gradebook holds.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.entries = json.loads(self.path.read_text())
            if not isinstance(self.entries, dict):
                self.entries = {}
        except (OSError, ValueError):
            self.entries = {}

    def get(self, student: str, assignment: str) -> dict | None:
        entry = self.entries.get(f"{assignment}/{student}")
        return entry if isinstance(entry, dict) else None

    def put(self, result: Result, hash_: str) -> None:
        self.entries[f"{result.assignment}/{result.student}"] = {"hash": hash_, "result": dataclasses.asdict(result)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.entries))
        os.replace(tmp, self.path)


def _kept(entry: dict | None, hash_: str, isolation: str, gb, root: Path, student: str,
          assignment: str) -> Result | None:
    """The previous Result if this submission need not be graded again, else None."""
    if not entry or entry.get("hash") != hash_:
        return None
    data = entry.get("result") or {}
    if data.get("status") != "graded":
        return None
    if isolation == "bubblewrap" and data.get("isolation") != "bubblewrap":
        return None  # graded without the sandbox before: grade again with it
    folder = Path(root) / "autograded" / student / assignment
    if not all((folder / f"{nb}.ipynb").is_file() for nb in data.get("notebooks", {})):
        return None
    if gb is None:
        return None
    from nbgrader.api import MissingEntry

    try:
        gb.find_submission(assignment, student)
    except MissingEntry:
        return None
    fields = {f.name for f in dataclasses.fields(Result)}
    result = Result(**{k: v for k, v in data.items() if k in fields})
    result.kept = True
    return result


# --------------------------------------------------------------------------- the single writer


class _Deferred:
    """A gradebook session whose commits only flush: the caller commits once, for the whole record."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def __getattr__(self, name):
        return getattr(self._session, name)


class _Borrowed:
    """The writer's open gradebook, lent to an nbgrader preprocessor that would open its own."""

    def __init__(self, gb):
        self._gb = gb

    def __enter__(self):
        return self._gb

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name):
        return getattr(self._gb, name)


@contextlib.contextmanager
def _one_transaction(gb):
    """Everything nbgrader writes inside is one transaction: committed at the end, or rolled back."""
    from nbgrader.preprocessors import latesubmissions, saveautogrades

    session = gb.db
    saved = saveautogrades.Gradebook, latesubmissions.Gradebook
    gb.db = _Deferred(session)
    saveautogrades.Gradebook = latesubmissions.Gradebook = lambda *a, **k: _Borrowed(gb)
    try:
        yield
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        saveautogrades.Gradebook, latesubmissions.Gradebook = saved
        gb.db = session


def write_record(gb, config: Config, root: Path, db_url: str, record: dict, timestamp: str | None) -> list[str]:
    import warnings

    with warnings.catch_warnings():
        # nbgrader 0.9 trips SQLAlchemy's autoflush warnings on every submission; they are nobody's concern
        warnings.filterwarnings("ignore", message=".*not in session.*")
        return _write_record(gb, config, root, db_url, record, timestamp)


def _write_record(gb, config: Config, root: Path, db_url: str, record: dict, timestamp: str | None) -> list[str]:
    """Write one graded record: autograded/ files, then the gradebook (one transaction). Returns notes.

    The gradebook part is what ``nbgrader autograde`` does after executing: the
    student and the submission (with its timestamp), then nbgrader's own
    SaveAutoGrades and AssignLatePenalties on each autograded notebook.
    """
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
    from nbgrader.utils import find_all_files, parse_utc

    student, assignment = record["student"], record["assignment"]
    notebooks = {name: nbformat.reads(text, as_version=4) for name, text in record["notebooks"].items()}

    # files: staged next to their place, then swapped in
    parent = Path(root) / "autograded" / student
    dest, staging = parent / assignment, parent / f".{assignment}.jaxgrader-new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    submitted = Path(root) / "submitted" / student / assignment
    ignore = list(config.CourseDirectory.get("ignore", [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]))
    for path in find_all_files(str(submitted), ignore + ["*.ipynb"]):  # as nbgrader does: other files come along
        target = staging / os.path.relpath(path, submitted)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    for name, text in record["notebooks"].items():
        (staging / f"{name}.ipynb").write_text(text, encoding="utf-8")
    old = parent / f".{assignment}.jaxgrader-old"
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        os.replace(dest, old)
    os.replace(staging, dest)
    shutil.rmtree(old, ignore_errors=True)

    with _one_transaction(gb):
        gb.update_or_create_student(student)
        when = parse_utc(timestamp.strip()) if timestamp and timestamp.strip() else None
        if when is not None:
            gb.update_or_create_submission(assignment, student, timestamp=when)
        else:
            gb.update_or_create_submission(assignment, student)
        for name, nb in notebooks.items():
            resources = {"nbgrader": {"db_url": db_url, "assignment": assignment, "notebook": name, "student": student}}
            SaveAutoGrades(config=config).preprocess(nb, resources)
            AssignLatePenalties(config=config).preprocess(nb, resources)

    notes = []
    for name, cells in record["cells"].items():
        sub_nb = gb.find_submission_notebook(name, assignment, student)
        live = {g.name: g.auto_score for g in sub_nb.grades}
        differ = [gid for gid, c in cells.items() if c.get("auto_score") != (None if live.get(gid) is None
                                                                          else float(live[gid]))]
        if differ:
            notes.append(f"{name}.ipynb: gradebook scores differ from the grading task's for {', '.join(differ[:5])}")
    return notes


def _result_of(record: dict, gb, renamed: list[str], notes: list[str]) -> Result:
    result = Result(record["student"], record["assignment"], record["status"], error=record.get("error", ""),
                    seconds=float(record.get("timings", {}).get("total", 0.0)),
                    notes=list(renamed) + list(record.get("notes", [])) + notes,
                    isolation=record.get("isolation", ""), flags=list(record.get("flags", [])),
                    cells=record.get("cells", {}), timings=record.get("timings", {}), host=record.get("host", ""))
    if record["status"] == "graded":
        submission = gb.find_submission(result.assignment, result.student)
        result.score, result.max_score = float(submission.score), float(submission.max_score)
        result.notebooks = {nb.name: {"score": float(nb.score), "max_score": float(nb.max_score)}
                            for nb in submission.notebooks}
    return result


# --------------------------------------------------------------------------- the class run


def grade_class(
    root: Path,
    assignments: list[str] | None = None,
    students: list[str] | None = None,
    *,
    feedback: bool = True,
    progress: bool = True,
    workers: int | None = None,
    dask: str | None = None,
    unsandboxed: bool = False,
    regrade: bool = False,
    pin: bool | None = None,
) -> list[Result]:
    """Grade every submission in ``root/submitted`` and return one Result per pair.

    Tasks run on ``workers`` local processes (default: ``c.JaxGrader.workers``, else
    the CPU count; each kept on its share of the CPUs unless ``pin`` or
    ``c.JaxGrader.pin_workers`` is False), or on the Dask cluster whose scheduler is at ``dask`` (default:
    ``c.JaxGrader.dask_scheduler``). Fails with CourseError, before anything is
    written, when a folder is missing, the kernel sandbox cannot run (unless
    ``unsandboxed``), the Dask scheduler cannot be reached, or the instructor's
    solution fails its own tests. A submission that cannot be read, or whose
    grading fails, is an error for that student only.

    Records are written to the gradebook as they arrive, one transaction each;
    an interrupted run keeps them, and the next run grades only submissions that
    are new, changed, or not graded yet (``regrade``: all of them).
    """
    from nbgrader.coursedir import CourseDirectory

    started = time.monotonic()
    root = Path(root).resolve()
    assignments = assignments or assignments_in(root)
    for assignment in assignments:
        source_notebooks(root, assignment)  # fails early, naming the folder
    submitted = root / "submitted"
    if not submitted.is_dir():
        raise CourseError(f"{submitted}: missing (no submissions to grade)")
    students = students or sorted(p.name for p in submitted.iterdir() if p.is_dir())
    if not students:
        raise CourseError(f"{submitted}: holds no student folder")
    for student in students:
        if not (submitted / student).is_dir():
            raise CourseError(f"{submitted / student}: missing (no such student)")

    config = load_config(root)
    settings = config.get("JaxGrader", {})
    dask = dask or settings.get("dask_scheduler") or None
    workers = workers or settings.get("workers") or os.cpu_count() or 1
    pin = bool(settings.get("pin_workers", True)) if pin is None else pin
    isolation = course_isolation(config, unsandboxed)
    db_url = gradebook_url(config, root)
    config.CourseDirectory.db_url = db_url
    config_text = (root / "nbgrader_config.py").read_text(encoding="utf-8")
    if unsandboxed:  # the tasks' own copy of the configuration must say so too
        config_text += '\n# jaxgrader grade --unsandboxed\nc.SandboxedKernelManager.isolation = "none"\n'

    course_id = CourseDirectory(config=config).course_id
    with _run_lock(root):
        return _grade_class(root, assignments, students, config, config_text, db_url, course_id, isolation,
                            feedback=feedback, progress=progress, workers=workers, dask=dask, regrade=regrade,
                            pin=pin, started=started)


def _grade_class(root, assignments, students, config, config_text, db_url, course_id, isolation, *,
                 feedback, progress, workers, dask, regrade, pin, started) -> list[Result]:
    from tqdm.auto import tqdm

    from .backends import make_backend
    from .seed import run_seed

    submitted = root / "submitted"
    try:
        backend = make_backend(workers, dask, pin)
    except ConnectionError as exc:
        raise CourseError(str(exc)) from None
    info: dict = {"backend": backend.describe(), "isolation": isolation}
    if getattr(backend, "previous_allowed_failures", None) is not None:
        info["dask_allowed_failures_before"] = backend.previous_allowed_failures
    try:
        # intake: fix names, check, read, hash; keep what is unchanged
        results: list[Result] = []
        tasks: list[dict] = []
        timestamps: dict[tuple[str, str], str | None] = {}
        renamed: dict[tuple[str, str], list[str]] = {}
        hashes = {a: assignment_hash(root, a, config_text) for a in assignments}
        ledger = Ledger(root / WORK / LEDGER)
        live_file = _sqlite_file(db_url)
        reader = (None if regrade or (live_file is not None and not live_file.exists())
                  else open_gradebook(db_url, course_id))
        try:
            for assignment in assignments:
                names = source_notebooks(root, assignment)
                for student in students:
                    folder = submitted / student / assignment
                    notes = renamed[student, assignment] = normalise_names(folder, names)
                    problem = check_submission(root, student, assignment)
                    if problem:
                        results.append(Result(student, assignment, "error", error=problem, notes=list(notes)))
                        continue
                    texts = {nb: (folder / f"{nb}.ipynb").read_text(encoding="utf-8") for nb in names}
                    stamp = folder / "timestamp.txt"
                    timestamp = stamp.read_text(encoding="utf-8") if stamp.is_file() else None
                    hash_ = submission_hash(hashes[assignment], texts, timestamp)
                    kept = None if regrade else _kept(ledger.get(student, assignment), hash_, isolation, reader,
                                                      root, student, assignment)
                    if kept is not None:
                        results.append(kept)
                        continue
                    timestamps[student, assignment] = timestamp
                    tasks.append({"student": student, "assignment": assignment, "notebooks": texts,
                                  "timestamp": timestamp, "hash": hash_, "shared": assignment})
        finally:
            if reader is not None:
                reader.close()

        if tasks:  # local workers start now, importing nbgrader while the reference runs
            start_problems = backend.start(len(tasks)) or []
            info["backend"] = backend.describe()
            if dask and start_problems and len(start_problems) >= len(backend.client.nthreads()):
                raise CourseError(start_problems[0])  # no worker can grade
            if start_problems:
                info["worker_problems"] = start_problems
                if progress:
                    for line in start_problems:
                        tqdm.write(f"jaxgrader: {line}", file=sys.stderr)

        # once per assignment with something to grade: template gradebook and reference run
        seed = run_seed()
        shared: dict[str, dict] = {}
        to_grade = sorted({t["assignment"] for t in tasks})
        all_references, seconds = references_side_by_side(root, to_grade, config, seed)
        if seconds:
            info["reference_seconds"] = seconds
        for assignment in to_grade:
            references = all_references[assignment]
            t0 = time.monotonic()
            template = template_gradebook(root, assignment, config_text)
            info.setdefault("template_seconds", {})[assignment] = round(time.monotonic() - t0, 2)
            shared[assignment] = {
                "config_text": config_text, "template_gradebook": template,
                "references": references, "seed": seed, "isolation": isolation,
                "limit_s": _limit_s(config, len(source_notebooks(root, assignment))),
            }
        info["seed"] = seed
        api = make_api(config)
        t0 = time.monotonic()
        _cache_alembic_version()
        generate(api, assignments)
        info["generate_seconds"] = round(time.monotonic() - t0, 2)
        if progress and tasks:
            refs = ", ".join(f"{a} {s:.0f} s" for a, s in info.get("reference_seconds", {}).items())
            kept = sum(r.kept for r in results)
            tqdm.write(f"jaxgrader: {len(tasks)} to grade on {backend.describe()}"
                       + (f", {kept} unchanged kept" if kept else "") + (f"; reference run: {refs}" if refs else ""),
                       file=sys.stderr)

        # grade; write each record as it arrives (the only writer of the gradebook)
        t0 = time.monotonic()
        info["write_seconds"] = 0.0  # the coordinator's own time in the gradebook, over the run
        graded: list[Result] = []
        with open_gradebook(db_url, course_id) as gb, \
                tqdm(total=len(tasks), desc=f"autograde ({backend.describe()})", unit="submission",
                     disable=not progress or not tasks, file=sys.stderr) as bar:
            for record in backend.run(tasks, shared):
                key = (record["student"], record["assignment"])
                extra = []
                if record["status"] == "graded":
                    try:
                        t_write = time.monotonic()
                        extra = write_record(gb, config, root, db_url, record, timestamps.get(key))
                        info["write_seconds"] += time.monotonic() - t_write
                    except Exception as exc:  # the gradebook refused it: this student only
                        record.update(status="error", error=one_line(
                            f"could not write to the gradebook: {exc.__class__.__name__}: {exc}"))
                result = _result_of(record, gb, renamed.get(key, []), extra)
                if result.status == "graded":
                    ledger.put(result, record["hash"])
                graded.append(result)
                results.append(result)
                bar.set_postfix_str(f"{backend.status()} last: {result.student}".strip(), refresh=False)
                bar.update(1)
                if result.status == "error" and progress:
                    tqdm.write(f"jaxgrader: {result.student}/{result.assignment}: {result.error}", file=sys.stderr)
        info["grade_seconds"] = round(time.monotonic() - t0, 2)
        info["write_seconds"] = round(info["write_seconds"], 2)
    finally:
        backend.close()

    if feedback:
        todo = [r for r in results if r.status == "graded" and (not r.kept or not _has_feedback(root, r))]
        for r in tqdm(todo, desc="feedback", unit="submission", disable=not progress or not todo, file=sys.stderr):
            out = api.generate_feedback(r.assignment, r.student, force=True)
            if not out["success"]:
                r.notes.append(f"feedback failed: {_last_line(out)}")
    results.sort(key=lambda r: (r.student, r.assignment))
    work = root / WORK
    work.mkdir(exist_ok=True)
    export_grades(db_url, work / "grades.csv")
    write_summary(results, work / "grading-summary.json")
    os.replace(work / "grades.csv", root / "grades.csv")
    os.replace(work / "grading-summary.json", root / "grading-summary.json")
    info.update(seconds=round(time.monotonic() - started, 2), graded=len(graded),
                kept=sum(r.kept for r in results), errors=sum(r.status == "error" for r in results))
    (work / "last-run.json").write_text(json.dumps(info, indent=2) + "\n")
    return results


def _has_feedback(root: Path, r: Result) -> bool:
    folder = Path(root) / "feedback" / r.student / r.assignment
    return all((folder / f"{nb}.html").is_file() for nb in r.notebooks)


def write_summary(results: list[Result], path: Path) -> None:
    """Machine-readable summary: one record per student and assignment."""
    path.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2) + "\n")


def format_table(results: list[Result]) -> str:
    """Students down, assignments across, 'score/max' or 'ERROR' in each cell."""
    students = sorted({r.student for r in results})
    assignments = sorted({r.assignment for r in results})
    cell = {(r.student, r.assignment): r for r in results}
    width = max([len("student")] + [len(s) for s in students])
    col = max([11] + [len(a) for a in assignments])
    lines = ["student".ljust(width) + "".join(a.rjust(col + 2) for a in assignments) + "total".rjust(col + 2)]
    for s in students:
        row, got, out_of = s.ljust(width), 0.0, 0.0
        for a in assignments:
            r = cell.get((s, a))
            if r is None or r.status == "error":
                row += "ERROR".rjust(col + 2)
            else:
                row += f"{r.score:g}/{r.max_score:g}".rjust(col + 2)
                got, out_of = got + r.score, out_of + r.max_score
        lines.append(row + f"{got:g}/{out_of:g}".rjust(col + 2))
    kept = sum(r.kept for r in results)
    if kept:
        lines += ["", f"{kept} unchanged submission{'s' if kept != 1 else ''} kept from an earlier run "
                      "(jaxgrader grade --regrade grades them again)"]
    unisolated = [r for r in results if r.status == "graded" and r.isolation == "none"]
    if unisolated:
        lines += ["", f"WARNING: {len(unisolated)} submission{'s were' if len(unisolated) != 1 else ' was'} graded "
                      "without the kernel sandbox: student code ran with the grader's permissions"]
    errors = [f"  {r.student}/{r.assignment}: {note}"
              for r in results for note in ([r.error] if r.error else []) + r.notes]
    if errors:
        lines += ["", "problems:"] + errors
    flags = [f"  {r.student}/{r.assignment}: {flag}" for r in results for flag in r.flags]
    if flags:
        lines += ["", "flagged for review (graded normally):"] + flags
    return "\n".join(lines)
