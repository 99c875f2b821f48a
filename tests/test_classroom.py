"""A term on one JupyterHub (`jaxgrader classroom`): students in JupyterLab, the teacher in formgrader and a
terminal, nbgrader's exchange between them, and nobody reading what is not theirs (docs/classroom.md).

One classroom per module (`classroom`): real accounts (a session prefix + the demo class's roles: ada, bo,
cy, hana; and an instructor), the command itself starting configurable-http-proxy and JupyterHub on a free
loopback port, nbgrader's exchange in a scratch folder. `term` plays the term once, in headless Chromium
(Debian's, as tests/test_browser.py launches it), four people logged in through the hub's login page:

* the teacher releases lesson 1 (cut short, tests/short_lesson.py) in formgrader;
* ada fetches it in the Assignments tab, submits the blank release, types her three answers, validates,
  submits again (the last one counts); bo submits it untouched; hana uploads the Korean edition's notebook
  over the fetched one, answers two of three, submits;
* cy works through the hub's REST API with a token from his own login: he submits a notebook that tries
  to write into the exchange and the course when it is graded, and from his kernel plants a submission
  named for ada and a symlink to the course's source/ in inbound/;
* the teacher collects in formgrader, grades with `jaxgrader grade` in a JupyterLab terminal (bubblewrap,
  as the instructor), releases feedback in formgrader;
* ada, bo and hana fetch their feedback in the Assignments tab and open it.

The tests read what the term left: scores, feedback (hana's in Korean), what collect took and refused,
and, as cy, every attempt to read what is ada's or the teacher's, through his kernel and the hub's API.
Screenshots: <pytest tmp>/classroom*/screenshots/ (docs/browser.md). Without a Chromium the tests skip,
unless JAXGRADER_REQUIRE_BROWSER=1 (CI) makes that a failure; without root they skip.
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jaxgrader.grading.course.notebooks import fill_answers, grade_id, read_notebook, solutions_of

from .test_browser import TIMEOUT_MS, _page, chromium_path  # noqa: F401  (a fixture, used by name)
from .test_classroom_setup import (COURSE_ID, base_folder, make_instructor, need_root, reachable, remove_accounts,
                                   scratch_course, session_prefix, set_password)

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "lesson1", "pure_functions"
ROLES = ("ada", "bo", "cy", "hana")  # the demo class (jaxgrader/grading/demo.py): here, roles
IN_BROWSER = ("ada", "bo", "hana")
START_TIMEOUT_S = 240  # the command's checks, the proxy and the hub, on a loaded 2-core machine
GRADE_TIMEOUT_S = 420


# --------------------------------------------------------------------------- the classroom, started and stopped


class Hub:
    """`jaxgrader classroom` running: ``url``, ``passwords`` (printed once), ``log_tail()``, ``stop()``."""

    def __init__(self, course: Path, base: Path, instructor: str):
        import psutil

        self.state, self.output = base / "state", base / "classroom.out"
        port = _free_port()
        argv = [sys.executable, "-m", "jaxgrader", "--root", str(course), "classroom", "--roster", "roster.csv",
                "--instructor", instructor, "--exchange", str(base / "exchange"), "--state", str(self.state),
                "--port", str(port)]
        with open(self.output, "w") as out:
            self.proc = subprocess.Popen(reachable(argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Ctrl-C stops" not in self.output.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"jaxgrader classroom did not start:\n{self.output.read_text()[-3000:]}")
            time.sleep(0.3)
        self.started = self.output.read_text()
        self.start_seconds = round(START_TIMEOUT_S - (deadline - time.monotonic()), 1)
        self.passwords = dict(re.findall(r"^ {4}(\S+) {2,}(\S+)$", self.started, re.M))
        self.family = [self.proc.pid] + [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]

    def log_tail(self, chars: int = 4000) -> str:
        hub_log = self.state / "hub" / "jupyterhub.log"
        return (self.output.read_text(errors="replace")[-1000:] + "\n--- hub log ---\n"
                + (hub_log.read_text(errors="replace")[-chars:] if hub_log.exists() else ""))

    def stop(self) -> None:
        """SIGTERM: the command stops the hub (and every user's server), then the proxy; what is left is killed."""
        import psutil

        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for pid in getattr(self, "family", []):
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass


def _free_port() -> int:
    from jaxgrader.grading.classroom.processes import free_port

    return free_port()


@dataclass
class Classroom:
    hub: Hub
    course: Path
    exchange: Path
    teacher: str
    names: dict[str, str]  # role -> account
    passwords: dict[str, str]

    @property
    def inbound(self) -> Path:
        return self.exchange / COURSE_ID / "inbound"

    def log_tail(self) -> str:
        return self.hub.log_tail()


@pytest.fixture(scope="module")
def classroom():
    need_root()
    prefix = session_prefix()
    names = {role: prefix + role for role in ROLES}
    teacher, teacher_password = prefix + "teach", secrets.token_urlsafe(12)
    base = None
    hub = None
    try:
        make_instructor(teacher)
        set_password(teacher, teacher_password)
        base = base_folder()
        course = scratch_course(base, teacher, roster=list(names.values()))
        hub = Hub(course, base, teacher)
        passwords = {**hub.passwords, teacher: teacher_password}
        assert set(names.values()) <= set(passwords), f"a new account's password was not printed:\n{hub.started}"
        yield Classroom(hub, course, base / "exchange", teacher, names, passwords)
    finally:
        if hub is not None:
            hub.stop()
        remove_accounts([teacher, *names.values()])
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- a student through the hub's API


class HubUser:
    """One account logged in through the hub's login form, holding an API token it asked for itself."""

    def __init__(self, url: str, name: str, password: str):
        self.url, self.name = url, name
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(f"{url}/hub/login").read()
        xsrf = next(c.value for c in jar if c.name == "_xsrf")
        form = urllib.parse.urlencode({"username": name, "password": password, "_xsrf": xsrf}).encode()
        opener.open(f"{url}/hub/login", form).read()  # logs in, and starts the user's server
        xsrf = next(c.value for c in jar if c.name == "_xsrf" and c.path == "/hub/")
        request = urllib.request.Request(f"{url}/hub/api/users/{name}/tokens", method="POST",
                                         data=json.dumps({"note": "tests/test_classroom.py"}).encode(),
                                         headers={"X-XSRFToken": xsrf, "Content-Type": "application/json"})
        self.token = json.loads(opener.open(request).read())["token"]

    def api(self, path: str, method: str = "GET", body=None) -> tuple[int, str]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, method=method, data=data,
                                         headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def wait_for_server(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, text = self.api(f"/hub/api/users/{self.name}")
            if status == 200 and json.loads(text)["servers"].get("", {}).get("ready"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{self.name}'s server did not start in {timeout:.0f} s")

    def put_notebook(self, path: str, nb) -> None:
        status, text = self.api(f"/user/{self.name}/api/contents/{path}", "PUT",
                                {"type": "notebook", "format": "json", "content": nb})
        assert status in (200, 201), text

    def assignments(self, action: str, **fields) -> dict:
        status, text = self.api(f"/user/{self.name}/assignments/{action}", "POST",
                                {"course_id": COURSE_ID, "assignment_id": ASSIGNMENT, **fields})
        assert status == 200 and json.loads(text)["success"], text
        return json.loads(text)

    def run(self, code: str, timeout: float = 120) -> str:
        """``code`` in a kernel of this user's server (as this user); its output."""
        status, text = self.api(f"/user/{self.name}/api/kernels", "POST", {"name": "python3"})
        assert status == 201, text
        kernel = json.loads(text)["id"]
        try:
            ws = self.url.replace("http", "ws", 1) + f"/user/{self.name}/api/kernels/{kernel}/channels"
            with ThreadPoolExecutor(1) as pool:  # a loop of its own (Playwright's sync API holds this thread's)
                return pool.submit(asyncio.run, _execute(ws, self.token, code, timeout)).result()
        finally:
            self.api(f"/user/{self.name}/api/kernels/{kernel}", "DELETE")


async def _execute(ws_url: str, token: str, code: str, timeout: float) -> str:
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    conn = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}))
    msg_id = uuid.uuid4().hex
    conn.write_message(json.dumps({
        "header": {"msg_id": msg_id, "username": "", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}}))
    out = []
    try:
        while True:
            msg = json.loads(await asyncio.wait_for(conn.read_message(), timeout))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)
    finally:
        conn.close()


