"""Python imports this at start-up when this directory is on PYTHONPATH: it installs the
simulated accelerator named by ``JAXGRADER_SIMULATE`` (jaxgrader/simulated/accelerator.py).

Loaded by file path, so that it works where ``jaxgrader`` is not installed (the Colab-like
environment of tests/test_colab.py).
"""

import importlib.util
import os
import sys

if os.environ.get("JAXGRADER_SIMULATE"):
    # On one CPU while installing, as the grader's prepared kernel process imports: a library that sizes a
    # thread pool when loaded (OpenBLAS, under numpy) then starts none, so that process may still fork
    # kernels (a process with threads may not), and trials graded under a simulation fork theirs too.
    _cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if _cpus:
        os.sched_setaffinity(0, {min(_cpus)})
    _path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "accelerator.py")
    _spec = importlib.util.spec_from_file_location("_jaxgrader_simulated_accelerator", _path)
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _module
    _spec.loader.exec_module(_module)
    try:
        _module.install_from_env()
    finally:
        if _cpus:
            os.sched_setaffinity(0, _cpus)
