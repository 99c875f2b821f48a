"""Facts read, outside the kernel, from program text a hidden test reported.

A kernel can claim anything about a program ("it is jitted", "the loop is a scan").
So hidden tests report the program itself, as JAX printed it for the run's inputs:
the lowered StableHLO module of a jitted function (``f.lower(*args).as_text()``) or
the jaxpr of a traced one (``str(jax.make_jaxpr(f)(*args))``). The grader parses
that text here and compares what it finds with the same text from the reference
run. To send a passing text a student has to produce the program: the right
arguments traced (not static), the right types, one program for every call.
"""

from __future__ import annotations

import re

_MAIN = re.compile(r"func\.func public @main\((.*)\)\s*->\s*(.*?)\s*\{\s*$", re.M)
_TYPE = re.compile(r"tensor<[^>]*>|!stablehlo\.token")


def main_signature(text) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(argument types, result types) of the ``main`` function of a lowered module, or None.

    None when ``text`` is not a lowered JAX module (a function that is not jitted has no
    ``.lower``, and its test reports no text). Argument names and attributes (shardings,
    result names) are dropped: only the types say what is traced and what comes out.
    """
    if not isinstance(text, str) or not text.lstrip().startswith("module @jit"):
        return None
    match = _MAIN.search(text)
    if match is None:
        return None
    args, results = match.group(1), match.group(2)
    return tuple(_TYPE.findall(args)), tuple(_TYPE.findall(results))


def describe(args) -> str:
    """A short description of a program's argument types for a verdict message (None: no program)."""
    if args is None:
        return "no lowered program (is the function wrapped in jax.jit?)"
    shown = ", ".join(args[:4]) + (", ..." if len(args) > 4 else "")
    return f"{len(args)} traced arguments ({shown})"


def equation_count(text) -> int | None:
    """Equations in a printed jaxpr, nested programs (scan, jit, shard_map bodies) included; None if none.

    An equation is a line ``outs = primitive[...] ins`` whose left side is typed variables
    (``a:f32[3]``); parameters (``name=f``) have no spaces around ``=``.
    """
    if not isinstance(text, str) or "lambda" not in text:
        return None
    count = 0
    for line in text.splitlines():
        left, sep, _ = line.partition(" = ")
        tokens = left.split()
        if sep and tokens and all(":" in token for token in tokens):
            count += 1
    return count


__all__ = ["describe", "equation_count", "main_signature"]
