"""Hostile submissions, graded in one class run beside honest students (lesson 1, real CLI).

Every attacker starts from the blank release (honest score 0) and adds one trick, so
any point it earns was earned by the trick. Honest-but-unusual students answer
everything right in ways a blocklist would have refused; they must keep full marks.
Then the run is checked from outside: scores, gradebook rows, the course's files,
other students' files, leftover processes and files, and the feedback HTML.
"""

from __future__ import annotations

import copy
import hashlib
import html as html_lib
import json
import shutil
import subprocess
import sys
import time

import nbformat
import psutil
import pytest

from jaxgrader.grading.course.notebooks import fill_answers, grade_id, is_autograded_test, read_notebook, solutions_of

from .conftest import ROOT
from .short_lesson import short_lesson, short_notebooks

pytestmark = pytest.mark.slow
ASSIGNMENT, NOTEBOOK = "lesson1", "pure_functions"
LAST = "test_count_traces"  # lesson 1 up to its fourth exercise (tests/short_lesson.py), which honest answers rewrite
MARK = "jaxgrader-hostile-marker"  # in the command line of every process an attacker leaves behind


def _tests(nb):
    return [c for c in nb.cells if is_autograded_test(c)]


def _solutions():
    return solutions_of(read_notebook(ROOT / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))


def blank_and(code, cell="predict"):
    """The blank release with ``code`` typed into one solution cell."""
    return lambda nb, course: fill_answers(nb, {cell: code.replace("COURSE", str(course))})


def honest_but(cell, code):
    """Every answer right; one of them written in an unusual (honest) way."""
    def make(nb, course):
        answers = _solutions()
        answers[cell] = code
        return fill_answers(nb, answers)
    return make


def honest(nb, course):
    return fill_answers(nb, _solutions())


def metadata_edit(edit, answers=False):
    def make(nb, course):
        nb = fill_answers(nb, _solutions()) if answers else nb
        edit(nb)
        return nb
    return make


def _empty_tests(nb):
    for cell in _tests(nb):
        cell.source = "pass"


def _delete_tests(nb):
    nb.cells = [c for c in nb.cells if not is_autograded_test(c)]


def _skip_tags(nb):
    for cell in nb.cells:
        cell.metadata["tags"] = ["skip-execution", "raises-exception"]


def _points_and_types(nb):
    for cell in _tests(nb):
        cell.metadata.nbgrader["points"] = 100
    for cell in _tests(nb)[:3]:
        cell.cell_type = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)


def _schema(nb):
    for cell in nb.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata.nbgrader["schema_version"] = 99
            cell.metadata.nbgrader["extra_credit"] = True


SLEEPER = f"""
import os, subprocess
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        subprocess.Popen(["sleep", "1000", "{MARK}"], start_new_session=True)
        subprocess.Popen(["python", "-c", "import time; time.sleep(1000)", "{MARK}"], start_new_session=True)
    os._exit(0)
"""

