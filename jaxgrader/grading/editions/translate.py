"""Editions of the course in other languages: built from the English files and gettext catalogs.

The English notebooks stay the one source of code. A translator never edits a
built notebook: they translate *units* in a catalog (``i18n/<lang>/LC_MESSAGES/
<english path>.po``, read and written with Babel), and ``jaxgrader translate build``
writes the edition (``<lang>/<english path>``) by replacing each unit of the English
file with its translation. Everything that is not a unit (code, outputs, cell ids,
metadata, grade ids, points, hidden tests) is copied, so the editions cannot drift.

What a unit is and how it is found and put back: ``translation_units``.

Each unit's gettext context (``msgctxt``) is its cell's id, so a unit belongs to its
cell wherever the cell moves. When an English unit changes, ``update`` (Babel's
``Catalog.update``) carries the old translation over flagged *fuzzy* with the old
English as ``#| msgid``; a build leaves fuzzy and missing units in English and
``tests/test_translation.py`` fails until a translator has looked.

An edition is declared in ``i18n/<lang>/edition.toml``: the English files it has so far.
Only those are built, and only those must be complete.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import nbformat
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

from ... import course_style
from ..course.config import CourseError
from .sentences import GRADER, STUBS, grader_template
from .translation_units import (LINK, cell_units, check_part, markdown_units, part_units, printed_outputs,
                                translate_text)

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
    return template(_read(path), english)


def _read(path: Path):
    from ..course.notebooks import NotebookError, read_notebook

    try:
        return read_notebook(path)
    except NotebookError as exc:
        raise CourseError(str(exc)) from None


# --------------------------------------------------------------------------- building



def _relink(text: str, english: str, edition: Edition, only: set[str] | None = None) -> str:
    """Links copied from the English (``only``: those targets; None: all): relative ones to the edition's
    counterpart where it has one, else to the English file; Colab addresses of files in the edition to the
    edition's copy. A link a translator added is theirs, relative to the built file."""
    colab = course_style.colab_url("")
    built, here = edition.built(), Path(english).parent
    target_dir = edition.built_path(english).parent.relative_to(edition.root)

    def one(match):
        target = match.group(2)
        if only is not None and target not in only:
            return match.group(0)
        if target.startswith(colab):
            path = target[len(colab):]
            return match.group(1) + (course_style.colab_url(f"{edition.language}/{path}") if path in built
                                     else target) + match.group(3)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        resolved = os.path.normpath(here / path).replace(os.sep, "/")
        is_dir = path.endswith("/")
        mine = resolved in built or (is_dir and any(b.startswith(resolved + "/") for b in built))
        dest = Path(edition.language) / resolved if mine else Path(resolved)
        new = os.path.relpath(dest, target_dir).replace(os.sep, "/") + ("/" if is_dir else "")
        return match.group(1) + new + ("#" + fragment if fragment else "") + match.group(3)

    return LINK.sub(one, text)


def build_notebook(nb, catalog: Catalog, english: str, edition: Edition):
    """The edition of a notebook: units translated, links pointed into the edition, what the translated
    ``print`` calls wrote in the committed outputs in the edition's words, all else copied."""
    table = translations(catalog)
    where = str(edition.catalog_path(english).relative_to(edition.root))
    out = copy.deepcopy(nb)
    for english_cell, cell in zip(nb.cells, out.cells):
        for unit in part_units(cell.source) if cell.cell_type == "code" else ():  # feedback's, checked here
            name = cell.source[unit.start:unit.end]
            if (part_context(cell.get("id")), name) in table:
                check_part(name, table[(part_context(cell.get("id")), name)], where)
        cell.source = translate_text(cell.source, cell_units(cell), lambda text, c=cell: table.get((c.get("id"), text)),
                                     where, lambda text, only: _relink(text, english, edition, only))
        if cell.cell_type == "code":
            cell.outputs = printed_outputs(english_cell, cell.source)
    return out


