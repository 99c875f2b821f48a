"""The class report: what a class got right and wrong in one assignment, for the teacher.

After ``jaxgrader grade`` (and on demand, ``jaxgrader report``) one HTML page and one CSV
per assignment under ``reports/`` in the course (``c.ClassReport.directory``):

* the score distribution (a matplotlib plot, embedded in the page as PNG data);
* every autograded test, named by its exercise heading: how many submissions passed
  it, the most common reasons it failed, and how many of those failures a *visible*
  test had already shown the student (the test stopped in its visible asserts before
  reaching the hidden part: the student was warned and submitted anyway);
  every check inside a test (the verdict's parts) with its own pass rate;
* submissions held for review (code no answer needs: ``held``), that could not be graded, or were graded
  again (a rerun in a fresh kernel, a retried task); the slowest submissions and grading time;
* similar submissions: pairs whose answers are unusually alike, side by side (``similarity``).

It reads only what grading already wrote, so it also works after a plain
``nbgrader autograde``: scores from nbgrader's gradebook, each test's verdict (its parts
and where it stopped) from the autograded notebooks, and timings, holds and notes from
``grading-summary.json`` when there is one. Everything that came from a submission is
escaped; the report is for teachers (it names hidden checks), so it stays in the course.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import csv
import dataclasses
import html
import io
import json
import re
import statistics
from pathlib import Path

from traitlets import Integer, Unicode
from traitlets.config import LoggingConfigurable

from ..course.config import CourseError, load_config
from .held import Held, held_rows, render_held

SUMMARY = "grading-summary.json"  # written by jaxgrader grade, one record per student and assignment
LAST_RUN = Path(".grading") / "last-run.json"
RERUN = re.compile(r"ran again in a freshly started kernel|graded on attempt \d+")  # notes of a second run
VISIBLE_FAILED = "a visible test failed"  # how the verdict's message starts when a visible assert stopped the test


class ClassReport(LoggingConfigurable):
    """Settings of the class report (``c.ClassReport.*`` in nbgrader_config.py)."""

    directory = Unicode("reports", help="Where the class reports go, relative to the course root: "
                        "<assignment>.html and <assignment>.csv.").tag(config=True)
    slowest = Integer(5, help="How many of the slowest submissions the report lists.").tag(config=True)
    top_messages = Integer(3, help="How many of the most common failure reasons the report shows per test.").tag(
        config=True)


@dataclasses.dataclass
class Check:
    """One check of a test (a part the verdict judged), over the class."""

    name: str
    passed: int = 0
    failed: int = 0
    messages: collections.Counter = dataclasses.field(default_factory=collections.Counter)


@dataclasses.dataclass
class Part:
    """One autograded test cell, over the class."""

    notebook: str
    grade_id: str
    name: str  # its exercise heading
    points: float
    passed: int = 0  # submissions with full points
    failed: int = 0
    warned: int = 0  # failures where a visible test had stopped it
    messages: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    checks: dict = dataclasses.field(default_factory=dict)  # name -> Check

    @property
    def graded(self) -> int:
        return self.passed + self.failed


@dataclasses.dataclass
class Report:
    assignment: str
    max_score: float
    scores: dict  # student -> total score in the gradebook (written answers graded so far included)
    missing: list  # students in the gradebook without a submission
    parts: list  # Part
    written: list  # (name, points, still to grade by hand)
    errors: list  # (student, reason): could not be graded in the last run
    reruns: list  # (student, note)
    times: list  # (student, seconds, host), slowest first
    run: dict  # .grading/last-run.json, if any
    similar: object = None  # similarity.Found, or why it could not be computed (str)
    held: list = dataclasses.field(default_factory=list)  # Held, by student


@contextlib.contextmanager
def existing_gradebook(root: Path, config):
    """The course's gradebook (nbgrader's Gradebook), or a one-line CourseError if there is none yet."""
    from ..course.coursedir import coursedir_of, gradebook_url, open_gradebook, sqlite_file

    db_url = gradebook_url(config, root)
    if sqlite_file(db_url) is not None and not sqlite_file(db_url).is_file():
        raise CourseError(f"{sqlite_file(db_url)}: no gradebook yet (run jaxgrader grade first)")
    with open_gradebook(db_url, coursedir_of(config).course_id) as gb:
        yield gb


def _records(root: Path, assignment: str) -> dict[str, dict]:
    try:
        records = json.loads((Path(root) / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {r["student"]: r for r in records if isinstance(r, dict) and r.get("assignment") == assignment
            and isinstance(r.get("student"), str)}


def _verdict_cells(path: Path) -> tuple[dict, dict | None]:
    """(grade_id -> test cell, what the tampering scan wrote or None) of an autograded notebook ({}, None if it
    cannot be read)."""
    from ..course.notebooks import NotebookError, read_notebook
    from ..verdict.holds import tampering_of

    try:
        nb = read_notebook(path)
    except NotebookError:
        return {}, None
    return {c.metadata.nbgrader.grade_id: c for c in nb.cells
            if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")}, tampering_of(nb)


def _reason(message: str, failed_checks: list[dict]) -> str:
    """What stopped the test, without the list of checks the verdict appends to it."""
    message = message.removeprefix("TestFailed: ")
    for check in failed_checks[:1]:
        cut = message.find(f"; {check.get('name', '')}: ")
        if cut >= 0:
            message = message[:cut]
    return message.strip()[:300] or "no points"


def _judge(part: Part, score: float, cell, record_cell: dict) -> None:
    """Count one submission's result for one test."""
    from ..verdict.verdict import parts_of, stopped_part

    checks = parts_of(cell) if cell is not None else list(record_cell.get("parts") or [])
    for p in checks:
        check = part.checks.setdefault(str(p.get("name", "")), Check(str(p.get("name", ""))))
        if p.get("passed"):
            check.passed += 1
        else:
            check.failed += 1
            check.messages[str(p.get("message", ""))[:300]] += 1
    if score >= part.points - 1e-9:
        part.passed += 1
        return
    part.failed += 1
    errors = [o for o in (cell.get("outputs", []) if cell is not None else []) if o.get("output_type") == "error"]
    message = str(errors[0].get("evalue", "")) if errors else str(record_cell.get("message", ""))
    stopped = stopped_part(cell) if cell is not None else None
    visible = stopped == "visible" or (stopped is None and message.removeprefix("TestFailed: ")
                                       .startswith(VISIBLE_FAILED))
    part.warned += visible
    failed = [p for p in checks if not p.get("passed")]
    if stopped or visible or not failed:
        part.messages[_reason(message, failed)] += 1
    else:  # it ran to the end: each failed check is a reason of its own
        part.messages.update(f"{p.get('name', '')}: {p.get('message', '')}"[:300] for p in failed)