ATTACKERS = {
    # the kernel's machinery: hooks that decide what later cells do
    "hook-cells-run-nothing": blank_and(
        "get_ipython().input_transformers_cleanup.append(lambda lines: [])"),
    "hook-cells-display-ok": blank_and(
        "get_ipython().input_transformers_cleanup.append(lambda lines: ['\"all tests passed\"\\n'])"),
    "hook-swallow-errors": blank_and(
        "ip = get_ipython()\nip.showtraceback = lambda *a, **k: None\n"
        "ip.set_custom_exc((BaseException,), lambda *a, **k: None)"),
    "hook-ast-transformer": blank_and(
        "import ast\nclass Empty(ast.NodeTransformer):\n    def visit_Module(self, node):\n"
        "        node.body = []\n        return node\nget_ipython().ast_transformers.append(Empty())"),
    # in-place patches of what tests use
    "patch-code-objects": blank_and(
        "import numpy as np\nnp.allclose.__code__ = (lambda *a, **k: True).__code__\n"
        "def predict(params, x):\n    return x"),
    "always-equal-object": blank_and(
        "class Anything:\n    __eq__ = lambda self, other: True\n    __array__ = None\n"
        "    def __getattr__(self, name): return self\n    def __call__(self, *a, **k): return self\n"
        "def predict(params, x):\n    return Anything()"),
    "patch-report": blank_and(
        "import jaxgrader.checks.report as r\nr.report = lambda *a, **k: None\n"
        "def predict(params, x):\n    return x"),
    "swap-sys-modules": blank_and(
        "import sys, types\nfake = types.ModuleType('jaxgrader.checks.report')\n"
        "fake.report = lambda *a, **k: None\nfake.key = lambda i=0: __import__('jax').random.key(0)\n"
        "fake.rng = lambda i=0: __import__('numpy').random.default_rng(0)\n"
        "sys.modules['jaxgrader.checks.report'] = fake\ndef predict(params, x):\n    return x"),
    "forged-reports": blank_and(
        "from IPython.display import display\nimport numpy as np\n"
        "from jaxgrader.checks.report import MIME, encode\n"
        "def predict(params, x):\n"
        "    for i in range(3):\n"
        "        for name in ('predict(params, x), draw %d' % i, 'jax.jit(predict)(params, x), draw %d' % i):\n"
        "            display({MIME: {'name': name, 'rule': 'true', 'rtol': 1e9, 'atol': 1e9, 'bound': None,"
        " 'value': True}}, raw=True)\n"
        "    return np.zeros(3)"),
    "fake-print": blank_and("print('All tests passed! Score: 13/13')"),
    "exit-kernel": blank_and("import os\nos._exit(0)"),
    # edits to cells and metadata
    "tests-emptied": metadata_edit(_empty_tests),
    "tests-deleted": metadata_edit(_delete_tests),
    "points-and-types": metadata_edit(_points_and_types),
    "skip-tags": metadata_edit(_skip_tags),
    "schema-edited": metadata_edit(_schema),
    # the gradebook, the course, other students
    "write-gradebook": blank_and(
        "import sqlite3\ntry:\n    db = sqlite3.connect('COURSE/gradebook.db')\n"
        "    db.execute('update grade set manual_score = 100')\n    db.execute('delete from student')\n"
        "    db.commit()\n    print('GRADEBOOK WRITTEN')\nexcept Exception as exc:\n    print('BLOCKED', type(exc).__name__)"),
    "write-course": blank_and(
        "for path in ('COURSE/nbgrader_config.py', 'COURSE/source/lesson1/pure_functions.ipynb',\n"
        "             'COURSE/feedback/victim/lesson1/pure_functions.html',\n"
        "             'COURSE/submitted/victim/lesson1/pure_functions.ipynb'):\n"
        "    try:\n        open(path, 'a').write('c.Autograde.autograde_preprocessors = []')\n"
        "        print('WROTE', path)\n    except OSError as exc:\n        print('BLOCKED', type(exc).__name__)"),
    "read-others": blank_and(
        "import glob\nfound = glob.glob('COURSE/**/*', recursive=True) + glob.glob('/root/**/*.db', recursive=True)\n"
        "print('FOUND', len(found))"),
    "read-hidden-tests-hook": blank_and(
        "seen = []\nget_ipython().events.register('pre_run_cell', lambda info: seen.append(info.raw_cell))\n"
        "get_ipython().events.register('post_run_cell', lambda result: print('\\n'.join(seen)))"),
    "script-in-output": blank_and(
        "from IPython.display import HTML, Javascript, display\n"
        "display(HTML('<script>document.title=\"pwned\"</script><b>hi</b>'))\n"
        "display(Javascript('document.title=\"pwned\"'))"),
    "network": blank_and(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 22), timeout=2)\n    print('CONNECTED')\n"
        "except OSError as exc:\n    print('BLOCKED', type(exc).__name__)"),
    # persistence: later kernels, later runs
    "startup-file": blank_and(
        "import os, pathlib\nfor d in (pathlib.Path.home() / '.ipython/profile_default/startup',):\n"
        "    d.mkdir(parents=True, exist_ok=True)\n"
        "    (d / '00-evil.py').write_text('import jaxgrader.checks.report as r; r.report = lambda *a, **k: None')\n"
        "import site, sys\n"
        "for d in site.getsitepackages():\n"
        "    try:\n        open(os.path.join(d, 'evil.pth'), 'w').write('import os')\n        print('WROTE pth')\n"
        "    except OSError as exc:\n        print('BLOCKED', type(exc).__name__)"),
    "leave-processes": blank_and(SLEEPER),
    "many-processes": blank_and(
        "import os\nn = 0\ntry:\n    for _ in range(3000):\n        if os.fork() == 0:\n"
        "            import time; time.sleep(1000); os._exit(0)\n        n += 1\n"
        "except OSError as exc:\n    print('stopped after', n, type(exc).__name__)"),
    # derailing the run
    "kill-everything": blank_and(
        "import os, signal\nfor pid in (os.getppid(), 1, -1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\nos.killpg(0, signal.SIGKILL)"),
    "huge-output": blank_and("for _ in range(300):\n    print('x' * 2**20)"),
    # honest answers a blocklist used to refuse: full marks
    "honest": honest,
    "honest-import-sys": honest_but(
        "predict", "import sys\n\ndef predict(params, x):\n    print(sys.version_info[:2])\n"
                   "    return params['W'] @ x + params['b']"),
    "honest-function-attribute": honest_but(
        "count_traces", "def count_traces(f, args_list):\n    def counted(*args):\n        counted.n += 1\n"
                        "        return f(*args)\n    counted.n = 0\n    compile = jax.jit(counted)\n"
                        "    for args in args_list:\n        compile(*args)\n    return counted.n"),
    "honest-magics-and-shell": honest_but(
        "predict", "def predict(params, x):\n    return params['W'] @ x + params['b']\n\n"
                   "%time predict({'W': jnp.eye(2), 'b': jnp.zeros(2)}, jnp.ones(2))\n!echo shell works\n"
                   "!pip --version"),
    "honest-progress-and-prints": honest_but(
        "count_traces", "from tqdm.auto import tqdm\nimport os\n\ndef count_traces(f, args_list):\n    traces = 0\n\n"
                        "    def counted(*args):\n        nonlocal traces\n        traces += 1\n"
                        "        return f(*args)\n\n    compiled = jax.jit(counted)\n"
                        "    for args in tqdm(args_list):\n        compiled(*args)\n"
                        "    print('traced', traces, 'times in', os.getcwd())\n    return traces"),
    "honest-schema-edited": metadata_edit(_schema, answers=True),
}
HONEST = [s for s in ATTACKERS if s.startswith("honest")]
BROKEN_FILES = {"deep-notebook": "[" * 20000 + "]" * 20000, "empty-notebook": "", "binary-notebook": "\x00\x01\x02"}


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _leftovers():
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if MARK in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            pass
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("class")
    shutil.copy2(ROOT / "nbgrader_config.py", course)
    _, release = short_lesson(course, LAST, workers=None)  # the course's default: a worker per CPU
    for student, make in ATTACKERS.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(make(copy.deepcopy(release), course), folder / f"{NOTEBOOK}.ipynb")
    for student, text in BROKEN_FILES.items():
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.ipynb").write_text(text)
    # A student outside this run: nothing of theirs may change.
    victim = course / "submitted" / "victim" / ASSIGNMENT
    victim.mkdir(parents=True)
    nbformat.write(honest(copy.deepcopy(release), course), victim / f"{NOTEBOOK}.ipynb")
    (course / "feedback" / "victim" / ASSIGNMENT).mkdir(parents=True)
    (course / "feedback" / "victim" / ASSIGNMENT / f"{NOTEBOOK}.html").write_text("<p>victim's feedback</p>")
    protected = [course / "nbgrader_config.py", course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb",
                 victim / f"{NOTEBOOK}.ipynb", course / "feedback" / "victim" / ASSIGNMENT / f"{NOTEBOOK}.html"]
    before = {p: _digest(p) for p in protected}
    students = [*ATTACKERS, *BROKEN_FILES]
    args = [arg for s in students for arg in ("-s", s)]
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "jaxgrader", "--root", str(course), "grade", "-a", ASSIGNMENT, *args],
                         capture_output=True, text=True, timeout=1800)
    seconds = time.monotonic() - start
    time.sleep(1)
    leftovers = _leftovers()
    for proc in leftovers:  # don't leave them to the rest of the suite
        proc.kill()
    summary = json.loads((course / "grading-summary.json").read_text())
    return {"run": run, "summary": {r["student"]: r for r in summary}, "course": course, "before": before,
            "leftovers": leftovers, "seconds": seconds}


