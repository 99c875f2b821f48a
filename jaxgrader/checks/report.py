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

Rules. Each part's points rest on evidence the grader checks outside the kernel, of one of
three kinds (``evidence`` in ``grading-summary.json``; docs/grading.md, "Evidence, not claims"):

*reference*: the value, compared with the reference run's value of the same name, computed
on inputs drawn for this run:

``close``    numbers and arrays within ``rtol``/``atol`` of the reference, same
             structure (dict keys, list lengths) and shapes; other leaves equal.
``equal``    exactly equal to the reference (shapes, dtypes as strings, counts).
``within_factor``   a measurement (seconds) within a factor ``bound`` either way of the
                    reference run's measurement of the same thing.
``within_cell_time`` a list of seconds the student's code claims to have measured in
                    this cell: their sum must not exceed the cell's wall time on the
                    grader's clock (code can make a cell slower, never faster).

*artifact*: something the grader evaluates itself, with trusted code, on data it holds:

``program``  a program exported with :func:`jaxgrader.checks.programs.exported`: the grader
             runs it (outside the kernel, in a process of its own) on inputs it draws near
             the run's, and compares its outputs with what the reference's exported program
             computes on the same inputs (``rtol``/``atol``). ``limits`` bound its form against
             the reference's program: ``{"entries": f}`` (no value more than ``f`` times the
             size of the reference's largest: no Hessian formed, micro-batches one at a time),
             ``{"ops": f}`` (at most ``f`` times the reference's operations: a scan, not an
             unrolled loop), ``{"shardings": True}`` (inputs and outputs laid out over devices as
             the reference's: a batch split, parameters replicated), ``{"collectives": True}`` (every
             kind of collective the reference's program has, e.g. a ``psum`` in a ``shard_map``),
             ``{"split_over": True}`` (inside its ``shard_map`` regions some input is split over every
             mesh axis the reference's splits one over: a batch split, not left whole on every device),
             ``{"memory": f}`` (XLA's temporary memory for the program at most ``f`` times the reference's),
             ``{"donation": True}`` (it donates as many inputs as the reference's: ``donate_argnums``).
             Operations are counted with every call written out (a nested jit, a checkpoint, a custom
             derivative), so a loop unrolled in any spelling counts as unrolled.
``scores``   trained parameters (any pytree): the grader applies the *reference's* model
             (``model=exported(predict, params, x)``, taken from the reference run) to them
             on held-out data the reference run names (``data={"x": ..., "y": ...}``) and
             computes the accuracy itself; it must be at least the reference parameters'
             accuracy less ``bound``.

*cost*: what the grader measures on its own clock:

``cell_time`` the whole test cell's wall time, timed by the grader, at most ``bound`` times
             the reference run's for the same cell (plus ``limits={"slack": s}`` seconds, 1 by
             default). The value reported is ignored. Give the cell a workload the property
             decides (many calls of a step: a missing ``jax.jit``, a recompiling step or an
             unrolled loop cost many times the factor).

Which parts count: ``if_passed=["test_a", ...]`` judges a part only when those test cells
passed in this submission, ``if_failed=[...]`` only when one of them failed. A test that
isolates one exercise from an earlier one reports the student's own chain under
``if_passed`` (any way of binding the earlier function is then judged fairly) and the same
computation with a stand-in for the earlier function under ``if_failed`` (a wrong earlier
answer costs only its own points). A condition names a test cell (``"test_train_step"``: all its
parts passed) or one part of it (``"test_train_step::loss of one step"``: that part passed, e.g.
the values of a step whose cost part a missing ``jax.jit`` failed).

Judged from the reported value's own form (*shape*: a student who controls the kernel can
send a value of that form without doing the work; kept for older tests, counted by
``jaxgrader trials``): ``finite``, ``falls``, ``all_equal``, ``all_distinct``,
``ratio_at_least``, ``agrees``, and the program texts of :func:`jaxgrader.checks.programs.lowered`
and :func:`jaxgrader.checks.programs.jaxpr` (``jitted``, ``same_program``, ``no_growth``,
``shard_shapes``, ``largest_value``), which a kernel can make from another function.

Taken on the kernel's word (``evidence="kernel"``): ``true``, ``at_most``, ``at_least``, and
any part marked so. A student who takes over the kernel can send whatever passes them.

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
         "shard_shapes", "largest_value", "cell_time", "program", "scores")
