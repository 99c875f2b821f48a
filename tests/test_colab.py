"""The student's Colab path: each release notebook, answered with the solution, run in an
environment holding only what Colab preinstalls (.ci/colab-preinstalled.txt, Python 3.13 where
available) plus whatever the notebook's own setup cell installs. Every cell must run and every
visible test pass, exactly as a student in Colab would see it.

The environment comes from ``JAXGRADER_COLAB_PYTHON`` (CI builds it beside the other lanes)
or is built here, in a temporary directory, from the same file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jaxgrader.grading.notebooks import fill_answers, is_autograded_test, read_notebook, solutions_of

from .conftest import ASSIGNMENTS, ROOT

pytestmark = pytest.mark.colab


def _python313() -> str:
    for candidate in (shutil.which("python3.13"),
                      os.path.expanduser("~/.pyenv/versions/3.13.0/bin/python3.13")):
        if candidate and os.path.exists(candidate):
            return candidate
    return sys.executable


@pytest.fixture(scope="module")
def colab_kernel(tmp_path_factory, monkeypatch_module):
    """A Jupyter kernel named "colab" running in the Colab-like environment."""
    python = os.environ.get("JAXGRADER_COLAB_PYTHON")
    if not python:
        venv = tmp_path_factory.mktemp("colab") / "venv"
        subprocess.run([_python313(), "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(ROOT / ".ci" / "colab-preinstalled.txt")], check=True)
    specs = tmp_path_factory.mktemp("kernels")
    (specs / "kernels" / "colab").mkdir(parents=True)
    (specs / "kernels" / "colab" / "kernel.json").write_text(json.dumps({
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab-like", "language": "python"}))
    monkeypatch_module.setenv("JUPYTER_PATH", str(specs))
    return python


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_notebook_runs_in_colab_with_the_solution(assignment, colab_kernel, tmp_path):
    for path in sorted((ROOT / "release" / assignment).glob("*.ipynb")):
        source = read_notebook(ROOT / "source" / assignment / path.name)
        nb = fill_answers(read_notebook(path), solutions_of(source))
        nb.cells.append(nbformat.v4.new_code_cell("import jax; print('JAX', jax.__version__)"))
        NotebookClient(nb, timeout=300, kernel_name="colab", allow_errors=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        errors = [(i, o.get("ename"), str(o.get("evalue"))[:200]) for i, c in enumerate(nb.cells)
                  if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert not errors, f"release/{assignment}/{path.name} in the Colab environment: {errors}"
        tests = [c for c in nb.cells if is_autograded_test(c)]
        assert tests and all(c.execution_count for c in tests), "visible tests did not run"
        version = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
        assert "JAX 0.7.2" in version, f"the kernel is not Colab's JAX: {version!r}"
