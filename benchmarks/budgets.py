"""The timing budgets of jaxgrader/checks/budgets.py, measured on this machine's backend.

    python benchmarks/budgets.py                            # print this backend's row
    python benchmarks/budgets.py --write docs/benchmarks.md  # and replace it in the budgets table

Each budget separates a right answer from a wrong one by a ratio, so what matters is how far
both sit from it on each backend: the script measures the right and the wrong side of each,
with the workloads the hidden tests use (scaled by ``workload_scale()`` off the CPU). Run it
on a GPU or TPU machine to fill that backend's row; rows never run stay "not measured", and
grading there uses the CPU row (with a warning).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxgrader.checks.budgets import BUDGETS, current_backend, row, workload_scale  # noqa: E402

BEGIN, END = "<!-- budgets table (benchmarks/budgets.py) -->", "<!-- end of the budgets table -->"
HEADER = ("| backend | device "
          "| run_s without block_until_ready / with; two honest measurements (budget: within {run_remeasure_tolerance:g}x) "
          "| measured with |\n|---|---|---|---|")


def _blocked_run_s(fn, *args, repeats: int) -> float:
    """Median seconds of ``repeats`` warm calls of ``fn(*args)``, each clock stopped after
    ``block_until_ready`` on the whole output (one warm-up call first)."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def remeasure() -> tuple[float, float]:
    """(unblocked / blocked, spread of two blocked measurements) of lesson 2's hidden timing workload."""
    def heavy(p, X, Y):
        h = jnp.tanh(X @ p)
        h = jnp.tanh(h @ p)
        return jnp.mean((h @ p - Y) ** 2, axis=1)

    heavy_jit = jax.jit(heavy)
    n = 320 * workload_scale()
    p, X, Y = jnp.full((256, 256), 1 / 256), jnp.ones((n, 256)), jnp.zeros((n, 256))
    jax.block_until_ready(heavy_jit(p, X, Y))

    def unblocked():
        times = []
        for _ in range(15):
            start = time.perf_counter()
            heavy_jit(p, X, Y)  # the mistake: the clock stops at dispatch
            times.append(time.perf_counter() - start)
        jax.block_until_ready(heavy_jit(p, X, Y))
        return statistics.median(times)

    blocked = [_blocked_run_s(heavy_jit, p, X, Y, repeats=15) for _ in range(2)]
    return unblocked() / blocked[0], max(blocked) / min(blocked)


def measured_row() -> str:
    backend, device = current_backend(), jax.devices()[0]
    unblocked, spread = remeasure()
    when = datetime.date.today().isoformat()
    return (f"| {backend} | {device.device_kind} ({platform.machine()}, {jax.device_count()} device(s)) "
            f"| {unblocked:.2g}; {spread:.2f} | jax {jax.__version__}, `python benchmarks/budgets.py`, {when} |")


def table(rows: dict[str, str]) -> str:
    lines = [HEADER.format(**row("cpu"))]
    for backend in BUDGETS:
        lines.append(rows.get(backend) or f"| {backend} | not measured | | |")
    return "\n".join(lines)


def write(path: Path, backend: str, new_row: str) -> None:
    """Replace ``backend``'s row of the budgets table in ``path`` (the others are kept)."""
    text = path.read_text()
    if BEGIN not in text:
        raise SystemExit(f"{path}: no budgets table (a line {BEGIN!r} ... {END!r})")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    rows = {m[1]: m[0] for m in re.finditer(r"^\| (\w+) \|.*$", old, re.MULTILINE) if "not measured" not in m[0]}
    rows[backend] = new_row
    path.write_text(f"{head}{BEGIN}\n{table(rows)}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this backend's row of the budgets table in this file")
    args = parser.parse_args()
    new_row = measured_row()
    print(table({current_backend(): new_row}))
    if args.write:
        write(args.write, current_backend(), new_row)


if __name__ == "__main__":
    main()