def build_readme(text: str, catalog: Catalog, edition: Edition) -> str:
    table = translations(catalog)
    section = readme_section(text)
    where = str(edition.catalog_path("README.md").relative_to(edition.root))
    return translate_text(section, markdown_units(section), lambda s: table.get(("README.md", s)), where,
                          lambda text, only: _relink(text, "README.md", edition, only))


def built_text(edition: Edition, english: str) -> str:
    """What ``build`` writes for one declared English file (notebooks: nbformat's JSON)."""
    catalog = read_catalog(edition.catalog_path(english))
    source = edition.root / english
    if english == "README.md":
        return build_readme(source.read_text(encoding="utf-8"), catalog, edition)
    return nbformat.writes(build_notebook(_read(source), catalog, english, edition)) + "\n"


# --------------------------------------------------------------------------- an edition's assignments side by side

SIDE_BY_SIDE = "{assignment}-{language}"  # an edition's assignment placed in the course as one of its own


def side_by_side(root: Path, language: str, assignments: list[str] | None = None) -> list[str]:
    """Place an edition's assignments in the course as assignments of their own (``lesson1-ko``: a column
    of their own in the gradebook; docs/grading.md, "Editions"): ``<lang>/source/<a>`` is copied to the
    course's ``source/<a>-<lang>`` (an earlier copy replaced), then nbgrader's generate_assignment writes
    ``release/<a>-<lang>`` and the gradebook's entry. Returns the placed assignments' names."""
    import shutil

    from ..course.config import load_config, make_api
    from ..course.coursedir import coursedir_of, edition_coursedir, folder
    from ..classrun.references import generate

    config = load_config(root)
    coursedir = coursedir_of(config)
    # what `build` wrote, not edition.toml: a teacher's grading copy of the course may lack the lectures it declares
    built = folder(edition_coursedir(coursedir, language), "source")
    have = sorted(p.name for p in built.iterdir() if p.is_dir()) if built.is_dir() else []
    if language not in languages(root) or not have:
        raise CourseError(f"{built}: no assignment of a '{language}' edition here (`jaxgrader translate build`)")
    missing = [a for a in assignments or [] if a not in have]
    if missing:
        raise CourseError(f"{built}: the edition has no {', '.join(missing)} (it has: {', '.join(have)})")
    placed = []
    for assignment in assignments or have:
        source = folder(edition_coursedir(coursedir, language), "source", ".", assignment)
        name = SIDE_BY_SIDE.format(assignment=assignment, language=language)
        target = folder(coursedir, "source", ".", name)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        placed.append(name)
    generate(make_api(config), placed)
    return placed


def edition_assignment(coursedir, assignment: str) -> tuple[str, str | None]:
    """(the assignment an edition's copy was placed from, its language) for an assignment ``side_by_side``
    placed (``lesson1-ko`` -> ``("lesson1", "ko")``); ``(assignment, None)`` for any other."""
    from ..course.coursedir import edition_coursedir, folder

    for language in languages(Path(coursedir.root)):
        base = assignment.removesuffix("-" + language)
        if base != assignment and SIDE_BY_SIDE.format(assignment=base, language=language) == assignment \
                and folder(edition_coursedir(coursedir, language), "source", ".", base).is_dir():
            return base, language
    return assignment, None


# --------------------------------------------------------------------------- commands


def extract(root: Path) -> list[Path]:
    """Write a template (``i18n/templates/<path>.pot``) for every translatable English file."""
    written = []
    for english in translatable_files(root):
        path = Path(root) / CATALOGS / "templates" / Path(english).with_suffix(".pot")
        write_catalog(english_template(root, english), path)
        written.append(path)
    return written


