"""Editions in other languages stay in step with the English (docs/translating.md).

Required so far: the files an edition declares (``i18n/<lang>/edition.toml``) are completely
translated, no translation is stale (fuzzy), the built files are what ``jaxgrader translate build``
writes today, and the two editions of a notebook differ in nothing but translated text. Files not
declared yet have catalogs but are not required. Cheap: no kernel runs (main lane only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat
import numpy as np
import pytest

from jaxgrader import course_style
from jaxgrader.grading.editions import build as tb
from jaxgrader.grading.editions import catalogs as tc
from jaxgrader.grading.editions import differences as td
from jaxgrader.grading.editions import literals as tl
from jaxgrader.grading.editions import translate as tr
from jaxgrader.grading.editions import translation_units as tu
from jaxgrader.grading.course.notebooks import read_notebook

from .conftest import ROOT

LANGUAGES = ["ko"]


@pytest.fixture(scope="module", params=LANGUAGES)
def edition(request):
    return tc.load_edition(ROOT, request.param)


def test_edition_declares_the_course_map_and_readme(edition):
    assert {"notebooks/00_index.ipynb", "README.md"} <= set(edition.files)


def test_declared_files_are_translated_and_current(edition):
    problems = []
    for _, path, tmpl in tc.catalog_sources(edition, required_only=True):
        problems += tc.problems(tmpl, tc.read_catalog(path))
    assert not problems, (f"{len(problems)} units to translate (`jaxgrader translate update {edition.language}`, "
                          "then edit the .po files):\n" + "\n".join(problems[:20]))


def test_built_files_are_current(edition):
    stale = [str(edition.built_path(f).relative_to(ROOT)) for f in edition.files
             if not edition.built_path(f).is_file()
             or edition.built_path(f).read_text(encoding="utf-8") != tb.built_text(edition, f)]
    assert not stale, f"rebuild with `jaxgrader translate build {edition.language}`: {stale}"


def test_editions_differ_only_in_text(edition):
    notebooks = sorted(f for f in edition.built() if f.endswith(".ipynb"))
    found = []
    for english in notebooks:
        found += td.differences(read_notebook(ROOT / english), read_notebook(edition.built_path(english)), english)
    assert not found, "\n".join(found)


def test_links_in_the_edition_lead_somewhere(edition):
    colab = course_style.colab_url("")
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


# --------------------------------------------------------------------------- one edition's words (house style)

# The glossary (``i18n/<lang>/glossary``, docs/translating.md "Glossary"): one English term a line,
#   english = rendering | replaces: variant, ... | keeps: phrase, ... | if-english: word, ... | unless-english: word, ...
_CODE = re.compile(r"``.*?``|`[^`\n]*`|\{[^{}\n]*\}|\]\([^)\s]*\)|https?://\S+")


@dataclass(frozen=True)
class Term:
    english: str
    rendering: str
    replaces: tuple[str, ...]
    keeps: tuple[str, ...] = ()
    if_english: tuple[str, ...] = ()
    unless_english: tuple[str, ...] = ()


def read_glossary(path) -> list[Term]:
    terms = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        head, *fields = [part.strip() for part in line.split(" | ")]
        english, equals, rendering = head.partition(" = ")
        options = {}
        for field in fields:
            key, colon, values = field.partition(":")
            options[key.strip()] = tuple(v.strip() for v in values.split(",") if v.strip())
            assert colon and key.strip() in {"replaces", "keeps", "if-english", "unless-english"}, f"{path}:{number}: {field!r}"
        assert equals and english and rendering and options.get("replaces"), \
            f"{path}:{number}: want 'english = rendering | replaces: a, b'"
        terms.append(Term(english.strip(), rendering.strip(), options["replaces"], options.get("keeps", ()),
                          options.get("if-english", ()), options.get("unless-english", ())))
    return terms


def _word(text: str) -> re.Pattern:
    """A rendering as a word: Latin letters whole (any case; not part of a name like ``weight_decay``
    or ``optimizer.update``), Hangul where a word starts (particles and endings may follow)."""
    if text.isascii():
        return re.compile(r"(?<![A-Za-z0-9_.])" + re.escape(text) + r"(?![A-Za-z0-9_(])", re.IGNORECASE)
    return re.compile(r"(?<![가-힣])" + re.escape(text))


def glossary_misses(terms: list[Term], english: str, translation: str) -> list[str]:
    """The replaced renderings a translation uses, outside code, as 'variant -> rendering (term)'."""
    prose = _CODE.sub(" ", translation)
    found: dict[str, list[str]] = {}
    for term in terms:
        if term.if_english and not any(_word(w).search(english) for w in term.if_english):
            continue
        if any(_word(w).search(english) for w in term.unless_english):
            continue
        text = prose
        for keep in term.keeps:
            text = re.sub(re.escape(keep), " ", text, flags=re.IGNORECASE)
        for variant in term.replaces:
            if _word(variant).search(text):
                found.setdefault(variant, []).append(f"{term.rendering!r} ({term.english})")
    return [f"{variant!r} -> " + " or ".join(uses) for variant, uses in found.items()]


def _units(edition):
    """(catalog path, msgctxt, English, translation) of every translated unit of the edition."""
    for path in sorted(edition.catalogs.rglob("*.po")):
        for message in tc.read_catalog(path):
            if message.id and message.string:
                yield (str(path.relative_to(ROOT)), message.context or "", message.id, message.string)


def test_glossary_matches_words_not_code():
    terms = read_glossary(ROOT / "i18n" / "ko" / "glossary")
    assert glossary_misses(terms, "the weights", "weight를 업데이트합니다")[0].startswith("'weight' -> '가중치'")
    assert glossary_misses(terms, "Fill in", "가중치에 weight decay를 적용하고 `weight_decay`, {weight}, "
                                             'adamw의 weight_decay=, optimizer.update(...)로 업데이트합니다') == []
    assert glossary_misses(terms, "the argument", "세 번째 인수를") and not glossary_misses(terms, "x", "세 번째 인자를")
    assert glossary_misses(terms, "Task", "과제") and not glossary_misses(terms, "the assignment", "과제")
    assert glossary_misses(terms, "the course's split", "강의 전체에서 쓰는 분할"), "course, never 강의"
    assert not glossary_misses(terms, "this lecture of the course", "이 과정의 이 강의는"), "a lecture is 강의"
    assert glossary_misses(terms, "laid out over devices", "device에 걸친 배치") and glossary_misses(
        terms, "the reference run", "정답 실행의 값")
    assert glossary_misses(terms, "graded by hand", "(2점, 직접 채점)") and not glossary_misses(
        terms, "graded by hand", "(2점, 강사가 직접 채점)"), "who grades is said"


@pytest.mark.parametrize("language", [lang for lang in LANGUAGES if (ROOT / "i18n" / lang / "glossary").is_file()])
def test_catalogs_follow_the_glossary(language):
    """No catalog uses a rendering the glossary replaced (docs/translating.md, "Glossary")."""
    edition = tc.load_edition(ROOT, language)
    terms = read_glossary(ROOT / "i18n" / language / "glossary")
    found = [f"{path} [{context}]: {miss}" for path, context, english, ko in _units(edition)
             for miss in glossary_misses(terms, english, ko)]
    assert not found, f"{len(found)} renderings the glossary replaced:\n" + "\n".join(found[:40])


# Capitals in Korean text are acronyms and names, never emphasis (docs/translating.md, "House style").
ACRONYMS = {"JAX", "XLA", "CPU", "GPU", "TPU", "TF32", "T4", "A100", "L4", "H100", "MLP", "NNX", "SGD", "VJP",
            "JVP", "HVP", "JIT", "AOT", "PRNG", "MLIR", "MNIST", "MCMC", "CLU", "API", "CI", "ML", "README", "L1",
            "L2", "TB", "GB", "MB", "HLO", "NUTS", "WARNING", "BEGIN", "END", "SOLUTION", "ID", "SIZES", "FAST",
            "FSDP", "SPMD", "GSPMD", "SLURM"}


def _final_b(syllable: str) -> bool:
    """A Hangul syllable ending in ㅂ (습, 합, 됩, 뀝: the -ㅂ니까 of 하십시오체 questions)."""
    return (ord(syllable) - 0xAC00) % 28 == 17


# The verdict's labels and the phrases that fill another sentence's field: not sentences themselves.
VERDICT_PHRASES = {"a visible test failed", "a visible test failed: {assertion}", "... and {n} more", " at {path}",
                   "{n} traced arguments ({shown})", "no lowered program (is the function wrapped in jax.jit?)",
                   "(no trusted check)", "(report)"}


def test_korean_house_style():
    """합니다체 questions (-ㄹ까요?/-나요?, never -습니까?), no English capitals for emphasis, and every
    verdict message a whole sentence (its values in a parenthesis after it, as labels)."""
    found = []
    for path, context, english, ko in _units(tc.load_edition(ROOT, "ko")):
        prose = _CODE.sub(" ", ko)
        if context == "verdict" and english not in VERDICT_PHRASES:
            sentence = ko
            while sentence != (shorter := re.sub(r"\s*(\([^()]*\)|\{\w+\}|:\s*\{\w+\})$", "", sentence)):
                sentence = shorter
            if not sentence.endswith(("다", "요", "?")):
                found.append(f"{path} [{context}]: {ko!r} (a whole sentence, 합니다체)")
        found += [f"{path} [{context}]: {m.group(0)!r} (ask with -ㄹ까요? or -나요?)"
                  for m in re.finditer(r"[가-힣]*([가-힣])니까\?", prose) if _final_b(m.group(1))]
        found += [f"{path} [{context}]: {w!r} (emphasis in English capitals)" for w in
                  re.findall(r"(?<![A-Za-z0-9_.])[A-Z][A-Z0-9]+(?![A-Za-z0-9_.(])", prose) if w not in ACRONYMS]
    assert not found, "\n".join(found)


def _literal_delimiters(markdown: str) -> int:
    """Emphasis markers CommonMark leaves as text (``**`code`**을`` does not render as bold)."""
    from markdown_it import MarkdownIt

    count = 0
    for token in MarkdownIt("commonmark").parse(markdown):
        for child in token.children or []:
            if child.type == "text":
                count += len(re.findall(r"\*\*|(?<![\s*])\*(?![\s*])|(?<=\s)\*(?=[^\s*])|(?<=[^\s*])\*(?=\s)",
                                        child.content))
    return count


def test_edition_emphasis_renders(edition):
    """Bold and italics in the edition render under CommonMark wherever the English's do (Korean
    particles attach to a word: write **`code`을**, not **`code`**을; docs/translating.md)."""
    pytest.importorskip("markdown_it")
    found = []
    for english in sorted(edition.files):
        built = edition.built_path(english)
        if built.suffix != ".ipynb":
            pairs = [("README", tc.readme_section((ROOT / english).read_text(encoding="utf-8")),
                      built.read_text(encoding="utf-8"))]
        else:
            pairs = [(c.get("id"), e.source, c.source) for e, c in zip(
                read_notebook(ROOT / english).cells, read_notebook(built).cells) if c.cell_type == "markdown"]
        found += [f"{built.relative_to(ROOT)} [{cell}] (catalog {edition.catalog_path(english).relative_to(ROOT)})"
                  for cell, en, ko in pairs if _literal_delimiters(ko) > _literal_delimiters(en)]
    assert not found, "emphasis markers left as literal text:\n" + "\n".join(found)


def _named_paths(text: str, base, root):
    """(where it resolves, how it was written) for each repository path a student-facing text names:
    relative links (from the file's folder), Colab badges (the repository path they open), and paths
    written out as code or text that start at a top-level folder of the repository (from the root;
    ``lessonN`` stands for lesson 1)."""
    colab = course_style.colab_url("")
    tops = {p.name for p in root.iterdir() if not p.name.startswith(".")}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(colab):
            yield root / target[len(colab):], target
        elif not re.match(r"^[a-z][a-z0-9+.-]*:|^#", target):
            yield base / target.partition("#")[0], target
    prose = re.sub(r"\]\([^)\s]*\)|https?://\S+", " ", text)
    for name in re.findall(r"(?<![\w./-])((?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]*)", prose):
        if name.split("/")[0] in tops:
            yield root / name.replace("lessonN", "lesson1"), name


def test_korean_readme_and_course_map_name_the_korean_edition():
    """README.ko.md and the Korean course map: every path they name exists and is the Korean
    edition's where it has one (but on the line that offers the English), and neither says the
    edition is still in English."""
    edition = tc.load_edition(ROOT, "ko")
    found = []
    for english in ["README.md", "notebooks/00_index.ipynb"]:
        built = edition.built_path(english)
        text = built.read_text(encoding="utf-8")
        if built.suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.reads(text, 4).cells if c.cell_type == "markdown")
        where = built.relative_to(ROOT)
        found += [f"{where}: says the edition is still in English: {line.strip()[:80]}"
                  for line in text.splitlines() if re.search(r"아직 영어|still in English", line)]
        for line in text.splitlines():
            for path, written in _named_paths(line, built.parent, ROOT):
                path = path.resolve()
                if not path.exists():
                    found.append(f"{where}: {written} does not exist")
                    continue
                inside = path.relative_to(ROOT) if path.is_relative_to(ROOT) else None
                korean = ROOT / "ko" / inside if inside is not None else None
                if (inside is not None and inside.parts[0] != "ko" and korean.exists()
                        and not line.lstrip().startswith("English:")):
                    found.append(f"{where}: {written} is the English edition's; the Korean one is "
                                 f"{korean.relative_to(ROOT)}")
    assert not found, "\n".join(found)


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
    """Every unit translated, and the outputs as ``build`` writes them."""
    out = nbformat.from_dict(nb)
    for english, cell in zip(nb.cells, out.cells):
        cell.source = tu.translate_text(cell.source, tu.cell_units(cell), lambda t, c=cell: _pseudo(
            t, next(u.kind for u in tu.cell_units(c) if c.source[u.start:u.end] == t)), "test")
        if cell.cell_type == "code":
            cell.outputs = tl.printed_outputs(english, cell.source)
    return out


@pytest.mark.parametrize("english", [f for f in tc.translatable_files(ROOT) if f.endswith(".ipynb")])
def test_translating_every_unit_changes_no_code(english):
    """Every unit of every English notebook translated: still the same notebook but for text, and each
    unit really was replaced (so a unit never holds code, a hidden test or a solution)."""
    nb = read_notebook(ROOT / english)
    translated = _pseudo_translate(nb)
    assert td.differences(nb, translated, english) == []
    units = [m.id for m in tc.template(translated, english) if m.id and not m.context.endswith(tc.PART)]
    left = [u for u in units if "번역" not in u]
    assert units and not left, f"units not replaced: {left[:3]}"


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
    units = [nb.cells[0].source[u.start:u.end] for u in tu.cell_units(nb.cells[0])]
    assert units == ["# Title", "First paragraph.", "| a | b |", "| one | two |"]
    code = [CODE[u.start:u.end] for u in tu.cell_units(nb.cells[1])]
    assert code == ["# check the shape", '"f(1) should be 2"', 'f"the value is {f(1)}"']


def test_units_are_what_a_student_reads_and_nothing_used_as_data():
    markdown = ("Solutions:\n\n1. ```python\n   # keep the key\n   x = f(1)\n   ```\n   Then it is pure.\n\n"
                "2. Done.")
    assert [markdown[u.start:u.end] for u in tu.markdown_units(markdown)] == [
        "Solutions:", "# keep the key", "   Then it is pure.", "2. Done."], "a fence opened on a list item's line"
    code = ('for hint, wrong in [("the sum, not the mean", 3.0), ("off by one", 2.0)]:\n'
            '    assert not close(value, wrong), hint\n'
            'try:\n    f(1)\nexcept Exception as exc:\n    raise AssertionError(f"f(1) raised {exc}") from None\n'
            'print("python print")\n'
            'seen = out.count("python print")\n'
            'print("the whole output", seen)\n')
    assert [code[u.start:u.end] for u in tu.code_units(code)] == [
        '"the sum, not the mean"', '"off by one"', 'f"f(1) raised {exc}"', '"the whole output"'
    ], "hints an assert names, an exception's message; a printed line the test counts is data"
    code = ('def half(x):\n    """Half of x."""\n    return x / 2\n'
            'assert half(4) == 2, f"half(4) is {half(4)}: " + ("divide, do not multiply" if half(4) == 8 else\n'
            '                                               "check " + "the sign")\n'
            'assert mode() == "train mode", "mode() must return " + repr("train mode")\n')
    assert [code[u.start:u.end] for u in tu.code_units(code)] == [
        '"""Half of x."""', 'f"half(4) is {half(4)}: "', '"divide, do not multiply"', '"check "', '"the sign"',
        '"mode() must return "'], "docstrings, and the literals a message is joined from (not data it quotes)"


def test_a_changed_english_unit_is_stale_until_translated_again(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "README.md").write_text("# Course\n\n## Students\n\nRead the map.\n", encoding="utf-8")
    path = tmp_path / "notebooks" / "00_index.ipynb"
    nbformat.write(_nb("# Title\n\nFirst paragraph.", CODE), path)
    (tmp_path / "i18n" / "ko").mkdir(parents=True)
    (tmp_path / "i18n" / "ko" / "edition.toml").write_text('files = ["notebooks/00_index.ipynb"]\n')
    tr.update(tmp_path, "ko")
    edition = tc.load_edition(tmp_path, "ko")
    po = edition.catalog_path("notebooks/00_index.ipynb")
    catalog = tc.read_catalog(po)
    assert len(tc.problems(tc.english_template(tmp_path, "notebooks/00_index.ipynb"), catalog)) == 5
    for message in catalog:
        if message.id:
            message.string = _pseudo(message.id, "comment" if message.id.startswith("# c") else
                                     "string" if message.id[:2] in ('"f', 'f"') else "markdown")
    tc.write_catalog(catalog, po)
    assert tc.problems(tc.english_template(tmp_path, "notebooks/00_index.ipynb"), tc.read_catalog(po)) == []
    tb.build(tmp_path, "ko")
    built = read_notebook(tmp_path / "ko" / "notebooks" / "00_index.ipynb")
    assert built.cells[0].source == "번역: # Title\n\n번역: First paragraph."

    nb = read_notebook(path)
    nb.cells[0].source = "# Title\n\nFirst paragraph, changed."
    nbformat.write(nb, path)
    tr.update(tmp_path, "ko")
    stale = tc.problems(tc.english_template(tmp_path, "notebooks/00_index.ipynb"), tc.read_catalog(po))
    assert len(stale) == 1 and "stale" in stale[0]
    assert "#| msgid \"First paragraph.\"" in po.read_text(encoding="utf-8")
    assert tb.built_text(edition, "notebooks/00_index.ipynb") != (tmp_path / "ko/notebooks/00_index.ipynb").read_text()
    rebuilt = tb.build_notebook(nb, tc.read_catalog(po), "notebooks/00_index.ipynb", edition)
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
    assert td.differences(english, translated) == []
    change(translated)
    found = td.differences(english, translated)
    assert found and expected in found[0], found


def test_printed_outputs_follow_the_translated_print_strings():
    """A built lecture's committed outputs say what its translated ``print`` calls would print; values,
    and anything else in the outputs, stay as the English run wrote them (and differences checks it)."""
    english = _nb("# Title", 'print("the value is", v, "| after the step:", w)\nprint(f"{n} compilations for n = {ns}")\n'
                  'print("data")\nv')
    english.cells[1].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="the value is 3 | after the step: [1 2]\n"
                               "7 compilations for n = (1, 2)\ndata\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "the value is 3"}, execution_count=1)]
    korean = nbformat.from_dict(english)
    korean.cells[1].source = ('print("값은", v, "| step 후:", w)\nprint(f"n = {ns}일 때 컴파일 {n}번")\n'
                              'print("data")\nv')
    outputs = tl.printed_outputs(english.cells[1], korean.cells[1].source)
    assert outputs[0]["text"] == "값은 3 | step 후: [1 2]\nn = (1, 2)일 때 컴파일 7번\ndata\n"
    assert outputs[1] == english.cells[1].outputs[1], "only what print wrote"
    assert english.cells[1].outputs[0]["text"].startswith("the value is"), "the English is not touched"
    assert td.differences(english, korean) == [" cell 2: outputs differ (other than the text of translated print strings)"]
    korean.cells[1].outputs = outputs
    assert td.differences(english, korean) == []
    korean.cells[1].outputs[0]["text"] = korean.cells[1].outputs[0]["text"].replace("3", "4")
    assert td.differences(english, korean), "a changed value is a difference"


def test_a_translation_that_is_not_a_comment_or_a_literal_is_refused():
    units = tu.code_units(CODE)
    with pytest.raises(tc.CourseError, match="one Python string literal"):
        tu.translate_text(CODE, units, lambda t: '"x"); import os; ("' if t.startswith('"f(1)') else None, "ko.po")
    with pytest.raises(tc.CourseError, match="one line starting with '#'"):
        tu.translate_text(CODE, units, lambda t: "# 확인\nimport os" if t.startswith("# check") else None, "ko.po")


REPORTING = ('assert f(1) == 2, "f(1) should be 2"\n### BEGIN HIDDEN TESTS\n'
             'from jaxgrader.checks.report import key as _key, report as _report\n'
             'for _i in range(2):\n'
             '    _report(f"f on draw {_i}: the value", f(_i))\n'
             '_report("f(3), bit for bit", f(3), rule="equal")\n'
             '_name = "a name in a variable"\n_report(_name, f(4))\nprint("no part; here", 1)\n'
             '### END HIDDEN TESTS')


def test_part_names_are_feedback_units_never_put_in_the_notebook(tmp_path):
    """The names a hidden test reports parts under are units of the notebook's catalog (context
    '<cell id>:part', for feedback), but the built notebook keeps its hidden test byte for byte."""
    assert [REPORTING[u.start:u.end] for u in tu.part_units(REPORTING)] == [
        'f"f on draw {_i}: the value"', '"f(3), bit for bit"'], "literal first arguments of report only"
    assert '"f(3), bit for bit"' not in [REPORTING[u.start:u.end] for u in tu.code_units(REPORTING)]
    nb = _nb("# Title", REPORTING)
    catalog = tc.template(nb, "notebooks/x.ipynb")
    parts = {m.id: m.context for m in catalog if m.id and m.context.endswith(tc.PART)}
    assert parts == {'f"f on draw {_i}: the value"': "c1:part", '"f(3), bit for bit"': "c1:part"}
    (tmp_path / "i18n" / "ko").mkdir(parents=True)
    edition = tc.Edition(tmp_path, "ko", ())
    for message in catalog:
        if message.id:
            message.string = _pseudo(message.id, "markdown" if message.context == "m1" else "string")
    built = tb.build_notebook(nb, catalog, "notebooks/x.ipynb", edition)
    assert built.cells[1].source == REPORTING.replace('"f(1) should be 2"', '"번역 f(1) should be 2"')
    for bad, why in [('f"f on draw: the value"', "keep every {field}"), ('f"{_i} {_j}"', "keep every {field}"),
                     ('"a" + "b"', "one Python string literal")]:
        catalog.get('f"f on draw {_i}: the value"', context="c1:part").string = bad
        with pytest.raises(tc.CourseError, match=re.escape(why)):
            tb.build_notebook(nb, catalog, "notebooks/x.ipynb", edition)


def test_every_part_a_hidden_test_reports_is_named_by_a_literal():
    """So that every part's name has a unit an edition translates (a name built at run time stays English)."""
    unnamed = []
    for english in tc.translatable_files(ROOT):
        if not english.startswith("source/"):
            continue
        for cell in read_notebook(ROOT / english).cells:
            if cell.cell_type == "code" and "### BEGIN HIDDEN TESTS" in cell.source:
                calls = len(re.findall(r"\b_report\(", cell.source))
                if calls != len(tu.part_units(cell.source)):
                    unnamed.append(f"{english} {cell.get('id')}: {calls} report calls, "
                                   f"{len(tu.part_units(cell.source))} named by a literal")
    assert not unnamed, "\n".join(unnamed)


