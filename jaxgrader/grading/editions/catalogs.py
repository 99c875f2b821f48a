"""Catalogs and editions: what a translator edits, and where an edition's files go.

An edition is declared in ``i18n/<lang>/edition.toml``: the English files it has so far. Each
translatable English file has a template (what its units are) and, per language, a catalog
(``i18n/<lang>/LC_MESSAGES/<english path>.po``, read and written with Babel) whose units' context
(``msgctxt``) is their cell's id, so a unit belongs to its cell wherever the cell moves.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from ..course.config import CourseError
from .sentences import GRADER, grader_template
from .translation_units import cell_units, markdown_units, part_units

CATALOGS = "i18n"
GRADER_SENTENCES = "the grader's sentences"
PROJECT = "JAX from first principles"
HEADER = """\
# Translation of {english}, the English file of the course it is built from.
# Translate the msgstr entries only; `jaxgrader translate update` keeps this file in step
# with the English and `jaxgrader translate build` writes the edition (docs/translating.md).
#"""


# --------------------------------------------------------------------------- catalogs


def _cell_id(cell, path: str, index: int) -> str:
    if not cell.get("id"):
        raise CourseError(f"{path}: cell {index + 1} has no id (nbformat 4.5+ ids are the catalogs' keys)")
    return cell["id"]


PART = ":part"  # msgctxt suffix of a cell's feedback units (part names), kept apart from its notebook units


def part_context(cell_id: str) -> str:
    return cell_id + PART


def template(nb, path: str) -> Catalog:
    """The catalog of a notebook's units, untranslated (what a ``.pot`` file holds), then its feedback
    units: the names hidden tests report parts under, translated for feedback only."""
    catalog = Catalog(project=PROJECT, fuzzy=False)
    for index, cell in enumerate(nb.cells):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        where = f"{cell.cell_type} cell {index + 1}" + (f", {grade_id}" if grade_id else "")
        for unit in cell_units(cell):
            note = where
            if unit.kind != "markdown":
                note += f", {unit.kind}: keep it a Python " + ("comment" if unit.kind == "comment" else
                                                             "string literal, same quotes and {fields}")
            catalog.add(cell.source[unit.start:unit.end], context=_cell_id(cell, path, index),
                        locations=[(path, index + 1)], auto_comments=[note])
        if cell.cell_type == "code":
            for unit in part_units(cell.source):
                catalog.add(cell.source[unit.start:unit.end], context=part_context(_cell_id(cell, path, index)),
                            locations=[(path, index + 1)], auto_comments=[
                                f"{where}, part name: the name of a graded part, shown only in feedback (the hidden "
                                "test keeps the English); keep it a Python string literal, same quotes and {fields}"])
    return catalog


def markdown_template(text: str, path: str) -> Catalog:
    """The catalog of a markdown document's paragraphs (context: the document's path)."""
    catalog = Catalog(project=PROJECT, fuzzy=False)
    for unit in markdown_units(text):
        line = text.count("\n", 0, unit.start) + 1
        catalog.add(text[unit.start:unit.end], context=path, locations=[(path, line)])
    return catalog


def read_catalog(path: Path) -> Catalog:
    try:
        with open(path, "rb") as f:
            return read_po(f, abort_invalid=True)
    except FileNotFoundError:
        raise CourseError(f"{path}: no catalog (run `jaxgrader translate update`)") from None
    except Exception as exc:  # noqa: BLE001  Babel raises several kinds for a broken file
        raise CourseError(f"{path}: not a readable gettext catalog ({exc})") from None


def write_catalog(catalog: Catalog, path: Path) -> None:
    """Write ``catalog``; an obsolete unit keeps its translation but not the English it once replaced.

    Babel writes an obsolete unit's previous English (``#|``) where it cannot read it back: the next
    read takes it for a translator's comment (``# | msgid ...``), and every update wrapped and added
    to those comments. They are dropped here, old and new."""
    for message in [*catalog, *catalog.obsolete.values()]:
        message.user_comments = [c for c in message.user_comments if not c.lstrip().startswith("|")]
    for message in catalog.obsolete.values():
        message.previous_id = ()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, omit_header=False, include_previous=True, sort_output=False)


def problems(tmpl: Catalog, catalog: Catalog) -> list[str]:
    """Units of the English file whose translation is missing or stale (fuzzy)."""
    out = []
    for message in tmpl:
        if not message.id:
            continue
        found = catalog.get(message.id, context=message.context)
        where = f"{message.locations[0][0]} cell/line {message.locations[0][1]}" if message.locations else ""
        first = message.id.splitlines()[0][:60]
        if found is None or not found.string:
            out.append(f"{where}: not translated: {first!r}")
        elif found.fuzzy:
            out.append(f"{where}: stale (fuzzy: the English changed): {first!r}")
    return out


