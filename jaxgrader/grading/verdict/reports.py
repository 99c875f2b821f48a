"""The one parser of what a kernel sends: test reports, with size and depth limits.

Everything a student's kernel hands the grader arrives as ``display_data`` outputs
with the MIME type :data:`MIME` (written by ``jaxgrader.checks.report``). This module
turns them into plain Python and NumPy values, or refuses them with a reason; it
judges nothing (``judging``) and runs nothing (``reference``).
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np

MIME = "application/vnd.jaxgrader.report.v1+json"  # same string as jaxgrader.checks.report.MIME
# The rules (jaxgrader.checks.report's docstring; what each part's points rest on: judging.EVIDENCE).
RULES = ("close", "equal", "true", "at_most", "at_least", "finite", "all_equal", "all_distinct", "falls",
         "agrees", "within_factor", "ratio_at_least", "jitted", "same_program", "no_growth", "within_cell_time",
         "shard_shapes", "largest_value", "cell_time", "program", "scores")
EVIDENCE = ("checked", "kernel")  # what a report may say of itself (evidence="kernel" marks the kernel's word)
MAX_CONDITIONS = 20  # grade ids in a part's if_passed / if_failed

MAX_REPORT_BYTES = 4 * 2**20  # one reported value, as JSON
MAX_STRING = 2 * 2**20  # program text (a lowered module) is the longest string a report carries
MAX_CELL_REPORTS = 200
MAX_DEPTH = 40
MAX_NODES = 200_000
MAX_ARRAY_ELEMENTS = 8 * 2**20
DTYPES = {"bool", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"}


class ReportError(ValueError):
    """A reported value the grader will not use (too big, malformed)."""


def _decode(node, budget: list[int], depth: int = 0):
    if depth > MAX_DEPTH:
        raise ReportError(f"nested more than {MAX_DEPTH} levels")
    budget[0] -= 1
    if budget[0] < 0:
        raise ReportError(f"more than {MAX_NODES} values")
    if node is None or isinstance(node, (bool, str)):
        if isinstance(node, str) and len(node) > MAX_STRING:
            raise ReportError(f"a string longer than {MAX_STRING} characters")
        return node
    if isinstance(node, int):
        return node
    if isinstance(node, float):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (tag, body), = node.items()
        if tag == "$float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "$list" and isinstance(body, list):
            return [_decode(v, budget, depth + 1) for v in body]
        if tag == "$dict" and isinstance(body, list):
            out = {}
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                    raise ReportError("malformed dict entry")
                if item[0] in out:
                    raise ReportError(f"duplicate key {item[0][:40]!r}")
                out[item[0]] = _decode(item[1], budget, depth + 1)
            return out
        if tag == "$array" and isinstance(body, dict):
            return _decode_array(body)
        if tag == "$unencodable":
            return Unencodable(str(body)[:200])
    raise ReportError("malformed value")


class Unencodable:
    """A value the kernel could not express as numbers (never equal to anything)."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self):
        return f"<{self.what}>"


def _decode_array(body: dict) -> np.ndarray:
    dtype, shape, data = body.get("dtype"), body.get("shape"), body.get("data")
    if dtype not in DTYPES or not isinstance(shape, list) or not isinstance(data, str):
        raise ReportError("malformed array")
    if len(shape) > 16 or not all(isinstance(n, int) and 0 <= n for n in shape):
        raise ReportError("malformed array shape")
    count = math.prod(shape)
    if count > MAX_ARRAY_ELEMENTS:
        raise ReportError(f"an array of more than {MAX_ARRAY_ELEMENTS} elements")
    np_dtype = np.dtype(bool) if dtype == "bool" else np.dtype("<" + dtype)
    if len(data) > 4 * (count * np_dtype.itemsize + 2) // 3 + 4:
        raise ReportError("array data longer than its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise ReportError("array data is not base64") from None
    if len(raw) != count * np_dtype.itemsize:
        raise ReportError("array data does not match its shape")
    return np.frombuffer(raw, dtype=np_dtype).reshape(shape)


def parse_report(payload) -> dict:
    """One reported value -> {name, rule, rtol, atol, bound, value}; ReportError if unusable."""
    if not isinstance(payload, dict):
        raise ReportError("not a report")
    try:
        size = len(json.dumps(payload))
    except (RecursionError, TypeError, ValueError):
        raise ReportError("a report that is not plain JSON or is nested too deeply") from None
    if size > MAX_REPORT_BYTES:
        raise ReportError(f"a report larger than {MAX_REPORT_BYTES} bytes")
    name, rule = payload.get("name"), payload.get("rule")
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ReportError("a report without a usable name")
    if rule not in RULES:
        raise ReportError(f"unknown rule {str(rule)[:20]!r}")
    numbers = {}
    for field in ("rtol", "atol", "bound"):
        v = payload.get(field)
        if v is not None and not isinstance(v, (int, float)):
            raise ReportError(f"{field} is not a number")
        numbers[field] = v
    evidence, against = payload.get("evidence"), payload.get("against")
    if evidence is not None and evidence not in EVIDENCE:
        raise ReportError(f"unknown evidence {str(evidence)[:20]!r}")
    if against is not None and (not isinstance(against, str) or len(against) > 200):
        raise ReportError("against is not a part name")
    conditions = {}
    for field in ("if_passed", "if_failed"):
        ids = payload.get(field) or []
        if not (isinstance(ids, list) and len(ids) <= MAX_CONDITIONS
                and all(isinstance(i, str) and 0 < len(i) <= 200 for i in ids)):
            raise ReportError(f"{field} is not a list of test names")
        conditions[field] = ids
    limits = payload.get("limits") or {}
    if not (isinstance(limits, dict) and len(limits) <= 10 and all(
            isinstance(k, str) and isinstance(v, (bool, int, float)) for k, v in limits.items())):
        raise ReportError("limits is not a dict of numbers")
    budget = [MAX_NODES]
    return {"name": name, "rule": rule, **numbers, "evidence": evidence, "against": against, **conditions,
            "limits": limits, "value": _decode(payload.get("value"), budget),
            "model": _decode(payload.get("model"), budget), "data": _decode(payload.get("data"), budget)}


def payloads(outputs) -> tuple[list, list[str]]:
    """The raw report payloads in one cell's outputs (at most MAX_CELL_REPORTS), and problems found."""
    found, problems = [], []
    for output in outputs or []:
        if output.get("output_type") not in ("display_data", "execute_result"):
            continue
        data = output.get("data") or {}
        if MIME not in data:
            continue
        if len(found) >= MAX_CELL_REPORTS:
            problems.append(f"more than {MAX_CELL_REPORTS} reports in one cell")
            break
        payload = data[MIME]
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except ValueError:
                problems.append("a report that is not JSON")
                continue
        found.append(payload)
    return found, problems


def parse_reports(outputs) -> tuple[dict[str, list[dict]], list[str]]:
    """The reports in one cell's outputs: name -> [reports], plus problems found.

    This is the only place the grader reads values produced by a kernel.
    """
    reports: dict[str, list[dict]] = {}
    found, problems = payloads(outputs)
    for payload in found:
        try:
            parsed = parse_report(payload)
        except ReportError as exc:
            problems.append(str(exc))
            continue
        reports.setdefault(parsed["name"], []).append(parsed)
    return reports, problems