# --------------------------------------------------------------------------- feedback in the edition's language


def _judged(outputs, reference, source="assert True\n### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS"):
    """A test cell judged by the real Verdict (no kernel: the outputs are what a kernel would send)."""
    from jaxgrader.checks.report import MIME, encode
    from jaxgrader.grading.verdict.verdict import Verdict

    def out(name, value, rule="close", bound=None):
        return {"output_type": "display_data", "metadata": {},
                "data": {MIME: {"name": name, "rule": rule, "rtol": 1e-5, "atol": 1e-6, "bound": bound,
                                "value": encode(value)}}}

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source, id="t1")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test_f", "locked": True, "points": 1,
                                 "schema_version": 3, "solution": False, "task": False}
    cell.outputs = [nbformat.from_dict(o) if isinstance(o, dict) and "output_type" in o and o["output_type"] == "error"
                    else nbformat.from_dict(out(*o)) for o in outputs]
    nb.cells = [cell]
    refs = {"x": {"test_f": [out(*r)["data"][MIME] for r in reference]}}
    Verdict(references=refs).preprocess(nb, {"nbgrader": {"notebook": "x"}})
    return nb.cells[0]


def _texts(cell):
    return [o["data"]["text/plain"] if o["output_type"] == "display_data" else o["evalue"] for o in cell.outputs]


