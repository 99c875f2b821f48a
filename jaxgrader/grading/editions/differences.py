"""What two editions of a notebook may differ in: translated text only.

``tests/test_translation.py`` holds every edition to ``differences``: same cells, ids, metadata,
points and code (compared as syntax trees with read strings blanked), solutions and hidden tests
byte for byte, outputs but for the text of translated ``print`` strings.
"""

from __future__ import annotations

import ast
import copy

from .literals import printed_outputs
from .translation_units import _excluded_lines, _lines, _magic, _parse, _read_strings

def code_skeleton(source: str) -> str:
    """A code cell with its read strings blanked and comments gone: what no edition may change."""
    tree, _ = _parse(source)
    if tree is None:
        return source
    for node, _ in _read_strings(tree):
        fields = sorted(ast.dump(v) for v in getattr(node, "values", []) if isinstance(v, ast.FormattedValue))
        if isinstance(node, ast.JoinedStr):
            node.values = [ast.Constant(value="|".join(fields))]
        else:
            node.value = ""
    magics = [line.strip() for line in source.splitlines() if _magic(line)]
    return ast.dump(tree) + "\n" + "\n".join(magics)


def _protected(source: str) -> str:
    """Solutions and hidden tests: the lines no edition touches."""
    lines = _lines(source)
    return "".join(lines[n - 1] for n in sorted(_excluded_lines(source)))


def differences(english, edition_nb, name: str = "") -> list[str]:
    """Everything in which two editions of a notebook differ apart from translated text."""
    out = []
    if english.metadata != edition_nb.metadata:
        out.append(f"{name}: notebook metadata differ")
    if len(english.cells) != len(edition_nb.cells):
        return out + [f"{name}: {len(english.cells)} cells in English, {len(edition_nb.cells)} in the edition"]
    for i, (a, b) in enumerate(zip(english.cells, edition_nb.cells), start=1):
        where = f"{name} cell {i}"
        if a.cell_type != b.cell_type or a.get("id") != b.get("id"):
            out.append(f"{where}: cell type or id differ ({a.cell_type} {a.get('id')} / {b.cell_type} {b.get('id')})")
            continue
        meta_a, meta_b = copy.deepcopy(dict(a.metadata)), copy.deepcopy(dict(b.metadata))
        for meta in (meta_a, meta_b):  # nbgrader's checksum hashes the (translated) source
            meta.get("nbgrader", {}).pop("checksum", None)
        if meta_a != meta_b:
            out.append(f"{where}: metadata differ (grade id, points or other)")
        if a.get("attachments") != b.get("attachments"):
            out.append(f"{where}: attachments differ")
        if a.cell_type == "code":
            if printed_outputs(a, b.source) != b.get("outputs"):
                out.append(f"{where}: outputs differ (other than the text of translated print strings)")
            if code_skeleton(a.source) != code_skeleton(b.source):
                out.append(f"{where}: code differs (only comments, assert messages and print strings may)")
            if _protected(a.source) != _protected(b.source):
                out.append(f"{where}: a solution or hidden test is not byte-identical")
        elif a.cell_type == "raw" and a.source != b.source:
            out.append(f"{where}: raw cell differs")
    return out
