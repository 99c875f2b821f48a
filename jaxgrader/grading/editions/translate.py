"""Editions of the course in other languages: built from the English files and gettext catalogs.

The English notebooks stay the one source of code. A translator never edits a
built notebook: they translate *units* in a catalog (``i18n/<lang>/LC_MESSAGES/
<english path>.po``, read and written with Babel), and ``jaxgrader translate build``
writes the edition (``<lang>/<english path>``) by replacing each unit of the English
file with its translation. Everything that is not a unit (code, outputs, cell ids,
metadata, grade ids, points, hidden tests) is copied, so the editions cannot drift.

What a unit is and how it is found and put back: ``translation_units`` (part names and printed
literals: ``literals``; what editions may differ in: ``differences``). Catalogs and editions:
``catalogs``; building: ``build``; placing an edition's assignments as columns: ``side_by_side``.
This module holds the commands (``jaxgrader translate ACTION LANGUAGE``).

Each unit's gettext context (``msgctxt``) is its cell's id, so a unit belongs to its
cell wherever the cell moves. When an English unit changes, ``update`` (Babel's
``Catalog.update``) carries the old translation over flagged *fuzzy* with the old
English as ``#| msgid``; a build leaves fuzzy and missing units in English and
``tests/test_translation.py`` fails until a translator has looked.

An edition is declared in ``i18n/<lang>/edition.toml``: the English files it has so far.
Only those are built, and only those must be complete.
"""

from __future__ import annotations

from pathlib import Path

from babel.messages.catalog import Catalog

from .build import build
from .catalogs import (CATALOGS, GRADER_SENTENCES, HEADER, PROJECT, catalog_sources, english_template,
                       load_edition, read_catalog, status_counts, translatable_files, write_catalog)
from .side_by_side import side_by_side


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
