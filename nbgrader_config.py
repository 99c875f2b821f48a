"""nbgrader settings for the course (this folder is the nbgrader course directory).

Read by nbgrader's own apps (`nbgrader generate_assignment lesson1`) and by the
`jaxgrader` command, which points CourseDirectory.root here.
"""

c = get_config()  # noqa: F821  (nbgrader injects get_config)

c.CourseDirectory.course_id = "jax-from-first-principles"
# The gradebook: by default SQLite in <course>/gradebook.db (one grader on local
# disk; `jaxgrader grade` runs its parallel workers against a copy of it). For
# several graders at once use PostgreSQL (needs psycopg2), e.g.:
# c.CourseDirectory.db_url = "postgresql://grader@localhost/gradebook"

# Students' notebooks get this stub where a solution was.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A student who deletes a test cell must not escape it: nbgrader puts it back.
c.OverwriteCells.add_missing_cells = True

# Submissions are untrusted (jaxgrader.preprocessors.SanitizeSubmission): cell tags
# are dropped (`skip-execution` would stop test cells running), edited nbgrader
# metadata is repaired, and solution code that tampers with the grader is not run.
# Then nbgrader 0.9's own steps.
c.Autograde.sanitize_preprocessors = [
    "jaxgrader.preprocessors.SanitizeSubmission",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Every grading kernel starts with jaxgrader.guard: known platform/deprecation
# notices are filtered (nbgrader zeroes a test cell that writes to stderr), and the
# modules tests rely on are restored before each cell if a student replaced them.
c.Execute.extra_arguments = [
    "--HistoryManager.hist_file=:memory:",
    "--IPKernelApp.exec_lines=['import jaxgrader.guard; jaxgrader.guard.install()']",
]

# Feedback shows no hidden tests (so they can be reused next term). To show them,
# as nbgrader does by default, set c.HideHiddenTests.enabled = False.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "jaxgrader.preprocessors.HideHiddenTests",
]

# Execution limits while autograding: nbgrader's per-cell timeout, plus a limit
# per notebook and on the kernel's memory (jaxgrader.limits). Cells that did not
# run score zero and say why; the rest keep their points. Lessons stay far below
# these on a 2-core CPU (see docs/benchmarks.md).
c.Execute.timeout = 120
c.LimitedExecute.notebook_timeout = 600  # seconds per notebook
c.LimitedExecute.memory_limit_mb = 6144  # resident memory of the kernel and its children
c.Autograde.autograde_preprocessors = [
    "jaxgrader.limits.LimitedExecute",  # in place of nbgrader.preprocessors.Execute
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Only notebooks are assignment files; anything else in source/<assignment>/
# would be copied to students and over their submission.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# LMS downloads: `nbgrader zip_collect lessonN` reads downloaded/lessonN/archive/*.zip
# and files each notebook under submitted/<student_id>/lessonN/. The pattern below
# reads Canvas's export names, "<login>[_late]_<user id>_<submission id>_<file name>",
# e.g. "jdoe_late_1234_5678_Copy of pure_functions.ipynb" -> student "jdoe".
# Decorated file names ("Copy of ...", "... (1)") are fixed by `jaxgrader grade`.
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.]+?)(?:_[Ll][Aa][Tt][Ee])?_\d+_\d+_(?P<file_id>[^/]+)$"
)