def _korean_feedback():
    from jaxgrader.grading.editions.localize import GRADER, Translator

    edition = tc.load_edition(ROOT, "ko")
    return Translator(tc.read_catalog(edition.catalogs / f"{GRADER}.po"))


VERDICTS = [  # (student's reports, reference's): together they make the verdict say each of its sentences
    ([("a", 1.0)], [("a", 1.0)]),
    ([("a", 1.0), ("b", 2.0)], [("a", 1.0), ("b", 2.0)]),
    ([("a", [1.0, 2.0])], [("a", [1.0, 3.0])]),
    ([("a", np.array([1.0, 2.0]))], [("a", np.array([1.0, 3.0]))]),
    ([("a", np.ones(3))], [("a", np.ones(2))]),
    ([("a", 1.0)], [("a", 2.0)]),
    ([("a", {"W": [[1.0, 2.0], [3.0, 4.0]]})], [("a", {"W": [[1.0, 2.0], [3.0, 5.0]]})]),
    ([], [("a", 1.0)]),
    ([("a", 1.0), ("a", 1.0)], [("a", 1.0)]),
    ([("a", False, "true")], [("a", True, "true")]),
    ([("a", 9.0, "at_most", 2.0)], [("a", 1.0, "at_most", 2.0)]),
    ([("a", 0.1, "at_least", 0.9)], [("a", 1.0, "at_least", 0.9)]),
    ([("a", "x", "at_least", 0.9)], [("a", 1.0, "at_least", 0.9)]),
    ([("a", {"V": 1.0})], [("a", {"W": 1.0})]),
    ([("a", [1.0])], [("a", [1.0, 2.0])]),
    ([("a", "yes")], [("a", "no")]),
    ([("a", [True, False])], [("a", [1.0, 0.0])]),
    ([("a", [1, 2], "equal")], [("a", [1, 3], "equal")]),
    ([("a", [1.5, 2.0], "equal")], [("a", [1, 2], "equal")]),
    ([], [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0), ("e", 1.0)]),
    ([{"output_type": "error", "ename": "AssertionError", "evalue": "f(1) should be 2", "traceback": []}],
     [("a", 1.0)]),
    ([{"output_type": "error", "ename": "AssertionError", "evalue": "not in the cell", "traceback": []}],
     [("a", 1.0)]),
    ([{"output_type": "error", "ename": "NameError", "evalue": "name 'f' is not defined", "traceback": []}],
     [("a", 1.0)]),
    ([{"output_type": "error", "ename": "Weird", "evalue": "x", "traceback": []}], [("a", 1.0)]),
    ([("a", 1.0)], []),
]