def translations(catalog: Catalog) -> dict[tuple[str, str | None], str]:
    """(context, English) -> translation, for translated units that are not fuzzy (gettext's rule)."""
    return {(m.context, m.id): m.string for m in catalog if m.id and m.string and not m.fuzzy}


# --------------------------------------------------------------------------- editions


@dataclass(frozen=True)
class Edition:
    """A language's edition: its catalogs, where it is built, and what it declares so far."""

    root: Path
    language: str
    files: tuple[str, ...]  # English paths (relative to the course) in the edition

    @property
    def catalogs(self) -> Path:
        return self.root / CATALOGS / self.language / "LC_MESSAGES"

    def catalog_path(self, english: str) -> Path:
        return self.catalogs / Path(english).with_suffix(".po")

    def built_path(self, english: str) -> Path:
        """Where the edition of an English file goes: README.md -> README.ko.md, else <lang>/<path>."""
        if english.endswith(".md"):
            return self.root / Path(english).with_suffix(f".{self.language}.md")
        return self.root / self.language / english

    def built(self) -> set[str]:
        """English paths (relative, posix) that have a counterpart in this edition: the declared
        files, and each declared assignment's release (nbgrader generates it from the edition's source)."""
        out = set(self.files)
        out |= {"release/" + f.split("/", 1)[1] for f in self.files if f.startswith("source/")}
        return out


def load_edition(root: Path, language: str) -> Edition:
    path = Path(root) / CATALOGS / language / "edition.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CourseError(f"{path}: missing (no '{language}' edition declared)") from None
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(f"{path}: not valid TOML ({exc})") from None
    files = data.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise CourseError(f"{path}: 'files' must be a list of English paths")
    for f in files:
        if not (Path(root) / f).is_file():
            raise CourseError(f"{path}: declares {f}, which does not exist")
        if not (f.endswith(".ipynb") or f == "README.md"):
            raise CourseError(f"{path}: {f}: only notebooks and README.md can be translated")
    return Edition(Path(root), language, tuple(files))


def languages(root: Path) -> list[str]:
    folder = Path(root) / CATALOGS
    return sorted(p.parent.name for p in folder.glob("*/edition.toml")) if folder.is_dir() else []


def translatable_files(root: Path) -> list[str]:
    """Every English file with units: lectures, the course map, instructors' assignments, the README."""
    root = Path(root)
    found = [p for p in sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "source").glob("*/*.ipynb"))]
    return [p.relative_to(root).as_posix() for p in found] + ["README.md"]


# The part of README.md that students read; README.<lang>.md is built from it.
README_SECTION = "## Students"


def readme_section(text: str) -> str:
    """README.md's student section: from its heading up to the next second-level heading."""
    found = re.search(rf"^{re.escape(README_SECTION)}\n", text, re.MULTILINE)
    if not found:
        raise CourseError(f"README.md: no '{README_SECTION}' section")
    end = text.find("\n## ", found.start() + 1)
    return text[found.start(): end + 1 if end >= 0 else len(text)]


def english_template(root: Path, english: str) -> Catalog:
    path = Path(root) / english
    if english == "README.md":
        return markdown_template(readme_section(path.read_text(encoding="utf-8")), english)
    return template(read_english(path), english)


def read_english(path: Path):
    from ..course.notebooks import NotebookError, read_notebook

    try:
        return read_notebook(path)
    except NotebookError as exc:
        raise CourseError(str(exc)) from None


def catalog_sources(edition: Edition, required_only: bool = False) -> list[tuple[str, Path, Catalog]]:
    """(what is translated, its catalog, its template): every translatable file (or only the declared
    ones), then the grader's own sentences (feedback, stubs), which every edition needs."""
    files = edition.files if required_only else translatable_files(edition.root)
    out = [(f, edition.catalog_path(f), english_template(edition.root, f)) for f in files]
    return out + [(GRADER_SENTENCES, edition.catalogs / f"{GRADER}.po", grader_template(PROJECT))]


def status_counts(tmpl: Catalog, catalog: Catalog) -> dict[str, int]:
    done = translations(catalog)
    units = [m for m in tmpl if m.id]
    fuzzy = sum(1 for m in units if (found := catalog.get(m.id, context=m.context)) is not None and found.fuzzy)
    translated = sum(1 for m in units if (m.context, m.id) in done)
    return {"units": len(units), "translated": translated, "fuzzy": fuzzy,
            "untranslated": len(units) - translated - fuzzy}
