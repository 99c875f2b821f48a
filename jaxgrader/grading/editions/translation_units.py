"""Translation units: the spans of an English notebook a translator translates, and nothing else.

Kept apart from the catalogs (``catalogs``) and the build (``build``) because this is the part that
decides what an edition may change: where units are found in a cell and how translations are put
back in their place (a translation must stay what its unit is). What two editions of a notebook may
differ in is ``differences``; literals whose rendered text is translated, ``literals``.
It knows nothing of catalogs, editions on disk or Babel.

Units (docs/translating.md):

* a markdown cell's paragraphs (blank-line separated; a table's rows one by one;
  fenced code blocks are copied, not translated, but for their whole-line comments);
* in a code cell, comments and the string literals a student reads: the literals an
  ``assert``'s message is made of (also one named in the assert and drawn from a literal list,
  as in ``for hint, case in [("...", ...)]: assert ..., hint``), those of the message an
  exception is raised with, docstrings, and the strings passed to ``print`` (those of two
  words or more, unless the same text is also data in the cell, e.g. a printed line the test
  then counts). Never inside a solution (``### BEGIN SOLUTION``) or a hidden test (``### BEGIN
  HIDDEN TESTS``): those stay byte-identical. Plot labels are not units: figures keep their
  English labels, so no notebook needs a font with Hangul.

Feedback units (``part_units``) are the one exception inside hidden tests: the name a hidden
test reports a part under is shown in the feedback a student reads, so an edition translates
it, but only there (``localize``); the hidden test itself is never changed.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

from ..course.config import CourseError

MARKERS = re.compile(r"^\s*###? (BEGIN|END) (SOLUTION|HIDDEN TESTS)\b")
# A markdown link: (opening, target, closing); the builder points copied targets into the edition.
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_LETTER = re.compile(r"[^\W\d_]")
_WORD = re.compile(r"[^\W\d_]{2,}")
_PRAGMA = re.compile(r"#\s*(noqa|type:|pragma|pylint|fmt:)")


# --------------------------------------------------------------------------- units


@dataclass(frozen=True)
class Unit:
    """A span of a cell's source that is translated as a whole."""

    start: int
    end: int
    kind: str  # "markdown", "comment", "string", or "part" (a feedback unit, never put back in the notebook)


def _has_text(markdown: str) -> bool:
    """Words outside HTML tags and link targets (a lone ``</details>`` is nothing to translate)."""
    return bool(_LETTER.search(re.sub(r"<[^>]+>|\]\([^)]*\)", "", markdown)))


_FENCE = re.compile(r"^\s*(?:(?:[-*+]|\d+[.)])\s+)?(```|~~~)")  # a fence, also one opened on a list item's line


def markdown_units(text: str) -> list[Unit]:
    """Paragraphs (table rows one by one); fenced code blocks are copied but for their whole-line
    comments (each a unit of its own); paragraphs without words are not units."""
    units, fence = [], None
    offset, block = 0, []  # block: (start, end) of the current paragraph's lines
    lines = text.splitlines(keepends=True)

    def close():
        if not block:
            return
        start, end = block[0][0], block[-1][1]
        if all(text[s:e].lstrip().startswith("|") for s, e in block):
            units.extend(Unit(s, s + len(text[s:e].rstrip("\n")), "markdown") for s, e in block
                         if _has_text(text[s:e]))
        elif _has_text(text[start:end]):
            units.append(Unit(start, start + len(text[start:end].rstrip("\n")), "markdown"))
        block.clear()

    for line in lines:
        start, offset = offset, offset + len(line)
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            elif stripped.startswith("#") and _LETTER.search(stripped) and not _PRAGMA.match(stripped):
                begin = start + line.index("#")
                units.append(Unit(begin, begin + len(line.rstrip("\n")) - line.index("#"), "comment"))
            continue
        opened = _FENCE.match(line)
        if opened:
            close()
            fence = opened.group(1)
            continue
        if not stripped:
            close()
            continue
        block.append((start, offset))
    close()
    return units


