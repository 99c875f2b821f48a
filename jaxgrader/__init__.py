"""The course's own package, split along the grader's trust boundary.

* ``jaxgrader.checks``: what hidden tests call *inside* the student's (sandboxed)
  kernel. Nothing the grader decides depends on this code behaving: its only job
  is to hand values out through :mod:`jaxgrader.checks.report`.
* ``jaxgrader.grading``: everything *outside* the kernel: the course, the kernel
  sandbox, the verdict (parse reported values, compare with the reference run,
  score), the class run and its command ``jaxgrader``. It never imports
  ``jaxgrader.checks``, and it trusts nothing the kernel produced except through
  :mod:`jaxgrader.grading.verdict.verdict`'s parser.
"""

__version__ = "0.2.0"
