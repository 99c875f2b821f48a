"""Points from evidence, decided outside the student's kernel.

The verdict parses what a hidden test reported (``reports``), judges each part against
the reference run's report of the same name (``judging``; program text parsed in
``programs``), and replaces the test cell's outputs with its own line, which nbgrader
then scores. ``reference`` runs the instructor's notebook; ``artifacts`` evaluates what a
kernel exported (programs, trained parameters) on inputs the grader holds.

May import: ``sandbox`` (where the reference kernel and exported programs run).
Never imported by ``jaxgrader.checks`` (the kernel side): that boundary is the trust boundary.
"""
