"""Program text for hidden tests to report: what JAX built from the student's function.

A fact about a compiled program ("jitted", "the learning rate is traced, not
static", "one program for every step", "a scan, not an unrolled loop") is not
reported as a bool the test worked out here, which a student controlling the
kernel could rewrite, but as the program itself, printed by JAX for the run's
inputs. The grader parses it outside the kernel (``jaxgrader.grading.verdict.programs``)
and compares it with the reference run's: to send a passing one, a student has
to have written that program. Rules: ``jitted``, ``same_program`` (lowered text),
``no_growth`` (jaxpr text); see ``jaxgrader.checks.report``.

Program text alone is the kernel's word about a program: a kernel can print the text of
another function (re-jitted, traced on something trivial). :func:`exported` hands the grader
the program itself, serialized by ``jax.export``: the grader *runs* it, outside the kernel,
on inputs the kernel never saw, so a program that passes computes the answer (rule
``program``), and its form (largest value, number of operations, shardings) is read off the
same program that computed it.
"""

from __future__ import annotations

import jax


def lowered(fn, *args, **kwargs) -> str | None:
    """``fn.lower(*args).as_text()``, the StableHLO module ``jax.jit`` builds, or None when ``fn`` is not jitted.

    Lowering traces but does not compile, so it costs little and counts no compilation.
    """
    lower = getattr(fn, "lower", None)
    if not callable(lower):
        return None
    return lower(*args, **kwargs).as_text()


def jaxpr(fn, *args, **kwargs) -> str:
    """The printed jaxpr of ``fn`` on ``args`` (nested programs included), without terminal colours
    (JAX colours it where it guesses a terminal, as in some kernels)."""
    return jax.make_jaxpr(fn)(*args, **kwargs).pretty_print(use_color=False)


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def donated_inputs(fn, args, static: dict) -> tuple[int, ...]:
    """The flat inputs a jitted ``fn`` donates (``donate_argnums``), read from JAX's own lowering of it: the
    arguments of its ``main`` that alias an output or are marked buffer donors. Empty for a function that is not
    jitted (nothing to donate) or does not lower."""
    import re

    lower = getattr(fn, "lower", None)
    if not callable(lower):
        return ()
    try:
        text = lower(*args, **static).as_text()
    except Exception:  # noqa: BLE001  what does not lower donates nothing here; the program says the rest
        return ()
    main = next((line for line in text.splitlines() if re.search(r"func\.func public @main\(", line)), "")
    signature = main.split(") ->")[0]
    pieces = re.split(r"%arg\d+:", signature)[1:]
    return tuple(i for i, piece in enumerate(pieces) if "tf.aliasing_output" in piece or "jax.buffer_donor" in piece)


def exported(fn, *args, static: dict | None = None) -> dict:
    """``fn`` on ``args`` as a program the grader can run: ``{"program": bytes, "inputs": [arrays],
    "outputs": [arrays]}``.

    The arguments are flattened to arrays (PRNG keys as their key data, wrapped again inside), the
    outputs likewise, so the grader needs neither the notebook's pytree classes nor its keys;
    ``static``: keyword arguments passed as they are (e.g. ``n_steps`` of a Python loop). The program
    is whatever ``fn`` traces to under ``jax.jit`` (jitted or not: whether the student jitted ``fn`` is
    a cost, measured elsewhere); sharded arguments keep their shardings. ``inputs`` are the flat
    arguments, from which the grader draws its own (``jaxgrader.grading.verdict.artifacts``);
    ``outputs`` what ``fn`` itself returned on them, called as the notebook calls it: the grader runs the
    program on ``inputs`` too and requires the same, so the program judged is the one the function runs.
    The inputs a jitted ``fn`` donates are donated in the program too (``donated_inputs``).
    """
    import numpy as np
    from jax import export

    leaves, treedef = jax.tree.flatten(args)
    impls = [jax.random.key_impl(x) if _is_key(x) else None for x in leaves]
    flat = [jax.random.key_data(x) if impl is not None else jax.numpy.asarray(x) for x, impl in zip(leaves, impls)]
    static = dict(static or {})

    def flat_fn(*xs):
        xs = [x if impl is None else jax.random.wrap_key_data(x, impl=impl) for x, impl in zip(xs, impls)]
        out = fn(*jax.tree.unflatten(treedef, xs), **static)
        return [jax.random.key_data(o) if _is_key(o) else o for o in jax.tree.leaves(out)]

    shardings = [getattr(x, "sharding", None) for x in flat]
    named = [s if isinstance(s, jax.sharding.NamedSharding) else None for s in shardings]
    # the inputs fn itself donates stay donated in the program, where the grader reads them (limit "donation")
    donated = donated_inputs(fn, args, static)
    jitted = jax.jit(flat_fn, in_shardings=named, donate_argnums=donated) if any(named) else \
        jax.jit(flat_fn, donate_argnums=donated)
    program = export.export(jitted)(*flat)
    copies = jax.tree.map(lambda x: x.copy() if isinstance(x, jax.Array) else x, args)  # fn may donate them
    returned = fn(*copies, **static)
    outputs = [jax.random.key_data(o) if _is_key(o) else o for o in jax.tree.leaves(returned)]
    return {"program": np.frombuffer(bytes(program.serialize()), np.uint8),
            "inputs": [np.asarray(x) for x in flat], "outputs": [np.asarray(o) for o in outputs]}


__all__ = ["donated_inputs", "exported", "jaxpr", "lowered"]
