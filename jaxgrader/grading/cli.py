"""``jaxgrader``: the teacher's loop in one command.

    jaxgrader demo                 # build the demo class, then grade it
    jaxgrader grade [-a A] [-s S]  # grade what is in submitted/ (new or changed submissions)
    jaxgrader grade --dask tcp://scheduler:8786   # ... on a Dask cluster
    jaxgrader release              # regenerate release/ from source/
    jaxgrader publish              # point Colab badges and links at course_style.REPOSITORY/BRANCH
    jaxgrader trials lesson3       # grade the solution, the release and each wrong answer
    jaxgrader translate update ko  # editions in other languages (docs/translating.md)
    jaxgrader translate side-by-side ko   # grade an edition in gradebook columns of its own
    jaxgrader report [-a A]        # the class report per assignment (reports/<assignment>.html, .csv)
    jaxgrader similarity [-a A]    # pairs of unusually similar submissions (reports/<assignment>-similarity.html)
    jaxgrader export --format canvas|moodle|csv [-a A] [-o FILE]   # grades in an LMS's import format
    jaxgrader review lesson3 [STUDENT ...] [--all]   # list submissions held for review; release and regrade them
    jaxgrader classroom --roster FILE   # a JupyterHub for the class, with nbgrader's exchange (docs/classroom.md)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from .course.config import CourseError, load_config, make_api
from .classrun.run import grade_class
from .course.coursedir import assignments_in, coursedir_of, folder
from .classrun.references import generate
from .classrun.table import format_table


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
    grade.add_argument("--seed", type=int, metavar="N",
                       help="seed of the hidden tests' inputs, for a reproducible run (default: c.JaxGrader.seed, "
                       "else a fresh one)")
    for p in (demo, grade):
        p.add_argument("--unsandboxed", action="store_true",
                       help="grade without the kernel sandbox (student code runs with your permissions)")
    release = sub.add_parser("release", help="regenerate release/ from source/ with nbgrader generate_assignment")
    release.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    sub.add_parser("publish", help="point every Colab badge and cross-notebook link of notebooks/, source/ "
                   "and release/ at the published repository (jaxgrader/course_style.py)")
    trials = sub.add_parser("trials", help="check an assignment's tests against its solution, "
                            "its release and its wrong answers (demo/wrong-answers/)")
    trials.add_argument("assignment")
    trials.add_argument("--only", action="append", help="only this trial student, e.g. wrong-NAME (repeatable)")
    trials.add_argument("--each", action="store_true",
                        help="one trial student per wrong answer and per binding style of the honest rewrites "
                        "(default: answers to different cells share one; styles take turns in two)")
    translate = sub.add_parser("translate", help="editions in other languages: extract templates, update a "
                               "language's catalogs, build its edition, or print its status (docs/translating.md)")
    translate.add_argument("action", choices=["extract", "update", "build", "status", "side-by-side"],
                           help="side-by-side: place the edition's assignments in the course as assignments of "
                           "their own (lesson1-ko), graded in a gradebook column of their own (docs/grading.md)")
    translate.add_argument("language", nargs="?", default="ko", help="language code (default: ko)")
    translate.add_argument("-a", "--assignment", action="append", help="side-by-side: only this assignment")
    report = sub.add_parser("report", help="write the class report (reports/<assignment>.html and .csv)")
    report.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    similarity = sub.add_parser("similarity", help="list pairs of submissions whose answers are unusually similar, "
                                "side by side (reports/<assignment>-similarity.html); a list to read, never a grade")
    similarity.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    export = sub.add_parser("export", help="write grades in an LMS's gradebook import format")
    export.add_argument("--format", required=True, choices=["canvas", "moodle", "csv"])
    export.add_argument("-a", "--assignment", action="append", help="only this assignment (repeatable)")
    export.add_argument("-o", "--output", type=Path, help="file to write (default: grades-<format>.csv here)")
    classroom = sub.add_parser("classroom", help="serve the class on JupyterHub: an account per student, nbgrader's "
                               "exchange, formgrader for the instructor (as root; docs/classroom.md)")
    who = classroom.add_mutually_exclusive_group()
    who.add_argument("--roster", type=Path, help="the class list, a CSV as `nbgrader db student import` reads")
    who.add_argument("--demo", action="store_true", help="the demo class's students (ada, bo, cy, hana)")
    classroom.add_argument("--instructor", help="the instructor's account (default: the course directory's owner)")
    classroom.add_argument("--exchange", help="nbgrader's exchange root (default: /srv/nbgrader/exchange)")
    classroom.add_argument("--state", help="the hub's own folder (default: /srv/jaxgrader/<course id>)")
    classroom.add_argument("--ip", help="address to serve on (default: 127.0.0.1, behind an HTTPS proxy)")
    classroom.add_argument("--port", type=int, help="port to serve on (default: 8000)")
    classroom.add_argument("--check", action="store_true", help="check everything, change nothing, say what a start would do")
    review = sub.add_parser("review", help="submissions held for review (code no answer needs: their cost and "
                            "artifact parts at 0): list them, or release and grade again (docs/grading.md)")
    review.add_argument("assignment")
    review.add_argument("student", nargs="*", help="release these students' held submissions (none: list them)")
    review.add_argument("--all", action="store_true", help="release every held submission of the assignment")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.command == "release":
            config = load_config(root)
            chosen = args.assignment or assignments_in(root)
            generate(make_api(config), chosen)
            print(f"release/ regenerated for {', '.join(chosen)}")
            return 0
        if args.command == "translate":
            from .editions.translate import command

            return command(root, args.action, args.language, args.assignment)
        if args.command == "similarity":
            return _similarity(root, args.assignment)
        if args.command in ("report", "export"):  # jaxgrader/grading/teacher/class_report.py, lms_export.py
            from .teacher.class_report import write_reports
            from .teacher.lms_export import export_grades as lms_export

            done = (write_reports(root, args.assignment) if args.command == "report"
                    else [lms_export(root, args.format, args.assignment, args.output)])
            print("\n".join(str(p) for p in done))
            return 0
        if args.command == "publish":
            from .publish import publish

            changed = publish(root)
            print(f"links published in {len(changed)} notebooks" + "".join(f"\n  {p.relative_to(root)}" for p in changed))
            return 0
        if args.command == "classroom":  # jaxgrader/grading/classroom/
            from .classroom.command import Options, run
            from .demo import DEMO_STUDENTS, EDITION_STUDENTS

            return run(root, Options(args.roster, tuple(DEMO_STUDENTS) + tuple(EDITION_STUDENTS) if args.demo else (),
                                     args.instructor, args.exchange, args.state, args.ip, args.port, args.check))
        if args.command == "review":  # jaxgrader/grading/review.py
            from .review import command as review_command

            return review_command(root, args.assignment, args.student, args.all)
        if args.command == "trials":
            return _trials(root, args.assignment, args.only, packed=not args.each)
        students = None
        if args.command == "demo":
            from .demo import write_demo_submissions

            students = write_demo_submissions(root, args.assignment)
            results = grade_class(root, args.assignment, students=students, unsandboxed=args.unsandboxed)
        else:
            results = grade_class(root, args.assignment, args.student, feedback=not args.no_feedback,
                                  workers=args.workers, dask=args.dask, unsandboxed=args.unsandboxed,
                                  regrade=args.regrade, seed=args.seed)
    except CourseError as exc:
        print(f"jaxgrader: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\njaxgrader: interrupted. What was graded before is in the gradebook; "
              "`jaxgrader grade` grades the rest.", file=sys.stderr)
        return 130
    print(format_table(results))
    print(f"\ngrades: {root / 'grades.csv'}   feedback: {folder(coursedir_of(load_config(root)), 'feedback')}/")
    from .teacher.class_report import after_grading

    print(after_grading(root, [r.assignment for r in results]))
    return 1 if any(r.status == "error" for r in results) else 0


def _similarity(root: Path, assignments: list[str] | None) -> int:
    """Print each assignment's similar pairs and write its page (jaxgrader/grading/teacher/similarity.py); exit 0:
    a list to read, not a verdict."""
    from .teacher.class_report import ClassReport
    from .teacher.similarity import describe, describe_passage, find_pairs, write_page

    config = load_config(root)
    for assignment in assignments or assignments_in(root, config):
        found = find_pairs(root, assignment, config)
        print(f"{assignment}: {len(found.compared)} submissions compared in {found.seconds:.1f} s; "
              f"{len(found.pairs) + found.more} pairs over {found.settings.threshold:.0%}")
        for pair in found.pairs:
            print(f"  {pair.a} and {pair.b}: {describe(pair)}")
        for passage in found.passages:  # a long cell many submissions share: read it
            print(f"  a long passage many share: {describe_passage(passage)}")
        for who, reason in found.unreadable:
            print(f"  not compared: {who}: {reason}")
        print(f"  {write_page(found, root / ClassReport(config=config).directory)}")
    return 0


def _trials(root: Path, assignment: str, only: list[str] | None, packed: bool = True) -> int:
    """Print, per trial, whether it lost exactly the points it should and whether a visible test saw it."""
    import tempfile

    from .trials import is_packed, outcomes, rates, run_trials

    with tempfile.TemporaryDirectory() as tmp:
        results = run_trials(root, assignment, Path(tmp), only=only, packed=packed)
    found = outcomes(root, assignment, results, packed=is_packed(packed, only))
    bad = 0
    for o in found:
        seen = ""
        if o.visible is not None:
            seen = "seen by a visible test" if o.visible else "hidden tests only"
            if o.visible != o.declared_visible:
                seen += f" (BAD: declared visible = {str(o.declared_visible).lower()})"
                bad += 1
        status = "ok " if o.ok else "BAD"
        bad += not o.ok
        print(f"{o.name:40s} {status} {seen}" + (f"  {o.problem}" if o.problem else ""))
    held = {s: t.held for s, t in results.items() if t.held}  # findings of code no answer needs (verdict/holds.py)
    print(f"\n{assignment}: held for review: " + (", ".join(f"{s} ({n} findings)" for s, n in sorted(held.items()))
                                                  or "nobody") + f"; {len(results) - len(held)} students not held"
          + (" (the forged students graded as released: only the evidence stops them)" if held else ""))
    from .trial_students import early_bound, trial_students

    students, holds = trial_students(root, assignment, packed)
    bound = {s: cells for s, cells in early_bound(students, holds).items() if s in results}
    if bound:  # one mistake, one exercise: a correct later answer bound to the mistake at definition loses nothing
        ok = {o.name: o.ok for o in found}
        bad_bound = [s for s in bound if not all(ok.get(f"wrong-{w['name']}", True) for w in holds[s])]
        print(f"{assignment}: {len(bound)} wrong-answer students hold correct later answers bound early to their "
              f"mistakes ({sum(map(len, bound.values()))} cells); "
              + (f"BAD: {', '.join(bad_bound)}" if bad_bound else "each lost only its answers' tests"))
    r = rates(found)
    if r["answers"]:
        print(f"\n{assignment}: {r['answers']} wrong answers; {r['lose_points']} ({r['lose_points_rate']:.0%}) "
              f"lose points on hidden tests; {r['flagged_visibly']} ({r['flagged_visibly_rate']:.0%}) "
              f"flagged by a visible test; graded as {len(results)} trial students")
    from .trials import edition_release

    edition = [s for s in results if edition_release(root, assignment, s)]
    if edition:
        print(f"{assignment}: {len(edition)} of them submitted a translated edition ({', '.join(edition)})")
    from .course.coursedir import source_notebooks
    from .course.notebooks import read_notebook
    from .verdict.verdict import evidence_summary, kernel_points_summary
    source = folder(coursedir_of(load_config(root)), "source", ".", assignment)
    notebooks = [read_notebook(source / f"{nb}.ipynb") for nb in source_notebooks(root, assignment)]
    print(kernel_points_summary(assignment, notebooks))
    print(evidence_summary(assignment, notebooks))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
