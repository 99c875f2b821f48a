"""``jaxgrader classroom``: checks, accounts, the exchange, the hub; then wait for Ctrl-C and stop it all.

Every check runs before anything is changed (root, the instructor's account and course directory, the
roster, the students' environment), so a refused start leaves the machine as it was. Then the accounts
(new ones with a generated password, printed once), the gradebook's students (``nbgrader db student
import``, run as the instructor), the exchange's folders, each role's configuration, the proxy and the
hub. ``--check`` stops after the checks and prints what a start would do.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from ..course.config import CourseError, load_config
from . import accounts, environment, exchange, hubconfig, processes
from .settings import classroom_settings


@dataclass
class Options:
    """What the command line says; None: the course's c.Classroom setting."""

    roster: Path | None = None
    demo_names: tuple[str, ...] = ()  # --demo: the demo class (jaxgrader/grading/demo.py)
    instructor: str | None = None
    exchange: str | None = None
    state: str | None = None
    ip: str | None = None
    port: int | None = None
    check: bool = False


def _plan(root: Path, options: Options):
    """Read and check everything; change nothing. Returns (settings, course_id, instructor account, students)."""
    config = load_config(root)
    try:
        settings = classroom_settings(config, root / "nbgrader_config.py")
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    for name in ("instructor", "ip", "port"):
        if getattr(options, name) is not None:
            setattr(settings, name, getattr(options, name))
    if options.exchange:
        settings.exchange_root = options.exchange
    if options.state:
        settings.state_dir = options.state
    course_id = config.CourseDirectory.get("course_id", "")
    if not course_id:
        raise CourseError(f"{root / 'nbgrader_config.py'}: set c.CourseDirectory.course_id (nbgrader's exchange "
                          "files every course under it)")
    instructor = settings.instructor or _owner(root)
    if not instructor:
        raise CourseError(f"{root} is owned by root: name the instructor's account (--instructor NAME), and give "
                          "them the course (chown -R NAME: DIR && chmod 700 DIR)")
    found = accounts.account(instructor)
    if found is None:
        raise CourseError(f"no account {instructor}: the instructor logs in with an account of their own "
                          f"(useradd --create-home {instructor} && passwd {instructor})")
    environment.course_is_private(root, instructor)
    if options.demo_names:
        students = accounts.demo_roster(options.demo_names)
    else:
        roster = options.roster or (Path(settings.roster) if settings.roster else None)
        if roster is None:
            raise CourseError("name the class list: --roster FILE (a CSV as `nbgrader db student import` reads), "
                              "or --demo for the demo class")
        students = accounts.read_roster(roster if roster.is_absolute() else root / roster)
    settings.python = os.path.abspath(settings.python or sys.executable)
    environment.students_environment(settings.python, root)
    environment.root_only(Path(sys.prefix), "the hub's Python environment")
    if settings.hub_config:
        settings.hub_config = str(root / settings.hub_config)
        environment.root_only(Path(settings.hub_config), "c.Classroom.hub_config")
    if os.geteuid() != 0:
        raise CourseError("the classroom makes accounts and starts each user's server as that user: run it as root")
    return settings, course_id, found, students


def _owner(root: Path) -> str:
    import pwd

    uid = root.stat().st_uid
    return "" if uid == 0 else pwd.getpwuid(uid).pw_name


def run(root: Path, options: Options, say=print) -> int:
    """Start the classroom and serve until interrupted (Ctrl-C, SIGTERM); 0 when stopped cleanly."""
    root = Path(root).resolve()
    settings, course_id, instructor, students = _plan(root, options)
    state = Path(settings.state_dir or f"/srv/jaxgrader/{course_id}")
    if options.check:
        say(f"classroom: {course_id}: the checks pass. A start would serve http://{settings.ip}:{settings.port}/ "
            f"with {len(students)} students ({', '.join(s.id for s in students)}) and the instructor "
            f"{instructor.pw_name}; exchange {settings.exchange_root}/{course_id}; hub state {state}")
        return 0

    notes = accounts.make_accounts(students, settings.home_base, instructor.pw_name)
    _import_roster(root, students, instructor.pw_name)
    try:
        notes += exchange.lay_out(settings.exchange_root, course_id, instructor.pw_uid, instructor.pw_gid)
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o711)  # others may enter (their role's configuration), not list
    config_dirs = {role: str(hubconfig.write_role_config(state / "jupyter" / role, role, course_id,
                                                        settings.exchange_root, root))
                   for role in (hubconfig.STUDENT, hubconfig.INSTRUCTOR)}
    proxy, proxy_version = processes.proxy_command(Path(settings.npm_prefix or state / "npm"),
                                                   settings.proxy_version)
    ports = {"hub_port": processes.free_port(), "proxy_api_port": processes.free_port()}
    hub_dir = state / "hub"
    hubconfig.write_hub_config(hub_dir, {
        "ip": settings.ip, "port": settings.port, **ports, "python": settings.python, "course": str(root),
        "instructor": instructor.pw_name, "students": [s.id for s in students], "config": config_dirs,
        "start_timeout": settings.start_timeout, "user_environment": dict(settings.user_environment)},
        extra=settings.hub_config)

    stop = _stop_on_signals()
    hub = processes.Classroom(proxy, settings.python, hub_dir, settings.ip, settings.port, ports["hub_port"],
                              ports["proxy_api_port"], timeout=settings.start_timeout)
    try:
        import jupyterhub

        say(f"classroom: {course_id} at {hub.url}/ (JupyterHub {jupyterhub.__version__}, {processes.PROXY} "
            f"{proxy_version})")
        say(f"  exchange: {settings.exchange_root}/{course_id} (inbound, outbound, feedback: the instructor's)")
        say(f"  instructor: {instructor.pw_name} (Nbgrader > Formgrader in their JupyterLab; course {root})")
        say(f"  students: {len(students)} accounts ({sum(s.password is not None for s in students)} new)")
        for note in notes:
            say(f"  {note}")
        new = [s for s in students if s.password is not None]
        if new:
            say("  new accounts' passwords (shown this once; give each to its student):")
            width = max(len(s.id) for s in new)
            for s in new:
                say(f"    {s.id:{width}}  {s.password}")
        say(f"  logs: {hub.logs['hub']}, {hub.logs['proxy']}")
        say("Ctrl-C stops the hub, the proxy and every user's server.")
        sys.stdout.flush()
        while hub.running() and not stop.is_set():
            stop.wait(1)
        if not hub.running():
            raise CourseError(f"the hub or the proxy stopped: {hub.log_tail()}")
    finally:
        hub.stop()
    say("classroom: stopped")
    return 0


def _stop_on_signals():
    import threading

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def _import_roster(root: Path, students: list[accounts.Student], instructor: str) -> None:
    """The roster into the gradebook (names, emails, LMS ids), as the instructor, whose gradebook it is (a new
    SQLite file is then theirs): what ``nbgrader db student import`` does, in a forked child."""
    from ..course.coursedir import gradebook_url, open_gradebook

    config = load_config(root)
    url, course_id = gradebook_url(config, root), config.CourseDirectory.course_id

    def write():
        with open_gradebook(url, course_id) as gb:
            for s in students:
                gb.update_or_create_student(s.id, **{k: v or None for k, v in s.row().items() if k != "id"})

    if accounts.as_account(instructor, write):
        raise CourseError(f"the roster could not be written to the gradebook {url} as {instructor} (see above)")
