"""A submission held for review (jaxgrader/grading/verdict/holds.py), graded for real, then released.

In a small course like tests/test_forger.py's, with one test per kind of evidence (a cost on the grader's clock, a
value, an artifact the grader evaluates), a student answers everything correctly and pastes one cell the course does not
need: an IPython hook. The hook is harmless here, but it is how a kernel stages a timed cell. Graded, the student
keeps the value parts, and the cost and artifact parts are held at 0 naming the pasted cell's line; the table and
the class report list the submission with the line; `jaxgrader review tiny hooked` releases it, grades it again,
and every point comes back.
"""

from __future__ import annotations

import csv
import html
import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from jaxgrader.grading.course.notebooks import fill_answers, read_notebook

from .conftest import ROOT
from .test_forger import DATA, MASKS, SETUP, STEP, TRAIN, _meta, _test

pytestmark = pytest.mark.slow

# the timed workload draws its inputs from the cell's nonce (filled in as the cell runs; before that change, plain)
NONCE = ('try:\n    _r = _rng(0, "{jaxgrader-nonce}")\nexcept TypeError:\n    _r = _rng(0)\n'
         "_xs = _r.normal(size=(3000, 4)).astype(np.float32)\n")

HOOK = "get_ipython().events.register('pre_run_cell', lambda info: None)  # pasted from a classmate"


def _course(root):
    """test_forger's course with one test per kind of evidence: a cost, a value, an artifact."""
    from nbformat.v4 import new_markdown_cell, new_notebook

    cells = [new_code_cell(SETUP, metadata=_meta(locked=True, grade_id="setup"))]
    for gid, code in (("step", STEP), ("masks", MASKS), ("train", TRAIN)):
        cells += [new_markdown_cell(f"## Exercise: {gid}"), new_code_cell(
            "### BEGIN SOLUTION\n" + code + "\n### END SOLUTION", metadata=_meta(solution=True, grade_id=gid))]
    cells += [
        _test("test_step_cost", 1, "from jaxgrader.checks.report import rng as _rng\n" + NONCE
              + "_ys = np.stack(jax.device_get([step(_x) for _x in _xs]))\n"
              '_report("what 3000 calls of step computed", _ys)\n_report("3000 calls of step", None, rule="cell_time", '
              "bound=4)"),
        _test("test_masks_values", 1, '_report("masks of a key", masks(_key(0)), rule="equal")'),
        _test("test_train_scores", 1, DATA + '\n_w, _l = train(_x, _y)\n_report("weights", [_w], rule="scores", '
                                            'bound=0.05, model=_exported(lambda w, x: x @ w, _w, _x), '
                                            'data={"x": _x, "y": _y})'),
    ]
    (root / "source" / "tiny").mkdir(parents=True)
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                      "language": "python"}}),
                   root / "source" / "tiny" / "tiny.ipynb")
    (root / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text()
                                             + '\nc.SandboxedKernelManager.preload = ["jax", "jax.numpy", '
                                             '"jaxgrader.checks"]\nc.JaxGrader.workers = 1\n')
    from jaxgrader.grading.cli import main

    assert main(["--root", str(root), "release", "-a", "tiny"]) == 0


def _summary(root) -> dict:
    return {r["student"]: r for r in json.loads((root / "grading-summary.json").read_text())}


def test_a_pasted_hook_holds_cost_and_artifact_parts_until_the_teacher_releases_them(tmp_path, capsys):
    from jaxgrader.grading.cli import main

    root = tmp_path / "class"
    _course(root)
    nb = fill_answers(read_notebook(root / "release" / "tiny" / "tiny.ipynb"),
                      {"step": STEP, "masks": MASKS, "train": TRAIN})
    nb.cells.insert(1, new_code_cell(HOOK))
    (root / "submitted" / "hooked" / "tiny").mkdir(parents=True)
    nbformat.write(nb, root / "submitted" / "hooked" / "tiny" / "tiny.ipynb")

    assert main(["--root", str(root), "grade", "-a", "tiny"]) == 0
    out = capsys.readouterr().out
    record = _summary(root)["hooked"]
    cells = record["cells"]["tiny"]
    held = {gid for gid, cell in cells.items() if any(p.get("held") for p in cell["parts"])}
    assert "test_step_cost" in held and held <= {"test_step_cost", "test_train_scores"}, cells
    assert cells["test_masks_values"]["score"] == 1  # the value part counts
    held_part = next(p for p in cells["test_step_cost"]["parts"] if p.get("held"))
    assert held_part["evidence"] == "cost" and held_part["message"].startswith("held for review: ")
    assert "added cell (cell 1), line 1: get_ipython" in held_part["message"]
    assert next(p for p in cells["test_step_cost"]["parts"] if p["evidence"] == "reference")["passed"]
    finding = record["held"]["tiny"]["findings"][0]
    assert (finding["where"], finding["cell"], finding["line"], finding["text"]) == ("added cell", 1, 1, HOOK)
    assert not record["held"]["tiny"]["released"] and record["score"] == 1
    before = record["score"]
    assert "held for review" in out and "hooked/tiny: tiny.ipynb added cell (cell 1), line 1: get_ipython" in out

    page = (root / "reports" / "tiny.html").read_text()
    assert "id='held'" in page and "jaxgrader review tiny hooked" in page and html.escape(HOOK) in page
    with open(root / "reports" / "tiny.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["exercise"] == "held for review"]
    assert [(r["test"], r["most_common_reason"]) for r in rows] == [("hooked", HOOK)]
    assert rows[0]["check"].startswith("added cell (cell 1), line 1: get_ipython")

    assert main(["--root", str(root), "review", "tiny"]) == 0  # the list
    assert "tiny: 1 submission held for review" in capsys.readouterr().out
    assert main(["--root", str(root), "review", "tiny", "nobody"]) == 1
    assert "nobody/tiny: nothing held for review" in capsys.readouterr().out

    assert main(["--root", str(root), "review", "tiny", "hooked"]) == 0  # released, graded again
    out = capsys.readouterr().out
    assert "released hooked/tiny: tiny.ipynb" in out and "held for review (" not in out
    record = _summary(root)["hooked"]
    cells = record["cells"]["tiny"]
    assert record["held"]["tiny"]["released"] and not any(p.get("held") for c in cells.values() for p in c["parts"])
    assert {gid for gid, cell in cells.items() if cell["score"]} == held | {"test_masks_values"}  # every point back
    assert record["score"] == before + len(held)
    released = json.loads((root / ".grading" / "released.json").read_text())["tiny"]
    assert [(r["student"], r["notebook"]) for r in released.values()] == [("hooked", "tiny")]
    page = (root / "reports" / "tiny.html").read_text()
    assert "hooked (released)" in page and "jaxgrader review tiny hooked" not in page
    assert main(["--root", str(root), "review", "tiny"]) == 0
    assert "tiny: 0 submissions held for review" in capsys.readouterr().out
