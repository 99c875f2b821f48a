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
  made every answer that lacks the property cost the trials 10 s a workload;
* they stop sooner where the end is in sight: past a quarter of ``seconds`` (1 s, over four times
  the slowest solution's whole workload), once the pace of the last calls (the median of 16, so
  that a call that compiled once more or met a busy moment does not set it) says the rest would
  end past ``seconds``, the workload stops there, as it would have at ``seconds`` (``_Pace``). A
  step that is not compiled, or compiles at every call, then costs about a second, not four.
"""

from __future__ import annotations

import statistics
import time

SECONDS = 4.0


class _Pace:
    """When a workload stops: before each call, ``over()`` says whether ``seconds`` have passed, or, past a
    quarter of them, whether the remaining calls at the median pace of the last 16 would end past them."""

    def __init__(self, items, seconds: float):
        self.total = len(items) if hasattr(items, "__len__") else None
        self.seconds, self.start, self.last, self.took = seconds, time.monotonic(), None, []

    def over(self) -> bool:
        now = time.monotonic()
        if self.last is not None:
            self.took.append(now - self.last)
        self.last = now
        elapsed = now - self.start
        if elapsed > self.seconds:
            return True
        if self.total is None or len(self.took) < 4 or elapsed < self.seconds / 4:
            return False
        return elapsed + statistics.median(self.took[-16:]) * (self.total - len(self.took)) > self.seconds


def calls(fn, arguments, seconds: float = SECONDS, until=None) -> list:
    """``fn(*args)`` for each ``args`` of ``arguments`` in turn: the results, until ``seconds`` have passed
    (or the pace says they would before the end), or ``until()`` is true before a call."""
    pace, out = _Pace(arguments, seconds), []
    for args in arguments:
        if pace.over() or (until is not None and until()):
            break
        out.append(fn(*args))
    return out


def chain(step, state, batches, seconds: float = SECONDS, until=None):
    """``state, output = step(state, batch)`` for each batch in turn, each call on the state the last one
    returned: ``(state, outputs)``, stopping after ``seconds`` (or when the pace says the calls would end past
    them), or when ``until()`` is true before a call (then ``state`` is not the final one)."""
    pace, outputs = _Pace(batches, seconds), []
    for batch in batches:
        if pace.over() or (until is not None and until()):
            break
        state, out = step(state, batch)
        outputs.append(out)
    return state, outputs


__all__ = ["SECONDS", "calls", "chain"]
