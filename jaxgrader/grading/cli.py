"""``jaxgrader``: the teacher's loop in one command.

    jaxgrader demo                 # build the demo class, then grade it
    jaxgrader grade [-a A] [-s S]  # grade what is in submitted/ (new or changed submissions)
    jaxgrader grade --dask tcp://scheduler:8786   # ... on a Dask cluster
    jaxgrader release              # regenerate release/ from source/
    jaxgrader trials lesson3       # grade the solution, the release and each wrong answer
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from .config import CourseError, load_config, make_api
from .course import assignments_in, format_table, generate, grade_class


def main(argv: list[str] | None = None) -> int:
    # nbgrader 0.9 trips SQLAlchemy's autoflush warnings on every autograde; they are not the teacher's concern.
    warnings.filterwarnings("ignore", message=".*not in session.*")
    parser = argparse.ArgumentParser(prog="jaxgrader", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="course directory (default: here)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="write the bundled demo submissions into submitted/ and grade them")
    demo.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    grade = sub.add_parser("grade", help="autograde submitted/, write feedback and grades.csv")
    grade.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    grade.add_argument("-s", "--student", action="append", help="only this student (repeatable)")
    grade.add_argument("--no-feedback", action="store_true", help="skip feedback HTML")
    grade.add_argument("--workers", type=int, metavar="N",
                       help="local grading processes (default: c.JaxGrader.workers, else the CPU count)")
    grade.add_argument("--dask", metavar="ADDRESS",
                       help="grade on the Dask cluster whose scheduler is at ADDRESS, e.g. tcp://head:8786 "
                       "(default: c.JaxGrader.dask_scheduler; see docs/scale-out.md)")
    grade.add_argument("--regrade", action="store_true",
                       help="grade every submission again, also those unchanged since they were last graded")
    for p in (demo, grade):
        p.add_argument("--unsandboxed", action="store_true",
                       help="grade without the kernel sandbox (student code runs with your permissions)")
    release = sub.add_parser("release", help="regenerate release/ from source/ with nbgrader generate_assignment")
    release.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    trials = sub.add_parser("trials", help="check an assignment's tests against its solution, "
                            "its release and its wrong answers (demo/wrong-answers/)")
    trials.add_argument("assignment")
    trials.add_argument("--only", action="append", help="only this trial student (repeatable)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.command == "release":
            config = load_config(root)
            chosen = args.assignment or assignments_in(root)
            generate(make_api(config), chosen)
            print(f"release/ regenerated for {', '.join(chosen)}")
            return 0
        if args.command == "trials":
            return _trials(root, args.assignment, args.only)
        students = None
        if args.command == "demo":
            from .demo import write_demo_submissions

            students = write_demo_submissions(root, args.assignment)
            results = grade_class(root, args.assignment, students=students, unsandboxed=args.unsandboxed)
        else:
            results = grade_class(root, args.assignment, args.student, feedback=not args.no_feedback,
                                  workers=args.workers, dask=args.dask, unsandboxed=args.unsandboxed,
                                  regrade=args.regrade)
    except CourseError as exc:
        print(f"jaxgrader: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\njaxgrader: interrupted. What was graded before is in the gradebook; "
              "`jaxgrader grade` grades the rest.", file=sys.stderr)
        return 130
    print(format_table(results))
    print(f"\ngrades: {root / 'grades.csv'}   feedback: {root / 'feedback'}/")
    return 1 if any(r.status == "error" for r in results) else 0


def _trials(root: Path, assignment: str, only: list[str] | None) -> int:
    """Print, per trial student, which test cells lost points against which should have."""
    import tempfile

    from .trials import expected_failures, run_trials

    expected = expected_failures(root, assignment)
    with tempfile.TemporaryDirectory() as tmp:
        results = run_trials(root, assignment, Path(tmp), only=only)
    bad = 0
    for student, result in results.items():
        if result.error:
            print(f"{student:40s} ERROR {result.error.strip().splitlines()[-1]}")
            bad += 1
            continue
        failed = {gid for scores in result.scores.values() for gid, pts in scores.items() if pts == 0}
        ok = failed == expected[student]
        bad += not ok
        print(f"{student:40s} {'ok ' if ok else 'BAD'} lost: {sorted(failed)}"
              + ("" if ok else f"  expected: {sorted(expected[student])}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
