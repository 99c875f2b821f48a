"""The student's and the teacher's screens in a real browser (JupyterLab 4 + nbgrader's extension).

One JupyterLab server runs on a free local port in a scratch course (module fixture);
headless Chromium (Debian's `chromium`, driven by Playwright through
``executable_path``: nothing is downloaded) plays

* a student: opens their fetched copy of lesson 1 (``lesson1/``), types a correct answer into a solution cell,
  runs all cells, sees the visible tests pass and nbgrader's Validate report success;
* a teacher: opens formgrader, sees every assignment of the course, opens the demo class's
  lesson-1 written answer, gives it points and a comment, and the gradebook has them.

Every step leaves a screenshot under the test's ``tmp_path`` (docs/browser.md).
Run just these with ``pytest -m browser``. Without a Chromium they skip, unless
``JAXGRADER_REQUIRE_BROWSER=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from .conftest import ASSIGNMENTS, ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STUDENT_NOTEBOOK = ("lesson1", "pure_functions", "predict")  # assignment, notebook, cell typed in the UI
GRADED = ("lesson1", "pure_functions", "written_function_data", "ada")  # assignment, notebook, cell, student
POINTS = 2.5
COMMENT = "Clear bullets. Say more about what the explicit loop costs you when debugging."
AUTOGRADED = ("ada",)  # of the demo class (ada, bo, cy all submit); one kernel run keeps the fixture short
TIMEOUT_MS = 90_000  # per UI step; a cold kernel on 2 cores takes a few seconds


def _chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


def _grading_helpers():
    """The course's own helpers: solution text of a source notebook, a filled-in release, the demo class."""
    from jaxgrader.grading.demo import write_demo_submissions
    from jaxgrader.grading.course.notebooks import fill_answers, solutions_of

    return solutions_of, fill_answers, write_demo_submissions


# Appended to the course's nbgrader_config.py in the scratch course only.
SCRATCH_CONFIG = '''

# ---- added by tests/test_browser.py (scratch course only) ----
c.Exchange.root = {exchange!r}
'''

# JupyterLab user settings for the scratch server: no news pop-up over the screenshots, and
# every cell in the DOM (no virtual scrolling) so outputs can be read below the fold.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def _build_course(base: Path) -> Path:
    """Course config, source/, release/, demo/; lesson 1 generated, submitted by the demo class, ada's autograded."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    solutions_of, fill_answers, write_demo_submissions = _grading_helpers()
    course = base / "course"
    course.mkdir()
    for name in ("source", "release", "demo"):
        shutil.copytree(ROOT / name, course / name)
    (base / "exchange").mkdir()
    config_text = (ROOT / "nbgrader_config.py").read_text() + SCRATCH_CONFIG.format(exchange=str(base / "exchange"))
    (course / "nbgrader_config.py").write_text(config_text)

    # The teacher's side: lesson 1 in the gradebook, the demo class's submissions, ada's autograded (lesson 1: the
    # shortest with a written answer; autograding lesson 4 here took a minute of the fixture's 74 s).
    assignment = GRADED[0]
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(course)
    api = NbGraderAPI(config=config)
    result = api.generate_assignment(assignment, force=True, create=True)
    assert result["success"], result["log"][-3000:]
    write_demo_submissions(course, [assignment])
    for student in AUTOGRADED:
        result = api.autograde(assignment, student, force=True, create=True)
        assert result["success"], f"autograde {assignment} {student}:\n" + result["log"][-3000:]

    # The student's copy, as fetched into their home (<assignment>/ beside the course's folders, never release/,
    # whose code the similarity report leaves out): every solution cell of lesson 1 answered but one, typed in the
    # browser.
    assignment, notebook, typed = STUDENT_NOTEBOOK
    answers = solutions_of(nbformat.read(course / "source" / assignment / f"{notebook}.ipynb", as_version=4))
    answers.pop(typed)
    fetched = course / assignment / f"{notebook}.ipynb"
    fetched.parent.mkdir()
    release_file = course / "release" / assignment / f"{notebook}.ipynb"
    nbformat.write(fill_answers(nbformat.read(release_file, as_version=4), answers), fetched)
    return course


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Lab:
    """A JupyterLab server in a scratch course: url(path), log_tail(), stop()."""

    def __init__(self, course: Path, home: Path):
        self.course, self.token, self.port = course, secrets.token_hex(16), _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        settings = home / "lab-settings"
        for name, value in LAB_SETTINGS.items():
            (settings / name).parent.mkdir(parents=True, exist_ok=True)
            (settings / name).write_text(json.dumps(value))
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(home / "config"),  # no ~/.jupyter (or its nbgrader_config.py)
            JUPYTER_DATA_DIR=str(home / "data"),  # kernels: this environment's python3
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            IPYTHONDIR=str(home / "ipython"),
            PYTHONUNBUFFERED="1",
        )
        env.setdefault("JAX_PLATFORMS", "cpu")
        self.log_path = home / "jupyterlab.log"
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={course}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        # nbgrader's server extensions read nbgrader_config.py from the working directory.
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=course, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait_ready(timeout=120)

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def log_tail(self, chars: int = 4000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def _api(self, path: str, method: str = "GET"):
        request = urllib.request.Request(f"{self.base}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self._api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer on {self.base} in {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Shut the server down with its kernels; kill whatever is left."""
        import psutil

        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)  # kernels run in sessions of their own
        except psutil.NoSuchProcess:
            children = []
        if self.proc.poll() is None:
            try:
                self._api("/api/shutdown", method="POST")
                self.proc.wait(timeout=30)
            except Exception:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                    self.proc.wait(timeout=15)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=15)
        for child in children:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        self._log.close()


