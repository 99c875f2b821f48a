"""The rules judged from evidence other than a plain comparison: artifacts, costs, and the shape-only
rules kept for older tests (``judging``'s docstring says what each part's points rest on)."""

from __future__ import annotations

import math

import numpy as np

from . import artifacts, programs
from .values import compare_values, leaves


def _numbers(value) -> list[float] | None:
    """Every leaf of ``value`` as a float, or None if one is not a real number (bools are not)."""
    out = []
    for _, leaf in leaves(value):
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "iuf":
            out.extend(float(v) for v in leaf.ravel())
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            out.append(float(leaf))
        else:
            return None
    return out


def _number(value) -> float | None:
    found = _numbers(value)
    return found[0] if found is not None and len(found) == 1 and math.isfinite(found[0]) else None


def _finite(value, ref, context) -> str:
    found = _numbers(value)
    if not found:
        return "not numbers"
    return "" if all(math.isfinite(v) for v in found) else "not every number is finite"


def _same(a, b, ref) -> bool:
    """Equal within the reference part's tolerances (booleans and integers: exactly)."""
    return not compare_values(a, b, "close", ref.get("rtol") or 0.0, ref.get("atol") or 0.0)


def _all_equal(value, ref, context) -> str:
    if not isinstance(value, list) or len(value) < 2:
        return "not a list of values to compare"
    return "" if all(_same(v, value[0], ref) for v in value[1:]) else "the values differ"


def _all_distinct(value, ref, context) -> str:
    if not isinstance(value, list) or len(value) < 2:
        return "not a list of values to compare"
    same = [(i, j) for i in range(len(value)) for j in range(i + 1, len(value)) if _same(value[i], value[j], {})]
    return f"values {same[0][0]} and {same[0][1]} are identical" if same else ""


def _falls(value, ref, context) -> str:
    found = _numbers(value)
    if not isinstance(value, list) or not found or len(found) < 2 or not all(math.isfinite(v) for v in found):
        return "not a list of finite losses"
    if found[0] <= 0:
        return f"the first loss is {found[0]:.4g}"
    ratio = float(np.mean(found[-5:])) / found[0]
    return "" if ratio <= ref["bound"] else f"the last losses are {ratio:.3g} of the first, above {ref['bound']:.3g}"


def _agrees(value, ref, context) -> str:
    target = context.get("reference", {}).get(ref.get("against") or "")
    want = None if target is None else target.get("value")
    if not isinstance(want, np.ndarray) or not isinstance(value, np.ndarray):
        return "no predictions to compare"
    if value.shape != want.shape or value.dtype.kind not in "iu":
        return f"predictions of shape {value.shape} ({value.dtype}), expected {want.shape} integers"
    fraction = float(np.mean(value == want))
    return "" if fraction >= ref["bound"] else f"{fraction:.4g} agree, below {ref['bound']:.4g}"


def _within_factor(value, ref, context) -> str:
    got, want = _number(value), _number(ref["value"])
    if got is None or got <= 0 or want is None or want <= 0:
        return f"not a positive number: {value!r:.60}"
    factor = max(got / want, want / got)
    return "" if factor <= ref["bound"] else f"{got:.3g} is {factor:.3g} times off the reference's {want:.3g}"


def _ratio_at_least(value, ref, context) -> str:
    found = _numbers(value)
    if not found or len(found) != 2 or not all(math.isfinite(v) for v in found) or found[1] <= 0:
        return "not two finite numbers, the second positive"
    ratio = found[0] / found[1]
    return "" if ratio >= ref["bound"] else f"the ratio {ratio:.4g} is below {ref['bound']:.4g}"


def _arguments(text):
    """The types a lowered program takes (its results are other parts' business), or None."""
    signature = programs.main_signature(text)
    return None if signature is None else signature[0]


def _program_message(i, got, want) -> str:
    where = f"call {i + 1}: " if i is not None else ""
    return f"{where}the program takes {programs.describe(got)}; expected {programs.describe(want)}"


def _jitted(value, ref, context) -> str:
    got, want = _arguments(value), _arguments(ref["value"])
    return "" if got is not None and got == want else _program_message(None, got, want)


