"""Points from evidence, decided outside the student's kernel.

The verdict parses what a hidden test reported (``reports``), judges each part against
the reference run's report of the same name (``judging``; program text parsed in
``programs``), and replaces the test cell's outputs with its own line, which nbgrader
then scores. ``reference`` runs the instructor's notebook; ``seed`` is the run's seed.

May import: ``jaxgrader.grading.course.settings`` (a leaf) and nothing else of the grader.
Never imported by ``jaxgrader.checks`` (the kernel side): that boundary is the trust boundary.
"""
