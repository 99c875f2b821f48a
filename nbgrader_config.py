"""nbgrader settings for the course (this folder is the nbgrader course directory).

Read by nbgrader's own apps (`nbgrader generate_assignment lesson1`) and by the
`jaxgrader` command, which points CourseDirectory.root here.
"""

c = get_config()  # noqa: F821  (nbgrader injects get_config)

c.CourseDirectory.course_id = "jax-from-first-principles"
# SQLite on local disk, one grader at a time. For several graders or parallel
# workers point this at PostgreSQL, e.g. "postgresql://user@host/gradebook".
c.CourseDirectory.db_url = "sqlite:///gradebook.db"

# Students' notebooks get this stub where a solution was.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A student who deletes a test cell must not escape it: nbgrader puts it back.
c.OverwriteCells.add_missing_cells = True

# Submissions are untrusted: tags such as `skip-execution` would stop test cells
# from running at all. Strip them after nbgrader has restored the test cells.
# (nbgrader 0.9's default list, plus one step at the end.)
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
    "jaxgrader.preprocessors.StripStudentTags",
]

# Per-cell limit while autograding. Lessons keep every cell far below this on a
# 2-core CPU (see docs/benchmarks.md).
c.Execute.timeout = 120

# Only notebooks are assignment files; anything else in source/<assignment>/
# would be copied to students and over their submission.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]
