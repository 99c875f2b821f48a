"""``c.JaxGrader.*``: the class run's own settings, declared, so that a misspelt one is an error.

nbgrader's apps read their own sections (``CourseDirectory``, ``Execute``, ...); this
section is read only by ``jaxgrader``. traitlets merely warns about an unknown name in
a section, and only when a configurable of that name is built: a misspelt
``c.JaxGrader.wokers = 8`` would grade with the default number of workers and say
nothing. :func:`check_settings` turns that into a one-line error naming the file.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from traitlets import Bool, Integer, Unicode
from traitlets.config import Config, Configurable


class JaxGrader(Configurable):
    """Settings of ``jaxgrader grade`` (and ``jaxgrader trials``), in ``nbgrader_config.py``."""

    workers = Integer(0, help="Local grading processes; 0: one per CPU. `jaxgrader grade --workers N` "
                      "overrides it.").tag(config=True)
    pin_workers = Bool(True, help="Keep each local worker, and the kernels it starts, on its share of the "
                       "CPUs (XLA sizes its thread pools to the CPUs a process may use: unpinned, N kernels "
                       "each start pools as wide as the machine and fight over every core). False: every "
                       "kernel may use every core.").tag(config=True)
    dask_scheduler = Unicode("", help="Grade on the Dask cluster whose scheduler is at this address, e.g. "
                             "'tcp://grading-head.example.edu:8786' (docs/scale-out.md); '': local processes. "
                             "`jaxgrader grade --dask ADDRESS` overrides it.").tag(config=True)
    seed = Integer(None, allow_none=True, help="The seed hidden tests draw their inputs from (the kernel "
                   "reads it as JAXGRADER_SEED). None: a fresh one per class run, drawn once by the "
                   "coordinator and handed to every task and to the reference run. Set it for a "
                   "reproducible run (`jaxgrader grade --seed N` does, for one run).").tag(config=True)
    run_key = Unicode("", help="The grader's own secret of a class run (hex), never given to a kernel: each "
                      "timed test cell's nonce (written into the cell as it runs) and the held-out examples "
                      "scores are judged on are drawn from it (jaxgrader.grading.sandbox.marks, heldout). '': a "
                      "fresh one per class run. Set it, with the seed, to repeat a run exactly.").tag(config=True)


def check_section(config: Config, config_file: Path, section: type[Configurable]) -> None:
    """Raise ValueError (one line naming ``config_file``) for a ``c.<section>`` name that is not a setting."""
    known = set(section.class_trait_names(config=True))
    for name in config.get(section.__name__, {}):
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (settings: {', '.join(sorted(known))})"
            raise ValueError(f"{config_file}: c.{section.__name__}.{name} is not a setting{hint}")


def check_settings(config: Config, config_file: Path) -> None:
    """Raise ValueError (one line naming ``config_file``) for a ``c.JaxGrader`` name that is not a setting."""
    check_section(config, config_file, JaxGrader)


def settings_of(config: Config) -> JaxGrader:
    """The ``c.JaxGrader`` settings of ``config``, typed (defaults where unset)."""
    return JaxGrader(config=config)