@pytest.mark.parametrize("student, reference", VERDICTS)
def test_every_verdict_sentence_has_a_korean_template(student, reference):
    """The real verdict's lines, fed through the Korean feedback catalog: nothing stays English."""
    cell = _judged(student, reference, source='assert f(1) == 2, "f(1) should be 2"\n### BEGIN HIDDEN TESTS\n')
    english = _texts(cell)
    _korean_feedback().verdict(cell)
    korean = _texts(cell)
    for en, ko in zip(english, korean):
        words = re.sub(r"'[^']*'|\"[^\"]*\"|\([^()]*\)|\[[^\]]*\]|\b[a-z]\b|NameError|Weird", "", ko)
        assert re.search(r"[가-힣]", ko) and not re.search(r"\b(the|of|than|instead|not|expected|at)\b", words), \
            (en, ko)


def _rule_messages():
    """Every failure message of the rules judged from evidence (judging.CHECKS), from real calls."""
    import jax
    import jax.numpy as jnp

    from jaxgrader.grading.verdict.judging import CHECKS

    lowered = jax.jit(lambda a, b: a * b).lower(jnp.ones(3), jnp.ones(3)).as_text()
    jaxpr = str(jax.make_jaxpr(lambda a: a * 2)(jnp.ones(3)))
    wide = str(jax.make_jaxpr(lambda a: jnp.outer(a, a).sum(0))(jnp.ones(3)))
    labels = {"y": {"value": np.array([1, 2, 3])}}
    cases = [
        ("finite", "x", {}, {}), ("finite", [1.0, float("nan")], {}, {}),
        ("all_equal", 1.0, {}, {}), ("all_equal", [1.0, 2.0], {}, {}), ("all_distinct", [1.0, 1.0], {}, {}),
        ("falls", "x", {"bound": 0.5}, {}), ("falls", [-1.0, 1.0], {"bound": 0.5}, {}),
        ("falls", [1.0] * 6, {"bound": 0.5}, {}),
        ("agrees", "x", {"against": "y", "bound": 0.9}, {"reference": labels}),
        ("agrees", np.array([1.0, 2.0]), {"against": "y", "bound": 0.9}, {"reference": labels}),
        ("agrees", np.array([1, 0, 0]), {"against": "y", "bound": 0.9}, {"reference": labels}),
        ("within_factor", -1.0, {"value": 1.0, "bound": 2.0}, {}), ("within_factor", 9.0, {"value": 1.0, "bound": 2.0}, {}),
        ("ratio_at_least", [1.0], {"bound": 2.0}, {}), ("ratio_at_least", [1.0, 1.0], {"bound": 2.0}, {}),
        ("jitted", None, {"value": lowered}, {}), ("same_program", [lowered], {"value": [lowered, lowered]}, {}),
        ("same_program", [lowered, None], {"value": [lowered, lowered]}, {}),
        ("no_growth", ["", ""], {}, {}), ("no_growth", [jaxpr, wide], {}, {}),
        ("largest_value", None, {"value": jaxpr}, {}), ("largest_value", wide, {"value": jaxpr}, {}),
        ("largest_value", str(jax.make_jaxpr(lambda a: a)(jnp.ones(4))), {"value": jaxpr}, {}),
        ("within_cell_time", [1.0], {}, {}), ("within_cell_time", "x", {}, {"seconds": 1.0}),
        ("within_cell_time", [5.0], {}, {"seconds": 1.0}),
    ]
    from jaxgrader.grading.verdict.judging import (  # judge_cell's own, for cell_time and scores
        UNCHECKED_TRAINING, UNCHECKED_WORK, UNFRESH_WORK, UNREPORTED_TRAINING, UNREPORTED_WORK)

    return [CHECKS[rule](value, ref, context) for rule, value, ref, context in cases] + [
        UNCHECKED_WORK, UNREPORTED_WORK, UNFRESH_WORK, UNCHECKED_TRAINING, UNREPORTED_TRAINING]