def _auto_points():
    return sum(float(c.metadata.nbgrader.points) for c in _tests(short_notebooks(LAST)[0]))


def _outputs_text(course, student):
    nb = read_notebook(course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    return "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_the_class_run_completes_and_reports_every_student(graded):
    run, summary = graded["run"], graded["summary"]
    assert set(summary) == set(ATTACKERS) | set(BROKEN_FILES), run.stderr[-3000:]
    # exit 1: the broken files are per-student errors; nothing else may be
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    for student in ATTACKERS:
        assert summary[student]["status"] == "graded", f"{student}: {summary[student]['error']}"
        assert summary[student]["isolation"] == "bubblewrap"


@pytest.mark.parametrize("student", [s for s in ATTACKERS if not s.startswith("honest")])
def test_no_trick_earns_a_point(graded, student):
    record = graded["summary"][student]
    assert record["score"] == 0, f"{student} scored {record['score']} with no honest answer"


@pytest.mark.parametrize("student", HONEST)
def test_honest_code_keeps_full_marks(graded, student):
    record = graded["summary"][student]
    assert record["score"] == _auto_points(), f"{student}: {record['score']}; {record.get('cells')}"
    # graded in kernels forked from the prepared process the attackers' kernels came from too
    assert record["timings"].get("kernels_forked") == 1, record["timings"]


def test_broken_files_are_one_line_errors_for_their_student(graded):
    summary = graded["summary"]
    for student, why in (("deep-notebook", "nested"), ("empty-notebook", "empty"), ("binary-notebook", "binary")):
        record = summary[student]
        assert record["status"] == "error" and why in record["error"], record
        assert "\n" not in record["error"] and f"{NOTEBOOK}.ipynb" in record["error"]


def test_course_and_other_students_are_untouched(graded):
    for path, digest in graded["before"].items():
        assert _digest(path) == digest, f"{path} changed"
    course = graded["course"]
    assert not (course / "autograded" / "victim").exists()
    assert "WROTE" not in _outputs_text(course, "write-course")
    assert _outputs_text(course, "write-course").count("BLOCKED") == 4


def test_the_gradebook_has_one_row_per_student_and_no_forged_grade(graded):
    from nbgrader.api import Gradebook

    course = graded["course"]
    assert "GRADEBOOK WRITTEN" not in _outputs_text(course, "write-gradebook")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        students = {s.id for s in gb.students}
        assert set(ATTACKERS) <= students
        for student in ATTACKERS:
            submission = gb.find_submission(ASSIGNMENT, student)
            assert all(g.manual_score is None for nb in submission.notebooks for g in nb.grades)
            assert submission.score == graded["summary"][student]["score"]


def test_the_kernel_sees_no_course_and_no_network(graded):
    course = graded["course"]
    assert "FOUND 0" in _outputs_text(course, "read-others")
    assert "BLOCKED" in _outputs_text(course, "network") and "CONNECTED" not in _outputs_text(course, "network")
    assert "WROTE pth" not in _outputs_text(course, "startup-file")


def test_nothing_a_kernel_started_is_left(graded):
    assert not graded["leftovers"], [p.info["cmdline"] for p in graded["leftovers"]]
    for site_dir in __import__("site").getsitepackages():
        assert not (__import__("pathlib").Path(site_dir) / "evil.pth").exists()


def test_a_fork_bomb_is_stopped_by_a_limit(graded):
    """RLIMIT_NPROC stops the forks, or the memory watchdog (it sums every fork's memory) stops the kernel."""
    stopped = "stopped after" in _outputs_text(graded["course"], "many-processes")
    notes = graded["summary"]["many-processes"]["notes"]
    assert stopped or any("NotebookMemoryLimit" in note for note in notes), notes


def test_code_no_answer_needs_is_held_not_refused(graded):
    """The one scan of submitted code (verdict/tampering.py): a kernel hook is held for review, with its line; an
    answer that prints Python's version is not; a shell command is held (a shell can write the modules an answer
    imports), and loses nothing of what its values earn."""
    summary = graded["summary"]
    held = {s: [f for h in (r.get("held") or {}).values() for f in h.get("findings", [])] for s, r in summary.items()}
    assert held["hook-cells-run-nothing"], "a kernel hook is held for the teacher"
    assert not held["honest-import-sys"]
    assert [f["text"].strip() for f in held["honest-magics-and-shell"]] == ["!echo shell works"], held
    assert "held for review" in graded["run"].stdout


def test_feedback_holds_no_hidden_test_no_output_and_no_script(graded):
    course = graded["course"]
    source, _ = short_notebooks(LAST)
    hidden_lines = set()
    for cell in _tests(source):
        if "### BEGIN HIDDEN TESTS" in cell.source:
            block = cell.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
            hidden_lines |= {ln.strip() for ln in block.splitlines() if len(ln.strip()) > 20}
    assert hidden_lines
    html_files = [p for p in (course / "feedback").rglob("*.html") if "victim" not in p.parts]
    assert len(html_files) == len(ATTACKERS)
    for path in html_files:
        text = html_lib.unescape(path.read_text())
        assert "BEGIN HIDDEN TESTS" not in text
        leaked = [ln for ln in hidden_lines if ln in text]
        assert not leaked, f"{path}: hidden test line in feedback: {leaked[0]}"
    raw = (course / "feedback" / "script-in-output" / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
    # the student's own code is shown, escaped; what it displayed must not be there as markup
    assert '<script>document.title="pwned"' not in raw and "<b>hi</b>" not in raw
    autograded = read_notebook(course / "autograded" / "script-in-output" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    shown = [o.get("data", {}) for c in autograded.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not any("application/javascript" in data for data in shown)
    assert not any("<script>" in str(data.get("text/html", "")) for data in shown)


def test_verdict_lines_tell_the_student_what_failed(graded):
    course = graded["course"]
    nb = read_notebook(course / "autograded" / "forged-reports" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    test = next(c for c in nb.cells if grade_id(c) == "test_predict")
    errors = [o for o in test.outputs if o.output_type == "error"]
    assert errors and "TestFailed" == errors[0].ename
    assert "predict(params, x), draw 0" in errors[0].evalue


def test_huge_output_is_capped(graded):
    path = graded["course"] / "autograded" / "huge-output" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    assert path.stat().st_size < 20 * 2**20
    assert "output truncated by the grader" in path.read_text()
