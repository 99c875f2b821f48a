"""The class report's section on submissions held for review (``verdict/holds.py``): each finding's cell, line
and code, what was found, and the command that releases them (``jaxgrader review``).

Read from the autograded notebooks (the grader wrote the findings into their metadata), so it works after a
plain ``nbgrader autograde`` too. Everything that came from a submission is escaped.
"""

from __future__ import annotations

import dataclasses
import html

HELD_ROW = "held for review"  # the CSV's exercise column on a held submission's finding


@dataclasses.dataclass
class Held:
    """One notebook of a submission with code no answer needs."""

    student: str
    notebook: str
    findings: list  # dicts of tampering.Finding: cell, where, line, text, what
    count: int  # findings in all (the notebook keeps at most 50)
    released: bool  # a teacher released it (jaxgrader review): its parts count


def render_held(assignment: str, held: list[Held]) -> str:
    """The section: the command that releases what waits, then one row per finding."""
    e = html.escape
    waiting = sorted({h.student for h in held if not h.released})
    out = ["<h2 id='held'>Held for review</h2><p>These submissions have code that no answer in this course needs "
           "(an IPython hook or magic, a module outside the course's libraries, a patched module, the grading "
           "seed, a hidden test's own names, frames: docs/grading.md, \"Tampering seen in the submission\"). Their "
           "value parts are graded as usual; their cost and artifact parts (the grader's clock, the programs and "
           "parameters it evaluates) are at 0 until you have read the code and released them"
           + (":</p>" if waiting else ". All are released.</p>")]
    if waiting:
        out.append(f"<pre id='release-command'>jaxgrader review {e(assignment)} {e(' '.join(waiting))}</pre>")
    out.append("<table id='held-findings'><tr><th>student</th><th>notebook</th><th>cell</th><th>line</th>"
               "<th>code</th><th>what</th></tr>")
    for h in held:
        status = " (released)" if h.released else ""
        for f in h.findings:
            out.append(f"<tr><td>{e(h.student)}{status}</td><td>{e(h.notebook)}</td><td>{e(str(f.get('where', '')))} "
                       f"(cell {e(str(f.get('cell', '')))})</td><td class='n'>{e(str(f.get('line', '')))}</td>"
                       f"<td><code>{e(str(f.get('text', '')))}</code></td><td>{e(str(f.get('what', '')))}</td></tr>")
        if h.count > len(h.findings):
            out.append(f"<tr><td>{e(h.student)}</td><td>{e(h.notebook)}</td><td colspan='4'>... and "
                       f"{h.count - len(h.findings)} more</td></tr>")
    return "\n".join(out) + "</table>"


def held_rows(assignment: str, held: list[Held]) -> list[list[str]]:
    """CSV rows in the class report's columns: exercise "held for review", test the student, check the cell,
    line and what was found, most_common_reason the line of code."""
    return [[assignment, h.notebook, HELD_ROW + (" (released)" if h.released else ""), h.student,
             f"{f.get('where')} (cell {f.get('cell')}), line {f.get('line')}: {f.get('what')}", "", "", "", "", "", "",
             str(f.get("text", "")), ""] for h in held for f in h.findings]