def collect(root: Path, assignment: str, config=None) -> Report:
    """Everything the report shows for one assignment, from the gradebook and what grading wrote."""
    from nbgrader.api import MissingEntry

    from ..course.coursedir import coursedir_of, folder
    from .exercises import source_names

    root = Path(root).resolve()
    config = config or load_config(root)
    coursedir = coursedir_of(config)
    records = _records(root, assignment)
    parts: dict[tuple[str, str], Part] = {}
    written: dict[tuple[str, str], list] = {}
    scores: dict[str, float] = {}
    held: list[Held] = []
    with existing_gradebook(root, config) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"{assignment}: not in the gradebook (nothing graded yet)") from None
        max_score = float(found.max_score)
        for nb in found.notebooks:
            named = source_names(coursedir, assignment, nb.name)
            answers = {c.name for c in nb.solution_cells}
            for cell in nb.grade_cells:
                name = named.get(cell.name, cell.name)
                if cell.cell_type == "code" and cell.name not in answers:
                    parts[nb.name, cell.name] = Part(nb.name, cell.name, name, float(cell.max_score))
                else:
                    written[nb.name, cell.name] = [name, float(cell.max_score), 0]
        for submission in found.submissions:
            student = submission.student.id
            scores[student] = float(submission.score)
            record = records.get(student, {})
            autograded = folder(coursedir, "autograded", student, assignment)
            for snb in submission.notebooks:
                cells, found = _verdict_cells(autograded / f"{snb.name}.ipynb")
                if found:
                    held.append(Held(student, snb.name, found["findings"], int(found.get("count") or 0),
                                     bool(found.get("released"))))
                record_cells = (record.get("cells") or {}).get(snb.name) or {}
                for grade in snb.grades:
                    key = (snb.name, grade.name)
                    if key in parts:
                        _judge(parts[key], float(grade.score or 0.0), cells.get(grade.name),
                               record_cells.get(grade.name) or {})
                    elif key in written and grade.needs_manual_grade:
                        written[key][2] += 1
        missing = sorted(s.id for s in gb.students if s.id not in scores)
    graded = [r for r in records.values() if r.get("status") == "graded"]
    times = sorted(((r["student"], float(r.get("seconds") or (r.get("timings") or {}).get("total") or 0.0),
                     str(r.get("host", ""))) for r in graded), key=lambda t: -t[1])
    try:
        run = json.loads((root / LAST_RUN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        run = {}
    try:
        from .similarity import find_pairs

        similar = find_pairs(root, assignment, config)
    except Exception as exc:  # noqa: BLE001  the rest of the report stands; say why this section does not
        similar = f"{exc.__class__.__name__}: {str(exc)[:300]}"
    return Report(
        assignment, max_score, scores, missing, list(parts.values()), [tuple(w) for w in written.values()],
        errors=sorted((s, str(r.get("error", ""))) for s, r in records.items() if r.get("status") == "error"),
        reruns=sorted((s, str(n)) for s, r in records.items() for n in r.get("notes") or [] if RERUN.search(str(n))),
        times=times, run=run if isinstance(run, dict) else {}, similar=similar,
        held=sorted(held, key=lambda h: (h.released, h.student, h.notebook)))


# --------------------------------------------------------------------------- output


def score_plot(scores: list[float], max_score: float) -> str:
    """The score distribution as a PNG data URL (matplotlib, no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 2.8), dpi=100, layout="constrained")
    ax = fig.subplots()
    top = max([max_score, *scores, 1.0])
    ax.hist(scores, bins=[i * top / 20 for i in range(21)], color="#4c72b0", edgecolor="white")
    ax.set_xlim(0, top)
    ax.set_xlabel(f"score (of {max_score:g})")
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _rate(n: int, of: int) -> str:
    return f"{n}/{of} ({n / of:.0%})" if of else "-"


def _top(counter: collections.Counter, n: int) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def render_html(report: Report, settings: ClassReport | None = None) -> str:
    """The page: self-contained (inline style, the plot as data), every submitted text escaped."""
    from .similarity import STYLE, render_section

    settings = settings or ClassReport()
    e = html.escape
    scores = list(report.scores.values())
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(report.assignment)}: class report</title>",
           "<style>body{font-family:sans-serif;max-width:72em;margin:1em auto;padding:0 1em}"
           "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;"
           "vertical-align:top;text-align:left}td.n{text-align:right}details{margin:.2em 0}"
           f".low{{background:#fde2e1}}{STYLE}</style></head><body>",
           f"<h1>{e(report.assignment)}: class report</h1>"]
    summary = f"{len(scores)} graded submission{'s' * (len(scores) != 1)}"
    if scores:
        summary += (f"; mean {statistics.fmean(scores):.2f}, median {statistics.median(scores):g} "
                    f"of {report.max_score:g} points")
    if report.missing:
        summary += f"; no submission from {len(report.missing)}: {e(', '.join(report.missing))}"
    out.append(f"<p>{summary}.</p>")
    out.append(f"<h2>Score distribution</h2><img id='score-plot' alt='score distribution' "
               f"src='{score_plot(scores, report.max_score)}'>")
    to_grade = [w for w in report.written if w[2]]
    if to_grade:
        out.append("<p>Scores include written answers graded so far; still to grade by hand: "
                   + e("; ".join(f"{name}: {n}" for name, _, n in to_grade)) + " (nbgrader formgrader).</p>")

    out.append("<h2>Tests</h2><p>Passed: full points. Warned: failures where a visible test had already "
               "stopped the test, so the student saw it fail before submitting.</p>"
               "<table id='parts'><tr><th>exercise</th><th>test</th><th>points</th><th>passed</th>"
               "<th>warned</th><th>most common reasons</th></tr>")
    for p in report.parts:
        low = " class='low'" if p.graded and p.passed / p.graded < 0.5 else ""
        reasons = "<br>".join(f"{e(m)} ({n})" for m, n in _top(p.messages, settings.top_messages))
        checks = "".join(
            f"<tr><td>{e(c.name)}</td><td class='n'>{_rate(c.passed, c.passed + c.failed)}</td><td>"
            + e("; ".join(f"{m} ({n})" for m, n in _top(c.messages, 1))) + "</td></tr>"
            for c in p.checks.values())
        if checks:
            reasons += (f"<details><summary>{len(p.checks)} checks</summary><table><tr><th>check</th>"
                        f"<th>passed</th><th>most common failure</th></tr>{checks}</table></details>")
        out.append(f"<tr{low}><td>{e(p.name)}</td><td><code>{e(p.grade_id)}</code></td><td class='n'>"
                   f"{p.points:g}</td><td class='n'>{_rate(p.passed, p.graded)}</td><td class='n'>"
                   f"{_rate(p.warned, p.failed)}</td><td>{reasons}</td></tr>")
    out.append("</table>")

    if report.held:
        out.append(render_held(report.assignment, report.held))
    for title, rows in (("Not graded", report.errors), ("Graded again", report.reruns)):
        if rows:
            out.append(f"<h2>{title}</h2><ul>" + "".join(f"<li>{e(s)}: {e(t)}</li>" for s, t in rows) + "</ul>")
    if isinstance(report.similar, str):
        out.append(f"<h2 id='similarity'>Similar submissions</h2><p>Not compared: {e(report.similar)}</p>")
    elif report.similar is not None:
        out.append(render_section(report.similar))
    if report.times:
        seconds = [t for _, t, _ in report.times]
        line = (f"<h2>Grading time</h2><p>{len(seconds)} submissions, {sum(seconds):.0f} s of grading "
                f"(median {statistics.median(seconds):.1f} s per submission)")
        if report.run.get("seconds") is not None:
            line += (f"; the last run took {float(report.run['seconds']):.0f} s on "
                     f"{e(str(report.run.get('backend', '')))}")
        out.append(line + ".</p><table id='slowest'><tr><th>slowest</th><th>seconds</th><th>host</th></tr>" + "".join(
            f"<tr><td>{e(s)}</td><td class='n'>{t:.1f}</td><td>{e(h)}</td></tr>"
            for s, t, h in report.times[:settings.slowest]) + "</table>")
    out.append("</body></html>")
    return "\n".join(out)


CSV_COLUMNS = ["assignment", "notebook", "exercise", "test", "check", "points", "graded", "passed", "pass_rate",
               "failed", "warned", "most_common_reason", "reason_count"]


def _text(value: str) -> str:
    """A text cell a spreadsheet will not run as a formula (a verdict message can quote a submission's value)."""
    return f"'{value}" if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def write_csv(report: Report, path: Path) -> None:
    """One row per test (``check`` empty), then one per check of that test; then one per finding of a
    submission held for review (``held.held_rows``: exercise "held for review", test the student)."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for p in report.parts:
            rows = [("", p.passed, p.failed, p.warned, p.messages)]
            rows += [(c.name, c.passed, c.failed, "", c.messages) for c in p.checks.values()]
            for check, passed, failed, warned, messages in rows:
                top = _top(messages, 1)
                writer.writerow([report.assignment, p.notebook, p.name, p.grade_id, _text(check), f"{p.points:g}",
                                 passed + failed, passed, f"{passed / (passed + failed):.3f}" if passed + failed
                                 else "", failed, warned, _text(top[0][0]) if top else "", top[0][1] if top else ""])
        writer.writerows([[_text(v) for v in row] for row in held_rows(report.assignment, report.held)])


def write_reports(root: Path, assignments: list[str] | None = None) -> list[Path]:
    """``<directory>/<assignment>.html`` and ``.csv`` for each assignment (default: all in the gradebook)."""
    root = Path(root).resolve()
    config = load_config(root)
    settings = ClassReport(config=config)
    if not assignments:
        with existing_gradebook(root, config) as gb:
            assignments = sorted(a.name for a in gb.assignments if a.submissions)
    folder = root / settings.directory
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for assignment in assignments:
        report = collect(root, assignment, config)
        page = folder / f"{assignment}.html"
        page.write_text(render_html(report, settings), encoding="utf-8")
        write_csv(report, folder / f"{assignment}.csv")
        written += [page, folder / f"{assignment}.csv"]
    return written


def after_grading(root: Path, assignments: list[str]) -> str:
    """The line ``jaxgrader grade`` prints about the class report; a report that fails never fails grading."""
    try:
        written = write_reports(root, sorted(set(assignments)))
    except Exception as exc:  # noqa: BLE001  the grades are written; say why the report is not
        return f"class report not written: {exc.__class__.__name__}: {str(exc)[:300]}"
    return f"class report: {written[0].parent}/" if written else ""
