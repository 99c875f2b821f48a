"""Artifacts a kernel hands over, evaluated by the grader on data the kernel never saw.

Two rules rest on them (``jaxgrader.checks.report``'s docstring):

``program``  the student's exported program and the reference's are both run (in the bounded
             process of ``jaxgrader.grading.sandbox.evaluator``) on *held inputs*: the run's
             inputs, as the reference run reported them, moved by the grader (floats scaled by
             1 + 5% noise, integers and booleans permuted: same kinds of values, other values).
             The kernel knows the run's inputs but not these, so a program that passes computes
             the function, not a table of answers. Its form is then bounded against the
             reference's program (``limits``).
``scores``   the *reference's* model program applied to the student's parameters and to the
             reference's held-out data; the grader computes the accuracy from the labels.

The noise comes from a seed drawn once per grading process, never shown to a kernel. The
reference's results on held inputs are the same for every submission a process grades, so they
are computed once per process (``_cache``).
"""

from __future__ import annotations

import hashlib
import secrets
import zlib

import numpy as np

from ..sandbox.evaluator import Job, Outcome, run_programs
from .values import compare_values

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


def _program(value) -> tuple[bytes, list[np.ndarray]] | None:
    """(program bytes, flat inputs) of a reported ``exported(...)`` value, or None if it is not one."""
    if not isinstance(value, dict) or set(value) != {"program", "inputs"}:
        return None
    program, inputs = value["program"], value["inputs"]
    if not (isinstance(program, np.ndarray) and program.dtype == np.uint8 and program.ndim == 1
            and isinstance(inputs, list) and all(isinstance(x, np.ndarray) for x in inputs)):
        return None
    return program.tobytes(), list(inputs)


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


def jobs_for(ref: dict, got: dict | None) -> tuple[Job | None, Job | None, str]:
    """(reference's job, student's job, problem) for one ``program`` or ``scores`` part."""
    if ref["rule"] == "program":
        mine = _program(ref["value"])
        if mine is None:
            return None, None, "the reference reported no program"
        inputs = held_inputs(mine[1], ref["name"])
        theirs = _program(got["value"]) if got is not None else None
        if theirs is None:
            return Job(mine[0], inputs), None, "no exported program"
        return Job(mine[0], inputs), Job(theirs[0], inputs), ""
    model, data = _program(ref.get("model")), ref.get("data")
    if model is None or not isinstance(data, dict) or not isinstance(data.get("x"), np.ndarray):
        return None, None, "the reference reported no model and data to score with"
    params, x = _leaves(ref["value"]), data["x"]
    if params is None:
        return None, None, "the reference's parameters are not a list of arrays"
    student = _leaves(got["value"]) if got is not None else None
    if student is None:
        return Job(model[0], params + [x]), None, "no parameters (a list of arrays: jax.tree.leaves(params))"
    return Job(model[0], params + [x]), Job(model[0], student + [x]), ""


def evaluate(pairs: list[tuple[dict, dict | None]], *, sandboxed: bool) -> list[tuple[Outcome | None, Outcome | None, str]]:
    """For each (reference part, student's report): (reference's outcome, student's outcome, problem),
    every job in one run of the bounded process; the reference's outcomes cached per process."""
    planned = [jobs_for(ref, got) for ref, got in pairs]
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
    for (ref_job, _, problem), i in zip(planned, student_at):
        key = None if ref_job is None else _key(ref_job)
        mine = None if key is None else _cache.get(key) or results[reference_at[key]]
        out.append((mine, None if i is None else results[i], problem))
    return out


def judge_program(ref: dict, mine: Outcome | None, theirs: Outcome | None, problem: str) -> str:
    """'' if the student's program computes what the reference's does on the held inputs, within its limits."""
    if mine is None or mine.error:
        return "the reference's program did not run: ask your teacher" if not problem else problem
    if problem or theirs is None:
        return problem or "no exported program"
    if theirs.error:
        return theirs.error
    why = compare_values(theirs.outputs, mine.outputs, "close", ref.get("rtol") or 0.0, ref.get("atol") or 0.0)
    if why:
        return "on inputs the grader chose, the program's outputs differ from the reference program's"
    limits = ref.get("limits") or {}
    for key, what in (("entries", "a value of {got} entries; the reference's largest has {want}"),
                      ("ops", "{got} operations; the reference's program has {want} (a loop unrolled?)")):
        if key in limits and not isinstance(limits[key], bool):
            got, want = theirs.form.get(key, 0), mine.form.get(key, 0)
            if got > limits[key] * max(want, 1):
                return "the program holds " + what.format(got=got, want=want) if key == "entries" \
                    else "the program has " + what.format(got=got, want=want)
    if limits.get("collectives") and set(theirs.form.get("collectives", [])) < set(mine.form.get("collectives", [])):
        missing = sorted(set(mine.form.get("collectives", [])) - set(theirs.form.get("collectives", [])))
        return f"the program has no {', '.join(missing)} across devices; the reference's program has"
    if limits.get("split_over"):
        missing = sorted(set(mine.form.get("split_over", [])) - set(theirs.form.get("split_over", [])))
        if missing:
            return (f"inside shard_map no input is split over {', '.join(missing)}: every device gets its inputs whole "
                    f"(in_specs); the reference's program splits them")
    if limits.get("shardings"):
        for side in ("in_shardings", "out_shardings"):
            if theirs.form.get(side) != mine.form.get(side):
                kind = "inputs" if side == "in_shardings" else "outputs"
                return (f"the program's {kind} are laid out over devices as {theirs.form.get(side)}; "
                        f"expected {mine.form.get(side)}")[:300]
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


def judge_scores(ref: dict, mine: Outcome | None, theirs: Outcome | None, problem: str) -> str:
    """'' if the student's parameters score at least the reference's accuracy less ``bound`` on held-out data."""
    labels = (ref.get("data") or {}).get("y")
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