def test_every_rule_message_has_a_korean_template():
    translator = _korean_feedback()
    messages = _rule_messages()
    assert all(messages), "every case above fails its rule"
    for en in messages:
        ko = translator.line(en)
        words = re.sub(r"'[^']*'|\"[^\"]*\"|\([^()]*\)|\[[^\]]*\]|tensor<[^>]*>|\b[a-z]\b", "", ko)
        assert re.search(r"[가-힣]", ko) and not re.search(r"\b(the|of|than|instead|not|expected|is|no)\b", words), \
            (en, ko)


def test_visible_test_messages_are_translated_with_their_fields():
    from jaxgrader.grading.editions.localize import Translator

    catalog = tc.Catalog(locale="ko")
    catalog.add('f"predict returned shape {jnp.shape(_ya)}; expected {want}"', context="c1",
                string='f"predict가 반환한 shape은 {jnp.shape(_ya)}입니다. 기대한 shape은 {want}입니다"')
    catalog.add('"the bias is missing"', context="c1", string='"bias가 빠졌습니다"')
    translator = Translator(tc.read_catalog(tc.load_edition(ROOT, "ko").catalogs / "grader.po"), catalog)
    assert translator.line("a visible test failed: predict returned shape (3,); expected (2,)") == \
        "공개 테스트 실패: predict가 반환한 shape은 (3,)입니다. 기대한 shape은 (2,)입니다"
    assert translator.line("a visible test failed: the bias is missing") == "공개 테스트 실패: bias가 빠졌습니다"
    assert translator.line("a visible test failed: something else") == "공개 테스트 실패: something else"


