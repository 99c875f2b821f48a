"""Editions in other languages stay in step with the English (docs/translating.md).

Required so far: the files an edition declares (``i18n/<lang>/edition.toml``) are completely
translated, no translation is stale (fuzzy), the built files are what ``jaxgrader translate build``
writes today, and the two editions of a notebook differ in nothing but translated text. Files not
declared yet have catalogs but are not required. Cheap: no kernel runs (main lane only).
"""

from __future__ import annotations

import re

import nbformat
import pytest

from jaxgrader.grading import translate as tr
from jaxgrader.grading.notebooks import read_notebook

from .conftest import ROOT

LANGUAGES = ["ko"]


@pytest.fixture(scope="module", params=LANGUAGES)
def edition(request):
    return tr.load_edition(ROOT, request.param)


def test_edition_declares_the_course_map_and_readme(edition):
    assert {"notebooks/00_index.ipynb", "README.md"} <= set(edition.files)


def test_declared_files_are_translated_and_current(edition):
    problems = []
    for english in edition.files:
        catalog = tr.read_catalog(edition.catalog_path(english))
        problems += tr.problems(tr.english_template(ROOT, english), catalog)
    assert not problems, (f"{len(problems)} units to translate (`jaxgrader translate update {edition.language}`, "
                          "then edit the .po files):\n" + "\n".join(problems[:20]))


def test_built_files_are_current(edition):
    stale = [str(edition.built_path(f).relative_to(ROOT)) for f in edition.files
             if not edition.built_path(f).is_file()
             or edition.built_path(f).read_text(encoding="utf-8") != tr.built_text(edition, f)]
    assert not stale, f"rebuild with `jaxgrader translate build {edition.language}`: {stale}"


def test_editions_differ_only_in_text(edition):
    notebooks = sorted(f for f in edition.built() if f.endswith(".ipynb"))
    found = []
    for english in notebooks:
        found += tr.differences(read_notebook(ROOT / english), read_notebook(edition.built_path(english)), english)
    assert not found, "\n".join(found)