def _lines(source: str) -> list[str]:
    """Lines as Python counts them (split at newlines only, kept), unlike ``str.splitlines``."""
    return io.StringIO(source).readlines()


def _magic(line: str) -> bool:
    return line.lstrip()[:1] in ("%", "!")


def _parse(source: str):
    """(tree, text parsed): the cell, or where it is not Python, the cell with its IPython magic and
    shell lines replaced by ``pass`` (same line positions); (None, source) if neither parses."""
    masked = "".join(re.sub(r"^(\s*).*?(\n?)$", r"\1pass\2", line) if _magic(line) else line
                     for line in _lines(source))
    for text in (source, masked):
        try:
            return ast.parse(text), text
        except SyntaxError:
            pass
    return None, source


def _excluded_lines(source: str) -> set[int]:
    """1-based lines of solutions and hidden tests: never translated, byte-identical in every edition."""
    out, inside = set(), False
    for number, line in enumerate(_lines(source), start=1):
        if re.match(r"^\s*### BEGIN (SOLUTION|HIDDEN TESTS)", line):
            inside = True
        if inside or MARKERS.match(line):
            out.add(number)
        if re.match(r"^\s*### END (SOLUTION|HIDDEN TESTS)", line):
            inside = False
    return out


def _offsets(source: str):
    """Character offset of (1-based line, column) where the column is in characters or UTF-8 bytes."""
    lines = _lines(source) or [""]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(line: int, col: int, in_bytes: bool = False) -> int:
        text = lines[line - 1] if line - 1 < len(lines) else ""
        if in_bytes:
            col = len(text.encode("utf-8")[:col].decode("utf-8", errors="ignore"))
        return starts[line - 1] + col

    return at


def _literal_text(node) -> str:
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else ""
    return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))


def _is_text(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _named_messages(tree) -> list[ast.expr]:
    """Literals an ``assert`` names as its message through a loop variable:
    ``for hint, case in [("message", ...), ...]: assert ..., hint``."""
    names = {node.msg.id for node in ast.walk(tree) if isinstance(node, ast.Assert) and isinstance(node.msg, ast.Name)}
    found = []
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, (ast.List, ast.Tuple))):
            continue
        targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        for k, target in enumerate(targets):
            if not (isinstance(target, ast.Name) and target.id in names):
                continue
            for item in loop.iter.elts:
                element = item if len(targets) == 1 else (item.elts[k] if isinstance(item, ast.Tuple)
                                                          and len(item.elts) == len(targets) else None)
                if element is not None and _is_text(element):
                    found.append(element)
    return found


def _message_literals(node) -> list[ast.expr]:
    """The literals a message is made of: the message itself, the operands of ``+``, both branches of
    ``a if c else b`` (never the condition, nor a call's arguments: those are data)."""
    if _is_text(node):
        return [node]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message_literals(node.left) + _message_literals(node.right)
    if isinstance(node, ast.IfExp):
        return _message_literals(node.body) + _message_literals(node.orelse)
    return []


def _docstrings(tree) -> list[ast.expr]:
    """Docstrings of the cell's functions and classes (and a cell that opens with a string)."""
    return [node.body[0].value for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)]


