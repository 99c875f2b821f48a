"""nbgrader settings for the course (this folder is the nbgrader course directory).

Read by nbgrader's own apps (`nbgrader generate_assignment lesson1`) and by the
`jaxgrader` command, which points CourseDirectory.root here.
"""

c = get_config()  # noqa: F821  (nbgrader injects get_config)

c.CourseDirectory.course_id = "jax-from-first-principles"
# The gradebook: by default SQLite in <course>/gradebook.db. `jaxgrader grade` is its
# only writer: grading tasks return records and the coordinator writes each one, in one
# transaction, as it arrives (an interrupted run keeps them). For a shared gradebook use
# PostgreSQL (the psycopg driver is in requirements.txt), e.g.:
# c.CourseDirectory.db_url = "postgresql+psycopg://grader@localhost/gradebook"

# jaxgrader's own settings (jaxgrader/grading/course/settings.py, each with its help text); a
# misspelt name here is an error, not silently ignored.
# Where grading tasks run (docs/scale-out.md). Default: local processes, one per CPU,
# each keeping its kernels on its share of the CPUs (False: every kernel may use every core).
# c.JaxGrader.workers = 8
# c.JaxGrader.pin_workers = True
# On a Dask cluster (`dask scheduler`; `dask worker ADDRESS --nthreads 1` on hosts with
# the course's environment and bubblewrap):
# c.JaxGrader.dask_scheduler = "tcp://grading-head.example.edu:8786"
# Hidden tests draw their inputs from a seed fresh for each run; for a reproducible run:
# c.JaxGrader.seed = 1234  (or `jaxgrader grade --seed 1234`)

# Students' notebooks get this stub where a solution was.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A student who deletes a test cell must not escape it: nbgrader puts it back.
c.OverwriteCells.add_missing_cells = True

