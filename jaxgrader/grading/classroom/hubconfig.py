"""What the hub is told, and what each role's JupyterLab is told.

The hub reads a two-line ``jupyterhub_config.py`` that calls :func:`configure` with the classroom's
settings (``classroom.json`` beside it, root's alone). Each user's server gets the configuration folder
of its role on ``JUPYTER_CONFIG_PATH``:

* students: nbgrader's course id and exchange (unset, students see "Error fetching courses" or nothing:
  nbgrader #1067, #1885), :class:`~.exchange.PrivateSubmit`; the Assignments tab and Validate; formgrader,
  the course list and the create-assignment toolbar switched off, server and lab extension alike;
* the instructor: the course's own ``nbgrader_config.py`` (formgrader runs in the instructor's server,
  whose working directory is their home), the course directory as the server's root, formgrader, and
  :class:`~.exchange.CheckedCollect`. JupyterHub 4.1+ forbids framing single-user pages
  (``frame-ancestors 'none'``), and formgrader is an iframe in JupyterLab (nbgrader #1870): the
  instructor's server allows ``'self'``.

Formgrader runs in the instructor's own server rather than as a hub service: JupyterHub 6's default
``user`` role already keeps every other account out of it (``access:servers!user=<instructor>`` is the
instructor's alone), with no service token or group to keep right (docs/classroom.md).
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

STUDENT, INSTRUCTOR = "student", "instructor"
# nbgrader 0.9's JupyterLab plugins and server extensions a student does not get.
INSTRUCTOR_ONLY_LAB = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                       "@jupyter/nbgrader:create-assignment")
INSTRUCTOR_ONLY_SERVER = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")
# JupyterLab defaults for a classroom: no news toast (the hub may have no internet; it covers the page), and
# every cell rendered (the browser's find sees the whole notebook; windowed rendering hides cells below the fold).
LAB_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false"},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)


def write_role_config(folder: Path, role: str, course_id: str, exchange_root: str, course: Path) -> Path:
    """The configuration folder of one role's servers (readable by all: it holds no secret)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    nbgrader = ["c = get_config()  # noqa: F821", "# written by jaxgrader classroom (jaxgrader/grading/classroom/hubconfig.py)"]
    if role == INSTRUCTOR:
        nbgrader += [f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821  the course's own settings",
                     f"c.CourseDirectory.root = {str(course)!r}",
                     "c.ExchangeFactory.collect = 'jaxgrader.grading.classroom.exchange.CheckedCollect'"]
    else:
        nbgrader += ["c.ExchangeFactory.submit = 'jaxgrader.grading.classroom.exchange.PrivateSubmit'"]
    nbgrader += [f"c.CourseDirectory.course_id = {course_id!r}", f"c.Exchange.root = {exchange_root!r}"]
    _write(folder / "nbgrader_config.py", "\n".join(nbgrader) + "\n")

    server = ["c = get_config()  # noqa: F821",
              f"c.LabApp.app_settings_dir = {str(folder / 'lab-settings')!r}",
              "c.LabApp.check_for_updates_class = 'jupyterlab.NeverCheckForUpdate'",
              # a terminal's shell is a login shell by default, and /etc/profile puts PATH back to the system's:
              # `jaxgrader`, `nbgrader` and the course's python would not be found
              "c.ServerApp.terminado_settings = {'shell_command': ['/bin/bash']}"]
    if role == INSTRUCTOR:  # formgrader is an iframe in the instructor's JupyterLab
        server += ["c.ServerApp.tornado_settings = {'headers': {'Content-Security-Policy': \"frame-ancestors 'self'\"}}"]
    else:
        server += ["c.ServerApp.jpserver_extensions = {"
                   + ", ".join(f"{name!r}: False" for name in INSTRUCTOR_ONLY_SERVER) + "}"]
    _write(folder / "jupyter_server_config.py", "\n".join(server) + "\n")
    disabled = {} if role == INSTRUCTOR else {name: True for name in INSTRUCTOR_ONLY_LAB}
    _write(folder / "labconfig" / "page_config.json", json.dumps({"disabledExtensions": disabled}, indent=1) + "\n")
    _write(folder / "lab-settings" / "overrides.json", json.dumps(LAB_OVERRIDES, indent=1) + "\n")
    return folder


def write_hub_config(hub_dir: Path, settings: dict, extra: str = "") -> Path:
    """``classroom.json`` and ``jupyterhub_config.py`` in ``hub_dir`` (root's alone: mode 0700); ``extra``, a
    teacher's own hub configuration file, is read last."""
    hub_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(hub_dir, 0o700)
    _write(hub_dir / "classroom.json", json.dumps(settings, indent=1) + "\n", 0o600)
    config = hub_dir / "jupyterhub_config.py"
    _write(config, "# written by jaxgrader classroom: its settings are in classroom.json beside this file\n"
           "from jaxgrader.grading.classroom.hubconfig import configure\n\n"
           f"configure(c, {str(hub_dir / 'classroom.json')!r})  # noqa: F821\n"
           + (f"load_subconfig({os.path.abspath(extra)!r})  # noqa: F821  c.Classroom.hub_config\n" if extra else ""),
           0o600)
    return config


def configure(c, settings_file: str) -> None:
    """Set the hub's configuration ``c`` from the classroom's settings (called by jupyterhub_config.py)."""
    s = json.loads(Path(settings_file).read_text(encoding="utf-8"))
    hub_dir = Path(settings_file).parent
    c.JupyterHub.ip, c.JupyterHub.port = s["ip"], s["port"]
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", s["hub_port"]
    c.JupyterHub.db_url = f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(hub_dir / "jupyterhub_cookie_secret")
    c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server
    # the proxy is the command's: started before the hub, stopped after it (its token comes in the environment)
    c.ConfigurableHTTPProxy.should_start = False
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s['proxy_api_port']}"
    # The accounts' own passwords (PAM), and only the roster's and the instructor's accounts: never anyone
    # with a Unix account on the machine, never an open sign-up.
    c.JupyterHub.authenticator_class = "pam"
    c.PAMAuthenticator.open_sessions = False
    c.Authenticator.allowed_users = set(s["students"]) | {s["instructor"]}
    c.Authenticator.admin_users = set()
    c.Authenticator.allow_all = False
    c.JupyterHub.spawner_class = "localprocess"  # each server runs as its user's Unix account
    c.Spawner.cmd = [s["python"], "-m", "jupyterhub.singleuser"]
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = c.Spawner.http_timeout = s["start_timeout"]
    c.Spawner.environment = {"PATH": f"{Path(s['python']).parent}:/usr/local/bin:/usr/bin:/bin",
                             **s["user_environment"]}
    c.Spawner.pre_spawn_hook = partial(by_role, s)


def by_role(s: dict, spawner) -> None:
    """Give a server its role's configuration; the instructor's starts in the course directory."""
    role = INSTRUCTOR if spawner.user.name == s["instructor"] else STUDENT
    spawner.environment = {**spawner.environment, "JUPYTER_CONFIG_PATH": s["config"][role]}
    if role == INSTRUCTOR:
        spawner.notebook_dir = s["course"]