def test_part_names_in_feedback_are_translated_with_their_fields():
    """A failed part's name is matched against the notebook's part units (its values carried over), also
    where the name itself holds the verdict's separators ': ' and '; '; a name without a unit stays."""
    from jaxgrader.grading.editions.localize import Translator

    catalog = tc.Catalog(locale="ko")
    catalog.add('f"f on draw {_i}: the value"', context="c1:part", string='f"{_i}번째 입력의 f: 값"')
    catalog.add('"f(3); bit for bit"', context="c1:part", string='"f(3); 비트 단위로"')
    catalog.add('"the value"', context="c1", string='"엉뚱한 번역"')  # an assert message, not a part name
    translator = Translator(tc.read_catalog(tc.load_edition(ROOT, "ko").catalogs / "grader.po"), catalog)
    names = ["f on draw 0: the value", "f on draw 1: the value", "f(3); bit for bit", "the value"]
    cell = _judged([(n, 1.0) for n in names], [(n, 2.0) for n in names])
    translator.verdict(cell)
    wrong = "기대한 값과 다릅니다 (결과 1, 기댓값 2)"
    assert _texts(cell)[1] == f"0번째 입력의 f: 값: {wrong}; 1번째 입력의 f: 값: {wrong}; f(3); 비트 단위로: {wrong}; ... 그 밖에 1개"
    assert translator.part("the value") == "the value" and translator.part("(report)") != "(report)"


