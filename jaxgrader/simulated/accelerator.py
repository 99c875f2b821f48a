"""A CPU that computes like an accelerator: reduced-precision float32 matmuls, one device.

Why: JAX's default float32 matmul precision is lower off the CPU (bfloat16 operands on a
TPU, TensorFloat-32 on Ampere-and-newer GPUs: relative errors near 1e-3), and a Colab GPU or
TPU v5e-1 runtime shows one device. XLA:CPU ignores ``jax_default_matmul_precision``, so a
test suite on a CPU sees neither, and a visible test with ``rtol=1e-5`` that rejects a
correct answer on a TPU passes here. This harness makes both visible on a CPU:

* ``bfloat16`` (a TPU) or ``tensorfloat32`` (an A100/L4/H100): every float32 operand of a
  ``dot_general`` or a convolution is rounded to 7 (bfloat16) or 10 (TF32) mantissa bits
  in the compiled program (``stablehlo.reduce_precision``), forward and backward, in jnp,
  lax, einsum and Keras alike, since it is the CPU lowering of the primitives that
  changes. The products of such operands are exact in float32, as on the hardware, so
  accumulation stays float32. An explicit precision is honoured as the hardware does:
  ``precision=HIGHEST`` (or ``jax.default_matmul_precision("float32")``, which JAX turns
  into the same parameter when it traces) computes in full float32; ``HIGH`` is
  TF32 on a GPU and three bfloat16 passes on a TPU (simulated as 16 mantissa bits).
* ``one-device``: ``jax.devices()`` and friends, asked for the default backend, report
  only its first device, as on a one-accelerator runtime; ``jax.devices("cpu")`` still
  lists every (simulated) CPU device, as it does beside a GPU or TPU.

Installed at interpreter start-up by ``site/sitecustomize.py`` when ``JAXGRADER_SIMULATE``
names a mode, e.g. ``JAXGRADER_SIMULATE=bfloat16,one-device``; :func:`kernel_env` gives a
kernel's environment for it. Imports only JAX: it also runs where ``jaxgrader`` is not
installed. Tests only; grading never uses it.
"""

from __future__ import annotations

import os

NUMERICS = {"bfloat16": "tpu", "tensorfloat32": "gpu"}  # simulated numerics -> the backend that has them
ONE_DEVICE = "one-device"
ENV = "JAXGRADER_SIMULATE"
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")

# Mantissa bits of a float32 matmul operand, per simulated backend and precision level
# (JAX's docs, "default_matmul_precision"); None: full float32.
_BITS = {
    "tpu": {"DEFAULT": 7, "HIGH": 16, "HIGHEST": None},
    "gpu": {"DEFAULT": 10, "HIGH": 10, "HIGHEST": None},
}
_LEVEL = {"default": "DEFAULT", "bfloat16": "DEFAULT", "fastest": "DEFAULT", "high": "HIGH",
          "tensorfloat32": "HIGH", "highest": "HIGHEST", "float32": "HIGHEST"}
_installed: set[str] = set()


def parse(spec: str) -> tuple[str | None, bool]:
    """(numerics or None, one device?) from e.g. ``"bfloat16,one-device"``; a one-line error otherwise."""
    words = [w.strip() for w in spec.split(",") if w.strip()]
    unknown = [w for w in words if w not in NUMERICS and w != ONE_DEVICE]
    numerics = [w for w in words if w in NUMERICS]
    if unknown or len(numerics) > 1:
        raise ValueError(f"{ENV}={spec!r}: expected one of {sorted(NUMERICS)} and/or {ONE_DEVICE!r}, "
                         "separated by commas")
    return (numerics[0] if numerics else None), ONE_DEVICE in words


def kernel_env(spec: str) -> dict[str, str]:
    """Environment variables that make a kernel (or any Python) start under ``spec``."""
    parse(spec)
    return {ENV: spec, "PYTHONPATH": SITE_DIR}