def _read_strings(tree) -> list[tuple[ast.expr, bool]]:
    """String literals a student reads: (node, always) for messages (always: what an assert's or an
    exception's message is made of) and docstrings, and print arguments (only when worded, and not when
    the same text is data elsewhere in the cell)."""
    found, printed = [(node, True) for node in _docstrings(tree)], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is not None:
            found.extend((literal, True) for literal in _message_literals(node.msg))
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            found.extend((literal, True) for literal in _message_literals(node.exc.args[0]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            printed.extend(arg for arg in node.args if _is_text(arg))
    found += [(node, True) for node in _named_messages(tree)]
    taken = {id(node) for node, _ in found} | {id(node) for node in printed}
    data = {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in taken}
    found += [(node, False) for node in printed if not (isinstance(node, ast.Constant) and node.value in data)]
    return found


def code_units(source: str) -> list[Unit]:
    """Comments and read strings outside solutions and hidden tests; none in a cell Python cannot parse."""
    tree, masked = _parse(source)
    if tree is None:
        return []
    excluded, at = _excluded_lines(source), _offsets(source)
    units = []
    for node, always in _read_strings(tree):
        if node.lineno in excluded or node.end_lineno in excluded:
            continue
        if always and _LETTER.search(_literal_text(node)) or len(_WORD.findall(_literal_text(node))) >= 2:
            units.append(Unit(at(node.lineno, node.col_offset, True), at(node.end_lineno, node.end_col_offset, True),
                              "string"))
    for tok in tokenize.generate_tokens(io.StringIO(masked).readline):
        if tok.type == tokenize.COMMENT and tok.start[0] not in excluded and not _PRAGMA.match(tok.string) \
                and _LETTER.search(tok.string):
            units.append(Unit(at(*tok.start), at(*tok.end), "comment"))
    return sorted(units, key=lambda u: u.start)


REPORT_MODULE = "jaxgrader.checks.report"


def _report_names(tree) -> set[str]:
    """The names a cell binds to ``jaxgrader.checks.report.report`` (``from ... import report as _report``)."""
    return {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == REPORT_MODULE
            for alias in node.names if alias.name == "report"}


def part_units(source: str) -> list[Unit]:
    """Feedback units of a test cell: each part's name, the first argument of a ``report`` call when it
    is a string literal (``_report(f"b (scale={_scale})", ...)``). The verdict shows these names in
    feedback, so an edition translates them there; they sit in hidden tests, so the notebook keeps
    them as they are (``translate_text`` is never given these units)."""
    tree, _ = _parse(source)
    if tree is None:
        return []
    names, at = _report_names(tree), _offsets(source)
    units = [Unit(at(node.args[0].lineno, node.args[0].col_offset, True),
                  at(node.args[0].end_lineno, node.args[0].end_col_offset, True), "part")
             for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
             and node.args and _is_text(node.args[0]) and _LETTER.search(_literal_text(node.args[0]))]
    return sorted(set(units), key=lambda u: u.start)


def cell_units(cell) -> list[Unit]:
    if cell.cell_type == "markdown":
        return markdown_units(cell.source)
    if cell.cell_type == "code":
        return code_units(cell.source)
    return []


# --------------------------------------------------------------------------- putting translations back


def _check(unit: Unit, english: str, translated: str, where: str) -> None:
    """A translation must stay what its unit is: a comment a one-line comment, a string one literal."""
    if unit.kind == "comment" and (not translated.startswith("#") or "\n" in translated):
        raise CourseError(f"{where}: the translation of comment {english!r} must be one line starting with '#'")
    if unit.kind == "string":
        try:
            node = ast.parse(f"(\n{translated}\n)", mode="eval").body
        except SyntaxError:
            node = None
        if not isinstance(node, (ast.Constant, ast.JoinedStr)) or (isinstance(node, ast.Constant)
                                                                  and not isinstance(node.value, str)):
            raise CourseError(f"{where}: the translation of {english!r} must be one Python string literal")


def translate_text(text: str, units: list[Unit], lookup, where: str, relink=None) -> str:
    """``text`` with each unit replaced by ``lookup(english)`` (None: keep the English); markdown units
    then pass through ``relink(unit, targets copied from the English)``, everything between is copied."""
    out, last = [], 0
    for unit in units:
        english = text[unit.start:unit.end]
        translated = lookup(english)
        if translated is not None:
            _check(unit, english, translated, where)
        new = english if translated is None else translated
        if relink is not None and unit.kind == "markdown":
            new = relink(new, {m.group(2) for m in LINK.finditer(english)})
        out += [text[last:unit.start], new]
        last = unit.end
    return "".join(out) + text[last:]
