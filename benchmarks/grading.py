"""Grading throughput: one class graded by stock nbgrader, the local pool and a Dask cluster.

    python benchmarks/grading.py                               # 6 students x lesson1, all three
    python benchmarks/grading.py --students 20 -a lesson1 -a lesson3 --workers 2
    python benchmarks/grading.py --only local --only dask

Students cycle through the trial answers (the solution, the blank release, each
wrong answer), so the class is a realistic mix of passing and failing cells. Each
backend grades the same class in a fresh scratch course, without feedback, with one
seed (``c.JaxGrader.seed``, fixed here so every backend runs the same checks):

* ``stock``: ``nbgrader generate_assignment`` then ``nbgrader autograde`` (one process,
  one submission after another, the course's preprocessors: the same grades), each
  notebook in a freshly started kernel as nbgrader starts them (the course's
  ``SandboxedKernelManager.preload = []``): a teacher's run before this package;
* ``stock_prepared``: the same with the course's config as it is, so that even plain
  ``nbgrader autograde`` forks each kernel from one prepared process (its imports done
  once for the whole run, jaxgrader.grading.sandbox.prepared);
* ``local``: ``jaxgrader grade --workers N`` (``grade_class(workers=N)``);
* ``unpinned``: the same with every kernel free to use every core (what pinning each
  worker to its share of the cores gives);
* ``unsandboxed``: the same with ``--unsandboxed`` (what the bubblewrap sandbox costs);
* ``dask``: ``grade_class(dask=...)`` on a ``dask scheduler`` and N ``dask worker
  --nthreads 1`` processes started here, each under ``taskset`` on its share of the
  cores (as docs/scale-out.md asks of workers started by hand).

Prints, per backend: wall seconds for the class run (stock: both nbgrader commands;
Dask: not counting the cluster's start), submissions per minute, the
coordinator's fixed costs (reference run, generate) and the per-submission overhead:
a task's seconds minus the seconds its notebooks executed (kernel start included).

It also prints the CPU seconds the machine was busy during each backend's run (so run it
on an otherwise idle machine), per submission and as the cores a backend kept busy.
Stock nbgrader is serial, but its kernel is not: XLA compiles and computes on thread
pools as wide as the machine, so one submission keeps more than one core busy, partly
with threads that spin while they wait for work. Busy CPU per submission is therefore
not a fixed cost of the notebooks: it depends on how kernels share the cores.

``breakdown`` (part of the default run) times where one submission's seconds go, for the
solution of each assignment: starting a process and importing the grader, starting a
sandboxed kernel, ``import jax``, JAX's tracing and compilation (jax.monitoring's
durations), and the rest of the notebook's own work; each notebook twice, with XLA's
default flags and as graded (the course's ``SandboxedKernelManager.xla_flags``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jaxgrader.grading.classrun.backends import core_shares  # noqa: E402
from jaxgrader.grading.classrun.run import assignments_in, grade_class  # noqa: E402
from jaxgrader.grading.course.notebooks import write_submission  # noqa: E402
from jaxgrader.grading.trials import trial_students  # noqa: E402

BIN = Path(sys.executable).parent
SEED = 1234


def build_class(course: Path, assignments: list[str], students: int) -> None:
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    with open(course / "nbgrader_config.py", "a") as f:  # every backend runs the same checks
        f.write(f"\nc.JaxGrader.seed = {SEED}  # benchmark: one seed for every backend\n")
    for assignment in assignments:
        shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment)
        kinds = list(trial_students(ROOT, assignment, packed=False)[0].items())
        for i in range(students):
            _, notebooks = kinds[i % len(kinds)]
            write_submission(ROOT / "release" / assignment, course / "submitted" / f"student{i:02d}" / assignment,
                             notebooks)


def stock(course: Path, assignments: list[str], workers: int) -> dict:
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\nc.SandboxedKernelManager.preload = []  # benchmark: fresh kernels, as nbgrader starts them\n")
    return stock_prepared(course, assignments, workers)


def stock_prepared(course: Path, assignments: list[str], workers: int) -> dict:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for assignment in assignments:
        for step in ("generate_assignment", "autograde"):
            run = subprocess.run([str(BIN / "nbgrader"), step, assignment, "--force", "--log-level=ERROR"],
                                 cwd=course, env=env, capture_output=True, text=True)
            if run.returncode:
                raise SystemExit(f"nbgrader {step} {assignment} failed:\n{run.stderr[-2000:]}")
    return {}


def local(course: Path, assignments: list[str], workers: int) -> dict:
    return _jaxgrader(course, assignments, workers=workers)


def unsandboxed(course: Path, assignments: list[str], workers: int) -> dict:
    """The local pool without bubblewrap: what the sandbox costs, side by side."""
    return _jaxgrader(course, assignments, workers=workers, unsandboxed=True)


def unpinned(course: Path, assignments: list[str], workers: int) -> dict:
    """The local pool with every kernel free to use every core (``c.JaxGrader.pin_workers = False``)."""
    return _jaxgrader(course, assignments, workers=workers, pin=False)


def dask(course: Path, assignments: list[str], workers: int) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        time.sleep(3)
        # each worker on its own share of the cores, as docs/scale-out.md asks of hand-started workers
        shares = core_shares(workers, sorted(os.sched_getaffinity(0)))
        procs += [subprocess.Popen([*(["taskset", "-c", ",".join(map(str, share))] if share else []),
                                    str(BIN / "dask"), "worker", address, "--nthreads", "1", "--no-dashboard",
                                    "--local-directory", str(course.parent / f"dask-{i}")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for i, share in enumerate(shares)]
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        return _jaxgrader(course, assignments, dask=address)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)


def _jaxgrader(course: Path, assignments: list[str], **backend) -> dict:
    from jaxgrader.grading.verdict import verdict

    verdict._reference_cache.clear()  # every backend pays its reference run, as a fresh `jaxgrader grade` does
    start = time.perf_counter()
    results = grade_class(course, assignments, feedback=False, progress=True, **backend)
    wall = time.perf_counter() - start
    errors = [r for r in results if r.status != "graded"]
    if errors:
        raise SystemExit(f"grading failed: {errors[0].student}/{errors[0].assignment}: {errors[0].error}")
    info = json.loads((course / ".grading" / "last-run.json").read_text())
    overhead = [r.timings["total"] - r.timings.get("execute", 0.0) for r in results]
    info["overhead_s"] = sum(overhead) / len(overhead)
    info["execute_s"] = sum(r.timings.get("execute", 0.0) for r in results) / len(results)
    info["wall"] = wall
    info["kernels"] = {kind: sum(int(r.timings.get(f"kernels_{kind}", 0)) for r in results) for kind in ("forked", "fresh")}
    return info


def _cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (all cores, from /proc/stat).

    Machine-wide, because a sandboxed kernel's CPU time never reaches the grader's
    rusage (it runs in its own PID namespace). So run the benchmark on an otherwise idle
    machine: the load average printed with the results tells whether it was.
    """
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


