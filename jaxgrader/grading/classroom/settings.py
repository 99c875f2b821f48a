"""``c.Classroom.*``: the classroom's settings, declared, so that a misspelt one is an error.

Read from the course's ``nbgrader_config.py`` (nbgrader's own apps ignore the section); the
command's flags override them for one start.
"""

from __future__ import annotations

from pathlib import Path

from traitlets import Dict, Integer, Unicode
from traitlets.config import Config, Configurable

from ..course.settings import check_section


class Classroom(Configurable):
    """Settings of ``jaxgrader classroom`` (docs/classroom.md), in ``nbgrader_config.py``."""

    instructor = Unicode("", help="The instructor's Unix account: it owns the course directory (mode 0700), "
                         "gets formgrader in its JupyterLab and collects, grades and returns feedback. '': the "
                         "course directory's owner (unless that is root). `--instructor NAME`.").tag(config=True)
    roster = Unicode("", help="The class list: a CSV file as `nbgrader db student import` reads it (a header "
                     "row; `id` required, `first_name`, `last_name`, `email`, `lms_user_id` optional). Each id "
                     "becomes a Unix account and a student of the gradebook. A relative path is taken from the "
                     "course directory. `--roster FILE`.").tag(config=True)
    exchange_root = Unicode("/srv/nbgrader/exchange", help="nbgrader's exchange (its `c.Exchange.root`): a folder "
                            "every account may enter; the course's folder inside it belongs to the instructor. "
                            "`--exchange DIR`.").tag(config=True)
    state_dir = Unicode("", help="Where the hub keeps its database, cookie secret, logs and the JupyterLab "
                        "settings it gives each role. '': /srv/jaxgrader/<course id>. `--state DIR`.").tag(config=True)
    ip = Unicode("127.0.0.1", help="Address the proxy listens on. Keep it on loopback behind an HTTPS reverse "
                 "proxy (docs/classroom.md); '0.0.0.0' serves plain HTTP to the network. `--ip`.").tag(config=True)
    port = Integer(8000, help="Port the proxy listens on (the students' URL). `--port`.").tag(config=True)
    python = Unicode("", help="The Python interpreter of every user's JupyterLab server and kernels: an "
                     "environment with requirements.txt installed, readable by every account and outside the "
                     "course directory. '': the one running the command.").tag(config=True)
    home_base = Unicode("/home", help="Where new accounts' home directories are made (useradd --base-dir); "
                        "each is made mode 0700.").tag(config=True)
    npm_prefix = Unicode("", help="Folder configurable-http-proxy is installed into with npm when it is not on "
                         "PATH. '': npm/ in the state folder (root's: the proxy runs as root, so nobody else may write "
                         "it).").tag(config=True)
    proxy_version = Unicode("5.3.0", help="The configurable-http-proxy release installed into npm_prefix.").tag(config=True)
    start_timeout = Integer(120, help="Seconds a user's JupyterLab may take to start (JupyterHub's "
                            "Spawner.start_timeout and http_timeout).").tag(config=True)
    hub_config = Unicode("", help="A JupyterHub configuration file of your own, read after the classroom's: "
                         "a university's OAuth in place of PAM (docs/classroom.md, 'Log in with the university's "
                         "accounts'), a spawner with CPU and memory limits, ... The hub runs it as root: it must be root's alone "
                         "(not in the course directory). ''; none.").tag(config=True)
    user_environment = Dict(help="Extra environment variables of every user's server and kernels, e.g. "
                            "{'JAX_PLATFORMS': 'cpu'} on a machine whose GPU students must not share.").tag(config=True)


def classroom_settings(config: Config, config_file: Path) -> Classroom:
    """The ``c.Classroom`` settings of ``config``, typed; ValueError (one line) for a name that is not one."""
    check_section(config, config_file, Classroom)
    return Classroom(config=config)
