"""What the reference run costs, per lesson: the instructor's notebooks run as the grader runs them.

    python benchmarks/reference_cost.py                      # every lesson, twice
    python benchmarks/reference_cost.py -a lesson3 -a lesson4 --repeat 3

Every grading run pays this once per notebook (``verdict/reference.py``: the sandboxed kernel, the run's seed,
the cells' marks filled), before any submission is judged, so new hidden-test parts cost the class run here
first. Prints, per lesson: the wall seconds of the run (median of ``--repeat``), the peak resident memory of
its largest process (the kernel, sampled every 0.1 s; each run in a process of its own), and how many parts
the reference reported.

To compare two versions of the course, run the script in both checkouts, one after the other and on an idle
machine (docs/benchmarks.md, "The reference run"); it imports only what both versions have
(``reference_reports``, ``load_config``, ``with_seed``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = 7  # one seed for every run, so two checkouts draw the same inputs where their tests agree


def one(assignment: str) -> dict:
    """Run ``assignment``'s reference once in this process; its seconds, parts and the children's peak memory."""
    sys.path.insert(0, str(ROOT))
    from jaxgrader.grading.course.config import load_config
    from jaxgrader.grading.course.coursedir import source_notebooks
    from jaxgrader.grading.sandbox.seed import with_seed
    from jaxgrader.grading.verdict.reference import reference_reports

    config = with_seed(load_config(ROOT), SEED)
    peak, done = [0], threading.Event()
    watcher = threading.Thread(target=_watch, args=(peak, done), daemon=True)
    watcher.start()
    start, parts = time.perf_counter(), 0
    for notebook in source_notebooks(ROOT, assignment):
        reports = reference_reports(ROOT / "source" / assignment / f"{notebook}.ipynb", config)
        parts += sum(len(found) for found in reports.values())
    seconds = time.perf_counter() - start
    done.set()
    watcher.join()
    return {"seconds": seconds, "parts": parts, "peak_mib": peak[0] / 2**20}


def _watch(peak: list, done: threading.Event, every: float = 0.1) -> None:
    """The largest resident memory of any process under this one, sampled until ``done``: the kernel's (a
    kernel forked from a prepared process is a grandchild, which getrusage would not see until it is reaped)."""
    import psutil

    me = psutil.Process()
    while not done.wait(every):
        for child in me.children(recursive=True):
            try:
                peak[0] = max(peak[0], child.memory_info().rss)
            except psutil.Error:
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-a", "--assignment", action="append", help="this lesson only (repeatable)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one run of one lesson, as JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    assignments = args.assignment or sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
    print("| lesson | seconds (median) | peak MiB | parts |")
    print("|---|---:|---:|---:|")
    for assignment in assignments:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--one", assignment], capture_output=True, text=True,
                                 cwd=ROOT)
            if out.returncode:
                raise SystemExit(f"{assignment}: the reference run failed:\n{out.stderr[-2000:]}")
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"| {assignment} | {statistics.median(r['seconds'] for r in runs):.1f} | "
              f"{max(r['peak_mib'] for r in runs):.0f} | {runs[0]['parts']} |", flush=True)


if __name__ == "__main__":
    main()
