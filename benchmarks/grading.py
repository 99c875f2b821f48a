"""Grading throughput: a demo class graded serially and in parallel.

    python benchmarks/grading.py                        # 20 students x every assignment
    python benchmarks/grading.py --students 6 -a lesson1

Students cycle through the trial answers (the solution, the blank release, each
wrong answer), so the class is a realistic mix of passing and failing cells.
The same class is graded with ``workers=1`` and ``workers=N`` (default: CPU
count) by ``jaxgrader.course.grade_class`` into fresh scratch courses, without
feedback. Prints seconds, submissions per minute and the speed-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jaxgrader.grading.course import assignments_in, grade_class  # noqa: E402
from jaxgrader.grading.notebooks import write_submission  # noqa: E402
from jaxgrader.grading.trials import trial_students  # noqa: E402


def build_class(course: Path, assignments: list[str], students: int) -> None:
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    for assignment in assignments:
        shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment)
        kinds = list(trial_students(ROOT, assignment).items())
        for i in range(students):
            _, notebooks = kinds[i % len(kinds)]
            write_submission(ROOT / "release" / assignment, course / "submitted" / f"student{i:02d}" / assignment,
                             notebooks)


def timed_grade(assignments: list[str], students: int, workers: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        build_class(course, assignments, students)
        start = time.perf_counter()
        results = grade_class(course, assignments, feedback=False, progress=True, workers=workers)
        elapsed = time.perf_counter() - start
        errors = [r for r in results if r.status != "graded"]
        if errors:
            raise SystemExit(f"grading failed: {errors[0].student}/{errors[0].assignment}: {errors[0].error}")
        return elapsed, len(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("-a", "--assignment", action="append")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    assignments = args.assignment or assignments_in(ROOT)
    serial, n = timed_grade(assignments, args.students, 1)
    parallel, _ = timed_grade(assignments, args.students, args.workers)
    print(f"\n{n} submissions ({args.students} students x {', '.join(assignments)}) on {os.cpu_count()} cores")
    print("| workers | seconds | submissions/min |\n|---:|---:|---:|")
    print(f"| 1 | {serial:.0f} | {60 * n / serial:.1f} |")
    print(f"| {args.workers} | {parallel:.0f} | {60 * n / parallel:.1f} |")
    print(f"speed-up: {serial / parallel:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