def test_links_in_the_edition_lead_somewhere(edition):
    colab = tr.course_style.colab_url("")
    broken = []
    for english in edition.files:
        built = edition.built_path(english)
        text = built.read_text(encoding="utf-8")
        if built.suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.reads(text, 4).cells if c.cell_type == "markdown")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(colab):
                path = ROOT / target[len(colab):]
            elif re.match(r"^[a-z][a-z0-9+.-]*:|^#", target):
                continue
            else:
                path = built.parent / target.partition("#")[0]
            if not path.exists():
                broken.append(f"{built.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)


# --------------------------------------------------------------------------- the machinery can fail


def _pseudo(unit_text: str, kind: str) -> str:
    """A stand-in translation of the right kind, as a careful translator would write it."""
    if kind == "comment":
        return "# 번역 " + unit_text.lstrip("#").strip()
    if kind == "string":
        quote = re.match(r"^[A-Za-z]*('''|\"\"\"|'|\")", unit_text)
        return unit_text[:quote.end()] + "번역 " + unit_text[quote.end():]
    return "번역: " + unit_text


def _pseudo_translate(nb):
    out = nbformat.from_dict(nb)
    for cell in out.cells:
        cell.source = tr.translate_text(cell.source, tr.cell_units(cell), lambda t, c=cell: _pseudo(
            t, next(u.kind for u in tr.cell_units(c) if c.source[u.start:u.end] == t)), "test")
    return out


@pytest.mark.parametrize("english", [f for f in tr.translatable_files(ROOT) if f.endswith(".ipynb")])
def test_translating_every_unit_changes_no_code(english):
    """Every unit of every English notebook translated: still the same notebook but for text, and each
    unit really was replaced (so a unit never holds code, a hidden test or a solution)."""
    nb = read_notebook(ROOT / english)
    translated = _pseudo_translate(nb)
    assert tr.differences(nb, translated, english) == []
    assert tr.template(translated, english).__len__() >= 1
    left = [m.id for m in tr.template(translated, english) if m.id and "번역" not in m.id]
    assert not left, f"units not replaced: {left[:3]}"


def _nb(markdown: str, code: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(markdown, id="m1"), nbformat.v4.new_code_cell(code, id="c1")]
    nb.cells[1].metadata["nbgrader"] = {"grade": True, "grade_id": "test_f", "locked": True, "points": 2,
                                        "schema_version": 3, "solution": False, "task": False}
    return nb


CODE = ('# check the shape\nassert f(1) == 2, "f(1) should be 2"\nprint(f"the value is {f(1)}")\n'
        '### BEGIN HIDDEN TESTS\n# hidden comment\nassert f(2) == 4, "hidden message"\n### END HIDDEN TESTS')


def test_units_skip_hidden_tests_and_short_labels():
    nb = _nb("# Title\n\nFirst paragraph.\n\n```python\nx = 1\n```\n\n| a | b |\n|---|---|\n| one | two |", CODE)
    units = [nb.cells[0].source[u.start:u.end] for u in tr.cell_units(nb.cells[0])]
    assert units == ["# Title", "First paragraph.", "| a | b |", "| one | two |"]
    code = [CODE[u.start:u.end] for u in tr.cell_units(nb.cells[1])]
    assert code == ["# check the shape", '"f(1) should be 2"', 'f"the value is {f(1)}"']


def test_a_changed_english_unit_is_stale_until_translated_again(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "README.md").write_text("# Course\n\n## Students\n\nRead the map.\n", encoding="utf-8")
    path = tmp_path / "notebooks" / "00_index.ipynb"
    nbformat.write(_nb("# Title\n\nFirst paragraph.", CODE), path)
    (tmp_path / "i18n" / "ko").mkdir(parents=True)
    (tmp_path / "i18n" / "ko" / "edition.toml").write_text('files = ["notebooks/00_index.ipynb"]\n')
    tr.update(tmp_path, "ko")
    edition = tr.load_edition(tmp_path, "ko")
    po = edition.catalog_path("notebooks/00_index.ipynb")
    catalog = tr.read_catalog(po)
    assert len(tr.problems(tr.english_template(tmp_path, "notebooks/00_index.ipynb"), catalog)) == 5
    for message in catalog:
        if message.id:
            message.string = _pseudo(message.id, "comment" if message.id.startswith("# c") else
                                     "string" if message.id[:2] in ('"f', 'f"') else "markdown")
    tr.write_catalog(catalog, po)
    assert tr.problems(tr.english_template(tmp_path, "notebooks/00_index.ipynb"), tr.read_catalog(po)) == []
    tr.build(tmp_path, "ko")
    built = read_notebook(tmp_path / "ko" / "notebooks" / "00_index.ipynb")
    assert built.cells[0].source == "번역: # Title\n\n번역: First paragraph."

    nb = read_notebook(path)
    nb.cells[0].source = "# Title\n\nFirst paragraph, changed."
    nbformat.write(nb, path)
    tr.update(tmp_path, "ko")
    stale = tr.problems(tr.english_template(tmp_path, "notebooks/00_index.ipynb"), tr.read_catalog(po))
    assert len(stale) == 1 and "stale" in stale[0]
    assert "#| msgid \"First paragraph.\"" in po.read_text(encoding="utf-8")
    assert tr.built_text(edition, "notebooks/00_index.ipynb") != (tmp_path / "ko/notebooks/00_index.ipynb").read_text()
    rebuilt = tr.build_notebook(nb, tr.read_catalog(po), "notebooks/00_index.ipynb", edition)
    assert rebuilt.cells[0].source == "번역: # Title\n\nFirst paragraph, changed."  # gettext: fuzzy stays English


@pytest.mark.parametrize("change, expected", [
    (lambda nb: setattr(nb.cells[1], "source", nb.cells[1].source.replace("f(1) == 2", "f(1) == 3")), "code differs"),
    (lambda nb: setattr(nb.cells[1], "source", nb.cells[1].source.replace("# hidden comment", "# 숨김")),
     "hidden test"),
    (lambda nb: nb.cells[1].metadata["nbgrader"].update(points=3), "metadata differ"),
    (lambda nb: nb.cells.reverse(), "cell type or id"),
    (lambda nb: nb.cells.pop(), "cells in English"),
    (lambda nb: setattr(nb.cells[1], "source", nb.cells[1].source.replace('"번역 f(1) should be 2"', '"x" + str(1)')),
     "code differs"),
])
def test_differences_catch_what_is_not_text(change, expected):
    english = _nb("# Title", CODE)
    translated = _pseudo_translate(english)
    assert tr.differences(english, translated) == []
    change(translated)
    found = tr.differences(english, translated)
    assert found and expected in found[0], found


def test_a_translation_that_is_not_a_comment_or_a_literal_is_refused():
    units = tr.code_units(CODE)
    with pytest.raises(tr.CourseError, match="one Python string literal"):
        tr.translate_text(CODE, units, lambda t: '"x"); import os; ("' if t.startswith('"f(1)') else None, "ko.po")
    with pytest.raises(tr.CourseError, match="one line starting with '#'"):
        tr.translate_text(CODE, units, lambda t: "# 확인\nimport os" if t.startswith("# check") else None, "ko.po")
