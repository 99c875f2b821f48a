"""The seed hidden tests draw their inputs from, fresh for every grading run.

Inside the grader it travels explicitly, as ``c.JaxGrader.seed`` in the configuration
each step is given: the coordinator draws it once per class run
(:func:`draw_seed`, unless the teacher set one) and writes it into its own
configuration and into every task's; the kernel manager passes it to the kernel as
``JAXGRADER_SEED`` (that is how hidden tests read it), and the reference run uses
the same configuration. Only a plain ``nbgrader autograde``, where nothing sets it,
falls back to one value drawn per process (:func:`seed_of`), shared by that
process's kernels and reference runs.
"""

from __future__ import annotations

import copy
import functools
import secrets

ENV = "JAXGRADER_SEED"  # the kernel's variable (jaxgrader.checks reads it)


def draw_seed() -> int:
    return secrets.randbelow(2**31)


@functools.lru_cache(maxsize=None)
def _process_seed() -> int:
    """For a plain ``nbgrader autograde`` only: no coordinator drew one."""
    return draw_seed()


def seed_of(config) -> int:
    """``c.JaxGrader.seed`` of ``config``; unset: this process's own (see module doc)."""
    seed = config.get("JaxGrader", {}).get("seed") if config is not None else None
    return _process_seed() if seed is None else int(seed) % 2**31


def with_seed(config, seed: int):
    """``config`` if it already says ``seed``, else a copy that does."""
    if config is not None and config.get("JaxGrader", {}).get("seed") == seed:
        return config
    config = copy.deepcopy(config) if config is not None else None
    if config is None:
        from traitlets.config import Config

        config = Config()
    config.JaxGrader.seed = seed
    return config


def run_seed() -> int:
    """This process's own seed, for callers without a configuration; prefer ``seed_of(config)``, which
    honours ``c.JaxGrader.seed`` (a class run's seed) as the kernels do."""
    return _process_seed()
