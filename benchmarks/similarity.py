"""The similarity pass on a large class: 200 generated submissions of one assignment (docs/benchmarks.md).

    python benchmarks/similarity.py                    # lesson3, 200 students
    python benchmarks/similarity.py -a lesson5 --students 400

Each generated student answers every cell with the instructor's solution, one of the catalogued wrong
answers for it (demo/wrong-answers/), an independent answer where there is one
(demo/independent/) or the stub, then renames, recomments and reorders it
(tests/similar_students.py's ``near_copy``), and writes a helper of its own into some cells (random
arithmetic: code nobody else has). Five more students each copy one of them the same way. Prints the time
of ``jaxgrader similarity -a A`` (a fresh process: start, imports, configuration, reading the notebooks,
fingerprints, pairs, the page) and of the pass inside an already started process (what the class report
adds after ``jaxgrader grade``), against a class run of as many submissions at the throughput measured in
docs/benchmarks.md, and whether the five copies were found.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# `jaxgrader grade`, 2 local workers, this machine (docs/benchmarks.md, "Grading throughput", (b))
SUBMISSIONS_PER_MINUTE = 12.7
CPU_PER_SUBMISSION = 9.0  # seconds


def own_code(rng: random.Random, k: int) -> str:
    """A helper nobody else writes: random arithmetic on random constants."""
    def expr(depth: int) -> str:
        if depth == 0:
            return rng.choice(["x", "y", f"{rng.randint(1, 999) / 100}", "x[0]"])
        if rng.random() < 0.3:
            return f"jnp.tanh({expr(depth - 1)})"
        return f"({expr(depth - 1)} {rng.choice('+-*')} {expr(depth - 1)})"

    body = "\n".join(f"    t{i} = {expr(3)}" for i in range(rng.randint(2, 4)))
    return f"\n\ndef _check_{k}(x, y):\n{body}\n    return t0\n"


def build(course: Path, assignment: str, students: int, copies: int, seed: int = 0) -> list[tuple[str, str]]:
    """Write the class into ``course/submitted``; return the planted (copier, original) pairs."""
    from jaxgrader.grading.course.coursedir import source_notebooks
    from jaxgrader.grading.course.notebooks import read_notebook, solutions_of, write_submission
    from jaxgrader.grading.trials import wrong_answers
    from tests.similar_students import independent_answers, near_copy

    rng = random.Random(seed)
    release = course / "release" / assignment
    wrong = wrong_answers(course, assignment)
    own = independent_answers(assignment) or {}
    typed: dict[str, dict[str, dict[str, str]]] = {}
    for notebook in source_notebooks(course, assignment):
        solutions = solutions_of(read_notebook(course / "source" / assignment / f"{notebook}.ipynb"))
        stubs = {c.metadata["nbgrader"]["grade_id"]: c.source for c in read_notebook(release / f"{notebook}.ipynb").cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
        for s in range(students):
            answers = {}
            for k, (gid, solution) in enumerate(solutions.items()):
                choices = [solution] * 5 + [w["code"] for w in wrong if w["cell"] == gid] + [own.get(gid, solution)] * 2
                text = stubs[gid] if rng.random() < 0.1 else rng.choice(choices).strip("\n")
                if text != stubs[gid] and "def " in text and rng.random() < 0.5:
                    text += own_code(rng, k)
                answers[gid] = near_copy(text + "\n", seed * 100_000 + s * 100 + k)
            typed.setdefault(f"student{s:03d}", {})[notebook] = answers
    planted = []
    for c in range(copies):
        original = f"student{rng.randrange(students):03d}"
        copier = f"copier{c}"
        typed[copier] = {nb: {gid: near_copy(text, 7 + c) for gid, text in answers.items()}
                         for nb, answers in typed[original].items()}
        planted.append((copier, original))
    for student, notebooks in typed.items():
        write_submission(release, course / "submitted" / student / assignment, notebooks)
    return planted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-a", "--assignment", default="lesson3")
    parser.add_argument("--students", type=int, default=200, help="generated students (the copiers come on top)")
    parser.add_argument("--copies", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp) / "course"
        course.mkdir()
        shutil.copy2(ROOT / "nbgrader_config.py", course)
        for name in ("source", "release", "demo", "notebooks"):
            shutil.copytree(ROOT / name, course / name)
        started = time.monotonic()
        planted = build(course, args.assignment, args.students - args.copies, args.copies)
        print(f"{args.students} submissions of {args.assignment} written in {time.monotonic() - started:.0f} s")

        started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "similarity",
                              "-a", args.assignment], capture_output=True, text=True)
        command = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        command_cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        assert run.returncode == 0, run.stderr[-2000:]

        from jaxgrader.grading.course.config import load_config
        from jaxgrader.grading.teacher.similarity import find_pairs, render_section

        config = load_config(course)
        find_pairs(course, args.assignment, config)  # imports and caches warm, as after a class run
        started, cpu = time.monotonic(), time.process_time()
        found = find_pairs(course, args.assignment, config)
        render_section(found)
        inside, inside_cpu = time.monotonic() - started, time.process_time() - cpu
        listed = {frozenset((p.a, p.b)) for p in found.pairs}
        hits = sum(frozenset(p) in listed for p in planted)
        class_run, class_cpu = args.students / SUBMISSIONS_PER_MINUTE * 60, args.students * CPU_PER_SUBMISSION
        print(f"jaxgrader similarity -a {args.assignment}: {command:.1f} s wall, {command_cpu:.1f} CPU s (a fresh "
              f"process); the pass inside a started process: {inside:.1f} s wall, {inside_cpu:.1f} CPU s; "
              f"{len(found.compared)} submissions compared, {found.ignored} fingerprints left out as shared by "
              f"more than {found.settings.common}")
        print(f"a class run of {args.students} submissions: {class_run:.0f} s wall on 2 workers, {class_cpu:.0f} CPU s; "
              f"the pass adds {inside / class_run:.1%} of its wall time, {inside_cpu / class_cpu:.1%} of its CPU "
              f"({command / class_run:.1%} and {command_cpu / class_cpu:.1%} as a command of its own)")
        print(f"planted copies found: {hits} of {len(planted)}; pairs listed: {len(found.pairs) + found.more} "
              f"({len(found.pairs) + found.more - hits} others)")


if __name__ == "__main__":
    main()
