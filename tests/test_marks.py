"""What the grader writes into a test cell as it runs it (jaxgrader/grading/sandbox/marks.py), and the examples it
holds out of every grading kernel (jaxgrader/grading/sandbox/heldout.py).

The kernel gets a test cell's code only when it runs that cell: a timed workload drawn from the cell's nonce cannot
be computed by an earlier cell, and a stand-in twin runs the submitted answer cells again on the stand-ins. The
digits a ``scores`` part is judged on are, in every grading kernel, other digits: no kernel can fit them.
"""

from __future__ import annotations

import json
import re

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from jaxgrader.grading.sandbox import heldout, marks
from jaxgrader.grading.sandbox.bwrap import check_sandbox


def _config(run_key: str, seed: int = 7) -> Config:
    c = Config()
    c.JaxGrader.seed, c.JaxGrader.run_key = seed, run_key
    return c


def _meta(**kw):
    return {"nbgrader": {"schema_version": 3, "task": False, "grade": False, "solution": False, "locked": False, **kw}}


def test_the_kernel_side_writes_the_same_marks():
    from jaxgrader.checks import report

    assert report.NONCE_MARK == marks.NONCE_MARK


def test_nonces_are_per_cell_and_run_and_the_same_for_everyone_in_a_run():
    one, other = _config("a" * 32), _config("b" * 32)
    first = marks.nonce(one, "lesson1/pure_functions", "test_x")
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first == marks.nonce(_config("a" * 32), "lesson1/pure_functions", "test_x")  # reference and students alike
    assert first != marks.nonce(one, "lesson1/pure_functions", "test_y")  # another cell
    assert first != marks.nonce(other, "lesson1/pure_functions", "test_x")  # another run
    assert first != marks.nonce(_config("a" * 32, seed=8), "lesson1/pure_functions", "test_x")


def test_marks_are_filled_only_in_test_cells_and_only_on_the_way_to_the_kernel():
    """``filled_cell``: a test cell's nonce and the named solution cells' submitted sources (a JSON list in a string
    literal); a solution cell that writes the marks itself is sent as written."""
    answer = 'def f(x):\n    return "{jaxgrader-nonce}" + x\n'
    nb = new_notebook(cells=[
        new_code_cell(answer, metadata=_meta(solution=True, grade_id="f")),
        new_code_cell('print("{jaxgrader-nonce}")\nprint("{jaxgrader-cells:f,missing}")',
                      metadata=_meta(grade=True, locked=True, points=1, grade_id="test_f"))])
    config = _config("c" * 32)
    assert marks.filled_cell(nb.cells[0], nb, config=config, notebook="a/b") is None
    sent = marks.filled_cell(nb.cells[1], nb, config=config, notebook="a/b")
    nonce = marks.nonce(config, "a/b", "test_f")
    lines = sent.splitlines()
    assert lines[0] == f'print("{nonce}")'
    assert json.loads(eval(lines[1][len("print("):-1])) == [answer]  # noqa: S307  the literal the grader wrote
    assert "{jaxgrader-" in nb.cells[1].source  # the notebook keeps the cell as written


@pytest.mark.slow
def test_a_graded_kernel_gets_the_nonce_only_with_its_cell(tmp_path):
    """Run as the grader runs a notebook (sandboxed when bubblewrap is here): the first cell, run before the test
    cell, sees no nonce anywhere in its kernel; the test cell gets it in its own code; the notebook keeps the mark."""
    from jaxgrader.grading.sandbox.sandbox import SandboxedKernelManager
    from jaxgrader.grading.verdict.reference import execute_reference

    config = _config("d" * 32)
    config.LimitedExecute.kernel_manager_class = SandboxedKernelManager
    if check_sandbox():
        config.SandboxedKernelManager.isolation = "none"
    nonce = marks.nonce(config, "ps1/ps1", "test_f")
    nb = new_notebook(cells=[
        new_code_cell("import gc, os, re\nfound = set(re.findall(r'[0-9a-f]{32}', repr(dict(os.environ))))\n"
                      "for o in gc.get_objects():\n    found |= set(re.findall(r'[0-9a-f]{32}', repr(o)[:100000]))\n"
                      "print('before:', ' '.join(sorted(found)))", metadata=_meta(solution=True, grade_id="f")),
        new_code_cell('print("after:", "{jaxgrader-nonce}")', metadata=_meta(grade=True, locked=True, points=1,
                                                                              grade_id="test_f"))])
    ran = execute_reference(nb, config, assignment="ps1", notebook="ps1")
    text = ["".join(o.get("text", "") for o in cell.outputs) for cell in ran.cells]
    assert text[0].startswith("before:") and nonce not in text[0]  # nothing in the kernel holds it yet
    assert text[1].strip() == f"after: {nonce}"
    assert ran.cells[1].source == 'print("after:", "{jaxgrader-nonce}")'


@pytest.mark.slow
@pytest.mark.skipif(bool(check_sandbox()), reason="needs bubblewrap: the held-out digits are hidden by the sandbox")
def test_held_out_digits_are_other_digits_in_every_grading_kernel(tmp_path):
    """Every grading kernel of a run reads scikit-learn's digits with that run's held-out rows replaced by copies of
    other rows (bound read-only over the real file); the grader alone holds the real ones, which it scores on."""
    from sklearn.datasets import load_digits

    from jaxgrader.grading.sandbox.sandbox import SandboxedKernelManager
    from jaxgrader.grading.verdict.reference import execute_reference

    config = _config("e" * 32)
    config.LimitedExecute.kernel_manager_class = SandboxedKernelManager
    rows = heldout.held_out_rows(config)
    assert len(rows) == heldout.HELD_OUT and len(set(rows.tolist())) == heldout.HELD_OUT
    assert not np.array_equal(rows, heldout.held_out_rows(_config("f" * 32)))  # drawn per run
    real = load_digits()
    held = heldout.held_out(config)
    assert np.array_equal(held["x"], (real.data[rows] / 16.0).astype(np.float32))
    assert np.array_equal(held["y"], real.target[rows])
    nb = new_notebook(cells=[new_code_cell(
        "import numpy as np\nfrom sklearn.datasets import load_digits\nd = load_digits()\n"
        "np.save('seen.npy', np.concatenate([d.data, d.target[:, None]], axis=1))\n"
        "print(d.data.shape, np.asarray(d.data, np.float64).tobytes().hex()[:0])\n"
        "import hashlib\nprint(hashlib.sha256(np.ascontiguousarray(np.concatenate([d.data, d.target[:, None]], "
        "axis=1)).tobytes()).hexdigest())")])
    ran = execute_reference(nb, config, assignment="ps1")
    text = "".join(o.get("text", "") for o in ran.cells[0].outputs)
    assert "(1797, 64)" in text, text
    table = np.concatenate([real.data, real.target[:, None]], axis=1)
    kept = np.setdiff1d(np.arange(len(table)), rows)
    seen = _kernel_table(config, table, rows)
    import hashlib

    assert hashlib.sha256(np.ascontiguousarray(seen).tobytes()).hexdigest() in text
    assert np.array_equal(seen[kept], table[kept])  # the notebook's data, as before, but for the held-out rows
    assert not any((seen[rows] == table[r]).all(axis=1).any() for r in rows[:50])  # no held-out digit is there


def _kernel_table(config, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """What a grading kernel of ``config``'s run reads from the digits file (the masked copy the sandbox binds)."""
    import gzip

    (masked, _), = heldout.masked_files(config)
    with gzip.open(masked, "rt") as f:
        return np.loadtxt(f, delimiter=",")
