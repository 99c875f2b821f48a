"""Shared fixtures. Tests run the real nbgrader and real kernels in temporary courses."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
LECTURES = sorted((ROOT / "notebooks").glob("*.ipynb"))

# Kernels and nbgrader's `alembic` must come from this interpreter's environment.
os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")


def pytest_collection_modifyitems(config, items):
    """Lecture notebooks (collected by nbval) belong to every version lane."""
    for item in items:
        if "notebooks" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.lane)