_IMPORT_JAX_CELL = """\
import time as _bench_time
_bench_t0 = _bench_time.perf_counter()
import jax as _bench_jax
print("BENCH", _bench_time.perf_counter() - _bench_t0)
"""
# Inserted right after the notebook's first cell that imports jax (its own setup may set
# XLA_FLAGS first): from then on, JAX's tracing, lowering and compile durations are summed.
_LISTEN_CELL = """\
import jax as _bench_jax
_bench_compile = [0.0]
def _bench_listener(event, duration, **kwargs):
    if "compile" in event or "trace" in event or "lower" in event or "mlir" in event:
        _bench_compile[0] += duration
_bench_jax.monitoring.register_event_duration_secs_listener(_bench_listener)
"""
_REPORT_CELL = "print('BENCH', _bench_compile[0])"


def _bench_value(cell) -> float:
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    return float(text.split()[1]) if text.startswith("BENCH") else float("nan")


def breakdown(assignments: list[str]) -> list[tuple[str, dict]]:
    """Where one submission's seconds go, per assignment (its solution, in the course's sandbox)."""
    os.environ["NBGRADER_EXECUTION"] = "autograde"  # the quick-run switch, as under nbgrader (passed to the kernel)
    import asyncio

    import nbformat
    from nbclient import NotebookClient

    from jaxgrader.grading.course.config import load_config
    from jaxgrader.grading.course.notebooks import read_notebook
    from jaxgrader.grading.sandbox.sandbox import SandboxedKernelManager

    config = load_config(ROOT)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import nbgrader.apps, jaxgrader.grading.classrun.task, jaxgrader.grading.verdict.verdict"],
                   check=True)
    imports = time.perf_counter() - start

    async def kernel_start(prepared: bool = False) -> float:
        km = SandboxedKernelManager(config=config, kernel_name="python3")
        km.use_prepared = prepared
        t0 = time.perf_counter()
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=120)
        elapsed = time.perf_counter() - t0
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        return elapsed

    kernel = min(asyncio.run(kernel_start()) for _ in range(3))
    zygote = asyncio.run(kernel_start(prepared=True))  # the first also starts the prepared process
    forked = min(asyncio.run(kernel_start(prepared=True)) for _ in range(3))
    from jaxgrader.grading.sandbox import prepared

    prepared.close_all()
    print(f"\nkernel start, sandboxed: fresh {kernel:.2f} s; forked from a prepared process {forked:.2f} s, "
          f"with {', '.join(config.SandboxedKernelManager.preload)} imported; the prepared process's own "
          f"start, once per grading process: {zygote - forked:.2f} s")

    defaults = copy.deepcopy(config)
    defaults.SandboxedKernelManager.xla_flags = ""  # what the kernel compiles with when the course sets no flags

    def run(nb, tmp, cfg=config):
        NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                       kernel_manager_class=SandboxedKernelManager, config=cfg,
                       resources={"metadata": {"path": tmp}}).execute()

    with tempfile.TemporaryDirectory() as tmp:
        probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_IMPORT_JAX_CELL)])
        run(probe, tmp)
        import_jax = _bench_value(probe.cells[0])
    rows = []
    for assignment in assignments:
        for path in sorted((ROOT / "source" / assignment).glob("*.ipynb")):
            # with XLA's default flags, then as graded (the course's SandboxedKernelManager.xla_flags)
            for flags, cfg in (("XLA defaults", defaults), ("as graded", config)):
                nb = read_notebook(path)  # what autograde runs for a full-marks submission: solutions, hidden tests
                first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "import jax" in c.source)
                nb.cells.insert(first + 1, nbformat.v4.new_code_cell(_LISTEN_CELL))
                nb.cells.append(nbformat.v4.new_code_cell(_REPORT_CELL))
                with tempfile.TemporaryDirectory() as tmp:
                    cwd = os.path.join(tmp, assignment)  # as under nbgrader: per-assignment settings apply
                    os.mkdir(cwd)
                    t0 = time.perf_counter()
                    run(nb, cwd, cfg)
                    total = time.perf_counter() - t0
                errors = sum(o.get("output_type") == "error" for c in nb.cells if c.cell_type == "code"
                             for o in c.outputs)
                if errors:
                    raise SystemExit(f"breakdown: {errors} cells of {assignment}/{path.name} failed with the solution")
                compile_s = _bench_value(nb.cells[-1])
                rows.append((f"{assignment}/{path.stem} ({flags})", {
                    "process start + imports": imports, "kernel start (sandboxed)": kernel,
                    "import jax": import_jax, "tracing + compilation": compile_s,
                    "notebook's own work": total - kernel - import_jax - compile_s, "total": total}))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("-a", "--assignment", action="append")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--only", action="append", choices=("stock", "stock_prepared", "local", "unpinned",
                                                              "unsandboxed", "dask", "breakdown"))
    args = parser.parse_args()
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ['PATH']}"
    assignments = args.assignment or ["lesson1"]
    unknown = set(assignments) - set(assignments_in(ROOT))
    if unknown:
        raise SystemExit(f"no such assignment: {', '.join(sorted(unknown))}")
    rows = []
    chosen = args.only or ("stock", "local", "unsandboxed", "dask", "breakdown")
    for name in (n for n in chosen if n != "breakdown"):
        with tempfile.TemporaryDirectory(prefix=f"jaxgrader-bench-{name}-") as tmp:
            course = Path(tmp) / "course"
            course.mkdir()
            build_class(course, assignments, args.students)
            start, cpu = time.perf_counter(), _cpu_seconds()
            info = globals()[name](course, assignments, args.workers)
            info["cpu"] = _cpu_seconds() - cpu
            # the class run itself (for Dask: not the cluster's start, which a teacher does once)
            rows.append((name, info.get("wall", time.perf_counter() - start), info))
    n = args.students * len(assignments)
    if rows:
        print(f"\n{n} submissions ({args.students} students x {', '.join(assignments)}), {args.workers} workers, "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
        print("| backend | seconds | submissions/min | reference run s | generate s | grading s "
              "| per submission: execute s | overhead s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, seconds, info in rows:
            refs = sum(info.get("reference_seconds", {}).values())
            ours = "grade_seconds" in info  # stock nbgrader reports none of these
            cells = [f"{refs:.1f}" if ours else "", f"{info['generate_seconds']:.1f}" if ours else "",
                     f"{info['grade_seconds']:.1f}" if ours else "", f"{info['execute_s']:.1f}" if ours else "",
                     f"{info['overhead_s']:.2f}" if ours else ""]
            print(f"| {name} | {seconds:.0f} | {60 * n / seconds:.1f} | " + " | ".join(cells) + " |")
        for name, _, info in rows:
            if info.get("kernels"):
                print(f"{name}: submissions' kernels forked from a prepared process {info['kernels']['forked']}, "
                      f"started fresh {info['kernels']['fresh']}")
            if info.get("write_seconds") is not None:
                print(f"{name}: the coordinator spent {info['write_seconds']:.1f} s writing {n} records to the gradebook "
                      f"({info['write_seconds'] / n:.3f} s each)")
        print("\n| backend | CPU s | CPU s per submission | cores busy (CPU s / wall s) |")
        print("|---|---:|---:|---:|")
        for name, seconds, info in rows:
            print(f"| {name} | {info['cpu']:.0f} | {info['cpu'] / n:.1f} | {info['cpu'] / seconds:.2f} |")
        walls = {name: seconds for name, seconds, _ in rows}
        if "stock" in walls and len(walls) > 1:
            print("speed-up over stock nbgrader, serial, fresh kernels: " + ", ".join(
                f"{name} {walls['stock'] / s:.2f}x" for name, s in walls.items() if name != "stock"))
    if "breakdown" in chosen:
        parts = breakdown(assignments)
        names = list(parts[0][1])
        print("\nwhere one submission's seconds go (its solution, sandboxed):")
        print("| notebook | " + " | ".join(names) + " |")
        print("|---|" + "---:|" * len(names))
        for nb_name, row in parts:
            print(f"| {nb_name} | " + " | ".join(f"{row[k]:.2f}" for k in names) + " |")
    by_name = {name: info for name, _, info in rows}
    if by_name.get("local") and by_name.get("unsandboxed"):
        sandboxed, plain = by_name["local"], by_name["unsandboxed"]
        per = [info["grade_seconds"] / n for info in (sandboxed, plain)]
        print(f"\nsandboxed / unsandboxed grading time per submission: {per[0]:.2f} s / {per[1]:.2f} s "
              f"= {per[0] / per[1]:.2f}x (reference run: {sum(sandboxed['reference_seconds'].values()):.1f} s "
              f"per class run, once per notebook)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
