"""Artifacts a kernel hands over, evaluated by the grader on data the kernel never saw.

Two rules rest on them (``jaxgrader.checks.report``'s docstring):

``program``  the student's exported program and the reference's are both run (in the bounded
             process of ``jaxgrader.grading.sandbox.evaluator``) on *held inputs*: the run's
             inputs, as the reference run reported them, moved by the grader (floats scaled by
             1 + 5% noise, integers and booleans permuted: same kinds of values, other values).
             The kernel knows the run's inputs but not these, so a program that passes computes
             the function, not a table of answers. The student's program is also run on the inputs
             the test called the function with, and must give what the function returned there
             (``exported`` sends both): a program other than the one the function runs does not.
             Its form is then bounded against the reference's program (``limits``: operations with
             every call written out, XLA's temporary memory, the largest value, collectives,
             layouts over devices).
``scores``   the *reference's* model program applied to the student's parameters and to examples
             the grader holds out of every kernel (``data="digits"``: ``sandbox.heldout``; a dict of
             ``x`` and ``y`` the reference run names is still read, for older tests); the grader
             computes the accuracy from the labels.

The noise comes from a seed drawn once per grading process, never shown to a kernel. The
reference's results on held inputs are the same for every submission a process grades, so they
are computed once per process (``_cache``).
"""

from __future__ import annotations

import hashlib
import secrets
import zlib
from typing import NamedTuple

import numpy as np

from ..sandbox.evaluator import Job, Outcome, run_programs
from ..sandbox.heldout import held_out
from .values import compare_values

MEMORY_SLACK = 64 * 2**10  # bytes a program may use beyond ``memory`` times the reference's: a few small buffers

HELD_SEED = secrets.randbits(63)  # this grading process's own; no kernel sees it
_cache: dict[str, Outcome] = {}


def held_inputs(inputs: list[np.ndarray], name: str) -> list[np.ndarray]:
    """The run's inputs moved to values the kernel never saw (see the module doc)."""
    rng = np.random.default_rng([HELD_SEED, zlib.crc32(name.encode())])
    out = []
    for x in inputs:
        x = np.asarray(x)
        if x.dtype.kind == "f":
            out.append((x * (1 + 0.05 * rng.standard_normal(x.shape))).astype(x.dtype))
        elif x.dtype.kind in "iub" and x.size > 1:
            out.append(rng.permutation(x.ravel()).reshape(x.shape))
        else:
            out.append(x.copy())
    return out


def _program(value) -> tuple[bytes, list[np.ndarray], list[np.ndarray] | None] | None:
    """(program bytes, flat inputs, what the function returned on them or None) of a reported ``exported(...)``
    value, or None if it is not one."""
    if not isinstance(value, dict) or set(value) not in ({"program", "inputs"}, {"program", "inputs", "outputs"}):
        return None
    program, inputs, outputs = value["program"], value["inputs"], value.get("outputs")
    arrays = (lambda xs: isinstance(xs, list) and all(isinstance(x, np.ndarray) for x in xs))
    if not (isinstance(program, np.ndarray) and program.dtype == np.uint8 and program.ndim == 1 and arrays(inputs)
            and (outputs is None or arrays(outputs))):
        return None
    return program.tobytes(), list(inputs), None if outputs is None else list(outputs)


def _leaves(value) -> list[np.ndarray] | None:
    if isinstance(value, list) and all(isinstance(x, np.ndarray) for x in value):
        return list(value)
    return None


def _key(job: Job) -> str:
    h = hashlib.sha256(job.program)
    for x in job.inputs:
        h.update(str((x.shape, x.dtype.str)).encode())
        h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