@pytest.fixture(scope="module")
def chromium_path():
    executable = _chromium()
    if executable is None:
        message = "no Chromium found (apt-get install chromium, or set CHROMIUM=/path/to/chrome)"
        if os.environ.get("JAXGRADER_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    return executable


@pytest.fixture(scope="module")
def lab(chromium_path, tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    course = _build_course(base)  # before Playwright starts: nbgrader runs kernels with asyncio
    home = base / "home"
    home.mkdir()
    server = Lab(course, home)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(lab, chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Playwright's own browser download is never used: launch the system's Chromium.
        chromium = playwright.chromium.launch(executable_path=chromium_path, args=["--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


@contextmanager
def _page(browser, lab: Lab, shots: Path):
    """A fresh browser profile's page; a failure leaves failure.png and the server log's tail."""
    from playwright.sync_api import expect

    shots.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=TIMEOUT_MS)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    except Exception as exc:
        try:
            page.screenshot(path=str(shots / "failure.png"))
        except Exception:
            pass
        raise AssertionError(f"{exc}\n(screenshots in {shots})\n--- JupyterLab log ---\n{lab.log_tail()}") from exc
    finally:
        context.close()


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def test_student_runs_and_validates_in_jupyterlab(browser, lab, tmp_path):
    from playwright.sync_api import expect

    shots = tmp_path / "screenshots"
    assignment, notebook, typed = STUDENT_NOTEBOOK
    solutions_of, _, _ = _grading_helpers()
    answer = solutions_of(nbformat.read(ROOT / "source" / assignment / f"{notebook}.ipynb", as_version=4))[typed]
    on_disk = lab.course / assignment / f"{notebook}.ipynb"
    nb = nbformat.read(on_disk, as_version=4)
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells]
    tests = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution")]
    solution_index, test_index = ids.index(typed), ids.index(f"test_{typed}")

    with _page(browser, lab, shots) as page:
        page.goto(lab.url(f"/lab/workspaces/student/tree/{assignment}/{notebook}.ipynb?reset"))
        panel = page.locator(".jp-NotebookPanel:visible")
        cells = panel.locator(".jp-Notebook .jp-Cell")
        expect(cells).to_have_count(len(nb.cells))
        expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible()  # kernel started
        page.screenshot(path=str(shots / "01-student-opens-lesson1.png"))

        # Type the answer where the release has its stub (CodeMirror 6: select all, insert).
        editor = cells.nth(solution_index).locator(".cm-content")
        expect(editor).to_contain_text("raise NotImplementedError()")
        editor.click()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.insert_text(answer)
        page.keyboard.press("Escape")
        expect(editor).not_to_contain_text("NotImplementedError")
        cells.nth(solution_index).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "02-student-types-answer.png"))

        _menu(page, "Run", "Run All Cells")
        # Done when every code cell's prompt holds a number ("[*]" while queued or running), or
        # nothing is running any more after an error (Run All stops at the first one).
        page.wait_for_function(
            """() => {
                const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
                const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                if (prompts.some(p => p.textContent.includes('*'))) return false;
                return prompts.every(p => /\\[\\d+\\]/.test(p.textContent))
                    || panel.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
            }""", timeout=TIMEOUT_MS)
        for index in tests:  # the visible tests passed: they ran, no traceback, nothing on stderr
            errors = cells.nth(index).locator(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
            assert errors.count() == 0, f"{ids[index]} failed in the browser:\n{errors.first.inner_text()[:1500]}"
            expect(cells.nth(index).locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"))
        cells.nth(test_index).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "03-student-runs-all-tests-pass.png"))

        # nbgrader's Validate saves the notebook, runs it in a fresh kernel and reports.
        panel.locator(".jp-Toolbar").get_by_text("Validate", exact=True).click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("Validation Results", timeout=TIMEOUT_MS)
        expect(dialog.locator(".validation-success")).to_contain_text("Success! Your notebook passes all the tests.")
        page.screenshot(path=str(shots / "04-student-validate-success.png"))
        dialog.get_by_role("button", name="Ok").click()

    # What Validate passed is the notebook with the answer typed in the browser.
    saved = nbformat.read(on_disk, as_version=4).cells[solution_index].source
    assert saved.strip() == answer.strip()


def test_teacher_grades_written_answer_in_formgrader(browser, lab, tmp_path):
    from nbgrader.api import Gradebook
    from playwright.sync_api import expect

    shots = tmp_path / "screenshots"
    assignment, notebook, cell, student = GRADED
    with _page(browser, lab, shots) as page:
        page.goto(lab.url("/lab/workspaces/teacher?reset"))
        _menu(page, "Nbgrader", "Formgrader")
        formgrader = page.frame_locator("iframe")
        rows = formgrader.locator("#main-table tr")
        expect(rows).to_have_count(len(ASSIGNMENTS))
        assert rows.locator("td:first-child").all_inner_texts() == ASSIGNMENTS
        page.screenshot(path=str(shots / "05-teacher-formgrader-assignments.png"))

        # Each click loads a page in the frame: wait for its breadcrumb before the next one.
        for link in ("Manual Grading", assignment, notebook):
            formgrader.get_by_role("link", name=link, exact=True).click()
            expect(formgrader.locator(".breadcrumb li.active")).to_have_text(link)
        expect(formgrader.locator("#main-table td.name a.name-hidden")).to_have_count(len(AUTOGRADED))  # rows loaded
        formgrader.get_by_role("button", name="Show All Names").click()
        expect(formgrader.get_by_role("button", name="Hide All Names")).to_be_visible()
        page.screenshot(path=str(shots / "06-teacher-submissions.png"))
        formgrader.get_by_role("link", name=student, exact=True).click()

        score = formgrader.locator(f"input.score#{cell}")
        comment = formgrader.locator(f"textarea#{cell}-comment")
        expect(score).to_be_visible()
        answer_panel = formgrader.locator(".nbgrader_cell", has=score)
        expect(answer_panel).to_contain_text("Student's answer")
        expect(answer_panel).not_to_contain_text("YOUR ANSWER HERE")  # ada wrote one
        formgrader.locator(".breadcrumb .glyphicon-eye-open").click()  # show the student's name
        score.fill(str(POINTS))
        score.press("Tab")  # formgrader saves on change
        comment.fill(COMMENT)
        comment.press("Tab")
        answer_panel.evaluate("e => e.scrollIntoView({block: 'center'})")

        # The gradebook has them (formgrader saves each field with its own request).
        deadline, stored = time.monotonic() + TIMEOUT_MS / 1000, None
        while time.monotonic() < deadline:
            with Gradebook(f"sqlite:///{lab.course / 'gradebook.db'}") as gradebook:
                grade = gradebook.find_grade(cell, notebook, assignment, student)
                remark = gradebook.find_comment(cell, notebook, assignment, student)
                stored = (grade.manual_score, grade.needs_manual_grade, remark.manual_comment)
            if stored == (POINTS, False, COMMENT):
                break
            time.sleep(0.5)
        page.screenshot(path=str(shots / "07-teacher-formgrader-manual-grade.png"))
        assert stored == (POINTS, False, COMMENT), stored

        # ... and formgrader's own table shows the written points.
        formgrader.locator(".breadcrumb a", has_text=notebook).click()
        expect(formgrader.locator(".breadcrumb li.active")).to_have_text(notebook)
        expect(formgrader.locator("#main-table td.written-score")).to_have_text(re.compile(rf"^\s*{POINTS:g} / "))


def test_teacher_opens_the_class_report(browser, lab, tmp_path):
    """The class report (jaxgrader/grading/teacher/class_report.py) of the autograded lesson: the page opens,
    its score plot is drawn (a decoded image, not a broken one), every test has its row, and the similar
    submissions open side by side."""
    from playwright.sync_api import expect

    from jaxgrader.grading.teacher.class_report import write_reports

    shots = tmp_path / "screenshots"
    assignment, notebook = GRADED[0], GRADED[1]
    source = nbformat.read(ROOT / "source" / assignment / f"{notebook}.ipynb", as_version=4)
    tests = [c for c in source.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution")]
    report = next(p for p in write_reports(lab.course, [assignment]) if p.suffix == ".html")
    with _page(browser, lab, shots) as page:
        page.goto(report.as_uri())
        plot = page.locator("img#score-plot")
        expect(plot).to_be_visible()
        page.wait_for_function("document.querySelector('img#score-plot').complete")
        width, height = plot.evaluate("img => [img.naturalWidth, img.naturalHeight]")
        assert width > 0 and height > 0, "the score plot did not render"
        expect(page.locator("table#parts > tbody > tr")).to_have_count(1 + len(tests))
        expect(page.locator("table#parts")).to_contain_text("Exercise 1:")
        page.screenshot(path=str(shots / "08-teacher-class-report.png"), full_page=True)
        # similar submissions: ada and cy typed the same solutions (cy with his demo mistakes), side by side
        pair = page.locator("details.pair")
        expect(pair).to_have_count(1)
        expect(pair.locator("summary")).to_contain_text("ada and cy")
        expect(pair.locator("table.side-by-side")).not_to_be_visible()
        pair.locator("summary").click()
        expect(pair.locator("table.side-by-side th")).to_have_text(["answer", "ada", "cy"])
        expect(pair.locator("table.side-by-side mark").first).to_be_visible()
        pair.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "09-teacher-similar-submissions.png"))
