"""What a class run leaves for people and programs: the score table and ``grading-summary.json``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .records import Result


def write_summary(results: list[Result], path: Path) -> None:
    """Machine-readable summary: one record per student and assignment."""
    path.write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=2) + "\n")


def format_table(results: list[Result]) -> str:
    """Students down, assignments across, 'score/max' or 'ERROR' in each cell."""
    students = sorted({r.student for r in results})
    assignments = sorted({r.assignment for r in results})
    cell = {(r.student, r.assignment): r for r in results}
    width = max([len("student")] + [len(s) for s in students])
    col = max([11] + [len(a) for a in assignments])
    lines = ["student".ljust(width) + "".join(a.rjust(col + 2) for a in assignments) + "total".rjust(col + 2)]
    for s in students:
        row, got, out_of = s.ljust(width), 0.0, 0.0
        for a in assignments:
            r = cell.get((s, a))
            if r is None or r.status == "error":
                row += "ERROR".rjust(col + 2)
            else:
                row += f"{r.score:g}/{r.max_score:g}".rjust(col + 2)
                got, out_of = got + r.score, out_of + r.max_score
        lines.append(row + f"{got:g}/{out_of:g}".rjust(col + 2))
    kept = sum(r.kept for r in results)
    if kept:
        lines += ["", f"{kept} unchanged submission{'s' if kept != 1 else ''} kept from an earlier run "
                      "(jaxgrader grade --regrade grades them again)"]
    unisolated = [r for r in results if r.status == "graded" and r.isolation == "none"]
    if unisolated:
        lines += ["", f"WARNING: {len(unisolated)} submission{'s were' if len(unisolated) != 1 else ' was'} graded "
                      "without the kernel sandbox: student code ran with the grader's permissions"]
    errors = [f"  {r.student}/{r.assignment}: {note}"
              for r in results for note in ([r.error] if r.error else []) + r.notes]
    if errors:
        lines += ["", "problems:"] + errors
    held = [r for r in results if r.is_held]
    if held:
        lines += ["", "held for review (code no answer needs: cost and artifact parts at 0 until "
                      "`jaxgrader review ASSIGNMENT STUDENT` releases them):"] + [
            line for r in held for line in held_lines(r)]
    return "\n".join(lines)


def held_lines(result: Result, most: int = 3) -> list[str]:
    """A held submission's findings, one line each (at most ``most`` per notebook, then how many more)."""
    lines = []
    for notebook, entry in sorted(result.held.items()):
        if entry.get("released") or not entry.get("findings"):
            continue
        for f in entry["findings"][:most]:
            lines.append(f"  {result.student}/{result.assignment}: {notebook}.ipynb {f.get('where')} "
                         f"(cell {f.get('cell')}), line {f.get('line')}: {f.get('what')}")
        count = int(entry.get("count") or len(entry["findings"]))
        if count > most:
            lines.append(f"  {result.student}/{result.assignment}: {notebook}.ipynb ... and {count - most} more")
    return lines
