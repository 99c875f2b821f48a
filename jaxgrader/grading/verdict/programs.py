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

import bisect
import itertools
import math
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
    text, count = _plain(text), 0
    for line in text.splitlines():
        left, sep, _ = line.partition(" = ")
        tokens = left.split()
        if sep and tokens and all(":" in token for token in tokens):
            count += 1
    return count


__all__ = ["describe", "equation_count", "main_signature"]


# --------------------------------------------------------------------------- printed jaxprs
# Typed variables print as ``name:dtype[dims]`` (a sharding note such as ``{V:data}`` may
# follow); literals such as ``2.0:f32[]`` start with a digit and are not variables.
_VAR = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z_0-9]*):([a-z]+[0-9]*)\[([0-9,\s]*)\]")
_OUTER = re.compile(r"^\{ lambda ", re.M)  # the start of an unindented program
_COLOR = re.compile(r"\x1b\[[0-9;]*m")  # JAX colours a printed jaxpr where it thinks a terminal reads it


def _plain(text: str) -> str:
    return _COLOR.sub("", text)


def _typed_at(text: str) -> list[tuple[int, str, str, tuple[int, ...]]]:
    """(position, name, dtype, shape) of every typed variable; a dimension of more than 12 digits
    (no real program has one, a made-up text may) makes its variable unreadable, so skipped."""
    out = []
    for match in _VAR.finditer(text):
        dims = match.group(3).replace(" ", "").replace("\n", "").split(",")
        if all(len(d) <= 12 for d in dims):
            out.append((match.start(), match.group(1), match.group(2), tuple(int(d) for d in dims if d)))
    return out


def _typed(text: str) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(name, dtype, shape) for _, name, dtype, shape in _typed_at(_plain(text))]


def _is_jaxpr(text) -> bool:
    return isinstance(text, str) and "lambda" in text


def jaxpr_inputs(text) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """(dtype, shape) of each input of the outermost program of a printed jaxpr, or None.

    The outermost program is the unindented ``{ lambda ; ...`` (newer JAX prints programs
    shared by several equations first, as ``let jaxpr = { lambda ...} in``). The inputs tie
    a reported program to the run's data, whose shapes are drawn for the run.
    """
    if not _is_jaxpr(text):
        return None
    text = _plain(text)
    starts = [m.end() for m in _OUTER.finditer(text)]
    if not starts:
        return None
    semicolon = text.find(";", starts[-1])  # constants (captured arrays) come before it
    stop = text.find(". let", semicolon)
    if semicolon < 0 or stop < 0:
        return None
    return tuple((dtype, shape) for _, dtype, shape in _typed(text[semicolon + 1:stop]))


def largest_value(text) -> int | None:
    """The most entries of any value in a printed jaxpr (nested programs included); None if not a jaxpr.

    A Hessian-vector product that builds the Hessian shows an ``n x n`` value here.
    """
    if not _is_jaxpr(text):
        return None
    return max((math.prod(shape) for _, _, shape in _typed(text)), default=0)


def _closing_brackets(text: str) -> dict[int, int]:
    """Position of each ``[`` -> just past the ``]`` that closes it (types like ``f32[3,5]`` nest
    evenly); one pass, so a text full of brackets costs no more than its length."""
    pairs, stack = {}, []
    for match in re.finditer(r"[\[\]]", text):
        if match.group() == "[":
            stack.append(match.start())
        elif stack:
            pairs[stack.pop()] = match.end()
    return pairs


MAX_SHARD_MAPS = 64  # more than any program of the course has; a longer made-up text is not read further


def shard_map_shapes(text) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """(shape outside, shape each device sees) of every input of every ``shard_map`` in a printed
    jaxpr; None if the text is not a jaxpr.

    Each ``shard_map[...]`` equation names its operands after the closing bracket; their
    types are where they were last defined above it, and the per-device types are the
    inputs of the program in its ``jaxpr=`` parameter (printed inline, or, in newer JAX,
    by name as a shared ``let <name> = { lambda ...}``). Linear in the text's length: the
    text comes from a student's kernel.
    """
    if not _is_jaxpr(text):
        return None
    text, pairs = _plain(text), []
    closing = _closing_brackets(text)
    defined: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
    for pos, name, _, shape in _typed_at(text):
        defined.setdefault(name, []).append((pos, shape))
    for match in itertools.islice(re.finditer(r"\bshard_map\[", text), MAX_SHARD_MAPS):
        end = closing.get(match.end() - 1, len(text))
        params = text[match.end():end - 1]
        body = re.search(r"\bjaxpr=(\{ lambda [^;]*;|[A-Za-z_]\w*)", params)
        if body is None:
            continue
        if body.group(1).startswith("{"):
            start = match.end() + body.end()
        else:
            shared = re.search(rf"\b{re.escape(body.group(1))} = \{{ lambda [^;]*;", text)
            if shared is None:
                continue
            start = shared.end()
        stop = text.find(". let", start, start + 100_000)
        inner = _typed(text[start:stop if stop >= 0 else start])
        operands = text[end:end + 10_000].split("\n", 1)[0].split()
        for name, (_, _, inner_shape) in zip(operands, inner):
            before = defined.get(name, [])
            k = bisect.bisect_left(before, (match.start(),))
            if k:
                pairs.append((before[k - 1][1], inner_shape))
    return pairs


__all__ += ["jaxpr_inputs", "largest_value", "shard_map_shapes"]
