"""Grading outside the student's kernel: course, sandbox, verdict, class runs.

Nothing in this package imports :mod:`jaxgrader.checks` (the kernel side); the
only way a kernel's values enter it is :func:`jaxgrader.grading.verdict.reports.parse_reports`.
"""
