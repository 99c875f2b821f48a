"""The course's nbgrader configuration and API, shared by the coordinator and grading tasks.

Kept apart from ``classrun.run`` (the class run) and ``classrun.task`` (one submission) so
that both can use it without importing each other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from .settings import check_settings


MAX_MESSAGE = 500


class CourseError(RuntimeError):
    """A problem with the course directory; the message is one line for the teacher."""


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line, shortened to ``limit``: how every problem reaches the teacher."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_config(root: Path, db_path: Path | None = None) -> Config:
    """The course's ``nbgrader_config.py``, pointed at ``root`` (and a gradebook file)."""
    root = Path(root).resolve()
    config_file = root / "nbgrader_config.py"
    if not config_file.is_file():
        raise CourseError(f"{config_file}: missing (is {root} a course directory?)")
    config = PyFileConfigLoader(config_file.name, path=str(root)).load_config()
    try:
        check_settings(config, config_file)
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    config.CourseDirectory.root = str(root)
    if db_path is not None:
        config.CourseDirectory.db_url = f"sqlite:///{Path(db_path).resolve()}"
    return config


def make_api(config: Config):
    """nbgrader's Python API for this configuration."""
    from nbgrader.apps import NbGraderAPI

    # nbgrader shells out to `alembic` (gradebook migrations) and kernels start
    # `python`: both must be this environment's, even when the command was
    # started as .venv/bin/jaxgrader without activating the environment.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

    api = NbGraderAPI(config=config)
    api.log_level = "ERROR"
    return api
