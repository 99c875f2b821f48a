"""The one way values leave the student's kernel: hidden tests *report*, the grader judges.

A hidden test does not decide anything. It computes the student's answers on
inputs drawn from the grader's seed and reports them::

    from jaxgrader.checks.programs import lowered as _lowered
    from jaxgrader.checks.report import key as _key, report as _report

    _x = jax.random.normal(_key(0), (4,))
    _report("predict(params, x)", predict(_params, _x))                 # compared with the reference
    _report("predict is jitted", _lowered(predict, _params, _x), rule="jitted")  # its program, parsed

Import under underscore names: a hidden test shares the notebook's namespace, and
a plain ``key`` or ``rng`` would replace a student's variable of that name in
every later cell (at grading only, where the student cannot see why).

The grader runs the instructor's solution with the same seed in its own
sandboxed kernel, and compares each reported value with the one the reference
run reported under the same name, outside the student's kernel
(``jaxgrader.grading.verdict.verdict``). Tolerances, rules and bounds are taken from the
*reference* run; what a student's kernel sends for them is ignored.

Rules (each part's points rest on what the grader can check itself: its *evidence*):

``close``    numbers and arrays within ``rtol``/``atol`` of the reference, same
             structure (dict keys, list lengths) and shapes; other leaves equal.
``equal``    exactly equal to the reference (shapes, dtypes as strings, counts).

Judged by the grader from the reported value alone (report the raw evidence, never
a verdict the test reached itself):

``finite``          every number in the value is finite (e.g. a list of losses).
``falls``           a list of losses: the mean of the last five is at most ``bound``
                    times the first.
``all_equal``       a list of values that must all be equal (same key, same masks).
``all_distinct``    a list of values no two of which may be equal.
``ratio_at_least``  ``[a, b]``: ``a / b`` at least ``bound``.
``agrees``          predicted class ids: the fraction equal to the *reference's* value
                    of the part named ``against`` (e.g. the test labels, reported as
                    their own ``equal`` part) is at least ``bound``: an accuracy the
                    grader computes.
``within_factor``   a measurement (seconds) within a factor ``bound`` either way of the
                    reference run's measurement of the same thing.
``within_cell_time`` a list of seconds the student's code claims to have measured in
                    this cell: their sum must not exceed the cell's wall time on the
                    grader's clock (code can make a cell slower, never faster).

Program artifacts, parsed by the grader (``jaxgrader.grading.verdict.programs``); report
them with :func:`jaxgrader.checks.programs.lowered` and
:func:`jaxgrader.checks.programs.jaxpr`:

``jitted``        the lowered text of a function on the run's inputs (None if it is not
                  jitted): its ``main`` must take and return the same types as the
                  reference's (a static argument or a changed dtype shows).
``same_program``  a list of lowered texts, one per call (e.g. on the state before and
                  after a step): every one must have the reference's signature, so one
                  compiled program serves every call.
``no_growth``     a list of jaxpr texts for growing inputs (2, then 6 batches): the
                  number of equations must not grow (a scan, not an unrolled loop).
``shard_shapes``  a jaxpr text on the run's inputs: every argument the reference's
                  program splits over devices inside a ``shard_map`` must be seen in
                  the same per-device shapes (a batch split, not replicated).
``largest_value`` a jaxpr text on the run's inputs: no value in it may have more
                  entries than the largest in the reference's (e.g. no Hessian formed).

(These two rules also require the program's inputs to be the reference's: the
run's data, whose shapes are drawn for the run.)

Kept for older tests, and taken on the kernel's word (``evidence="kernel"``):

``true``     the value must be ``True``: a fact measured inside the kernel.
``at_most``  a number measured inside the kernel, at most ``bound``.
``at_least`` a number measured inside the kernel, at least ``bound``.

A student who takes over the kernel can send whatever passes those three, so no
new test uses them; ``jaxgrader trials`` and ``grading-summary.json`` count the
points resting on them. ``evidence="kernel"`` marks any other part whose value is a
fact the test worked out inside the kernel (the same in every run, so guessable).

The value travels as a ``display_data`` output with the MIME type
:data:`MIME`; this module only encodes. The grader's parser enforces sizes.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import os

import numpy as np

MIME = "application/vnd.jaxgrader.report.v1+json"
RULES = ("close", "equal", "true", "at_most", "at_least", "finite", "all_equal", "all_distinct", "falls",
         "agrees", "within_factor", "ratio_at_least", "jitted", "same_program", "no_growth", "within_cell_time",
         "shard_shapes", "largest_value")
# A report bigger than this is refused here, with a message, instead of by the grader.
MAX_REPORT_BYTES = 2 * 2**20


def seed() -> int:
    """The grader's seed for this run (``JAXGRADER_SEED``; 0 outside grading)."""
    try:
        return int(os.environ.get("JAXGRADER_SEED", "0")) % 2**31
    except ValueError:
        return 0


def key(i: int = 0):
    """A PRNG key drawn from the run's seed: the same in the student's and the reference run."""
    import jax

    return jax.random.fold_in(jax.random.key(seed()), i)


def rng(i: int = 0) -> np.random.Generator:
    """A NumPy generator drawn from the run's seed (for data that need not be JAX arrays)."""
    return np.random.default_rng([seed(), i])