def test_feedback_follows_the_edition_the_student_submitted(tmp_path):
    """A tmp course with an English and a Korean release of one notebook: the Korean student's feedback
    gets the Korean prompt, visible test and verdict; the English student's stays as nbgrader wrote it."""
    import shutil

    from traitlets.config import Config

    from jaxgrader.grading.editions.localize import LocalizeFeedback

    english = _nb("# Exercise\n\nWrite f.", CODE)
    english.cells[0].metadata["nbgrader"] = {"grade": False, "grade_id": "prompt_f", "locked": True,
                                             "schema_version": 3, "solution": False, "task": False}
    korean = _pseudo_translate(english)
    for folder, nb in [("release", english), ("ko/release", korean), ("submitted/en1", english),
                       ("submitted/ko1", korean)]:
        (tmp_path / folder / "lesson9").mkdir(parents=True)
        nbformat.write(nb, tmp_path / folder / "lesson9" / "x.ipynb")
    (tmp_path / "i18n" / "ko" / "LC_MESSAGES").mkdir(parents=True)
    (tmp_path / "i18n" / "ko" / "edition.toml").write_text("files = []\n")
    shutil.copy(ROOT / "i18n" / "ko" / "LC_MESSAGES" / "grader.po", tmp_path / "i18n" / "ko" / "LC_MESSAGES")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    judged = _judged([("a", 1.0)], [("a", 2.0)], source=CODE)

    def feedback(student):
        nb = nbformat.from_dict(english)
        nb.cells[1].outputs = nbformat.from_dict(judged.outputs)
        return LocalizeFeedback(config=config).preprocess(
            nb, {"nbgrader": {"student": student, "assignment": "lesson9", "notebook": "x"}})[0]

    ko, en = feedback("ko1"), feedback("en1")
    assert ko.cells[0].source == korean.cells[0].source and ko.cells[1].source == korean.cells[1].source
    assert _texts(ko.cells[1]) == ["실패: 1개 항목 중 1개가 실패했습니다 (0개 통과)", "a: 기대한 값과 다릅니다 (결과 1, 기댓값 2)"]
    assert en.cells[0].source == english.cells[0].source and _texts(en.cells[1]) == _texts(judged)
    (tmp_path / "i18n" / "ko" / "LC_MESSAGES" / "grader.po").write_text("msgid \"broken")
    broken = feedback("ko1")  # a broken catalog costs the language, not the feedback
    assert broken.cells[0].source == english.cells[0].source and _texts(broken.cells[1]) == _texts(judged)


