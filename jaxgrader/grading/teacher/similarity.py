"""Similar submissions: pairs whose answers are unusually alike, a list for the teacher to read.

``jaxgrader similarity [-a A]`` prints the pairs and writes ``reports/<A>-similarity.html``; the class
report has the same section after every ``jaxgrader grade`` (docs/grading.md, "Similar submissions").
Nothing here changes a grade or decides anything: a pair is a reason to read two notebooks.

What is compared: each submission's answers, from ``submitted/`` (its solution cells, its written
answers, and code cells the student added), across the assignment and the editions placed beside it
(``lesson1-ko``), as copydetect's winnowed fingerprints (``fingerprints``): names, strings, comments,
whitespace and the order of a cell's definitions do not count.

What is ignored: every cell of the release, in every edition (the setup cell, the starter code, the
visible tests, the prompts), the course's other shared files (``c.Similarity.shared_code``: the lecture),
and any passage found in more than ``c.Similarity.common`` submissions (MOSS's ``-m``: what a class writes
alike is not copying). Such a passage that is long (``c.Similarity.long_passage`` normalised characters) is
listed on its own, once, with who has it: what a class writes alike is short, and a long cell that many
submissions share is one they pasted (a cell passed round, which may be a hook into the grader: read it).

A pair's score is the larger of its two shares: how much of A's remaining answer text is also in B's, and
the other way round (a student who copied half of a classmate's work has half of theirs in common).
Pairs at or above ``c.Similarity.threshold`` with at least ``c.Similarity.min_shared`` characters of
normalised code in common are listed, highest first, with their answer cells side by side and the
common passages marked. Everything from a submission is escaped.
"""

from __future__ import annotations

import dataclasses
import glob
import html
import itertools
import time
from collections import Counter
from pathlib import Path

from traitlets import Float, Integer, List, Unicode
from traitlets.config import LoggingConfigurable

from ..course.config import CourseError, load_config
from .fingerprints import Fingerprint, fingerprint, in_raw, marked, shared_hashes

ADDED = "added"  # the key of the code cells a student added to a notebook


class Similarity(LoggingConfigurable):
    """Settings of the similarity pass (``c.Similarity.*`` in nbgrader_config.py)."""

    threshold = Float(0.5, help="List a pair when this share of one submission's answers (normalised, shared "
                      "code left out) is also in the other's: 0.5 is half.").tag(config=True)
    min_shared = Integer(100, help="... and when they have at least this many characters of normalised code in "
                         "common (names are one letter there, whitespace and comments gone), so that one short "
                         "answer every student writes alike does not make a pair.").tag(config=True)
    common = Integer(10, help="A passage found in more than this many submissions is ignored, as MOSS's -m "
                     "does: a class writes some code alike. 0: never ignore a passage for that.").tag(config=True)
    shared_code = List(Unicode(), ["notebooks/{assignment}_*.ipynb"],
                       help="Files every student has besides the release, whose code is ignored as the release's "
                       "is: globs relative to the course, of notebooks or Python files; {assignment} is the "
                       "assignment's name (the default: its lecture).").tag(config=True)
    most = Integer(50, help="List at most this many pairs in detail (the highest scores).").tag(config=True)
    long_passage = Integer(200, help="A passage left out as found in more than `common` submissions is listed on "
                           "its own (once, with who has it) when it is at least this many characters of normalised "
                           "code (nine in ten of the course's own answers are shorter): a class writes short things "
                           "alike; a long one many share was pasted. 0: never list them.").tag(config=True)


def check_names(config, config_file: Path) -> None:
    """A misspelt ``c.Similarity`` name is an error naming the file, not a silently ignored setting."""
    from ..course.settings import check_section

    try:
        check_section(config, config_file, Similarity)
    except ValueError as exc:
        raise CourseError(str(exc)) from None


# --------------------------------------------------------------------------- submissions


@dataclasses.dataclass
class Submission:
    name: str  # the student, or "student (lesson1-ko)" for one of an edition placed beside the assignment
    cells: dict  # key -> (kind, text), in the notebook's order
    prints: dict = dataclasses.field(default_factory=dict)  # key -> fingerprint
    hashes: set = dataclasses.field(default_factory=set)

    @property
    def coverage(self) -> float:
        return sum(p.coverage for p in self.prints.values())


