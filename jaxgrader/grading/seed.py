"""The seed hidden tests draw their inputs from, fresh for every grading run.

One value per grading process tree: the first call draws it and puts it in
``JAXGRADER_SEED``, so kernels (sandboxed ones get it explicitly), worker
processes and the reference run all see the same one. A teacher who wants a
reproducible run sets ``JAXGRADER_SEED`` before grading.
"""

from __future__ import annotations

import os
import secrets

ENV = "JAXGRADER_SEED"


def run_seed() -> int:
    value = os.environ.get(ENV, "")
    try:
        return int(value) % 2**31
    except ValueError:
        seed = secrets.randbelow(2**31)
        os.environ[ENV] = str(seed)
        return seed