# --------------------------------------------------------------------------- the term, in the browser

# cy's answer to `predict`: right, and, wherever it runs, an attempt to write into the exchange and the
# course and to list what is not his (printed as ATTEMPTS {...}; graded, it runs in the grading sandbox)
HOSTILE = '''import json, os
_targets = {TARGETS}
_attempts = {{}}
for _name, _path in _targets.items():
    try:
        if _name.startswith("list "):
            _attempts[_name] = len(os.listdir(_path))
        else:
            with open(_path, "a") as _fh:
                _fh.write("pwned by cy")
            _attempts[_name] = "wrote"
    except Exception as _exc:
        _attempts[_name] = type(_exc).__name__
print("ATTEMPTS " + json.dumps(_attempts))

def predict(params, x):
    return params["W"] @ x + params["b"]
'''
FORGED_TIME = "2099-01-01 00:00:00.000000 UTC"  # newer than any real submission: collect would take it
LINK_TIME = "2098-01-01 00:00:00.000000 UTC"


def hostile_targets(room: Classroom) -> dict[str, str]:
    course, exchange = room.course, room.exchange / COURSE_ID
    return {"exchange root": f"{room.exchange}/pwned.txt", "outbound": f"{exchange}/outbound/{ASSIGNMENT}/pwned.txt",
            "inbound": f"{exchange}/inbound/pwned", "exchange feedback": f"{exchange}/feedback/pwned.html",
            "source": f"{course}/source/{ASSIGNMENT}/pwned.txt", "gradebook": f"{course}/gradebook.db",
            "course config": f"{course}/nbgrader_config.py",
            "list inbound": f"{exchange}/inbound", "list course": str(course)}