def encode(value, _depth: int = 0):
    """A JSON-able form of a pytree of arrays, numbers, strings, bools and None."""
    if _depth > 32:
        raise ValueError("nested more than 32 levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, dict):
        return {"$dict": [[str(k), encode(v, _depth + 1)] for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]}
    if hasattr(value, "_asdict") and isinstance(value, tuple):  # NamedTuple (optax states)
        return encode(dict(value._asdict()), _depth)
    if isinstance(value, (list, tuple)):
        return {"$list": [encode(v, _depth + 1) for v in value]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode({f.name: getattr(value, f.name) for f in dataclasses.fields(value)}, _depth)
    return _encode_array(value)


def _encode_array(value):
    try:
        import jax

        if jax.dtypes.issubdtype(getattr(value, "dtype", None), jax.dtypes.prng_key):
            value = jax.random.key_data(value)
    except (ImportError, TypeError, AttributeError):
        pass
    try:
        array = np.asarray(value)
    except Exception as exc:  # what a student returned cannot be an array
        return {"$unencodable": f"{type(value).__name__} ({exc.__class__.__name__})"}
    if array.dtype == object or array.dtype.kind not in "biuf":
        return {"$unencodable": f"{type(value).__name__} of dtype {array.dtype}"}
    if array.dtype.kind == "f" and array.dtype.itemsize < 4:
        array = array.astype(np.float32)  # bfloat16/float16: float32 holds them exactly
    dtype = "bool" if array.dtype.kind == "b" else array.dtype.str.lstrip("<>=|")
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<") if array.dtype.kind != "b" else bool)
    return {"$array": {"dtype": dtype, "kind": array.dtype.kind, "shape": list(array.shape),
                       "data": base64.b64encode(data.tobytes()).decode("ascii")}}


_matmul_error: float | None = None


def matmul_error() -> float:
    """Relative error of this backend's default float32 matmul (a random 64x64 one, against float64).

    ~1e-7 on a CPU; ~3e-4 with TF32 (Ampere-and-newer GPUs), ~2e-3 with bfloat16 operands (TPUs).
    Measured once per kernel. The setup cell's ``matmul_tolerance`` measures the same way.
    """
    global _matmul_error
    if _matmul_error is None:
        import jax.numpy as jnp

        a = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)
        exact = a.astype(np.float64) @ a.T.astype(np.float64)
        _matmul_error = float(np.max(np.abs(np.asarray(jnp.dot(a, a.T), np.float64) - exact)) / np.max(np.abs(exact)))
    return _matmul_error


def precision_floor(value) -> tuple[float, float]:
    """(rtol, atol) below which no ``close`` report of ``value`` can be judged on this backend.

    Zero on a CPU. Where float32 matmuls are computed at reduced precision, two correct answers
    that feed a matmul different (equally correct) operands differ by a few times the measured
    matmul error, relative to the size of the values (hence atol scaled by their RMS): rtol four
    times it, as the setup cell's matmul_tolerance, atol once it times the RMS. No wider: at ten
    times the error, lesson 5's forgotten activity regularization kept its training-step points.
    Only the *reference* run's tolerances count, so only the trusted kernel's measurement does.
    """
    error = matmul_error()
    if error <= 1e-5:
        return 0.0, 0.0
    floats = [np.asarray(leaf, np.float64).ravel() for leaf in _leaves(value)]
    floats = [f for f in floats if f.size]
    rms = float(np.sqrt(np.mean(np.concatenate(floats) ** 2))) if floats else 0.0
    return 4 * error, error * rms


def _leaves(value):
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if hasattr(value, "_asdict") and isinstance(value, tuple):
        return _leaves(dict(value._asdict()))
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _leaves({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    try:
        array = np.asarray(value)
    except Exception:
        return []
    return [array] if array.dtype.kind == "f" and np.all(np.isfinite(array)) else []


def report(name: str, value, *, rule: str = "close", rtol: float = 1e-5, atol: float = 1e-6,
           bound: float | None = None, against: str | None = None, evidence: str | None = None) -> None:
    """Hand ``value`` to the grader under ``name`` (unique within the test cell).

    ``close`` tolerances are widened to :func:`precision_floor` where matmuls run at reduced precision.
    ``against``: the part whose reference value an ``agrees`` part is judged against;
    ``evidence="kernel"``: this part's value is the kernel's word (see the module doc).
    """
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; one of {RULES}")
    if rule == "close":
        floor_rtol, floor_atol = precision_floor(value)
        rtol, atol = max(rtol, floor_rtol), max(atol, floor_atol)
    payload = {"name": str(name), "rule": rule, "rtol": float(rtol), "atol": float(atol),
               "bound": None if bound is None else float(bound), "value": encode(value)}
    if against is not None:
        payload["against"] = str(against)
    if evidence is not None:
        payload["evidence"] = str(evidence)
    import json

    if len(json.dumps(payload)) > MAX_REPORT_BYTES:
        payload["value"] = {"$unencodable": f"more than {MAX_REPORT_BYTES} bytes"}
    from IPython.display import display

    display({MIME: payload}, raw=True)


__all__ = ["MIME", "RULES", "encode", "key", "report", "rng", "seed"]
