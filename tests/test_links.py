"""Colab opens what the course links to, and runs every notebook top to bottom.

* every Colab address (badges and cross-links) in notebooks/, source/ and release/ names the
  published repository and branch (``course_style.REPOSITORY``/``BRANCH``) and a file of the
  course at that path;
* every relative link to a notebook resolves to a file (JupyterLab) and has a Colab link to the
  same file beside it (Colab cannot follow relative links);
* ``jaxgrader publish`` rewrites another repository's addresses and is idempotent;
* no cell relies on ``raises-exception`` (Colab ignores the tag, and "Run all" stops at the
  first error): a demo that fails on purpose runs inside the setup cell's ``fails_on_purpose``.
"""

from __future__ import annotations

import posixpath
import re

import pytest

from jaxgrader import course_style
from jaxgrader.grading.publish import COLAB, RELATIVE, notebooks, publish_text
from jaxgrader.grading.course.notebooks import read_notebook

from .conftest import ROOT

NOTEBOOKS = [p.relative_to(ROOT).as_posix() for p in notebooks(ROOT)]
PREFIX = f"https://colab.research.google.com/github/{course_style.REPOSITORY}/blob/{course_style.BRANCH}/"


def _markdown(path: str) -> list[str]:
    return [c.source for c in read_notebook(ROOT / path).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_colab_links_name_the_published_repository_and_a_file_of_the_course(path):
    found = [m for text in _markdown(path) for m in COLAB.finditer(text)]
    assert found, f"{path}: no Colab link (its badge)"
    for m in found:
        assert m.group(0).startswith(PREFIX), f"{path}: {m.group(0)} is not in {PREFIX} (run `jaxgrader publish`)"
        assert (ROOT / m.group(1)).is_file(), f"{path}: {m.group(0)} names no file of the course"


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_relative_links_resolve_and_have_a_colab_link_beside_them(path):
    for text in _markdown(path):
        for m in RELATIVE.finditer(text):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), m["target"]))
            assert (ROOT / target).is_file(), f"{path}: {m['target']} does not resolve"
            after = text[m.end():m.end() + 300]
            badge = after.startswith(" [![Open In Colab]") and course_style.colab_url(target) in after
            assert m["colab"] or badge, f"{path}: {m['target']} has no Colab link beside it (`jaxgrader publish`)"
            if m["colab"]:
                assert course_style.colab_url(target) in m["colab"], f"{path}: the Colab link of {m['target']}"


def test_publish_rewrites_other_repositories_and_is_idempotent():
    text = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            "(https://colab.research.google.com/github/someone/fork/blob/dev/release/lesson2/transformations.ipynb)\n"
            "Lecture: [Lesson 2](../../notebooks/lesson2_transformations.ipynb#jit).\n"
            "![a figure](figure.ipynb)")
    once = publish_text(text, "release/lesson2/transformations.ipynb")
    assert "someone/fork" not in once
    assert course_style.colab_url("release/lesson2/transformations.ipynb") in once
    assert ("[Lesson 2](../../notebooks/lesson2_transformations.ipynb#jit) "
            f"([Colab]({course_style.colab_url('notebooks/lesson2_transformations.ipynb')}#jit))") in once
    assert "![a figure](figure.ipynb)" in once
    assert publish_text(once, "release/lesson2/transformations.ipynb") == once


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_cells_that_fail_on_purpose_do_not_stop_run_all(path):
    nb = read_notebook(ROOT / path)
    tagged = [i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])]
    assert not tagged, (f"{path}: cells {tagged} are tagged raises-exception, which Colab ignores: wrap the "
                        "demo in `with fails_on_purpose():` (the setup cell's) instead")
    if path.startswith("notebooks/"):  # committed with outputs: what a student sees after "Run all"
        errors = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                  for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{path}: cells {errors} stop with an error"