@dataclasses.dataclass
class Pair:
    a: str
    b: str
    share_a: float  # of a's answers, the share also in b's
    share_b: float
    shared: int  # characters of normalised answers in common (the smaller of the two counts)
    cells: list = dataclasses.field(default_factory=list)  # (label, a's cell as HTML, b's cell as HTML)

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


@dataclasses.dataclass
class Passage:
    """A long passage many submissions share (left out of every pair's score)."""

    label: str  # the answer it is in (the first holder's)
    text: str  # as the first holder wrote it
    length: int  # characters of normalised code
    students: list  # who has it


@dataclasses.dataclass
class Found:
    assignment: str
    compared: list  # who was compared
    unreadable: list  # (who, reason)
    pairs: list  # Pair, highest first, at most `most`
    more: int  # pairs over the threshold not listed in detail
    ignored: int  # passages left out as found in more than `common` submissions
    settings: Similarity
    seconds: float = 0.0
    passages: list = dataclasses.field(default_factory=list)  # Passage, most shared first


def _notebook(where: Path, name: str) -> Path:
    """The student's notebook ``name``, or the one a download renamed (``Copy of ...``), newest first."""
    from ..classrun.intake import canonical

    exact = where / f"{name}.ipynb"
    if exact.exists():
        return exact
    found = sorted((p for p in where.glob("*.ipynb") if canonical(p.stem) == canonical(name)),
                   key=lambda p: p.stat().st_mtime)
    return found[-1] if found else exact


def _answers(nb, notebook: str, answer_kinds: dict) -> dict:
    """key -> (kind, text) of one submitted notebook's answers."""
    from ..course.notebooks import grade_id, nbgrader_meta

    cells, added = {}, []
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in answer_kinds:
            key = f"{notebook}/{gid}"
            kind, text = cells.get(key, (answer_kinds[gid], ""))
            cells[key] = (kind, (text + "\n\n" + cell.source) if text else cell.source)
        elif not nbgrader_meta(cell) and cell.cell_type == "code" and cell.source.strip():
            added.append(cell.source)
    if added:
        cells[f"{notebook}/{ADDED}"] = ("code", "\n\n".join(added))
    return cells


def _pool(coursedir, assignment: str) -> tuple[str, list[str]]:
    """(the English assignment, every assignment its submissions are compared across: it and its
    editions placed beside it, ``lesson1-ko``)."""
    from ..course.coursedir import folder
    from ..editions.catalogs import languages
    from ..editions.side_by_side import SIDE_BY_SIDE, edition_assignment

    base, _ = edition_assignment(coursedir, assignment)
    placed = [SIDE_BY_SIDE.format(assignment=base, language=lang) for lang in languages(Path(coursedir.root))]
    return base, [base] + [a for a in placed if folder(coursedir, "source", ".", a).is_dir()]


def gather(root: Path, assignment: str, config=None):
    """(submissions, unreadable, labels, shared hashes) of one assignment."""
    from ..course.coursedir import coursedir_of, folder, source_notebooks
    from ..course.notebooks import NotebookError, is_solution, grade_id, read_notebook
    from ..editions.catalogs import languages
    from ..editions.localize import release_path
    from .exercises import headings

    root = Path(root).resolve()
    config = config or load_config(root)
    settings = Similarity(config=config)
    coursedir = coursedir_of(config)
    base, pool = _pool(coursedir, assignment)
    notebooks = source_notebooks(root, base, config)
    kinds, labels, shared = {}, {}, []
    for nb in notebooks:
        source = read_notebook(folder(coursedir, "source", ".", base) / f"{nb}.ipynb")
        above = headings(source)
        kinds[nb] = {grade_id(c): "code" if c.cell_type == "code" else "text" for c in source.cells if is_solution(c)}
        for gid, kind in kinds[nb].items():
            labels[f"{nb}/{gid}"] = (above.get(gid) or gid) + (" (written answer)" if kind == "text" else "")
        labels[f"{nb}/{ADDED}"] = f"{nb}: code cells the student added"
        shared += [release_path(coursedir, a, nb) for a in pool]
        shared += [release_path(coursedir, base, nb, lang) for lang in languages(root)]
    shared = [p for p in shared if p.is_file()]
    shared += sorted(Path(p) for pattern in settings.shared_code
                     for p in glob.glob(str(root / pattern.format(assignment=glob.escape(base)))))
    submissions, unreadable = [], []
    submitted = folder(coursedir, "submitted")
    students = sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []
    for a in pool:
        for student in students:
            where = folder(coursedir, "submitted", student, a)
            if not where.is_dir():
                continue
            who = student if a == assignment else f"{student} ({a})"
            cells = {}
            try:
                for nb in notebooks:
                    cells.update(_answers(read_notebook(_notebook(where, nb)), nb, kinds[nb]))
            except NotebookError as exc:
                unreadable.append((who, str(exc)))
                continue
            submissions.append(Submission(who, cells))
    return submissions, unreadable, labels, shared_hashes(shared)


