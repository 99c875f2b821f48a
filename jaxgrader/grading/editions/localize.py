"""Feedback in the language of the edition a student submitted (docs/grading.md, "Editions").

An edition's release has the English notebook's file names, cell ids, grade ids, points and
code; only text differs (tests/test_translation.py). So a Korean submission is graded as the
English assignment it is a translation of: nbgrader restores the English locked and test cells,
the same hidden tests run on the same code against the same reference run, and the score is
the English one by construction. Only the feedback is written afterwards in the student's
language, by ``LocalizeFeedback`` (a ``GenerateFeedback`` preprocessor, before
``HideHiddenTests``):

* the edition is recognised from the submission itself (``submitted/``): the edition whose
  release its locked cells match most, English on a tie; nothing the student could gain by it.
  An assignment an edition was placed as (``lesson1-ko``, ``side_by_side.side_by_side``) is that
  edition's, whatever was submitted;
* the course's cells (prompts, locked cells, the visible part of test cells) are put back in
  the edition's words, from the edition's release, by grade id; the student's cells stay theirs;
* the verdict's lines are translated through the edition's catalogs: the grader's sentences
  (``MESSAGES`` in ``sentences``, catalog ``i18n/<lang>/LC_MESSAGES/grader.po``), the visible
  tests' assert messages and the names hidden tests report parts under (the notebook's own
  catalog, f-string fields carried over: the hidden tests themselves are never translated).
  A line no template matches stays in English, so nothing is lost.
"""

from __future__ import annotations

import re
from pathlib import Path

from babel.messages.catalog import Catalog
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from . import catalogs as tc
from . import literals as tl
from . import side_by_side as tsbs
from .sentences import GRADER, MESSAGES

_FIELD = re.compile(r"\{(\w+)\}")
_GROUP = {"where": r"(?: at \[.*)?", "path": r"\[.*"}
_NESTED = {"where", "got", "want"}  # fields that may themselves be a translatable phrase


def _pattern(template: str) -> re.Pattern:
    out, last = [], 0
    for m in _FIELD.finditer(template):
        out += [re.escape(template[last:m.start()]), f"(?P<{m.group(1)}>{_GROUP.get(m.group(1), '.+?')})"]
        last = m.end()
    return re.compile("".join(out) + re.escape(template[last:]) + r"\Z", re.DOTALL)


class Translator:
    """One edition's feedback sentences and one notebook's assert messages, English -> edition."""

    def __init__(self, grader: Catalog, notebook: Catalog | None = None):
        table = tc.translations(grader)
        self.templates = [(_pattern(m), table[("verdict", m)]) for m in MESSAGES if ("verdict", m) in table]
        units = [(context or "", tl.literal_parts(en), tl.literal_parts(ko))
                 for (context, en), ko in (tc.translations(notebook).items() if notebook is not None else ())]
        # a cell's feedback units (part names, context "<cell id>:part") and the rest (assert messages)
        self.parts = tl.literal_patterns((en, ko) for context, en, ko in units if context.endswith(tc.PART))
        self.assertions = tl.literal_patterns((en, ko) for context, en, ko in units if not context.endswith(tc.PART))

    def line(self, text: str) -> str:
        for pattern, translated in self.templates:
            match = pattern.match(text)
            if match:
                fields = {k: (self.line(v) if k in _NESTED and v else self.assertion(v) if k == "assertion" else v)
                          for k, v in match.groupdict().items()}
                return _FIELD.sub(lambda m: fields.get(m.group(1), m.group(0)), translated)
        return text

    def assertion(self, text: str) -> str:
        """A visible test's assert message in the edition's words (its f-string values carried over)."""
        return tl.fill(self.assertions, text)

    def part(self, name: str) -> str:
        """A part's name (what the hidden test reported it as) in the edition's words."""
        return self.line(name) if name.startswith("(") else tl.fill(self.parts, name)

    def verdict(self, cell) -> None:
        """Translate the verdict's outputs of a judged test cell in place."""
        parts = []
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("jaxgrader") if output.get("output_type") == "display_data" else None
            if isinstance(meta, dict):
                parts = meta.get("parts", [])
                output["data"]["text/plain"] = self.line(output["data"].get("text/plain", ""))
            elif output.get("output_type") == "error" and output.get("ename") == "TestFailed":
                head, tail = _split(output["evalue"], parts)
                lines = ([self.line(head)] if head else []) + [
                    self.line(line) if part is None else f"{self.part(part['name'])}: {self.line(part['message'])}"
                    for line, part in tail]
                output["evalue"] = "; ".join(lines)
                output["traceback"] = [f"TestFailed: {output['evalue']}"]


