"""Shared by the course's hidden tests, its grading command and its test suite.

Hidden tests import the checks from here (``from jaxgrader.checks import ...``);
the teacher runs ``jaxgrader demo`` / ``jaxgrader grade``.
"""

__version__ = "0.1.0"
