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

pytestmark = pytest.mark.slow

HOOK = "get_ipython().events.register('pre_run_cell', lambda info: None)  # pasted from a classmate"
SETUP = "import jax\nimport jax.numpy as jnp\nimport numpy as np"
ANSWERS = {
    "step": "@jax.jit\ndef step(x):\n    for _ in range(40):\n        x = jnp.sin(x) * 0.99 + 0.01\n    return x",
    "masks": "def masks(key):\n    return jnp.stack([jax.random.bernoulli(k, 0.5, (8, 8)) for k in jax.random.split(key, 3)])",
    "cumulative": "def cumulative(xs):\n    return jax.lax.scan(lambda c, x: (c + x, c), jnp.zeros(xs.shape[1:]), xs)[1]",
}
TESTS = {  # one per kind of evidence: a cost on the grader's clock (its inputs from the cell's nonce), a value, a
    # program the grader runs on inputs of its own
    "test_step_cost": ('_xs = _rng(0, "{jaxgrader-nonce}").normal(size=(2000, 4)).astype(np.float32)\n'
                       "_ys = np.stack(jax.device_get([step(_x) for _x in _xs]))\n"
                       '_report("what 2000 calls of step computed", _ys)\n'
                       '_report("2000 calls of step", None, rule="cell_time", bound=4)'),
    "test_masks_values": '_report("masks of a key", masks(_key(0)), rule="equal")',
    "test_cumulative": ("_xs = jax.device_put(_rng(3).normal(size=(24, 5)).astype(np.float32))\n"
                        '_report("cumulative(xs)", cumulative(_xs), rtol=1e-5, atol=1e-6)\n'
                        '_report("the program of cumulative", _exported(cumulative, _xs), rule="program", rtol=1e-5, '
                        "atol=1e-6)"),
}


def _meta(**kw):
    return {"nbgrader": {"schema_version": 3, "task": False, "grade": False, "solution": False, "locked": False, **kw}}


def _course(root):
    """A small course like tests/test_forger.py's, one test per kind of evidence."""
    from nbformat.v4 import new_markdown_cell, new_notebook

    from jaxgrader.grading.cli import main

    cells = [new_code_cell(SETUP, metadata=_meta(locked=True, grade_id="setup"))]
    for gid, code in ANSWERS.items():
        cells += [new_markdown_cell(f"## Exercise: {gid}"), new_code_cell(
            "### BEGIN SOLUTION\n" + code + "\n### END SOLUTION", metadata=_meta(solution=True, grade_id=gid))]
    cells += [new_code_cell("### BEGIN HIDDEN TESTS\nfrom jaxgrader.checks.report import key as _key, report as _report, "
                            "rng as _rng\nfrom jaxgrader.checks.programs import exported as _exported\n" + hidden
                            + "\n### END HIDDEN TESTS", metadata=_meta(grade=True, locked=True, points=1, grade_id=gid))
              for gid, hidden in TESTS.items()]
    (root / "source" / "tiny").mkdir(parents=True)
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                      "language": "python"}}),
                   root / "source" / "tiny" / "tiny.ipynb")
    (root / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text()
                                             + '\nc.SandboxedKernelManager.preload = ["jax", "jax.numpy", '
                                             '"jaxgrader.checks"]\nc.JaxGrader.workers = 1\n')
    assert main(["--root", str(root), "release", "-a", "tiny"]) == 0


def _summary(root) -> dict:
    return {r["student"]: r for r in json.loads((root / "grading-summary.json").read_text())}


def test_a_pasted_hook_holds_cost_and_artifact_parts_until_the_teacher_releases_them(tmp_path, capsys):
    from jaxgrader.grading.cli import main

    root = tmp_path / "class"
    _course(root)
    nb = fill_answers(read_notebook(root / "release" / "tiny" / "tiny.ipynb"), ANSWERS)
    nb.cells.insert(1, new_code_cell(HOOK))
    (root / "submitted" / "hooked" / "tiny").mkdir(parents=True)
    nbformat.write(nb, root / "submitted" / "hooked" / "tiny" / "tiny.ipynb")

    assert main(["--root", str(root), "grade", "-a", "tiny"]) == 0
    out = capsys.readouterr().out
    record = _summary(root)["hooked"]
    cells = record["cells"]["tiny"]
    held = {gid for gid, cell in cells.items() if any(p.get("held") for p in cell["parts"])}
    assert held == {"test_step_cost", "test_cumulative"}, cells
    assert cells["test_masks_values"]["score"] == 1  # the value part counts
    held_part = next(p for p in cells["test_step_cost"]["parts"] if p.get("held"))
    assert held_part["evidence"] == "cost" and held_part["message"].startswith("held for review: ")
    assert "added cell (cell 1), line 1: get_ipython" in held_part["message"]
    assert next(p for p in cells["test_step_cost"]["parts"] if p["evidence"] == "reference")["passed"]
    finding = record["held"]["tiny"]["findings"][0]
    assert (finding["where"], finding["cell"], finding["line"], finding["text"]) == ("added cell", 1, 1, HOOK)
    assert not record["held"]["tiny"]["released"] and record["score"] == 1
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
    assert record["score"] == 3  # every point back
    released = json.loads((root / ".grading" / "released.json").read_text())["tiny"]
    assert [(r["student"], r["notebook"]) for r in released.values()] == [("hooked", "tiny")]
    page = (root / "reports" / "tiny.html").read_text()
    assert "hooked (released)" in page and "jaxgrader review tiny hooked" not in page
    assert main(["--root", str(root), "review", "tiny"]) == 0
    assert "tiny: 0 submissions held for review" in capsys.readouterr().out
