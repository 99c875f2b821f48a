"""Comparing a reported value with the reference's: structure first, then leaf by leaf (``close``, ``equal``)."""

from __future__ import annotations

import numpy as np

from .reports import Unencodable


def leaves(value, path=""):
    if isinstance(value, dict):
        for k in value:
            yield from leaves(value[k], f"{path}[{k!r}]")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def structure(value):
    if isinstance(value, dict):
        return {k: structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [structure(v) for v in value]
    return None


def _as_array(value):
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float)):
        return np.asarray(value)
    return None


def compare_values(value, want, rule: str = "close", rtol: float = 0.0, atol: float = 0.0) -> str:
    """'' if ``value`` has ``want``'s structure and every leaf matches (``equal``: exactly; ``close``: within
    ``rtol``/``atol``; booleans and strings exactly); else why not."""
    if structure(value) != structure(want):
        return "different structure (keys, lengths or nesting) than expected"
    for (path, a), (_, b) in zip(leaves(value), leaves(want)):
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
        if not np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
            diff = np.abs(a64 - b64)
            diff = np.where(np.isnan(diff), np.inf, diff)
            worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.shape else ()
            return (f"differs from the expected value{where}"
                    + (f" (largest difference {float(diff[worst]):.3g} at index {tuple(int(i) for i in worst)})"
                       if diff.shape else f" (got {float(a64):.6g}, expected {float(b64):.6g})"))
    return ""
