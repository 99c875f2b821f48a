"""A literal's English text and the edition's: part names, printed lines, f-string fields carried over.

A hidden test's part names and a lecture's ``print`` strings are literals whose *rendered* text the
student reads (in feedback, in committed outputs); these patterns turn rendered English into the
edition's words, with each f-string value carried over.
"""

from __future__ import annotations

import ast
import copy
import re

from ..course.config import CourseError
from .translation_units import _LETTER, _is_text, _literal_text, _parse

def _node_parts(node) -> list[tuple[str, str]] | None:
    """A string literal as [("text", str) | ("field", its syntax)], or None if it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [("text", node.value)]
    if isinstance(node, ast.JoinedStr):
        return [("text", v.value) if isinstance(v, ast.Constant) else ("field", ast.dump(v)) for v in node.values]
    return None


def literal_parts(source: str) -> list[tuple[str, str]] | None:
    try:
        return _node_parts(ast.parse(f"(\n{source}\n)", mode="eval").body)
    except SyntaxError:
        return None


def literal_patterns(pairs, field: str = ".*?", last: str | None = None) -> list[tuple[re.Pattern, list]]:
    """(English, translated) literals, each as ``literal_parts``, as patterns matching the text the English
    literal renders to (f-string values captured by ``field``, or by ``last`` where the literal ends in
    one) with the translation's parts, for ``fill``.
    A pair whose translation has a field the English lacks is left out (that text stays English).
    Most literal text first: a text two patterns match takes the more specific one's translation."""
    out = []
    for en, ko in pairs:
        if en is None or ko is None:
            continue
        keys = {p: i for i, (kind, p) in reversed(list(enumerate(en))) if kind == "field"}
        if any(kind == "field" and p not in keys for kind, p in ko):
            continue
        pattern, seen = [], set()
        for i, (kind, p) in enumerate(en):
            if kind == "text":
                pattern.append(re.escape(p))
            else:
                capture = last if last is not None and i == len(en) - 1 else field
                pattern.append(f"(?P=f{keys[p]})" if keys[p] in seen else f"(?P<f{keys[p]}>{capture})")
                seen.add(keys[p])
        specific = sum(len(p) for kind, p in en if kind == "text")
        out.append((specific, re.compile("".join(pattern), re.DOTALL),
                    [(kind, p if kind == "text" else keys[p]) for kind, p in ko]))
    return [(pattern, parts) for _, pattern, parts in sorted(out, key=lambda item: -item[0])]


def _render(match, parts) -> str:
    return "".join(p if kind == "text" else match.group(f"f{p}") for kind, p in parts)


def fill(patterns: list[tuple[re.Pattern, list]], text: str) -> str:
    """``text`` (all of it) in the edition's words, by the first pattern that matches it whole; else as it is."""
    for pattern, parts in patterns:
        match = pattern.fullmatch(text)
        if match:
            return _render(match, parts)
    return text


def _printed(tree) -> list[ast.expr]:
    """The literal arguments of a cell's ``print`` calls, in a fixed order (two editions' cells pair up by it)."""
    return [arg for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print" for arg in node.args if _is_text(arg)]


def printed_outputs(english_cell, edition_source: str) -> list:
    """The English cell's outputs with what its ``print`` calls wrote in the edition's words: each printed
    literal whose edition differs is replaced where it appears in the cell's printed text (an f-string
    with its values carried over, within a line). Everything else (values, errors, results, images) is
    copied. Derived from the two cells' sources alone, so ``build`` and ``differences`` agree."""
    outputs = copy.deepcopy(list(english_cell.get("outputs", [])))
    english, edition = _parse(english_cell.source)[0], _parse(edition_source)[0]
    if english is None or edition is None or not any(o.get("output_type") == "stream" for o in outputs):
        return outputs
    pairs = [(_node_parts(a), _node_parts(b)) for a, b in zip(_printed(english), _printed(edition))
             if _node_parts(a) != _node_parts(b) and _LETTER.search(_literal_text(a))]
    patterns = literal_patterns(pairs, field=r"[^\n]*?", last=r"[^\n]*")  # a value is within its line
    if not patterns or len(_printed(english)) != len(_printed(edition)):
        return outputs
    for output in outputs:
        if output.get("output_type") == "stream":
            text = "".join(output["text"]) if isinstance(output["text"], list) else output["text"]
            for pattern, parts in patterns:
                text = pattern.sub(lambda m, parts=parts: _render(m, parts), text)
            output["text"] = text
    return outputs


def literal_fields(source: str) -> list[str] | None:
    """A string literal's f-string fields (as syntax, sorted), or None if ``source`` is not one literal."""
    parts = literal_parts(source)
    return None if parts is None else sorted(p for kind, p in parts if kind == "field")


def check_part(english: str, translated: str, where: str) -> None:
    """A part name's translation must be one string literal with the English's {fields}: the grader
    fills them from the name the reference run reported."""
    if literal_fields(translated) is None:
        raise CourseError(f"{where}: the translation of part name {english!r} must be one Python string literal")
    if literal_fields(translated) != literal_fields(english):
        raise CourseError(f"{where}: the translation of part name {english!r} must keep every {{field}} of it")
