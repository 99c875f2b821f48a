"""nbgrader preprocessors for what a submitted notebook must not decide.

Registered in ``nbgrader_config.py``. nbgrader restores test cells' *source*
from the gradebook, but keeps the student's cell metadata. nbclient skips code
cells tagged ``skip-execution``, so a blank notebook with that tag on every test
cell would have no failing test cell, and full marks.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor


class StripStudentTags(NbGraderPreprocessor):
    """Drop every cell tag before execution: tags in a submission are the student's to set."""

    def preprocess_cell(self, cell, resources, index):
        cell.metadata.pop("tags", None)
        return cell, resources
