"""The student's Colab path: each release notebook, answered with the solution, run in an
environment holding only what Colab preinstalls (.ci/colab-preinstalled.txt, Python 3.13 where
available) plus whatever the notebook's own setup cell installs, computing as Colab's A100/L4 GPU
TPU runtime does (bfloat16 matmuls, one device; simulated). Every cell must run and every visible test
pass, exactly as a student in Colab would see it.

The environment comes from ``JAXGRADER_COLAB_PYTHON`` (CI builds it beside the other lanes)
or is built here, in a temporary directory, from the same file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jaxgrader.grading.course.notebooks import fill_answers, is_autograded_test, read_notebook, solutions_of
from jaxgrader.simulated.accelerator import write_kernelspec

from .conftest import ASSIGNMENTS, ROOT

pytestmark = pytest.mark.colab


def _runs(python: str | None) -> bool:
    """Whether ``python`` really starts (a pyenv shim whose version is not active exits 127)."""
    if not python:
        return False
    try:
        return subprocess.run([python, "-c", "pass"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def colab_python() -> str:
    """Colab's Python (3.13) if this machine has one that runs, else this test's own Python."""
    pyenv = shutil.which("pyenv")
    candidates = [subprocess.run([pyenv, "which", "python3.13"], capture_output=True, text=True,
                                 env={**os.environ, "PYENV_VERSION": version}).stdout.strip()
                  for version in _pyenv_versions(pyenv, "3.13")] if pyenv else []
    candidates += [shutil.which("python3.13")]
    return next((c for c in candidates if _runs(c)), sys.executable)


def _pyenv_versions(pyenv: str, prefix: str) -> list[str]:
    out = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True).stdout
    return [v.strip() for v in out.splitlines() if v.strip().startswith(prefix)]


def _provision(command: list[str], what: str) -> None:
    """Run a provisioning step; where the machine cannot (no venv module, no package index), skip
    with one line saying why, instead of erroring."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        pytest.skip(f"cannot build the Colab-like environment ({what}): {last[0][:200]}")


# Colab's TPU runtime (v5e-1): float32 matmuls with bfloat16 operands and one device, simulated on
# this CPU (jaxgrader/simulated/accelerator.py). The coarsest default a student meets: its A100/L4
# runtimes round to TF32, less, and the visible tests' tolerances follow the measured error.
COLAB_SIMULATE = "bfloat16,one-device"


@pytest.fixture(scope="module")
def colab_kernel(tmp_path_factory, monkeypatch_module):
    """A Jupyter kernel named "colab" running in the Colab-like environment, as a one-TPU runtime
    with bfloat16 matmuls would compute."""
    python = os.environ.get("JAXGRADER_COLAB_PYTHON")
    if not python:
        venv = tmp_path_factory.mktemp("colab") / "venv"
        _provision([colab_python(), "-m", "venv", str(venv)], "python -m venv")
        python = str(venv / "bin" / "python")
        _provision([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-r", str(ROOT / ".ci" / "colab-preinstalled.txt")], "pip install")
    specs = write_kernelspec(tmp_path_factory.mktemp("kernels"), COLAB_SIMULATE, name="colab", python=python)
    monkeypatch_module.setenv("JUPYTER_PATH", specs)
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
