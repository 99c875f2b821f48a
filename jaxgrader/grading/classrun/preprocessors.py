"""nbgrader preprocessors for what a submitted notebook must not decide or carry.

Registered in ``nbgrader_config.py``. They run in the grader, outside the
student's kernel:

* ``SanitizeSubmission`` (first step of autograding): drops cell tags (nbclient
  skips cells tagged ``skip-execution``), repairs nbgrader metadata a student
  edited (unknown keys, another ``schema_version``: either would otherwise abort
  the whole run), and keeps the marks of a duplicated cell on its last copy.
  It refuses no code: the kernel runs in an OS sandbox and points come from
  :mod:`jaxgrader.grading.verdict.verdict`, so any code runs as written. Code that no
  answer needs (the kernel's machinery, patched modules, ...) is found by the one scan
  of submitted code, :mod:`jaxgrader.grading.verdict.tampering`, and its cost and artifact
  parts are held for review (:mod:`jaxgrader.grading.verdict.holds`).
* ``HideHiddenTests`` (feedback): removes hidden tests from the feedback, and
  with them every output the student's kernel wrote (it could have copied the
  hidden tests it saw run into any later output). What stays: the student's
  own code, written answers, and the grader's verdict lines.
"""

from __future__ import annotations

import re

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

NBGRADER_KEYS = {"grade", "grade_id", "locked", "points", "schema_version", "solution", "task", "checksum",
                 "cell_type"}

class SanitizeSubmission(NbGraderPreprocessor):
    """Make a submitted notebook's metadata safe to grade; runs before nbgrader's own sanitizing."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        # A duplicated nbgrader cell: keep the marks on the last copy only. (nbgrader's
        # own DeduplicateIds leaves the copies half-marked, and autograde then crashes.)
        seen = set()
        for cell in reversed(nb.cells):
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in seen:
                del cell.metadata["nbgrader"]
            elif gid:
                seen.add(gid)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        cell.metadata.pop("tags", None)
        meta = cell.metadata.get("nbgrader")
        if meta is not None:
            if not isinstance(meta, dict) or not isinstance(meta.get("grade_id"), str) or not meta.get("grade_id"):
                del cell.metadata["nbgrader"]
            else:
                for key in set(meta) - NBGRADER_KEYS:
                    del meta[key]
                meta["schema_version"] = 3
                for flag in ("grade", "solution", "locked", "task"):
                    meta[flag] = bool(meta.get(flag, False))
                if meta["grade"] and not isinstance(meta.get("points"), (int, float)):
                    meta["points"] = 0  # nbgrader restores the real points from the gradebook
        return cell, resources


HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback without hidden tests and without anything the kernel printed.

    Test cells keep the grader's verdict (written outside the kernel); other code
    cells lose their outputs. Set ``c.HideHiddenTests.enabled = False`` to show
    hidden tests and outputs as nbgrader does by default.
    """

    enabled = Bool(True, help="Remove hidden tests and kernel outputs from feedback.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not self.enabled or cell.cell_type != "code":
            return cell, resources
        meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
        is_test = meta.get("grade") and not meta.get("solution")
        if HIDDEN_BLOCK.search(cell.source):
            cell.source = HIDDEN_BLOCK.sub("# (hidden tests are not shown)", cell.source)
        if not is_test:
            cell.outputs = []
        return cell, resources