# A report bigger than this is refused here, with a message, instead of by the grader.
MAX_REPORT_BYTES = 2 * 2**20


def seed() -> int:
    """The grader's seed for this run (``JAXGRADER_SEED``; 0 outside grading)."""
    try:
        return int(os.environ.get("JAXGRADER_SEED", "0")) % 2**31
    except ValueError:
        return 0


# Written in a hidden test cell, filled in by the grader as it runs the cell (jaxgrader.grading.sandbox.marks;
# the same string there): a fresh value per cell and run, which no earlier cell can know.
NONCE_MARK = "{jaxgrader-nonce}"


def _nonce_words(nonce: str) -> list[int]:
    """32-bit words of a nonce (32 hex digits as the grader writes them; any other text is hashed, so a cell
    run outside grading, its mark unfilled, still draws the same values each time)."""
    import hashlib

    digits = nonce if len(nonce) == 32 and all(c in "0123456789abcdef" for c in nonce) else \
        hashlib.sha256(nonce.encode()).hexdigest()[:32]
    return [int(digits[k:k + 8], 16) for k in range(0, 32, 8)]


def key(i: int = 0, nonce: str | None = None):
    """A PRNG key drawn from the run's seed (and the cell's ``nonce``, for the inputs of a timed workload): the
    same in the student's and the reference run."""
    import jax

    k = jax.random.key(seed())
    for word in _nonce_words(nonce) if nonce is not None else ():
        k = jax.random.fold_in(k, word)
    return jax.random.fold_in(k, i)


def rng(i: int = 0, nonce: str | None = None) -> np.random.Generator:
    """A NumPy generator drawn from the run's seed (and the cell's ``nonce``, for the inputs of a timed
    workload), for data that need not be JAX arrays."""
    words = _nonce_words(nonce) if nonce is not None else []
    return np.random.default_rng([seed(), i, *words])


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
           bound: float | None = None, against: str | None = None, evidence: str | None = None,
           if_passed=(), if_failed=(), limits: dict | None = None, model=None, data=None) -> None:
    """Hand ``value`` to the grader under ``name`` (unique within the test cell).

    ``close`` tolerances are widened to :func:`precision_floor` where matmuls run at reduced precision.
    ``against``: the part whose reference value an ``agrees`` part is judged against;
    ``evidence="kernel"``: this part's value is the kernel's word; ``if_passed`` / ``if_failed``:
    grade ids of test cells that decide whether this part counts; ``limits``: bounds of a
    ``program`` or ``cell_time`` part; ``model`` and ``data``: what a ``scores`` part is scored with
    (see the module doc). Only the reference run's rule, tolerances and options count.
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
    for field, ids in (("if_passed", if_passed), ("if_failed", if_failed)):
        if ids:
            payload[field] = [str(i) for i in ([ids] if isinstance(ids, str) else ids)]
    if limits:
        payload["limits"] = {str(k): (v if isinstance(v, bool) else float(v)) for k, v in limits.items()}
    if model is not None:
        payload["model"] = encode(model)
    if data is not None:
        payload["data"] = encode(data)
    import json

    if len(json.dumps(payload)) > MAX_REPORT_BYTES:
        payload["value"] = {"$unencodable": f"more than {MAX_REPORT_BYTES} bytes"}
    from IPython.display import display

    display({MIME: payload}, raw=True)


__all__ = ["MIME", "NONCE_MARK", "RULES", "encode", "key", "report", "rng", "seed"]
