"""Judging one test cell: each reported part against the reference run's, by its rule.

Rules, tolerances and bounds come from the reference run (the instructor's solution
with the same seed); what a student's kernel sends for them is ignored. Every part
says what its points rest on (``evidence``):

``checked``  judged here, from values and program text the kernel reported, against
             the reference's values or the grader's own data (its clock, its parse
             of the program): ``close``, ``equal`` (the answer computed on inputs
             drawn for this run), ``finite``, ``all_equal``, ``all_distinct``,
             ``falls``, ``agrees``, ``ratio_at_least`` (the grader's arithmetic on
             reported values), ``within_factor`` (against the reference's own
             measurement), ``jitted``, ``same_program``, ``no_growth``,
             ``shard_shapes``, ``largest_value`` (the program text, parsed by ``programs``), ``within_cell_time`` (claimed seconds
             against the cell's wall time on the grader's clock).
``kernel``   the kernel's word: ``true``, ``at_most``, ``at_least`` (a bool or number
             the kernel computed about itself), or any part whose reference report
             says ``evidence="kernel"``. A student who controls the kernel can send
             what passes; :func:`kernel_points` counts the points that rest on them.
"""

from __future__ import annotations

import math

import numpy as np

from . import programs
from .reports import Unencodable, parse_reports

KERNEL_RULES = ("true", "at_most", "at_least")


def evidence_of(ref: dict) -> str:
    """"checked" or "kernel": what the points of reference part ``ref`` rest on."""
    return ref.get("evidence") or ("kernel" if ref["rule"] in KERNEL_RULES else "checked")


def _leaves(value, path=""):
    if isinstance(value, dict):
        for k in value:
            yield from _leaves(value[k], f"{path}[{k!r}]")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _structure(value):
    if isinstance(value, dict):
        return {k: _structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_structure(v) for v in value]
    return None


def _as_array(value):
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float)):
        return np.asarray(value)
    return None


def compare(got, ref: dict, context: dict | None = None) -> str:
    """'' if ``got`` (a student's parsed report, or None) satisfies reference ``ref``; else why not.

    ``context``: what some rules judge against besides ``ref``: ``"reference"`` (the cell's
    reference parts by name, for ``agrees``) and ``"seconds"`` (the cell's wall time on the
    grader's clock, for ``within_cell_time``).
    """
    if got is None:
        return "not reported (the test stopped before this check)"
    rule, value, want = ref["rule"], got["value"], ref["value"]
    if rule in CHECKS:
        return CHECKS[rule](value, ref, context or {})
    if rule == "true":
        return "" if value is True else "not true"
    if rule in ("at_most", "at_least"):
        bound = ref["bound"]
        if isinstance(value, np.ndarray) and value.shape == ():
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"not a number: {value!r:.60}"
        ok = value <= bound if rule == "at_most" else value >= bound
        return "" if ok else f"{value:.4g} is {'above' if rule == 'at_most' else 'below'} {bound:.4g}"
    if _structure(value) != _structure(want):
        return "different structure (keys, lengths or nesting) than expected"
    for (path, a), (_, b) in zip(_leaves(value), _leaves(want)):
        where = f" at {path}" if path else ""
        if isinstance(a, Unencodable) or isinstance(b, Unencodable):
            return f"not a numeric value{where}: {a!r}"
        arr_a, arr_b = _as_array(a), _as_array(b)
        if arr_a is None or arr_b is None:
            if a != b or type(a) is not type(b):
                return f"{a!r:.60} instead of {b!r:.60}{where}"
            continue
        if arr_a.shape != arr_b.shape:
            return f"shape {arr_a.shape} instead of {arr_b.shape}{where}"
        if rule == "equal" or arr_b.dtype.kind == "b":
            if arr_a.dtype.kind != arr_b.dtype.kind and {arr_a.dtype.kind, arr_b.dtype.kind} != {"i", "u"}:
                return f"dtype kind {arr_a.dtype.kind!r} instead of {arr_b.dtype.kind!r}{where}"
            if not np.array_equal(arr_a, arr_b):
                return f"values differ from the expected ones{where}"
            continue
        if arr_a.dtype.kind == "b":
            return f"booleans where numbers were expected{where}"
        a64, b64 = arr_a.astype(np.float64), arr_b.astype(np.float64)
        if not np.allclose(a64, b64, rtol=ref["rtol"], atol=ref["atol"], equal_nan=True):
            diff = np.abs(a64 - b64)
            diff = np.where(np.isnan(diff), np.inf, diff)
            worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.shape else ()
            return (f"differs from the expected value{where}"
                    + (f" (largest difference {float(diff[worst]):.3g} at index {tuple(int(i) for i in worst)})"
                       if diff.shape else f" (got {float(a64):.6g}, expected {float(b64):.6g})"))
    return ""