def mantissa_bits(precision, numerics: str) -> int | None:
    """Mantissa bits the simulated backend keeps of a float32 operand for a dot's ``precision``
    parameter (None: full float32). An explicit dot algorithm is computed as written."""
    if precision is None:
        level = "DEFAULT"
    elif isinstance(precision, (tuple, list)):  # (lhs, rhs): the more precise one decides
        levels = [mantissa_bits(p, numerics) for p in precision]
        return None if None in levels else max(levels)
    else:
        name = getattr(precision, "name", None) or str(precision)
        level = _LEVEL.get(name.lower(), name.upper())
    row = _BITS[NUMERICS[numerics]]
    return row[level] if level in row else None


def install_numerics(numerics: str) -> None:
    """Round float32 operands of every dot and convolution that XLA:CPU compiles from now on."""
    if numerics in _installed:
        return
    import numpy as np
    from jax._src import core
    from jax._src.interpreters import mlir
    from jax._src.lax import convolution, lax
    from jax._src.lib.mlir.dialects import hlo

    def rounded(value, aval, bits):
        if bits is None or getattr(aval, "dtype", None) != np.float32:
            return value
        return hlo.reduce_precision(value, mlir.i32_attr(8), mlir.i32_attr(bits))

    for primitive in (lax.dot_general_p, convolution.conv_general_dilated_p):
        entry = mlir._platform_specific_lowerings["cpu"].get(primitive) or mlir._lowerings[primitive]
        rule = getattr(entry, "rule", entry)

        def lowering(ctx, lhs, rhs, *args, _rule=rule, precision=None, **params):
            bits = mantissa_bits(precision, numerics)
            lhs_aval, rhs_aval = ctx.avals_in[:2]
            return _rule(ctx, rounded(lhs, lhs_aval, bits), rounded(rhs, rhs_aval, bits), *args,
                         precision=precision, **params)

        mlir.register_lowering(primitive, lowering, platform="cpu")
    del core
    _installed.add(numerics)


def install_one_device() -> None:
    """The default backend reports one device (a Colab GPU or TPU v5e-1 runtime)."""
    if ONE_DEVICE in _installed:
        return
    import jax
    from jax._src import xla_bridge

    def first(listing):
        def devices(backend=None):
            found = listing(backend)
            return found if backend is not None else found[:1]
        return devices

    def local(listing):
        def local_devices(process_index=None, backend=None, host_id=None):
            found = listing(process_index, backend, host_id)
            return found if backend is not None else found[:1]
        return local_devices

    def count(counter):
        def device_count(backend=None):
            return counter(backend) if backend is not None else 1
        return device_count

    for module in (jax, xla_bridge):
        module.devices = first(module.devices)
        module.local_devices = local(module.local_devices)
        module.device_count = count(module.device_count)
        module.local_device_count = count(module.local_device_count)
    _installed.add(ONE_DEVICE)


def install(spec: str) -> None:
    """Install what ``spec`` names (see :func:`parse`)."""
    numerics, one_device = parse(spec)
    if numerics:
        install_numerics(numerics)
    if one_device:
        install_one_device()


def install_from_env() -> None:
    """Install what ``JAXGRADER_SIMULATE`` names, if anything (called by ``site/sitecustomize.py``)."""
    if os.environ.get(ENV):
        install(os.environ[ENV])


def write_kernelspec(directory, spec: str, *, name: str = "python3", python: str = "python",
                     env: dict[str, str] | None = None) -> str:
    """A kernelspec ``name`` under ``directory/kernels`` whose kernels start under ``spec``;
    returns ``directory``, for ``JUPYTER_PATH`` (searched before the environment's own kernels).
    ``python`` "python" is the grader's own interpreter, as in ipykernel's native spec."""
    import json

    path = os.path.join(os.fspath(directory), "kernels", name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "kernel.json"), "w") as fh:
        json.dump({"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   "display_name": f"Python 3 ({spec}, simulated)", "language": "python",
                   "env": {**(env or {}), **kernel_env(spec)}}, fh)
    return os.fspath(directory)


class simulated_kernels:
    """``with simulated_kernels(directory, spec):`` every ``python3`` kernel started meanwhile (by
    nbclient, nbgrader, the grader's sandbox, processes spawned here) runs under ``spec``."""

    def __init__(self, directory, spec: str):
        self.path = write_kernelspec(directory, spec)

    def __enter__(self):
        self.saved = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (self.path, self.saved) if p)
        return self

    def __exit__(self, *exc):
        if self.saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = self.saved