@dataclass
class Term:
    room: Classroom
    shots: Path
    notebook_cells: list[str]  # grade ids of the released notebook, in order
    ada_cache: list[str] = field(default_factory=list)  # her submissions' folders in her nbgrader cache
    collect_log: str = ""
    menus: dict[str, list[str]] = field(default_factory=dict)  # the Nbgrader menu each role sees
    feedback: dict[str, str] = field(default_factory=dict)  # student -> the feedback page's text in their browser
    cy: HubUser | None = None  # cy's login, token and server (the isolation attempts use them)
    seconds: dict[str, float] = field(default_factory=dict)  # each step's wall time

    def step(self, name: str, since: float) -> float:
        now = time.monotonic()
        self.seconds[name] = round(now - since, 1)
        return now


@pytest.fixture(scope="module")
def browser(classroom, chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path, args=["--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


def _log_in(page, room: Classroom, name: str) -> None:
    page.goto(f"{room.hub.url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", room.passwords[name])
    page.click("#login_submit")


def _lab_ready(page) -> None:
    page.wait_for_url(re.compile(r".*/lab(\?.*|/.*)?$"), timeout=TIMEOUT_MS * 2)
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for()


def _open_menu(page, menu: str) -> None:
    """Open a menu of the menu bar (a click can land while JupyterLab is still laying out: try again)."""
    for attempt in range(4):
        page.locator(".lm-MenuBar-itemLabel", has_text=menu).click()
        try:
            page.locator(".lm-Menu:visible .lm-Menu-itemLabel").first.wait_for(timeout=5_000)
            return
        except Exception:
            page.keyboard.press("Escape")
    raise AssertionError(f"the {menu} menu does not open")


def _menu_item(page, menu: str, item: str) -> None:
    _open_menu(page, menu)
    label = page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^\s*{re.escape(item)}\s*$"))
    page.locator(".lm-Menu:visible .lm-Menu-item").filter(has=label).click()


def _nbgrader_menu(page) -> list[str]:
    _open_menu(page, "Nbgrader")
    items = [t.strip() for t in page.locator(".lm-Menu:visible .lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()  # closes it (Escape needs the page's focus)
    page.locator(".lm-Menu:visible").wait_for(state="hidden")
    return items


def _assignments_tab(page) -> None:
    """Open (or show) nbgrader's Assignments tab."""
    tab = page.locator(".lm-TabBar-tab", has_text="Assignments")
    if tab.count():
        tab.first.click()
    else:
        _menu_item(page, "Nbgrader", "Assignment List")
    page.locator("#released_assignments_list").wait_for()


def _refresh_assignments(page) -> None:
    page.locator(".list_toolbar button, button[title='Refresh assignments list']").last.click()


def _row(page, listing: str):
    return page.locator(f"#{listing} .list_item", has_text=ASSIGNMENT).first


def _fetch(page) -> None:
    from playwright.sync_api import expect

    _assignments_tab(page)
    _row(page, "released_assignments_list").get_by_role("button", name="Fetch").click()
    expect(_row(page, "fetched_assignments_list").get_by_role("button", name="Submit")).to_be_visible()


def _submit(page, count: int) -> None:
    """Submit from the Assignments tab; wait for the ``count``-th submission in its list."""
    from playwright.sync_api import expect

    _assignments_tab(page)
    _row(page, "fetched_assignments_list").get_by_role("button", name="Submit").click()
    expect(page.locator("#submitted_assignments_list .nested_list_item")).to_have_count(count)


def _open_notebook(page) -> None:
    """From the Assignments tab: the fetched lesson's notebook, opened, its kernel idle."""
    from playwright.sync_api import expect

    _assignments_tab(page)
    row = _row(page, "fetched_assignments_list")
    row.locator("a.assignment-notebooks-link").click()
    page.locator("#fetched_assignments_list .nested_list_item a", has_text=NOTEBOOK).click()
    expect(page.locator(".jp-NotebookPanel:visible .jp-Cell").first).to_be_visible()
    expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible()


def _type(page, cells: list[str], answers: dict[str, str]) -> None:
    """Type each answer over its cell's stub, as test_browser.py's student does (CodeMirror 6)."""
    from playwright.sync_api import expect

    panel = page.locator(".jp-NotebookPanel:visible")
    for cell, answer in answers.items():
        editor = panel.locator(".jp-Notebook .jp-Cell").nth(cells.index(cell)).locator(".cm-content")
        expect(editor).to_contain_text("NotImplementedError")
        editor.click()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.insert_text(answer)
        page.keyboard.press("Escape")
        expect(editor).not_to_contain_text("NotImplementedError")


def _save(page) -> None:
    from playwright.sync_api import expect

    _menu_item(page, "File", "Save Notebook")
    expect(page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")).to_have_count(0)


def _upload_over(page, local: Path) -> None:
    """Upload ``local`` into the file browser's lesson folder, over the fetched notebook of that name."""
    from playwright.sync_api import expect

    if not page.locator("#filebrowser").is_visible():  # its side bar tab toggles it
        page.locator(".jp-SideBar li[data-id='filebrowser']").first.click()
    listing = page.locator("#filebrowser .jp-DirListing-content")
    listing.locator(".jp-DirListing-item", has_text=ASSIGNMENT).dblclick()
    expect(page.locator(".jp-BreadCrumbs")).to_contain_text(ASSIGNMENT)
    with page.expect_file_chooser() as chooser:
        page.locator("#filebrowser jp-button[title='Upload Files']").click()
    chooser.value.set_files(str(local))
    page.locator(".jp-Dialog").get_by_role("button", name="Overwrite").click()
    expect(page.locator(".jp-Dialog")).to_have_count(0)


def _formgrader(page):
    from playwright.sync_api import expect

    tab = page.locator(".lm-TabBar-tab", has_text="Formgrader")
    if tab.count():  # still on Manage Assignments (a click there now could land on the page being left)
        tab.first.click()
    else:
        _menu_item(page, "Nbgrader", "Formgrader")
    frame = page.frame_locator("iframe")
    expect(frame.locator("#main-table tr", has_text=ASSIGNMENT)).to_be_visible()
    return frame


def _formgrader_action(page, column: str, shot: Path) -> str:
    """Click ``column``'s link in the lesson's row of Manage Assignments; the success dialog's text (its log)."""
    from playwright.sync_api import expect

    frame = _formgrader(page)
    frame.locator("#main-table tr", has_text=ASSIGNMENT).locator(f"td.{column} a").click()
    dialog = frame.locator("#success-modal, #error-modal")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS * 2)
    text = dialog.inner_text()
    page.screenshot(path=str(shot))
    assert frame.locator("#success-modal").count() == 1, f"formgrader {column}:\n{text}"
    dialog.locator(".modal-footer button").click()
    expect(dialog).to_have_count(0)
    return text


def _terminal(page, command: str, done: Path, timeout: float, shot: Path) -> str:
    """Type ``command`` into a new JupyterLab terminal; wait for it to write its exit status to ``done``."""
    from playwright.sync_api import expect

    _open_menu(page, "File")
    page.locator('.lm-Menu-item[data-type="submenu"]', has_text="New").first.click()
    page.get_by_role("menuitem", name="Terminal").click()
    terminal = page.locator(".jp-Terminal:visible")
    expect(terminal).to_be_visible()
    terminal.click()
    page.keyboard.type(f"{command}; echo $? > {done}\n")
    deadline = time.monotonic() + timeout
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(1)
    page.screenshot(path=str(shot))
    assert done.exists(), f"{command!r} did not finish in {timeout:.0f} s"
    return done.read_text().strip()


def _fetch_and_open_feedback(page, shot: Path | None) -> str:
    """Fetch Feedback in the Assignments tab, follow '(view feedback)', open the page; its text."""
    from playwright.sync_api import expect

    _assignments_tab(page)
    _refresh_assignments(page)
    _row(page, "submitted_assignments_list").get_by_role("button", name="Fetch Feedback").click()
    page.locator("#submitted_assignments_list a", has_text="(view feedback)").first.click()
    page.locator(".jp-DirListing-item", has_text=f"{NOTEBOOK}.html").dblclick()
    frame = page.frame_locator(".jp-HTMLViewer:visible iframe, .jp-RenderedHTML:visible iframe").first
    body = frame.locator("body")
    expect(body).to_contain_text(ASSIGNMENT)
    if shot is not None:
        page.screenshot(path=str(shot))
    return body.inner_text()


@pytest.fixture(scope="module")
def term(classroom, browser, tmp_path_factory):
    room = classroom
    shots = tmp_path_factory.mktemp("classroom") / "screenshots"
    source = read_notebook(room.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    release = read_notebook(room.course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    answers = solutions_of(source)
    result = Term(room, shots, [grade_id(c) for c in release.cells])
    ada, bo, cy, hana = (room.names[r] for r in ROLES)
    teacher = room.teacher

    contexts = {}
    t = time.monotonic()
    with _page(browser, room, shots) as t_page:
        # Everyone logs in first: the hub starts the four servers side by side.
        _log_in(t_page, room, teacher)
        pages = {teacher: t_page}
        for name in (ada, bo, hana):
            contexts[name] = browser.new_context(viewport={"width": 1400, "height": 900})
            contexts[name].set_default_timeout(TIMEOUT_MS)
            pages[name] = contexts[name].new_page()
            _log_in(pages[name], room, name)
        mallory = HubUser(room.hub.url, cy, room.passwords[cy])
        from playwright.sync_api import expect

        try:
            for name, page in pages.items():
                _lab_ready(page)
                result.menus[name] = _nbgrader_menu(page)
            t = result.step("log in, four servers and JupyterLab pages start", t)

            # The teacher releases the lesson in formgrader.
            _formgrader_action(t_page, "release", shots / "01-teacher-releases-lesson1.png")
            t = result.step("release (formgrader)", t)

            # Students fetch it.
            for name in (ada, bo, hana):
                _fetch(pages[name])
            expect(pages[ada].locator("#filebrowser .jp-DirListing-item", has_text=ASSIGNMENT)).to_be_visible()
            pages[ada].screenshot(path=str(shots / "02-student-assignments-tab.png"))
            mallory.wait_for_server()
            mallory.assignments("fetch")
            t = result.step("fetch (four students)", t)

            # ada: the blank release first, then her answers, validated, submitted again.
            _submit(pages[ada], 1)
            _open_notebook(pages[ada])
            _type(pages[ada], result.notebook_cells, answers)
            panel = pages[ada].locator(".jp-NotebookPanel:visible")
            panel.locator(".jp-Toolbar").get_by_text("Validate", exact=True).click()
            dialog = pages[ada].locator(".jp-Dialog")
            expect(dialog).to_contain_text("Validation Results", timeout=TIMEOUT_MS * 2)
            expect(dialog.locator(".validation-success")).to_contain_text("Success!")
            pages[ada].screenshot(path=str(shots / "03-student-validates.png"))
            dialog.get_by_role("button", name="Ok").click()
            _submit(pages[ada], 2)
            pages[ada].screenshot(path=str(shots / "04-student-submitted-twice.png"))
            t = result.step("ada: submit, type, validate, submit", t)

            # bo: the release as fetched.
            _submit(pages[bo], 1)

            # hana: the Korean edition's notebook (as published in ko/release/) over the fetched one.
            korean = shots.parent / "ko" / f"{NOTEBOOK}.ipynb"
            korean.parent.mkdir()
            shutil.copy(room.course / "ko" / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", korean)
            _upload_over(pages[hana], korean)
            pages[hana].locator(".jp-DirListing-item", has_text=f"{NOTEBOOK}.ipynb").dblclick()
            expect(pages[hana].locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible()
            _type(pages[hana], result.notebook_cells, {k: answers[k] for k in ("predict", "sgd_step")})
            _save(pages[hana])
            pages[hana].screenshot(path=str(shots / "05-korean-student-notebook.png"))
            _submit(pages[hana], 1)
            t = result.step("bo and hana: upload, type, submit", t)

            # cy, through the API: a hostile answer, submitted; then, from his kernel, a forgery in inbound/.
            hostile = fill_answers(release, {**answers, "predict": HOSTILE.format(TARGETS=repr(hostile_targets(room)))})
            mallory.put_notebook(f"{ASSIGNMENT}/{NOTEBOOK}.ipynb", hostile)
            mallory.assignments("submit")
            planted = mallory.run(PLANT.format(inbound=str(room.inbound), ada=ada, cy=cy, course=str(room.course),
                                               forged=FORGED_TIME, link=LINK_TIME, assignment=ASSIGNMENT))
            assert planted.strip() == "planted", planted
            t = result.step("cy: submit and plant (API, kernel)", t)

            # The teacher collects, grades in a terminal, releases feedback.
            result.collect_log = _formgrader_action(t_page, "collect", shots / "06-teacher-collects.png")
            t = result.step("collect (formgrader)", t)
            status = _terminal(t_page, f"cd {room.course} && jaxgrader grade -a {ASSIGNMENT}",
                               Path(f"/home/{teacher}/.grade-exit"), GRADE_TIMEOUT_S,
                               shots / "07-teacher-grades-in-a-terminal.png")
            assert status == "0", f"jaxgrader grade exited with {status} (screenshot 07)"
            t = result.step("jaxgrader grade (terminal)", t)
            _formgrader_action(t_page, "release-feedback", shots / "08-teacher-releases-feedback.png")
            t = result.step("release feedback (formgrader)", t)

            # Each student fetches and opens their own.
            result.feedback[ada] = _fetch_and_open_feedback(pages[ada], shots / "09-student-feedback.png")
            result.feedback[bo] = _fetch_and_open_feedback(pages[bo], None)
            result.feedback[hana] = _fetch_and_open_feedback(pages[hana], shots / "10-korean-student-feedback.png")
            t = result.step("fetch and open feedback (three students)", t)
        except Exception:
            for name, page in pages.items():
                if name != teacher:
                    page.screenshot(path=str(shots / f"failure-{name}.png"))
            raise
        finally:
            for context in contexts.values():
                context.close()
    cache = Path(f"/home/{ada}/.local/share/jupyter/nbgrader_cache/{COURSE_ID}")
    result.ada_cache = sorted(p.name for p in cache.iterdir())
    result.cy = mallory
    return result


PLANT = '''import os, shutil
forged = os.path.join("{inbound}", "{ada}+{assignment}+{forged}+forged")
os.makedirs(forged)
shutil.copy(os.path.expanduser("~/{assignment}/pure_functions.ipynb"), forged)
with open(os.path.join(forged, "timestamp.txt"), "w") as fh:
    fh.write("{forged}")
os.symlink("{course}/source/{assignment}", os.path.join("{inbound}", "{cy}+{assignment}+{link}+link"))
print("planted")
'''


# --------------------------------------------------------------------------- what the term left


def _scores(course: Path) -> dict[str, float]:
    import csv

    with open(course / "grades.csv") as fh:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(fh) if row["assignment"] == ASSIGNMENT}


def _points(nb) -> float:
    return sum(float(c.metadata.nbgrader.get("points", 0)) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))


@pytest.mark.browser
def test_students_and_the_teacher_run_a_term_through_the_hub(term):
    """Release, fetch, validate, submit twice, collect, grade, release feedback, fetch feedback: in the browser."""
    room = term.room
    ada, bo, cy, hana = (room.names[r] for r in ROLES)
    # what each role is offered: formgrader only to the instructor
    assert term.menus[ada] == ["Assignment List"], term.menus[ada]
    assert "Formgrader" in term.menus[room.teacher], term.menus[room.teacher]
    # the last of ada's two submissions was collected (the first was the blank release)
    assert len(term.ada_cache) == 2, term.ada_cache
    collected = (room.course / "submitted" / ada / ASSIGNMENT / "timestamp.txt").read_text()
    assert term.ada_cache[-1].split("+")[2] == collected, (term.ada_cache, collected)
    full = _points(read_notebook(room.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))
    scores = _scores(room.course)
    assert scores[ada] == full and scores[bo] == 0 and scores[cy] == full, scores  # cy's answer is right too
    assert 0 < scores[hana] < full, "hana answered two of the three exercises"
    # each fetched their own feedback: the page names the score it says
    for name in (room.names[r] for r in IN_BROWSER):
        fetched = list(Path(f"/home/{name}/{ASSIGNMENT}/feedback").glob(f"*/{NOTEBOOK}.html"))
        assert len(fetched) == 1, fetched
        assert fetched[0].read_text(encoding="utf-8") == (room.course / "feedback" / name / ASSIGNMENT /
                                                          f"{NOTEBOOK}.html").read_text(encoding="utf-8")
        assert f"{scores[name]:g}" in term.feedback[name], term.feedback[name][:500]
    # hana's in Korean, in her browser too (jaxgrader's LocalizeFeedback through collect and the exchange)
    assert "연습 1:" in term.feedback[hana] and "점수" in term.feedback[hana], term.feedback[hana][:800]
    assert "Exercise 1:" in term.feedback[ada] and "연습 1:" not in term.feedback[ada]
    for shot in ("02-student-assignments-tab.png", "09-student-feedback.png", "10-korean-student-feedback.png"):
        assert (term.shots / shot).stat().st_size > 10_000, shot
    run = json.loads((room.course / ".grading" / "last-run.json").read_text())
    print(f"\nclassroom started in {room.hub.start_seconds} s; the term: {json.dumps(term.seconds)}; jaxgrader grade: "
          + json.dumps({k: run.get(k) for k in ("reference_seconds", "grade_seconds", "seconds")}))


ATTEMPT = '''import json, os
def attempt(kind, path):
    try:
        if kind == "list":
            os.listdir(path)
        elif kind == "read":
            with open(path, "rb") as fh:
                fh.read(1)
        else:
            os.rename(path, path + ".moved")
        return "allowed"
    except PermissionError:
        return "refused"
    except Exception as exc:
        return type(exc).__name__
print(json.dumps({{name: attempt(kind, path) for name, (kind, path) in {targets!r}.items()}}))
'''


def test_a_student_reads_nothing_of_another_student_or_of_the_teacher(term):
    """As cy, in a kernel of his own server (his real login): every way at another's work is refused. Each
    target exists (checked as root first), so a refusal is not a missing file."""
    room = term.room
    ada, teacher = room.names["ada"], room.teacher
    exchange, course, home = room.exchange / COURSE_ID, room.course, Path(f"/home/{ada}")
    last = sorted(p for p in room.inbound.iterdir() if p.name.startswith(f"{ada}+") and "forged" not in p.name)[-1]
    fetched = next((home / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK}.html"))
    cached = next((home / ".local/share/jupyter/nbgrader_cache" / COURSE_ID).iterdir())
    targets = {
        "list inbound/": ("list", exchange / "inbound"),
        "ada's submission": ("read", last / f"{NOTEBOOK}.ipynb"),
        "ada's submission secret (her feedback's name)": ("read", last / "submission_secret.txt"),
        "list the exchange's feedback/": ("list", exchange / "feedback"),
        "list the course": ("list", course),
        "source/ (solutions, hidden tests)": ("read", course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"),
        "the gradebook": ("read", course / "gradebook.db"),
        "list autograded/": ("list", course / "autograded"),
        "ada's autograded notebook": ("read", course / "autograded" / ada / ASSIGNMENT / f"{NOTEBOOK}.ipynb"),
        "ada's feedback in the course": ("read", course / "feedback" / ada / ASSIGNMENT / f"{NOTEBOOK}.html"),
        "list ada's home": ("list", home),
        "ada's fetched feedback": ("read", fetched),
        "ada's copy of her submission": ("read", cached / f"{NOTEBOOK}.ipynb"),
        "list the teacher's home": ("list", Path(f"/home/{teacher}")),
        "the hub's database": ("read", room.hub.state / "hub" / "jupyterhub.sqlite"),
        "rename ada's submission away": ("rename", last),
        "rename the course's exchange folder away": ("rename", exchange),
    }
    for name, (_, path) in targets.items():
        assert path.exists(), f"{name}: {path} does not exist, so its refusal would prove nothing"
    got = json.loads(term.cy.run(ATTEMPT.format(targets={k: (kind, str(p)) for k, (kind, p) in targets.items()}))
                     .strip().splitlines()[-1])
    assert got == {name: "refused" for name in targets}, {k: v for k, v in got.items() if v != "refused"}


def test_a_students_server_holds_no_secret_of_the_hub(term):
    """The proxy's token (with it, a student could route anyone's traffic to himself) and the hub's cookie
    secret stay with the command and the hub: a student's server and kernels get neither."""
    env = json.loads(term.cy.run("import json, os; print(json.dumps(dict(os.environ)))").strip().splitlines()[-1])
    leaked = [name for name in env if "CONFIGPROXY" in name or "COOKIE_SECRET" in name or name == "JPY_COOKIE_SECRET"]
    assert not leaked, leaked
    assert env["USER"] == term.room.names["cy"] and env["HOME"] == f"/home/{term.room.names['cy']}", env


def test_formgrader_and_other_servers_refuse_a_student(term):
    """With cy's own token (from his login): the teacher's formgrader (pages and API), the teacher's and ada's
    servers, the hub's user list; his own server has no formgrader."""
    room = term.room
    ada, cy, teacher = room.names["ada"], room.names["cy"], room.teacher
    attempts = {
        "formgrader's page": ("GET", f"/user/{teacher}/formgrader/"),
        "formgrader's API: assignments": ("GET", f"/user/{teacher}/formgrader/api/assignments"),
        "formgrader's API: submissions": ("GET", f"/user/{teacher}/formgrader/api/submissions/{ASSIGNMENT}"),
        "formgrader's API: release": ("POST", f"/user/{teacher}/formgrader/api/assignment/{ASSIGNMENT}/release"),
        "the teacher's files": ("GET", f"/user/{teacher}/api/contents/gradebook.db"),
        "ada's files": ("GET", f"/user/{ada}/api/contents/{ASSIGNMENT}"),
        "ada's assignments": ("GET", f"/user/{ada}/assignments?course_id={COURSE_ID}"),
        "the hub's users": ("GET", "/hub/api/users"),
        "a token for ada": ("POST", f"/hub/api/users/{ada}/tokens"),
        "formgrader on his own server": ("GET", f"/user/{cy}/formgrader/api/assignments"),
    }
    got = {name: term.cy.api(path, method, b"{}" if method == "POST" else None) for name, (method, path) in attempts.items()}
    allowed = {name: (status, text[:200]) for name, (status, text) in got.items() if status not in (403, 404)}
    assert not allowed, allowed
    # the teacher's token reaches the same formgrader API: the refusals are the hub's, not a broken service
    teacher_user = HubUser(room.hub.url, teacher, room.passwords[teacher])
    status, text = teacher_user.api(f"/user/{teacher}/formgrader/api/assignments")
    assert status == 200 and ASSIGNMENT in text, (status, text[:300])


def test_a_hostile_submission_changes_nothing_when_graded(term):
    """cy's answer tried, while graded, to write into the exchange (root, outbound, inbound, feedback) and the
    course (source/, the gradebook, nbgrader_config.py) and to list inbound/ and the course: the grading
    sandbox showed it none of them."""
    room = term.room
    targets = hostile_targets(room)
    for name, path in targets.items():
        if name.startswith("list "):
            continue
        path = Path(path)
        assert not path.exists() or b"pwned by cy" not in path.read_bytes(), f"{name}: {path} was written"
    graded = read_notebook(room.course / "autograded" / room.names["cy"] / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    cell = next(c for c in graded.cells if grade_id(c) == "predict")
    printed = "".join(o.get("text", "") for o in cell.get("outputs", []))
    assert "ATTEMPTS " in printed, f"cy's answer did not run when graded: {cell.get('outputs')}"
    attempts = json.loads(printed.split("ATTEMPTS ", 1)[1].splitlines()[0])
    assert set(attempts) == set(targets) and "wrote" not in attempts.values(), attempts
    assert not any(isinstance(v, int) for v in attempts.values()), f"a listing succeeded: {attempts}"


def test_collect_takes_only_what_a_student_made(term):
    """cy planted, in inbound/, a newer submission named for ada and a symlink named for himself pointing at
    the course's source/: collect refused both (and said so), took ada's own last submission and cy's own."""
    room = term.room
    ada, cy = room.names["ada"], room.names["cy"]
    assert re.search(rf"Refused {re.escape(ada)}\+{ASSIGNMENT}\+{re.escape(FORGED_TIME)}\+forged: named for {ada} "
                     rf"but made by {cy}", term.collect_log), term.collect_log
    assert re.search(rf"Refused {re.escape(cy)}\+{ASSIGNMENT}\+{re.escape(LINK_TIME)}\+link: not a folder",
                     term.collect_log), term.collect_log
    submitted = room.course / "submitted"
    assert "ATTEMPTS" not in (submitted / ada / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text(), "ada got cy's forgery"
    assert (submitted / ada / ASSIGNMENT / "timestamp.txt").read_text() != FORGED_TIME
    theirs = submitted / cy / ASSIGNMENT
    assert not any(p.is_symlink() for p in theirs.rglob("*")), list(theirs.rglob("*"))
    text = (theirs / f"{NOTEBOOK}.ipynb").read_text()
    assert "ATTEMPTS" in text and "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
