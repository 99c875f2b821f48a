"""The course directory: built once per run, every path through nbgrader's ``CourseDirectory``.

A :class:`Course` holds what every step of a run reads: the root, the loaded
``nbgrader_config.py`` (and its text, which grading tasks load themselves), the
gradebook URL, the ``c.JaxGrader`` settings, the kernels' isolation and the notebooks
of each assignment. Paths come from ``CourseDirectory.format_path``, so a course that
renames ``submitted/``, ``autograded/`` or ``feedback/`` (``c.CourseDirectory.*_directory``)
is graded where nbgrader itself would look.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from traitlets.config import Config

from .config import CourseError, load_config, one_line
from .notebooks import NotebookError, read_notebook

GRADEBOOK = "gradebook.db"  # nbgrader's default SQLite file in the course


def cache_alembic_version() -> None:
    """nbgrader asks a fresh ``alembic heads`` process for every new gradebook (2.6 s each here,
    mostly that process's imports, paid by every class run for its template gradebook). The answer
    is the head revision of nbgrader's own migration scripts: read here with alembic's API from the
    same scripts (0.1 s), once, since it cannot change while this process runs."""
    import nbgrader.api

    if not getattr(nbgrader.api.get_alembic_version, "jaxgrader", False):
        head = _alembic_head()
        nbgrader.api.get_alembic_version = lambda: head
        nbgrader.api.get_alembic_version.jaxgrader = True


def _alembic_head() -> str:
    """What ``alembic heads`` prints first for nbgrader's migrations (its ``dbutil.ALEMBIC_DIR``)."""
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = AlembicConfig()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_heads()[0]


def coursedir_of(config: Config):
    from nbgrader.coursedir import CourseDirectory

    return CourseDirectory(config=config)


def folder(coursedir, step: str, student: str = ".", assignment: str = ".") -> Path:
    """``format_path`` of one of the course's steps ("source", "release", "submitted", "autograded",
    "feedback": the step's configured directory name is looked up)."""
    name = getattr(coursedir, f"{step}_directory")
    return Path(os.path.normpath(coursedir.format_path(name, student, assignment)))


def edition_coursedir(coursedir, language: str | None):
    """The course directory of an edition (``<root>/<lang>/``, laid out like the course's own), or
    ``coursedir`` itself for the English (``language`` None)."""
    from nbgrader.coursedir import CourseDirectory

    if not language:
        return coursedir
    return CourseDirectory(config=coursedir.config, root=str(Path(coursedir.root) / language))


def assignments_in(root: Path, config: Config | None = None) -> list[str]:
    source = folder(coursedir_of(config or load_config(root)), "source")
    if not source.is_dir():
        raise CourseError(f"{source}: missing (no assignments to grade)")
    return sorted(p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith("."))


def source_notebooks(root: Path, assignment: str, config: Config | None = None) -> list[str]:
    source = folder(coursedir_of(config or load_config(root)), "source", ".", assignment)
    if not source.is_dir():
        raise CourseError(f"{source}: missing (no such assignment)")
    names = sorted(p.stem for p in source.glob("*.ipynb"))
    if not names:
        raise CourseError(f"{source}: holds no notebook")
    return names


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


def sqlite_file(db_url: str) -> Path | None:
    if db_url.startswith("sqlite:///"):
        return Path(db_url[len("sqlite:///"):].partition("?")[0])
    return None


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

    cache_alembic_version()  # a gradebook that does not exist yet asks for it
    try:
        return Gradebook(db_url, course_id)
    except Exception as exc:
        raise CourseError(f"cannot open the gradebook {_shown(db_url)}: "
                          f"{one_line(f'{exc.__class__.__name__}: {exc}', 300)}") from None


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
    from ..sandbox import sandbox

    reason = sandbox.check_sandbox()
    if reason:
        raise CourseError(f"{reason}; pass --unsandboxed to grade without isolation")
    return "bubblewrap"


@dataclasses.dataclass
class Course:
    """One course directory, opened once for a run (:meth:`open`)."""

    root: Path
    config: Config
    config_text: str  # what grading tasks load (with the run's own additions)
    db_url: str
    course_id: str
    isolation: str  # "bubblewrap" or "none"
    notebooks: dict[str, list[str]]  # assignment -> its notebooks' names
    coursedir: object = dataclasses.field(repr=False, default=None)

    @classmethod
    def open(cls, root: Path, assignments: list[str] | None = None, *, unsandboxed: bool = False) -> Course:
        """Load the configuration, check the assignments exist and the sandbox runs: one-line CourseError."""
        root = Path(root).resolve()
        config = load_config(root)
        assignments = assignments or assignments_in(root, config)
        notebooks = {a: source_notebooks(root, a, config) for a in assignments}  # fails early, naming the folder
        isolation = course_isolation(config, unsandboxed)
        db_url = gradebook_url(config, root)
        config.CourseDirectory.db_url = db_url
        config_text = (root / "nbgrader_config.py").read_text(encoding="utf-8")
        if unsandboxed:  # the tasks' own copy of the configuration must say so too
            config_text += '\n# jaxgrader grade --unsandboxed\nc.SandboxedKernelManager.isolation = "none"\n'
        coursedir = coursedir_of(config)
        return cls(root, config, config_text, db_url, coursedir.course_id, isolation, notebooks, coursedir)

    @property
    def assignments(self) -> list[str]:
        return list(self.notebooks)

    def folder(self, step: str, student: str = ".", assignment: str = ".") -> Path:
        return folder(self.coursedir, step, student, assignment)

    def source(self, assignment: str, notebook: str) -> Path:
        return self.folder("source", ".", assignment) / f"{notebook}.ipynb"

    def students(self, chosen: list[str] | None = None) -> list[str]:
        """The students with a folder under submitted/ (or ``chosen``, checked): one-line CourseError."""
        submitted = self.folder("submitted")
        if not submitted.is_dir():
            raise CourseError(f"{submitted}: missing (no submissions to grade)")
        students = chosen or sorted(p.name for p in submitted.iterdir() if p.is_dir())
        if not students:
            raise CourseError(f"{submitted}: holds no student folder")
        for student in students:
            if not self.folder("submitted", student).is_dir():
                raise CourseError(f"{self.folder('submitted', student)}: missing (no such student)")
        return students

    def check_submission(self, student: str, assignment: str) -> str:
        """'' if the submission can be graded, else a one-line reason naming the file."""
        where = self.folder("submitted", student, assignment)
        if not where.is_dir():
            return f"{where}: missing (no submission for {assignment})"
        for notebook in self.notebooks[assignment]:
            try:
                read_notebook(where / f"{notebook}.ipynb")
            except NotebookError as exc:
                return str(exc)
        return ""

    def has_feedback(self, student: str, assignment: str, notebooks) -> bool:
        where = self.folder("feedback", student, assignment)
        return all((where / f"{nb}.html").is_file() for nb in notebooks)
