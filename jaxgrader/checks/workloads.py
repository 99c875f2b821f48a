"""Workloads for cost parts (``rule="cell_time"``): many calls of a student's function, bounded in time.

A cost part compares the test cell's wall time, on the grader's clock, with the reference run's same
cell (``jaxgrader.checks.report``): hundreds or thousands of calls of a compiled step take a fraction
of a second, while a step that is not compiled runs every operation of every call one by one, and one
that compiles again on every call compiles every time. Two things keep such a cell honest and cheap:

* the workload's results are reported and compared with the reference's (every call on inputs of
  its own, so no call's result stands for another's), so a run cut short (a patched loop, a
  ``range`` shadowed in the notebook) fails on its values, not only on its time; the grader counts
  the time only in a submission where such a comparison counts (``verdict.judging.UNCHECKED_WORK``);
* the calls stop after ``seconds`` (``SECONDS``, 4 by default), so a step that lacks the property
  costs the grader four seconds instead of minutes; the results it then returns are incomplete, and
  the values reported say so. The solutions' workloads take 0.05-0.22 s on a 2-core machine busy
  with another test run (lesson 5's five; lessons 1 and 2 less): the cap is 18 times the slowest,
  and a workload anywhere near it is far past its cell's time bound anyway. It was 10 s, which
  made every answer that lacks the property cost the trials 10 s a workload.
"""

from __future__ import annotations

import time

SECONDS = 4.0


def calls(fn, arguments, seconds: float = SECONDS) -> list:
    """``fn(*args)`` for each ``args`` of ``arguments`` in turn: the results, until ``seconds`` have passed."""
    start, out = time.monotonic(), []
    for args in arguments:
        if time.monotonic() - start > seconds:
            break
        out.append(fn(*args))
    return out


def chain(step, state, batches, seconds: float = SECONDS):
    """``state, output = step(state, batch)`` for each batch in turn, each call on the state the last one
    returned: ``(state, outputs)``, stopping after ``seconds`` (then ``state`` is not the final one)."""
    start, outputs = time.monotonic(), []
    for batch in batches:
        if time.monotonic() - start > seconds:
            break
        state, out = step(state, batch)
        outputs.append(out)
    return state, outputs


__all__ = ["SECONDS", "calls", "chain"]