# --------------------------------------------------------------------------- rules judged from evidence


def _numbers(value) -> list[float] | None:
    """Every leaf of ``value`` as a float, or None if one is not a real number (bools are not)."""
    out = []
    for _, leaf in _leaves(value):
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
    return not compare({"value": a}, {"rule": "close", "value": b, "rtol": ref.get("rtol") or 0.0,
                                      "atol": ref.get("atol") or 0.0})


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


CHECKS = {"finite": _finite, "all_equal": _all_equal, "all_distinct": _all_distinct, "falls": _falls,
          "agrees": _agrees, "within_factor": _within_factor, "ratio_at_least": _ratio_at_least,
          "jitted": _jitted, "same_program": _same_program, "no_growth": _no_growth,
          "shard_shapes": _shard_shapes, "largest_value": _largest_value,
          "within_cell_time": _within_cell_time}


# --------------------------------------------------------------------------- a cell


def judge_cell(outputs, reference: list[dict], seconds: float | None = None) -> list[dict]:
    """One record per reference part: {name, passed, message, evidence, kernel_measured}.

    ``seconds``: the cell's wall time on the grader's clock (None: not timed).
    """
    reports, problems = parse_reports(outputs)
    context = {"reference": {ref["name"]: ref for ref in reference}, "seconds": seconds}
    parts = []
    for ref in reference:
        got = reports.get(ref["name"], [])
        if len(got) > 1:
            message = "reported more than once"
        else:
            message = compare(got[0] if got else None, ref, context)
        evidence = evidence_of(ref)
        parts.append({"name": ref["name"], "passed": not message, "message": message, "evidence": evidence,
                      "kernel_measured": evidence == "kernel"})
    if not reference:
        parts.append({"name": "(no trusted check)", "passed": False, "evidence": "checked", "kernel_measured": False,
                      "message": "the reference run reported nothing for this test; ask your teacher"})
    for problem in problems[:3]:
        parts.append({"name": "(report)", "passed": False, "message": problem, "evidence": "checked",
                      "kernel_measured": False})
    return parts


def kernel_points(parts: list[dict], points: float) -> float:
    """The points of a test cell that rest on the kernel's word: all of them if any part does.

    A cell scores all or nothing, so one part taken on the kernel's word is enough for a
    student who controls the kernel to buy the cell with an answer that lacks that property.
    """
    return float(points) if any(p.get("evidence") == "kernel" for p in parts) else 0.0


def kernel_points_of(source_nb, references: dict[str, list]) -> dict[str, float]:
    """grade_id -> points resting on kernel evidence, for one notebook and its reference reports.

    ``references``: grade_id -> report payloads, as the reference run sent them
    (``reference.reference_reports``). Only cells with such points are listed.
    """
    from .reports import parse_report

    out = {}
    for cell in source_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in references:
            parts = [{"evidence": evidence_of(parse_report(p))} for p in references[gid]]
            points = kernel_points(parts, meta.get("points") or 0)
            if points:
                out[gid] = points
    return out


__all__ = ["CHECKS", "KERNEL_RULES", "compare", "evidence_of", "judge_cell", "kernel_points", "kernel_points_of"]
