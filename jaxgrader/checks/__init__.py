"""Checks that hidden tests run inside the student's kernel.

The student's code runs in the same process, so any of this can be replaced by
it: nothing here decides a grade. Hidden tests compute the student's answers on
inputs drawn from the grader's seed and hand them out with
:func:`jaxgrader.checks.report.report`, as values or as evidence (losses, predicted
classes, program text); the grader judges them, outside the kernel, against the
instructor's solution run on the same inputs.

The kernel can import every module here, so none may hold a working answer to a
graded exercise: tests that isolate one exercise from another use stand-ins that
compute something else (``tests/test_answer_key.py`` tries everything here as an
answer to every exercise).
"""
