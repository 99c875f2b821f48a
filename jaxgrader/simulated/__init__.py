"""An accelerator's view, simulated on a CPU: its matmul numerics and its one device.

Tests only: ``accelerator`` is the harness, ``site/sitecustomize.py`` loads it into any
Python that has ``site/`` on its ``PYTHONPATH``. It lives inside the package, not in
``tests/``, because grading kernels run in a sandbox that shows them the package and
never the course (so never ``tests/``), and the Colab-like environment of
``tests/test_colab.py`` has no ``jaxgrader`` installed at all: a directory on
``PYTHONPATH`` reaches both.
"""
