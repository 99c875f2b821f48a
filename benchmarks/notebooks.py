"""Budgets, measured: seconds per notebook, and autograde overhead against plain execution.

    python benchmarks/notebooks.py                 # print a Markdown table
    python benchmarks/notebooks.py --write docs/benchmarks.md
    python benchmarks/notebooks.py --only assignments -a lesson4

For every lecture notebook: `jupyter nbconvert --execute` wall time (budget: 30 s
on a 2-core CPU). For every assignment: the instructor's answers typed into the
release (what a full-marks student submits), executed plainly with nbconvert and
autograded with `nbgrader autograde` in a scratch course; the ratio is nbgrader's
overhead (kernel start is in both).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jaxgrader.grading.classrun.run import assignments_in, load_config, make_api, source_notebooks  # noqa: E402
from jaxgrader.grading.course.notebooks import fill_answers, read_notebook, solutions_of  # noqa: E402
from jaxgrader.grading.trials import scratch_course  # noqa: E402

NOTEBOOK_BUDGET_S = 30.0


def nbconvert_seconds(path: Path, workdir: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.timeout=600", "--output-dir", str(workdir), str(path)],
        check=True, capture_output=True,
    )
    return time.perf_counter() - start


def autograde_rows(assignment: str, tmp: Path) -> list[tuple[str, float, float]]:
    course = scratch_course(ROOT, tmp / assignment, assignment)
    config = load_config(course, course / "gradebook.db")
    api = make_api(config)
    api.generate_assignment(assignment, force=True, create=True)
    rows = []
    for notebook in source_notebooks(course, assignment):
        answers = solutions_of(read_notebook(course / "source" / assignment / f"{notebook}.ipynb"))
        release = read_notebook(course / "release" / assignment / f"{notebook}.ipynb")
        folder = course / "submitted" / "bench" / assignment
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(fill_answers(release, answers), folder / f"{notebook}.ipynb")
        plain = nbconvert_seconds(folder / f"{notebook}.ipynb", tmp)
        start = time.perf_counter()
        result = api.autograde(assignment, "bench", force=True, create=True)
        graded = time.perf_counter() - start
        if not result["success"]:
            raise RuntimeError(f"autograde {assignment} failed")
        rows.append((f"{assignment}/{notebook}", plain, graded))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the table to this Markdown file")
    parser.add_argument("--only", choices=("lectures", "assignments"), help="time only these")
    parser.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    args = parser.parse_args()
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    import jax

    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}, "
        f"JAX {jax.__version__} on {jax.default_backend()}.",
        "",
        "| lecture notebook | nbconvert --execute (s) | within 30 s |",
        "|---|---:|:---:|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for path in sorted((ROOT / "notebooks").glob("*.ipynb")) if args.only != "assignments" else []:
            s = nbconvert_seconds(path, tmp)
            lines.append(f"| {path.name} | {s:.1f} | {'yes' if s < NOTEBOOK_BUDGET_S else '**no**'} |")
            print(lines[-1], flush=True)
        lines += ["", "| assignment (full-marks submission) | nbconvert --execute (s) | nbgrader autograde (s) "
                  "| overhead | within 30 s |", "|---|---:|---:|---:|:---:|"]
        for assignment in (args.assignment or assignments_in(ROOT)) if args.only != "lectures" else []:
            for name, plain, graded in autograde_rows(assignment, tmp):
                lines.append(f"| {name} | {plain:.1f} | {graded:.1f} | {graded / plain:.2f}x | "
                             f"{'yes' if graded < NOTEBOOK_BUDGET_S else '**no**'} |")
                print(lines[-1], flush=True)
    table = "\n".join(lines)
    print("\n" + table)
    if args.write:
        args.write.write_text(
            "# Benchmarks\n\nProduced by `python benchmarks/notebooks.py --write docs/benchmarks.md`.\n\n"
            + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