def _split(evalue: str, parts: list[dict]) -> tuple[str, list[tuple[str, dict | None]]]:
    """The verdict's error as (its visible test's line or "", [(line, the failed part it names, or None for
    '... and N more')]): failed parts come last, in order, and their names may hold ': ' or '; '."""
    failed = [p for p in parts if not p.get("passed")]
    for k in range(len(failed), -1, -1):
        tail = [(f"{p['name']}: {p['message']}", p) for p in failed[:k]]
        tail += [(f"... and {len(failed) - k} more", None)] if k < len(failed) else []
        joined = "; ".join(line for line, _ in tail)
        if tail and evalue == joined:
            return "", tail
        if tail and evalue.endswith("; " + joined):
            return evalue[: -len(joined) - 2], tail
    return evalue, []


# --------------------------------------------------------------------------- the preprocessor


def release_path(coursedir, assignment: str, notebook: str, language: str | None = None) -> Path:
    """A notebook of the English release, or of an edition's (its folder ``<lang>/`` is a course
    directory laid out like the course's own)."""
    from ..course.coursedir import edition_coursedir, folder

    return folder(edition_coursedir(coursedir, language), "release", ".", assignment) / f"{notebook}.ipynb"


def edition_of(submission, coursedir, assignment: str, notebook: str) -> str | None:
    """The language whose release the submission's locked cells match most (None: English)."""
    from ..course.notebooks import read_notebook

    def locked(nb) -> dict[str, str]:
        return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("locked") and "grade_id" in c.metadata["nbgrader"]}

    def matches(path: Path) -> int:
        return sum(mine.get(g) == s for g, s in locked(read_notebook(path)).items()) if path.is_file() else 0

    mine = locked(submission)
    best, best_score = None, matches(release_path(coursedir, assignment, notebook))
    for language in tc.languages(Path(coursedir.root)):
        score = matches(release_path(coursedir, assignment, notebook, language))
        if score > best_score:
            best, best_score = language, score
    return best


def localize(nb, coursedir, language: str, assignment: str, notebook: str):
    """The autograded notebook ``nb`` with the course's cells and the verdict in ``language``."""
    from ..course.notebooks import read_notebook

    # only its catalogs are read: a grading copy of the course need not hold the edition's lectures
    edition = tc.Edition(Path(coursedir.root), language, ())
    release = read_notebook(release_path(coursedir, assignment, notebook, language))
    theirs = {c.metadata["nbgrader"]["grade_id"]: c for c in release.cells if "grade_id" in c.metadata.get("nbgrader", {})}
    po = edition.catalog_path(f"source/{assignment}/{notebook}.ipynb")
    translator = Translator(tc.read_catalog(edition.catalogs / f"{GRADER}.po"),
                            tc.read_catalog(po) if po.is_file() else None)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        ours = theirs.get(meta.get("grade_id"))
        if ours is not None and ours.cell_type == cell.cell_type and not meta.get("solution") \
                and (meta.get("locked") or meta.get("grade")):
            cell.source = ours.source
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            translator.verdict(cell)
    return nb


class LocalizeFeedback(NbGraderPreprocessor):
    """Feedback in the language of the edition the student submitted (see module doc)."""

    enabled = Bool(True, help="Write feedback in the language of the edition a student submitted "
                   "(editions: i18n/<lang>/edition.toml); off: every student's feedback is in English.").tag(config=True)

    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        from ..course.notebooks import NotebookError, read_notebook

        info = resources.get("nbgrader", {})
        coursedir = CourseDirectory(config=self.config)
        if not self.enabled or not tc.languages(Path(coursedir.root)):
            return nb, resources
        assignment, language = tsbs.edition_assignment(coursedir, info.get("assignment", ""))  # placed side by side
        submitted = Path(coursedir.format_path(coursedir.submitted_directory, info.get("student", ""),
                                               info.get("assignment", ""))) / f"{info.get('notebook')}.ipynb"
        try:
            language = language or edition_of(read_notebook(submitted), coursedir, assignment, info["notebook"])
        except (NotebookError, KeyError):
            return nb, resources
        if language:
            try:
                nb = localize(nb, coursedir, language, assignment, info["notebook"])
            except (tc.CourseError, NotebookError) as exc:  # a broken catalog costs the language, not the feedback
                self.log.warning("feedback for %s stays in English: %s", info.get("student"), exc)
                return nb, resources
            nb.metadata["language"] = language
        return nb, resources