def _same_program(value, ref, context) -> str:
    wants = ref["value"] if isinstance(ref["value"], list) else [ref["value"]]
    if not isinstance(value, list) or len(value) != len(wants):
        return f"not {len(wants)} programs"
    for i, (text, want) in enumerate(zip(value, wants)):
        got, want = _arguments(text), _arguments(want)
        if got is None or got != want:
            return _program_message(i, got, want)
    return ""


def _no_growth(value, ref, context) -> str:
    counts = [programs.equation_count(t) for t in value] if isinstance(value, list) and len(value) >= 2 else [None]
    if None in counts:
        return "no traced programs to compare"
    return "" if len(set(counts)) == 1 else f"the program grows: {' -> '.join(map(str, counts))} operations"


def _this_run(value, ref) -> str:
    """'' if ``value`` is a printed jaxpr traced on the same inputs (types) as the reference's."""
    got, want = programs.jaxpr_inputs(value), programs.jaxpr_inputs(ref["value"])
    if got is None:
        return "no traced program"
    return "" if got == want else f"a program traced on other inputs ({len(got)} arguments) than this run's"


def _per_device(text) -> list[list[tuple]]:
    """Per program input: the shapes each device sees of it inside the program's shard_maps."""
    inputs, pairs = programs.jaxpr_inputs(text), programs.shard_map_shapes(text) or []
    return [sorted({inner for outer, inner in pairs if outer == shape}) for _, shape in inputs]


def _shard_shapes(value, ref, context) -> str:
    if problem := _this_run(value, ref):
        return problem
    got, want = _per_device(value), _per_device(ref["value"])
    shapes = [shape for _, shape in programs.jaxpr_inputs(ref["value"])]
    # the inputs the reference splits over devices (replicated ones, such as parameters a
    # solution may close over instead, are not checked)
    for i, (g, w) in enumerate(zip(got, want)):
        if w and w != [shapes[i]] and g != w:
            return f"argument {i + 1} is seen as {g or 'nothing'} inside shard_map; expected {w}"
    return ""


def _largest_value(value, ref, context) -> str:
    if problem := _this_run(value, ref):
        return problem
    got, want = programs.largest_value(value), programs.largest_value(ref["value"])
    return "" if got <= want else f"the program holds a value of {got} entries; the largest needed has {want}"


def _within_cell_time(value, ref, context) -> str:
    found, seconds = _numbers(value), context.get("seconds")
    if seconds is None:
        return "the grader did not time this cell"
    if not found or not all(math.isfinite(v) and v >= 0 for v in found):
        return "not a list of durations"
    return "" if sum(found) <= seconds else f"{sum(found):.3g} s claimed in a cell that ran {seconds:.3g} s"


def _cell_time(value, ref, context) -> str:
    seconds, want = context.get("seconds"), _number(ref["value"])
    if seconds is None or want is None:
        return "the grader did not time this cell"
    slack = float((ref.get("limits") or {}).get("slack", 1.0))
    allowed = ref["bound"] * want + slack
    return "" if seconds <= allowed else (f"the cell took {seconds:.3g} s on the grader's clock; the reference's "
                                          f"{want:.3g} s (at most {allowed:.3g} s accepted)")


def _artifact(value, ref, context) -> str:
    found = (context.get("artifacts") or {}).get(ref["name"])
    if found is None:
        return "the grader did not evaluate this part"
    mine, theirs, problem, labels = found
    if ref["rule"] == "scores":
        return artifacts.judge_scores(ref, mine, theirs, problem, labels)
    return artifacts.judge_program(ref, mine, theirs, problem, value)


CHECKS = {"cell_time": _cell_time, "program": _artifact, "scores": _artifact, "finite": _finite, "all_equal": _all_equal, "all_distinct": _all_distinct, "falls": _falls,
          "agrees": _agrees, "within_factor": _within_factor, "ratio_at_least": _ratio_at_least,
          "jitted": _jitted, "same_program": _same_program, "no_growth": _no_growth,
          "shard_shapes": _shard_shapes, "largest_value": _largest_value,
          "within_cell_time": _within_cell_time}
