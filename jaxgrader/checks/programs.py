"""Program text for hidden tests to report: what JAX built from the student's function.

A fact about a compiled program ("jitted", "the learning rate is traced, not
static", "one program for every step", "a scan, not an unrolled loop") is not
reported as a bool the test worked out here, which a student controlling the
kernel could rewrite, but as the program itself, printed by JAX for the run's
inputs. The grader parses it outside the kernel (``jaxgrader.grading.verdict.programs``)
and compares it with the reference run's: to send a passing one, a student has
to have written that program. Rules: ``jitted``, ``same_program`` (lowered text),
``no_growth`` (jaxpr text); see ``jaxgrader.checks.report``.
"""

from __future__ import annotations

import jax


def lowered(fn, *args, **kwargs) -> str | None:
    """``fn.lower(*args).as_text()``, the StableHLO module ``jax.jit`` builds, or None when ``fn`` is not jitted.

    Lowering traces but does not compile, so it costs little and counts no compilation.
    """
    lower = getattr(fn, "lower", None)
    if not callable(lower):
        return None
    return lower(*args, **kwargs).as_text()


def jaxpr(fn, *args, **kwargs) -> str:
    """The printed jaxpr of ``fn`` on ``args`` (nested programs included), without terminal colours
    (JAX colours it where it guesses a terminal, as in some kernels)."""
    return jax.make_jaxpr(fn)(*args, **kwargs).pretty_print(use_color=False)


__all__ = ["jaxpr", "lowered"]