# Grading an edition: the trials grade the Korean solution, release and every other pack of wrong
# answers in the Korean release (jaxgrader.grading.trials, tests/test_assignments.py), and the demo
# class's Korean student gets cy's score with feedback in Korean (tests/test_course.py).


def test_links_follow_the_edition_as_it_grows(tmp_path):
    badge = course_style.badge("notebooks/lesson1_x.ipynb")
    index = _nb(f"See [lesson 1](lesson1_x.ipynb) {badge} and [its assignment](../release/lesson1/x.ipynb).", "x = 1")
    (tmp_path / "notebooks").mkdir()
    nbformat.write(index, tmp_path / "notebooks" / "00_index.ipynb")
    nbformat.write(_nb("# Lesson 1", "x = 1"), tmp_path / "notebooks" / "lesson1_x.ipynb")
    (tmp_path / "README.md").write_text("## Students\n\nHello.\n")
    (tmp_path / "i18n" / "ko").mkdir(parents=True)

    def built(files):
        (tmp_path / "i18n" / "ko" / "edition.toml").write_text(f"files = {files!r}\n".replace("'", '"'))
        tr.update(tmp_path, "ko")
        edition = tc.load_edition(tmp_path, "ko")
        catalog = tc.read_catalog(edition.catalog_path("notebooks/00_index.ipynb"))
        return tb.build_notebook(index, catalog, "notebooks/00_index.ipynb", edition).cells[0].source

    alone = built(["notebooks/00_index.ipynb"])
    assert "](../../notebooks/lesson1_x.ipynb)" in alone and "](../../release/lesson1/x.ipynb)" in alone
    assert course_style.colab_url("notebooks/lesson1_x.ipynb") + ")" in alone
    both = built(["notebooks/00_index.ipynb", "notebooks/lesson1_x.ipynb"])
    assert "](lesson1_x.ipynb)" in both and "](../../release/lesson1/x.ipynb)" in both
    assert course_style.colab_url("ko/notebooks/lesson1_x.ipynb") + ")" in both
