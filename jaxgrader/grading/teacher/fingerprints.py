"""Winnowed fingerprints of answer cells, from copydetect (the similarity pass: ``similarity``).

copydetect implements winnowing as MOSS does: code is tokenised (Pygments) and normalised (every name
becomes one letter, strings one letter, comments and whitespace go), k-grams of what is left are hashed,
and winnowing keeps a few of the hashes of every window, so that any match of ``GUARANTEE`` characters is
found and none under ``NOISE`` is. This module takes copydetect's tokeniser, winnowing, coverage, slices
and highlighting as they are, and adds two things: a cell's top-level definitions are put in one order
first, and k-grams are hashed with BLAKE2 instead of Python's ``hash()`` (seeded afresh in every process:
scores would move from run to run). Written answers are fingerprinted as text, whitespace collapsed.
"""

from __future__ import annotations

import ast
import dataclasses
import html
from hashlib import blake2b

NOISE = 25  # copydetect's defaults: k-grams of 25 characters of normalised code, a match of 30 is always found
GUARANTEE = 30
MAX_CHARS = 50_000  # of one cell: what a pasted megabyte would cost the teacher's report stays bounded


def _in_order(code: str) -> str:
    """The cell with its top-level statements in one order, whatever their names, comments and layout: sorted
    by the kinds of their syntax tree's nodes (unchanged if the cell does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    if len(tree.body) < 2:
        return code
    lines = code.splitlines(keepends=True)
    parts = [(" ".join(type(n).__name__ for n in ast.walk(node)),
              "".join(lines[min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1:
                            node.end_lineno])) for node in tree.body]
    return "\n".join(text for _, text in sorted(parts, key=lambda part: part[0]))


def _kgram_hashes(text: str, k: int):
    """Every k-gram of ``text`` hashed with BLAKE2 (copydetect hashes with ``hash()``, which Python seeds
    afresh in every process: winnowing would keep other fingerprints, and scores move, from run to run)."""
    import numpy as np

    hashes = [int.from_bytes(blake2b(text[i:i + k].encode(), digest_size=8).digest(), "little", signed=True)
              for i in range(len(text) - k + 1)]
    return np.fromiter(hashes, dtype=np.int64, count=len(hashes))


@dataclasses.dataclass
class Fingerprint:
    """One cell's winnowed fingerprints, as copydetect's ``CodeFingerprint`` holds them."""

    raw: str  # the text fingerprinted (a code cell's definitions in order; a written answer's words)
    filtered: str  # normalised: copydetect's filter_code (names, strings, comments, whitespace)
    offsets: object  # copydetect's map (a NumPy array) from normalised positions back to ``raw``
    hash_idx: dict  # hash -> positions in ``filtered``
    coverage: float = 0.0  # characters of ``filtered`` the fingerprints cover (copydetect's token coverage)

    @property
    def hashes(self) -> set:
        return set(self.hash_idx)

    def count(self) -> None:
        from copydetect.utils import get_token_coverage

        self.coverage = float(get_token_coverage(self.hash_idx, NOISE, len(self.filtered)))

    def drop(self, hashes: set) -> None:
        """Leave ``hashes`` out, as copydetect leaves out boilerplate."""
        for h in hashes & self.hash_idx.keys():
            del self.hash_idx[h]
        self.count()

    def slices(self, matched: set):
        """copydetect's slices of ``filtered`` covered by fingerprints in ``matched`` (None: none)."""
        import numpy as np
        from copydetect.utils import get_copied_slices

        hits = self.hash_idx.keys() & matched
        return get_copied_slices(np.concatenate([self.hash_idx[h] for h in hits]), NOISE) if hits else None


def fingerprint(kind: str, text: str, ignored: set = frozenset(), ordered: bool = True) -> Fingerprint:
    """One answer cell (``kind`` "code" or "text"), tokenised, normalised and winnowed by copydetect, without
    the hashes in ``ignored`` (what every student shares: copydetect's boilerplate)."""
    import numpy as np
    from copydetect.utils import filter_code, winnow

    text = text[:MAX_CHARS]
    if kind == "code":
        raw = _in_order(text) if ordered else text
        filtered, offsets = filter_code(raw, "cell.py", "python")
    else:
        raw = filtered = " ".join(text.split())
        offsets = np.array([])
    hashes, idx = winnow(_kgram_hashes(filtered, NOISE), GUARANTEE - NOISE + 1, remove_duplicates=False)
    print_ = Fingerprint(raw, filtered, offsets, {})
    for h, i in zip(hashes.tolist(), idx.tolist()):
        if h not in ignored:
            print_.hash_idx.setdefault(h, []).append(i)
    print_.count()
    return print_


def shared_hashes(paths) -> set:
    """Fingerprints of every cell of these notebooks (and Python files): what every student has."""
    from ..course.notebooks import NotebookError, read_notebook

    found = set()
    for path in paths:
        if path.suffix == ".py":
            cells = [("code", path.read_text(encoding="utf-8", errors="replace"))]
        else:
            try:
                cells = [("code" if c.cell_type == "code" else "text", c.source) for c in read_notebook(path).cells]
            except NotebookError:
                continue
        for kind, text in cells:
            found |= fingerprint(kind, text, ordered=False).hashes
    return found


def marked(print_: Fingerprint | None, other: set) -> str:
    """A cell as the student wrote it (its fingerprint with ``ordered=False``) as HTML, escaped, with the
    passages whose fingerprints are in ``other`` marked; None: an empty cell."""
    from copydetect.utils import highlight_overlap

    if print_ is None or not print_.raw.strip():
        return "<pre class='none'>(nothing)</pre>"
    slices = print_.slices(other)
    if slices is None:
        return f"<pre>{html.escape(print_.raw)}</pre>"
    escaped, _ = highlight_overlap(print_.raw, in_raw(print_, slices), "<mark>", "</mark>", escape_html=True)
    return f"<pre>{escaped}</pre>"


def in_raw(print_: Fingerprint, slices):
    """Slices of ``print_.filtered`` (normalised positions) as slices of ``print_.raw``, the text as written, as
    copydetect's compare_files maps them."""
    import numpy as np

    offsets = print_.offsets
    if not len(offsets):
        return slices
    return slices + offsets[:, 1][np.clip(np.searchsorted(offsets[:, 0], slices), 0, len(offsets) - 1)]
