"""Tolerances against many seeds: the instructor's answers evaluated eagerly, judged against them jitted.

    python benchmarks/tolerances.py -a lesson3 --seeds 40     # one lesson, 40 seeds
    python benchmarks/tolerances.py --seeds 30                # every lesson

A correct answer keeps its points whether the student jitted it or not, on any seed (issue 40, item 7). An
eagerly evaluated function rounds differently from a compiled one (XLA fuses and reorders floating-point
operations), and a tolerance set by looking at one seed can be too tight for another: a correct ``clip_gradient``
evaluated eagerly once differed from the reference by 2.9e-6 against an ``atol`` of 1e-6.

For each lesson, two kernels run the instructor's notebook as the grader does (its XLA flags and matmul
precision, the marks of test cells filled in): one as written, one with ``jax_disable_jit`` set after the setup
cell (every function eager, the tests' own wrappers too: harder than any student's rewrite). Then, for every
seed, both run every test cell again with ``JAXGRADER_SEED`` set to it, and each ``close``/``equal`` part of the
eager run is judged against the compiled run's with the compiled run's tolerances, by the verdict's own
comparison. The table lists every part that failed on some seed, with the seeds and the largest difference.
Program, cost and score parts are not values and are not judged here, nor are the cells that measure time (a cost
part, a student's benchmark: they measure the compiled program by design, which an eager answer does not have).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jaxgrader.grading.course.config import load_config  # noqa: E402
from jaxgrader.grading.course.notebooks import read_notebook  # noqa: E402
from jaxgrader.grading.sandbox.marks import filled_cell  # noqa: E402
from jaxgrader.grading.verdict.reports import parse_reports  # noqa: E402
from jaxgrader.grading.verdict.values import compare_values  # noqa: E402

EAGER = 'import jax\njax.config.update("jax_disable_jit", True)'


def _timed(source: str) -> bool:
    """Whether a test cell measures time (its cost, or a student's own benchmark): the compiled program by design,
    which an eager answer does not have. Such cells run once, for what later cells need, and are not judged."""
    return any(rule in source for rule in ("cell_time", "within_factor"))


def _kernel_env(assignment: str) -> dict[str, str]:
    """The grading kernels' variables (nbgrader_config.py), as SandboxedKernelManager gives them."""
    config = load_config(ROOT)
    section = config.SandboxedKernelManager
    env = dict(os.environ, NBGRADER_EXECUTION="autograde", **dict(section.get("kernel_env", {})))
    if assignment not in section.get("xla_defaults_for", []) and section.get("xla_flags"):
        env["XLA_FLAGS"] = section.xla_flags
    env["JAX_DEFAULT_MATMUL_PRECISION"] = section.get("matmul_precision", "float32") or ""
    return env


def _runs(assignment: str, seeds: list[int], eager: bool) -> dict[int, dict[str, dict]]:
    """seed -> grade_id -> the parts a kernel reported, running the notebook once and its test cells per seed."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError
    from nbformat.v4 import new_code_cell

    path = next((ROOT / "source" / assignment).glob("*.ipynb"))
    nb = read_notebook(path)
    config = load_config(ROOT)
    where = f"{assignment}/{path.stem}"
    tests = [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and cell.metadata.get("nbgrader", {}).get("grade") and not _timed(cell.source)]
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_kernel_env(assignment), JAXGRADER_SEED=str(seeds[0]))
    try:
        client = NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}})
        out: dict[int, dict[str, dict]] = {}
        with client.setup_kernel():
            first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
            setup_done = False
            for seed in seeds:
                client.execute_cell(new_code_cell(f"import os; os.environ['JAXGRADER_SEED'] = '{seed}'"), 0)
                cells = list(enumerate(nb.cells)) if not setup_done else tests
                for i, cell in cells:
                    if cell.cell_type != "code":
                        continue
                    sent = filled_cell(cell, nb, config=config, notebook=where)
                    run = new_code_cell(sent if sent is not None else cell.source, metadata=cell.metadata)
                    try:
                        client.execute_cell(run, i)
                    except CellTimeoutError:  # an eager workload past the limit: its parts are not reported
                        client.km.interrupt_kernel()
                    except Exception:  # noqa: BLE001  a reply lost after an interrupt: that cell is not judged
                        pass
                    cell_setup = cell.metadata.get("nbgrader", {}).get("grade_id") in ("setup", "install")
                    if eager and not setup_done and (cell_setup or i == first_code) and "import jax" in cell.source:
                        client.execute_cell(new_code_cell(EAGER), i)
                    gid = cell.metadata.get("nbgrader", {}).get("grade_id")
                    if cell.metadata.get("nbgrader", {}).get("grade") and not _timed(cell.source):
                        reports, _ = parse_reports(run.outputs)
                        out.setdefault(seed, {})[gid] = {k: v[0] for k, v in reports.items() if len(v) == 1}
                setup_done = True
        return out
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _difference(got, want) -> str:
    """The largest absolute difference over the leaves of two values of one structure (else what differs)."""
    from jaxgrader.grading.verdict.values import leaves

    pairs = list(zip(leaves(got), leaves(want)))
    if len(pairs) != len(list(leaves(want))) or any(p != q for (p, _), (q, _) in pairs):
        return "structure"
    worst = 0.0
    for (_, a), (_, b) in pairs:
        try:
            worst = max(worst, float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))))
        except Exception:  # noqa: BLE001  not numbers (a dtype's name, a structure's text)
            if str(a) != str(b):
                return f"{a!r:.40} against {b!r:.40}"
    return f"{worst:.2g} abs"


def sweep(assignment: str, seeds: list[int]) -> list[tuple]:
    """(test, part, failing seeds, the largest difference, rtol, atol) for every value part that failed."""
    compiled, eager = _runs(assignment, seeds, eager=False), _runs(assignment, seeds, eager=True)
    failed: dict[tuple[str, str], list] = {}
    for seed in seeds:
        for gid, parts in compiled.get(seed, {}).items():
            for name, ref in parts.items():
                if ref["rule"] not in ("close", "equal"):
                    continue
                got = eager.get(seed, {}).get(gid, {}).get(name)
                why = "not reported" if got is None else compare_values(got["value"], ref["value"], ref["rule"],
                                                                        ref.get("rtol") or 0.0, ref.get("atol") or 0.0)
                if why:
                    failed.setdefault((gid, name), []).append(
                        (seed, why if got is None else _difference(got["value"], ref["value"]), ref))
    return [(gid, name, [s for s, _, _ in found], max(d for _, d, _ in found), found[0][2].get("rtol"),
             found[0][2].get("atol")) for (gid, name), found in sorted(failed.items())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-a", "--assignment", action="append", help="lessonN (repeatable; default: all)")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first-seed", type=int, default=1)
    args = parser.parse_args(argv)
    assignments = args.assignment or sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    print(f"| lesson | test | part | seeds failed (of {len(seeds)}) | largest difference | rtol | atol |")
    print("|---|---|---|---|---|---|---|")
    for assignment in assignments:
        start = time.monotonic()
        rows = sweep(assignment, seeds)
        for gid, name, failing, worst, rtol, atol in rows:
            print(f"| {assignment} | {gid} | {name} | {len(failing)} ({', '.join(map(str, failing[:6]))}) | {worst} "
                  f"| {rtol:g} | {atol:g} |")
        if not rows:
            print(f"| {assignment} | (none) | every value part passed eagerly on every seed | 0 | | | |")
        print(f"<!-- {assignment}: {time.monotonic() - start:.0f} s -->", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