# --------------------------------------------------------------------------- pairs


def _overlap(sub: Submission, matched: set) -> int:
    """Characters of ``sub``'s normalised answers covered by k-grams in ``matched`` (copydetect's count)."""
    total = 0
    for print_ in sub.prints.values():
        slices = print_.slices(matched)
        if slices is not None:
            total += int((slices[1] - slices[0]).sum())
    return total


def find_pairs(root: Path, assignment: str, config=None) -> Found:
    """Every pair of this assignment's submissions over the threshold, highest first."""
    started = time.monotonic()
    root = Path(root).resolve()
    config = config or load_config(root)
    check_names(config, root / "nbgrader_config.py")
    settings = Similarity(config=config)
    submissions, unreadable, labels, ignored = gather(root, assignment, config)
    prints: dict[tuple[str, str], Fingerprint] = {}  # many cells are alike (a stub left as it is): one each
    for sub in submissions:
        sub.prints = {key: prints.get(cell) or prints.setdefault(cell, fingerprint(*cell, ignored))
                      for key, cell in sub.cells.items()}
        sub.hashes = set().union(*(p.hashes for p in sub.prints.values()))
    counts = Counter(h for sub in submissions for h in sub.hashes)
    common = {h for h, n in counts.items() if n > settings.common} if settings.common else set()
    passages = long_passages(submissions, labels, common, settings.long_passage)
    if common:
        for sub in submissions:
            for print_ in sub.prints.values():
                print_.drop(common)
            sub.hashes -= common
    pairs = []
    for a, b in itertools.combinations(submissions, 2):
        both = a.hashes & b.hashes
        if not both:
            continue
        over_a, over_b = _overlap(a, both), _overlap(b, both)
        pair = Pair(a.name, b.name, float(over_a / a.coverage) if a.coverage else 0.0,
                    float(over_b / b.coverage) if b.coverage else 0.0, min(over_a, over_b))
        if pair.score >= settings.threshold and pair.shared >= settings.min_shared:
            pairs.append((pair, a, b))
    pairs.sort(key=lambda t: (-t[0].score, -t[0].shared, t[0].a, t[0].b))
    skip, written = ignored | common, {}

    def as_written(cell):  # the cell as the student typed it, for the page (one fingerprint each)
        if cell is not None and cell not in written:
            written[cell] = fingerprint(*cell, skip, ordered=False)
        return written.get(cell)

    for pair, a, b in pairs[:settings.most]:
        for key in [k for k in labels if k in a.cells or k in b.cells]:
            pair.cells.append((labels[key], marked(as_written(a.cells.get(key)), b.hashes),
                               marked(as_written(b.cells.get(key)), a.hashes)))
    return Found(assignment, [s.name for s in submissions], unreadable, [p for p, _, _ in pairs[:settings.most]],
                 max(0, len(pairs) - settings.most), len(common), settings, time.monotonic() - started, passages)


def long_passages(submissions, labels: dict, common: set, longest: int) -> list[Passage]:
    """The stretches of at least ``longest`` normalised characters that ``common`` fingerprints cover in a
    submission's answer, grouped across submissions (a stretch joins a group when half of the smaller one's
    fingerprints are the other's), most shared first."""
    import numpy as np

    groups: list[tuple[set, Passage]] = []
    for sub in submissions:
        for key, print_ in sub.prints.items():
            slices = print_.slices(common) if longest and common else None
            for start, end in zip(*slices) if slices is not None else ():
                if end - start < longest:
                    continue
                hashes = {h for h, where in print_.hash_idx.items() if h in common and any(start <= i < end
                                                                                         for i in where)}
                group = next((g for g in groups if 2 * len(g[0] & hashes) >= min(len(g[0]), len(hashes))), None)
                if group is None:
                    (a,), (b,) = in_raw(print_, np.array([[start], [end]])).tolist()  # as written, whole lines
                    a, b = print_.raw.rfind("\n", 0, a) + 1, (print_.raw.find("\n", b) + 1 or len(print_.raw) + 1) - 1
                    groups.append((hashes, Passage(labels.get(key, key), print_.raw[a:b], int(end - start),
                                                   [sub.name])))
                elif sub.name not in group[1].students:
                    group[0].update(hashes)
                    group[1].students.append(sub.name)
    return sorted((p for _, p in groups), key=lambda p: (-len(p.students), -p.length, p.label))


