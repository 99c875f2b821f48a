"""A classroom on JupyterHub: students fetch, validate and submit through nbgrader's exchange.

``jaxgrader classroom`` starts a real JupyterHub and configurable-http-proxy for the course, with
nbgrader's exchange laid out as nbgrader documents it, one Unix account per student from the
roster, and nothing readable by anyone it does not belong to (docs/classroom.md):

``settings`` (``c.Classroom.*``), ``accounts`` (the roster, Unix accounts, passwords, running as an
account), ``environment`` (may students run the course's Python? is the course the instructor's
alone?), ``exchange`` (the exchange's folders and the two nbgrader exchange steps it tightens:
private submissions, collect that takes only what a student owns), ``hubconfig`` (what the hub and
each role's JupyterLab are told), ``processes`` (the proxy and the hub, started and stopped),
``command`` (the command itself).

May import: ``teacher``, ``editions``, ``classrun``, ``course``, ``verdict``, ``sandbox`` (it uses only
``course``).
"""