def update(root: Path, language: str) -> dict[str, dict[str, int]]:
    """Create or update the language's catalog of every translatable file (Babel's merge: changed English
    keeps its old translation flagged fuzzy); returns counts per file."""
    edition = load_edition(root, language)
    counts = {}
    for english, path, tmpl in catalog_sources(edition):
        if path.exists():
            catalog = read_catalog(path)
            catalog.update(tmpl, update_header_comment=False, update_creation_date=False)
            # removed English keeps its translation for reference (`#~`); untranslated, it is only noise
            catalog.obsolete = type(catalog.obsolete)((k, m) for k, m in catalog.obsolete.items() if m.string)
        else:
            catalog = Catalog(locale=language, project=PROJECT, version="1", fuzzy=False,
                              header_comment=HEADER.format(english=english), copyright_holder="the course's authors")
            catalog.update(tmpl)
        write_catalog(catalog, path)
        counts[english] = status_counts(tmpl, catalog)
    return counts


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


def build(root: Path, language: str) -> list[Path]:
    """Write the edition of every declared file; a declared assignment's release is generated by nbgrader."""
    edition = load_edition(root, language)
    written = []
    for english in edition.files:
        path = edition.built_path(english)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(built_text(edition, english), encoding="utf-8")
        written.append(path)
    assignments = sorted({f.split("/")[1] for f in edition.files if f.startswith("source/")})
    if assignments:
        written += generate_release(edition, assignments)
    return written


def generate_release(edition: Edition, assignments: list[str]) -> list[Path]:
    """nbgrader generate_assignment in the edition's folder (its own course root, a throwaway gradebook):
    ``<lang>/source/lessonN`` -> ``<lang>/release/lessonN``, checksums of the translated cells included."""
    import tempfile

    from ..course.config import load_config, make_api
    from ..classrun.references import generate

    config = load_config(edition.root)
    for name, value in stubs(config, edition).items():
        setattr(config.ClearSolutions, name, value)
    with tempfile.TemporaryDirectory() as tmp:
        config.CourseDirectory.root = str(edition.root / edition.language)
        config.CourseDirectory.db_url = f"sqlite:///{Path(tmp) / 'gradebook.db'}"
        generate(make_api(config), assignments)
    return sorted((edition.root / edition.language / "release").glob("*/*.ipynb"))


def command(root: Path, action: str, language: str, assignments: list[str] | None = None) -> int:
    """``jaxgrader translate ACTION LANGUAGE``: one line per file written, counts per catalog."""
    if action == "side-by-side":
        for name in side_by_side(root, language, assignments):
            print(f"source/{name} and release/{name}: placed (students of this edition submit under {name})")
        return 0
    if action == "extract":
        for path in extract(root):
            print(path.relative_to(root))
        return 0
    if action == "build":
        for path in build(root, language):
            print(path.relative_to(root))
        return 0
    edition = load_edition(root, language)
    counts = update(root, language) if action == "update" else {
        f: status_counts(tmpl, read_catalog(path)) for f, path, tmpl in catalog_sources(edition) if path.exists()}
    incomplete = 0
    for english, c in counts.items():
        declared = english in edition.files or english == GRADER_SENTENCES
        incomplete += declared and c["translated"] < c["units"]
        print(f"{english:45s} {c['translated']:4d}/{c['units']:<4d} translated, {c['fuzzy']:3d} fuzzy"
              + ("  (in the edition)" if declared else ""))
    return 1 if action == "status" and incomplete else 0


def stubs(config, edition) -> dict:
    """nbgrader's ClearSolutions stubs with their sentences in the edition's words (for its release)."""
    table = translations(read_catalog(edition.catalogs / f"{GRADER}.po"))
    stub = config.ClearSolutions

    def words(text: str) -> str:
        for english in STUBS:
            if ("stub", english) in table:
                text = text.replace(english, table[("stub", english)])
        return text

    code = dict(stub.get("code_stub", {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}))
    return {"code_stub": {k: words(v) for k, v in code.items()},
            "text_stub": words(stub.get("text_stub", "YOUR ANSWER HERE"))}