def jobs_for(ref: dict, got: dict | None, config=None) -> tuple[Job | None, Job | None, str]:
    """(reference's job, student's job, problem) for one ``program`` or ``scores`` part (``config``: the run's,
    whose held-out examples a ``scores`` part with ``data="digits"`` is scored on)."""
    if ref["rule"] == "program":
        mine = _program(ref["value"])
        if mine is None:
            return None, None, "the reference reported no program"
        inputs = held_inputs(mine[1], ref["name"])
        theirs = _program(got["value"]) if got is not None else None
        if theirs is None:
            return Job(mine[0], inputs), None, "no exported program"
        if mine[2] is not None and theirs[2] is None:
            return Job(mine[0], inputs), None, "no outputs of the function itself to tie its program to"
        return Job(mine[0], inputs), Job(theirs[0], inputs, also=theirs[1] if mine[2] is not None else None), ""
    model, data = _program(ref.get("model")), scoring_data(ref.get("data"), config)
    if model is None or data is None:
        return None, None, "the reference reported no model and data to score with"
    params, x = _leaves(ref["value"]), data["x"]
    if params is None:
        return None, None, "the reference's parameters are not a list of arrays"
    student = _leaves(got["value"]) if got is not None else None
    if student is None:
        return Job(model[0], params + [x], chunked=True), None, "no parameters (a list of arrays: jax.tree.leaves(params))"
    return Job(model[0], params + [x], chunked=True), Job(model[0], student + [x], chunked=True), ""


class Evaluated(NamedTuple):
    """What evaluating one ``program`` or ``scores`` part gave: the reference's and the student's outcomes, why
    it could not be run ('' if it could), and the labels a ``scores`` part is judged with."""

    mine: Outcome | None
    theirs: Outcome | None
    problem: str
    labels: np.ndarray | None = None


def scoring_data(data, config) -> dict | None:
    """{"x", "y"} a ``scores`` part is scored on: the grader's held-out examples for a data set's name
    (``"digits"``), or, for older tests, the arrays the reference run named."""
    if isinstance(data, str):
        return held_out(config, data)
    if isinstance(data, dict) and isinstance(data.get("x"), np.ndarray):
        return data
    return None


def evaluate(pairs: list[tuple[dict, dict | None]], *, sandboxed: bool, config=None) -> list[Evaluated]:
    """For each (reference part, student's report): (reference's outcome, student's outcome, problem),
    every job in one run of the bounded process; the reference's outcomes cached per process."""
    planned = [jobs_for(ref, got, config) for ref, got in pairs]
    todo: list[Job] = []
    reference_at: dict[str, int] = {}
    for ref_job, _, _ in planned:
        key = None if ref_job is None else _key(ref_job)
        if key is not None and key not in _cache and key not in reference_at:
            reference_at[key] = len(todo)
            todo.append(ref_job)
    student_at = []
    for _, student_job, _ in planned:
        student_at.append(None if student_job is None else len(todo))
        if student_job is not None:
            todo.append(student_job)
    results = run_programs(todo, sandboxed=sandboxed)
    for key, i in reference_at.items():
        if not results[i].error:
            _cache[key] = results[i]
    out = []
    for (ref, _), (ref_job, _, problem), i in zip(pairs, planned, student_at):
        key = None if ref_job is None else _key(ref_job)
        mine = None if key is None else _cache.get(key) or results[reference_at[key]]
        data = scoring_data(ref.get("data"), config) if ref["rule"] == "scores" else None
        out.append(Evaluated(mine, None if i is None else results[i], problem, None if data is None else data["y"]))
    return out


