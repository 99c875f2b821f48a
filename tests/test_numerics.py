"""The simulated accelerator (jaxgrader/simulated/accelerator.py) computes as the hardware does, and
the course's tolerances follow it.

Each case runs a fresh Python under the simulation (the harness changes JAX for the whole
process, so never in pytest's own). The notebooks themselves run under it elsewhere: the
trials in tests/test_assignments.py as a one-TPU grading host (bfloat16, one device, with the
grader's float32 matmul precision), the release notebooks in tests/test_colab.py as Colab's TPU
runtime (bfloat16, one device).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jaxgrader import course_style
from jaxgrader.simulated.accelerator import kernel_env, mantissa_bits, parse

PROBE = r'''
import json
import numpy as np
import jax, jax.numpy as jnp
from jaxgrader.checks.report import matmul_error, precision_floor

a = np.random.default_rng(0).normal(size=(32, 48)).astype(np.float32)
b = np.random.default_rng(1).normal(size=(48, 16)).astype(np.float32)

def bits(x, m):  # round to m mantissa bits, NumPy only
    return np.asarray(jax.lax.reduce_precision(jnp.asarray(x), 8, m))

out = {}
for m in (7, 10):
    want = bits(a, m).astype(np.float64) @ bits(b, m).astype(np.float64)
    out[f"rounded{m}"] = float(np.max(np.abs(np.asarray(jnp.dot(a, b), np.float64) - want)))
exact = a.astype(np.float64) @ b.astype(np.float64)
err = lambda x: float(np.max(np.abs(np.asarray(x, np.float64) - exact)) / np.max(np.abs(exact)))
out["default"] = err(jax.jit(jnp.matmul)(a, b))
out["einsum"] = err(jnp.einsum("ij,jk->ik", a, b))
out["highest"] = err(jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST))
with jax.default_matmul_precision("float32"):
    out["float32 context"] = err(jax.jit(jnp.matmul)(a, b))
g = jax.grad(lambda x: jnp.sum(x @ b))(a)  # backward matmul: ones @ b.T
out["grad"] = float(np.max(np.abs(np.asarray(g, np.float64) - b.sum(axis=1)[None, :])) / np.max(np.abs(b.sum(axis=1))))
out["devices"], out["cpu devices"] = len(jax.devices()), len(jax.devices("cpu"))
out["matmul_error"], out["floor"] = matmul_error(), list(precision_floor([np.ones(4)]))
# A norm's tangent along a direction orthogonal to x, two correct ways: the exact value is 0, and
# a dot's rounded operands leave 40 * 0.6 - 30 * 0.8 off by far more than float32's rounding.
x, t = jnp.array([3.0, 4.0]), jnp.array([40.0, -30.0])
unit = jax.jit(lambda x: x / jnp.sqrt(jnp.sum(x * x)))(x)
out["tangents"] = [float(jax.jit(jnp.dot)(unit, t)), float(jax.jit(lambda u, t: jnp.sum(u * t))(unit, t))]
out["tangent floor"] = list(precision_floor((jnp.sqrt(jnp.sum(x * x)), out["tangents"][1])))
ns = {}
exec(SETUP_CELL, ns)
out["setup tolerance"] = ns["matmul_tolerance"](1e-5, 1e-6)
print(json.dumps(out))
'''


GRADING = "bfloat16,one-device, as graded"  # a one-TPU grading host with the grader's matmul_precision


def _probe(spec: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    if spec == GRADING:
        spec, env["JAX_DEFAULT_MATMUL_PRECISION"] = spec.split(",", 1)[0] + ",one-device", "float32"
    env.update(kernel_env(spec))
    script = f"SETUP_CELL = {course_style.SETUP_CELL!r}\n{PROBE}"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def probes():
    return {spec: _probe(spec) for spec in ("", "bfloat16,one-device", "tensorfloat32", GRADING)}


def test_a_cpu_computes_float32_and_the_tolerances_stay_as_written(probes):
    cpu = probes[""]
    assert cpu["default"] < 1e-5 and cpu["highest"] < 1e-5
    assert cpu["floor"] == [0.0, 0.0]
    assert cpu["setup tolerance"] == {"rtol": 1e-5, "atol": 1e-6}
    assert cpu["devices"] == cpu["cpu devices"] == 4


@pytest.mark.parametrize("spec, mantissa", [("bfloat16,one-device", 7), ("tensorfloat32", 10)])
def test_reduced_precision_rounds_every_matmul_operand_and_honours_highest(probes, spec, mantissa):
    got = probes[spec]
    assert got[f"rounded{mantissa}"] < 1e-4, "jnp.dot is not the product of the rounded operands"
    assert 1e-4 < got["default"] < 1e-2 and 1e-4 < got["einsum"] < 1e-2
    assert got["grad"] > 1e-4, "the backward pass's matmul is not rounded"
    assert got["highest"] < 1e-5 and got["float32 context"] < 1e-5, "an explicit float32 precision is not honoured"
    assert got["floor"][0] > 1e-4 and got["floor"][1] > 1e-5, "report() does not widen its tolerances"
    widened = got["setup tolerance"]
    assert widened["rtol"] > 1e-4 and widened["atol"] > 1e-5, "the setup cell's matmul_tolerance does not widen"
    assert widened["rtol"] == 4 * got["matmul_error"], "the setup cell and report() measure differently"


def test_grading_kernels_compute_float32_matmuls_where_two_correct_answers_part_otherwise(probes):
    """The grader's kernels set JAX_DEFAULT_MATMUL_PRECISION=float32 (SandboxedKernelManager.matmul_precision):
    at the device's default, a correct answer computed with a dot and one computed elementwise differ by
    more than report()'s widened tolerance wherever the result cancels (here an exact 0); graded in
    float32 they agree as on a CPU, and no tolerance needs widening."""
    tpu, graded = probes["bfloat16,one-device"], probes[GRADING]
    (dot, elementwise), (rtol, atol) = tpu["tangents"], tpu["tangent floor"]
    assert abs(dot - elementwise) > atol + rtol * abs(elementwise), "the default precision no longer parts them"
    assert abs(graded["tangents"][0] - graded["tangents"][1]) < 1e-5
    assert graded["default"] < 1e-5 and graded["floor"] == [0.0, 0.0]


def test_one_device_shows_one_default_device_and_every_cpu(probes):
    got = probes["bfloat16,one-device"]
    assert got["devices"] == 1 and got["cpu devices"] == 4
    assert probes["tensorfloat32"]["devices"] == 4


def test_precision_levels_follow_the_hardware():
    assert mantissa_bits(None, "bfloat16") == 7 and mantissa_bits(None, "tensorfloat32") == 10
    assert mantissa_bits("highest", "bfloat16") is None and mantissa_bits("float32", "tensorfloat32") is None
    assert mantissa_bits("tensorfloat32", "tensorfloat32") == 10
    assert parse("bfloat16,one-device") == ("bfloat16", True)
    with pytest.raises(ValueError, match="JAXGRADER_SIMULATE"):
        parse("float16")
