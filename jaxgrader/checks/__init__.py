"""Checks that hidden tests run inside the student's kernel.

The student's code runs in the same process, so any of this can be replaced by
it: nothing here decides a grade. Hidden tests compute the student's answers on
inputs drawn from the grader's seed and hand them out with
:func:`jaxgrader.checks.report.report`; the grader compares them, outside the
kernel, with the instructor's solution run on the same inputs.
"""
