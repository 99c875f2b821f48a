"""release/ is exactly what nbgrader generates from source/, and nothing leaks into it."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from jaxgrader.grading.classrun.run import generate, load_config, make_api
from jaxgrader.grading.course.notebooks import read_notebook

from .conftest import ASSIGNMENTS, ROOT

ALLOWED_IN_RELEASE = {".ipynb"}


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """A scratch course holding a fresh `nbgrader generate_assignment` of every assignment."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source", course / "source")
    generate(make_api(load_config(course, course / "gradebook.db")), ASSIGNMENTS)
    return course / "release"


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _canonical(path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        cell.pop("id", None)
    return nb


def test_release_matches_a_fresh_generation(regenerated):
    committed = ROOT / "release"
    assert _files(committed) == _files(regenerated), "release/ holds other files than nbgrader generates"
    for name in _files(regenerated):
        assert _canonical(committed / name) == _canonical(regenerated / name), (
            f"release/{name} differs from what nbgrader generates: run `jaxgrader release`")


def test_release_holds_only_notebooks():
    for name in _files(ROOT / "release"):
        assert any(name.endswith(ext) for ext in ALLOWED_IN_RELEASE), f"release/{name} is not on the allow-list"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_or_hidden_test_leaks(assignment):
    for path in sorted((ROOT / "release" / assignment).glob("*.ipynb")):
        released = read_notebook(path)
        text = "\n".join(c.source for c in released.cells)
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "jaxgrader"):
            assert marker not in text, f"release/{assignment}/{path.name} contains {marker!r}"
        for cell in released.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: outputs left in release"
        # A solution cell released without its markers would hand out the answer.
        released_solutions = {c.metadata.nbgrader.grade_id: c.source for c in released.cells
                              if c.metadata.get("nbgrader", {}).get("solution")}
        source = read_notebook(ROOT / "source" / assignment / path.name)
        for cell in source.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if not cell.metadata.get("nbgrader", {}).get("solution") or "### BEGIN SOLUTION" not in cell.source:
                continue
            answer = cell.source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
            for line in answer.splitlines():
                line = line.strip()
                if len(line) > 25 and not line.startswith(("def ", "#")) and not re.match(r"^\w+\s*$", line):
                    assert line not in released_solutions.get(gid, ""), (
                        f"release/{assignment}/{path.name}: solution line of {gid} leaked: {line}")