# --------------------------------------------------------------------------- output

STYLE = ("pre{margin:0;white-space:pre-wrap;font-size:.85em}mark{background:#ffd45e}details.pair{margin:.6em 0}"
         "table.side-by-side{width:100%;table-layout:fixed}table.side-by-side th:first-child{width:14em}")


def describe(pair: Pair) -> str:
    return (f"{pair.score:.0%}: {pair.share_a:.0%} of {pair.a}'s answers are in {pair.b}'s, {pair.share_b:.0%} of "
            f"{pair.b}'s in {pair.a}'s ({pair.shared} characters of normalised code in common)")


def describe_passage(passage: Passage) -> str:
    return (f"{len(passage.students)} submissions share {passage.length} characters of normalised code in "
            f"{passage.label}: {', '.join(passage.students)}")


def render_section(found: Found) -> str:
    """The class report's section (and the similarity page's body)."""
    e = html.escape
    s = found.settings
    out = [f"<h2 id='similarity'>Similar submissions</h2><p>{len(found.compared)} submissions compared; "
           f"listed: pairs where at least {s.threshold:.0%} of one's answers are also in the other's "
           f"(<code>c.Similarity.threshold</code>), with at least {s.min_shared} characters in common. The release, "
           "the lesson's lecture and passages found in more than "
           f"{s.common} submissions are left out; names, comments, whitespace and the order of definitions do "
           "not count. A list to read, never a grade: two students may have worked from the same source.</p>"]
    if found.unreadable:
        out.append("<p>Not compared: " + e("; ".join(f"{w}: {r}" for w, r in found.unreadable)) + "</p>")
    if found.passages:
        out.append(f"<h3 id='long-passages'>Long passages many submissions share</h3><p>Left out of every pair's "
                   f"score as found in more than {s.common} submissions, but {s.long_passage} characters or more "
                   "(<code>c.Similarity.long_passage</code>): a class writes short things alike, so each of these is "
                   "a long cell many submissions share: read it.</p>")
        for k, p in enumerate(found.passages, 1):
            out.append(f"<details class='passage' id='passage-{k}'><summary>{e(describe_passage(p))}</summary>"
                       f"<pre>{e(p.text)}</pre></details>")
    if not found.pairs:
        out.append("<p id='no-similar-pairs'>No pair over the threshold.</p>")
    for k, pair in enumerate(found.pairs, 1):
        rows = "".join(f"<tr><td>{e(label)}</td><td>{a}</td><td>{b}</td></tr>" for label, a, b in pair.cells)
        out.append(f"<details class='pair' id='pair-{k}'><summary><b>{e(pair.a)}</b> and <b>{e(pair.b)}</b>: "
                   f"{e(describe(pair))}</summary><table class='side-by-side'><tr><th>answer</th>"
                   f"<th>{e(pair.a)}</th><th>{e(pair.b)}</th></tr>{rows}</table></details>")
    if found.more:
        out.append(f"<p>{found.more} more pairs over the threshold (<code>c.Similarity.most</code>).</p>")
    return "\n".join(out)


def write_page(found: Found, directory: Path) -> Path:
    """``<directory>/<assignment>-similarity.html``: the section on a page of its own."""
    directory.mkdir(parents=True, exist_ok=True)
    page = directory / f"{found.assignment}-similarity.html"
    title = html.escape(f"{found.assignment}: similar submissions")
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title><style>"
                    "body{font-family:sans-serif;max-width:90em;margin:1em auto;padding:0 1em}table{border-collapse:"
                    "collapse}td,th{border:1px solid #ccc;padding:.2em .5em;vertical-align:top;text-align:left}"
                    f"{STYLE}</style></head><body><h1>{title}</h1>{render_section(found)}</body></html>",
                    encoding="utf-8")
    return page