# Submissions are untrusted. Before anything runs (jaxgrader.grading.classrun.preprocessors):
# cell tags are dropped (`skip-execution` would stop test cells running) and edited
# nbgrader metadata is repaired. No code is refused: the kernel is sandboxed and
# points come from the verdict below. Then nbgrader 0.9's own steps.
c.Autograde.sanitize_preprocessors = [
    "jaxgrader.grading.classrun.preprocessors.SanitizeSubmission",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Every grading kernel runs in an OS sandbox (bubblewrap; jaxgrader/grading/sandbox/sandbox.py):
# read-only system and Python environment, a private scratch directory as the only
# writable place, no view of the course (source/, other submissions, the gradebook,
# this file), no network, its own PID namespace, an unprivileged user, rlimits.
# Where bubblewrap cannot run, grading stops; `jaxgrader grade --unsandboxed` (or
# c.SandboxedKernelManager.isolation = "none") grades without it, and says so.
c.LimitedExecute.kernel_manager_class = "jaxgrader.grading.sandbox.sandbox.SandboxedKernelManager"
# Grading on a host with an NVIDIA GPU: pass it into every kernel's sandbox (device nodes with
# --dev-bind, the driver's libraries read-only; jaxgrader/grading/sandbox/gpu.py, docs/grading.md).
# c.SandboxedKernelManager.gpu = True
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:"]

# Submissions' kernels are forked from a prepared process that imported these modules once
# per grading process (jaxgrader.grading.sandbox.prepared): a fresh kernel spends 1.3-4 CPU-seconds on
# them, for every notebook. Each fork is a fresh sandbox as far as the student can tell (own
# scratch directory, nothing left of the last kernel); a notebook that changes an environment
# variable these imports read runs again in a fresh kernel. [] turns it off.
c.SandboxedKernelManager.preload = ["jax", "jax.numpy", "optax", "sklearn.datasets", "keras", "jaxgrader.checks"]
# The course is taught on JAX: Keras must use it (lesson 5 also sets this itself, before `import keras`).
c.SandboxedKernelManager.kernel_env = {"KERAS_BACKEND": "jax"}

# Grading kernels compile with LLVM's optimisations off. A graded notebook spends most of
# its time compiling small programs (docs/benchmarks.md), which this makes 20-40% cheaper;
# the programs compute the same values up to rounding, and the reference run uses the same flags. Lesson 2
# grades students' own timings of compiled code, so its kernels keep XLA's defaults.
c.SandboxedKernelManager.xla_flags = "--xla_backend_optimization_level=0"
c.SandboxedKernelManager.xla_defaults_for = ["lesson2"]  # assignment names: rename here too

# Execution limits while autograding: nbgrader's per-cell timeout, plus a limit
# per notebook, on the kernel's memory and on what it may print (jaxgrader.grading.sandbox.limits).
# Cells that did not run score zero and say why; the rest keep their points.
c.Execute.timeout = 120
c.LimitedExecute.notebook_timeout = 600  # seconds per notebook
c.LimitedExecute.memory_limit_mb = 6144  # resident memory of the kernel and its children
c.LimitedExecute.max_output_mb = 8  # outputs kept per notebook; the rest is dropped, with a note

# Points come from the verdict (jaxgrader.grading.verdict.verdict), not from what the kernel
# printed: hidden tests report the student's answers on inputs drawn from a seed fresh
# for each run, the instructor's solution is run with the same seed in its own
# sandboxed kernel, and the grader compares the two outside the student's kernel.
# It replaces each test cell's outputs by its own pass line or error, which
# nbgrader's SaveAutoGrades then scores. HTML and JavaScript in outputs are sanitized.
c.Autograde.autograde_preprocessors = [
    "jaxgrader.grading.verdict.verdict.StartReferenceRun",  # the instructor's run, beside the submission's
    "jaxgrader.grading.sandbox.limits.LimitedExecute",  # in place of nbgrader.preprocessors.Execute
    "jaxgrader.grading.verdict.holds.FindTampering",  # code no answer needs: cost and artifact parts held
    "jaxgrader.grading.verdict.verdict.Verdict",
    "nbconvert.preprocessors.sanitize.SanitizeHTML",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Tampering is read in the submission itself, outside the kernel (jaxgrader/grading/verdict/tampering.py,
# docs/grading.md): a student's cell that uses what no answer in this course needs (IPython hooks and
# magics beyond timing and plots, modules beyond the course's libraries, patched modules, the grading
# seed, names only the hidden tests define, frames) keeps its value parts, while its cost and artifact
# parts are held for review; the class report lists it and `jaxgrader review lessonN STUDENT` releases it.
# The lists are settings (c.FindTampering.allowed_modules, limited_modules, environ_read, line_magics, ...):
# c.FindTampering.allowed_modules = [..., "seaborn"]  # a module your course's answers use
# c.FindTampering.enabled = False  # no scan, no hold

# nbconvert's preprocessors are off unless enabled (nbgrader's own are on).
c.SanitizeHTML.enabled = True

# Feedback shows the student's code, written answers and the grader's verdict per
# test: no hidden tests (they can be reused next term) and nothing the kernel printed
# (it could have copied hidden tests into any output). To show both, as nbgrader
# does by default, set c.HideHiddenTests.enabled = False.
# A student who submitted an edition in another language (ko/release/, docs/grading.md "Editions")
# is graded as the English assignment and gets feedback in that edition's words.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "jaxgrader.grading.editions.localize.LocalizeFeedback",
    "jaxgrader.grading.classrun.preprocessors.HideHiddenTests",
    "nbconvert.preprocessors.sanitize.SanitizeHTML",
    "jaxgrader.grading.teacher.feedback.NamePartsInFeedback",
]
# The summary at the top of each feedback page names every graded part by its exercise
# heading (jaxgrader/grading/teacher/feedback.py): nbgrader's feedback template with that summary replaced.
from jaxgrader.grading.teacher.feedback import TEMPLATE_FILE, template_dirs  # noqa: E402

c.GenerateFeedback.HTMLExporter.extra_template_basedirs = template_dirs()  # only feedback's exporter:
c.GenerateFeedback.HTMLExporter.template_file = TEMPLATE_FILE  # formgrader's own pages keep theirs

# Only notebooks are assignment files; anything else in source/<assignment>/
# would be copied to students and over their submission.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# Similar submissions (the class report's last section; `jaxgrader similarity`; docs/grading.md):
# pairs listed from this share of one submission's answers also in the other's, never a grade.
# c.Similarity.threshold = 0.5
# c.Similarity.common = 10  # a passage in more than this many submissions is shared, not copied
# c.Similarity.long_passage = 200  # ... but one this long (normalised characters) is listed on its own: read it

# LMS downloads: `nbgrader zip_collect lessonN` reads downloaded/lessonN/archive/*.zip
# and files each notebook under submitted/<student_id>/lessonN/. The pattern below
# reads Canvas's export names, "<login>[_late]_<user id>_<submission id>_<file name>",
# e.g. "jdoe_late_1234_5678_Copy of pure_functions.ipynb" -> student "jdoe".
# Decorated file names ("Copy of ...", "... (1)") are fixed by `jaxgrader grade`.
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.]+?)(?:_[Ll][Aa][Tt][Ee])?_\d+_\d+_(?P<file_id>[^/]+)$"
)