def judge_program(ref: dict, mine: Outcome | None, theirs: Outcome | None, problem: str, value=None) -> str:
    """'' if the student's program computes what the reference's does on the held inputs, and what their function
    returned on the test's inputs (``value``: the student's report, as ``exported`` made it), within its limits."""
    if mine is None or mine.error:
        return "the reference's program did not run: ask your teacher" if not problem else problem
    if problem or theirs is None:
        return problem or "no exported program"
    if theirs.error:
        return theirs.error
    rtol, atol = ref.get("rtol") or 0.0, ref.get("atol") or 0.0
    why = compare_values(theirs.outputs, mine.outputs, "close", rtol, atol)
    if why:
        return "on inputs the grader chose, the program's outputs differ from the reference program's"
    returned = _program(value)
    if theirs.also_outputs is not None and (returned is None or returned[2] is None or compare_values(
            theirs.also_outputs, returned[2], "close", max(rtol, 1e-5), max(atol, 1e-6))):
        return ("the exported program does not compute what the function returned on the test's inputs: "
                "it is not the program the function runs")
    limits = ref.get("limits") or {}
    for key, what in (("entries", "a value of {got} entries; the reference's largest has {want}"),
                      ("ops", "{got} operations; the reference's program has {want} (a loop unrolled?)")):
        if key in limits and not isinstance(limits[key], bool):
            got, want = theirs.form.get(key, 0), mine.form.get(key, 0)
            if got > limits[key] * max(want, 1):
                return "the program holds " + what.format(got=got, want=want) if key == "entries" \
                    else "the program has " + what.format(got=got, want=want)
    if "memory" in limits and not isinstance(limits["memory"], bool):
        got, want = theirs.form.get("memory"), mine.form.get("memory")
        if got is not None and want is not None and got > limits["memory"] * want + MEMORY_SLACK:
            return (f"the program needs {got / 1024:.0f} KiB of temporary memory (XLA's analysis); the reference's "
                    f"{want / 1024:.0f} KiB (at most {limits['memory']:g} times that)")
    if limits.get("donation") and theirs.form.get("donated", 0) < mine.form.get("donated", 0):
        return (f"the program donates {theirs.form.get('donated', 0)} of its inputs; the reference's donates "
                f"{mine.form.get('donated', 0)} (donate_argnums)")
    missing = sorted(set(mine.form.get("collectives", [])) - set(theirs.form.get("collectives", [])))
    if limits.get("collectives") and missing:
        return f"the program has no {', '.join(missing)} across devices; the reference's program has"
    if limits.get("split_over"):
        missing = sorted(set(mine.form.get("split_over", [])) - set(theirs.form.get("split_over", [])))
        if missing:
            return (f"inside shard_map no input is split over {', '.join(missing)}: every device gets its inputs whole "
                    f"(in_specs); the reference's program splits them")
    if limits.get("shardings"):
        if theirs.form.get("devices") != mine.form.get("devices"):
            return (f"the program runs on {theirs.form.get('devices')} device(s); the reference's on "
                    f"{mine.form.get('devices')} (its inputs laid out over the mesh)")
        if theirs.form.get("in_shardings") != mine.form.get("in_shardings"):
            return (f"the program's inputs are laid out over devices as {theirs.form.get('in_shardings')}; "
                    f"expected {mine.form.get('in_shardings')}")[:300]
        if theirs.form.get("out_shardings") != mine.form.get("out_shardings"):
            return (f"the program's outputs are laid out over devices as {theirs.form.get('out_shardings')}; "
                    f"expected {mine.form.get('out_shardings')}")[:300]
    return ""


def accuracy(outcome: Outcome, labels) -> float | None:
    """The fraction of ``labels`` a model's first output predicts (logits: by argmax; else class ids)."""
    if outcome is None or outcome.error or not outcome.outputs:
        return None
    first = np.asarray(outcome.outputs[0])
    predicted = first.argmax(axis=-1) if first.ndim == 2 else first
    labels = np.asarray(labels)
    if predicted.shape != labels.shape:
        return None
    return float(np.mean(predicted == labels))


def judge_scores(ref: dict, mine: Outcome | None, theirs: Outcome | None, problem: str, labels=None) -> str:
    """'' if the student's parameters score at least the reference's accuracy less ``bound`` on held-out data
    (``labels``: theirs, as ``evaluate`` found them; else those the reference run named)."""
    if labels is None and isinstance(ref.get("data"), dict):
        labels = ref["data"].get("y")
    want = accuracy(mine, labels) if mine is not None else None
    if want is None:
        return problem or "the reference's parameters could not be scored: ask your teacher"
    if problem or theirs is None:
        return problem or "no parameters"
    if theirs.error:
        return "the parameters do not fit the model: " + theirs.error
    got = accuracy(theirs, labels)
    if got is None:
        return "the model's output on these parameters is not a prediction per example"
    bound = ref.get("bound") or 0.0
    return "" if got >= want - bound else (f"the trained parameters classify {got:.1%} of held-out examples right; "
                                           f"the reference's {want:.1%} (at most {bound:.0%} less is accepted)")
