"""The two processes of a classroom: configurable-http-proxy (Node.js) and JupyterHub, both the command's.

The proxy starts first, on the students' port, with a token only it and the hub know; the hub then
starts on a loopback port of its own and tells the proxy where each user's server is. They stop in the
other order: the hub stops every user's server on its way out. The proxy comes from PATH (as
JupyterHub's docs install it, ``npm install -g``) or else is installed once, pinned, into a folder of
the course's (``c.Classroom.npm_prefix``) with the machine's npm.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..course.config import CourseError, one_line

PROXY = "configurable-http-proxy"


def free_port(ip: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((ip, 0))
        return sock.getsockname()[1]


def proxy_command(npm_prefix: Path, version: str) -> tuple[str, str]:
    """(path, version) of configurable-http-proxy: on PATH, or in ``npm_prefix`` (installed there if missing)."""
    local = npm_prefix / "node_modules" / ".bin" / PROXY
    found = shutil.which(PROXY) or (str(local) if local.exists() else None)
    if found is None:
        if not shutil.which("npm"):
            raise CourseError(f"{PROXY} is not installed and there is no npm to install it with: install Node.js "
                              "and npm (Debian: apt-get install nodejs npm), or put it on PATH")
        npm_prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["npm", "install", "--prefix", str(npm_prefix), "--no-audit", "--no-fund",
                               "--loglevel=error", f"{PROXY}@{version}"], capture_output=True, text=True, timeout=600)
        if done.returncode or not local.exists():
            raise CourseError(f"npm could not install {PROXY}@{version} into {npm_prefix}: "
                              f"{one_line(done.stderr or done.stdout, 300)}")
        found = str(local)
    got = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60)
    return found, got.stdout.strip() or "unknown version"


class Classroom:
    """The proxy and the hub as running processes: ``url``, ``stop()``, ``log_tail()``."""

    def __init__(self, proxy: str, python: str, hub_dir: Path, ip: str, port: int, hub_port: int, proxy_api_port: int,
                 timeout: float = 120):
        self.hub_dir, self.url = hub_dir, f"http://{ip if ip != '0.0.0.0' else '127.0.0.1'}:{port}"
        self.procs: list[subprocess.Popen] = []
        self.logs = {"proxy": hub_dir / "proxy.log", "hub": hub_dir / "jupyterhub.log"}
        env = {**os.environ, "CONFIGPROXY_AUTH_TOKEN": secrets.token_hex(32), "PYTHONUNBUFFERED": "1"}
        env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        try:
            self._start("proxy", [proxy, "--ip", ip, "--port", str(port), "--api-ip", "127.0.0.1",
                                  "--api-port", str(proxy_api_port),
                                  "--error-target", f"http://127.0.0.1:{hub_port}/hub/error"], env)
            self._wait(f"http://127.0.0.1:{proxy_api_port}/api/routes", "proxy", timeout,
                       headers={"Authorization": f"token {env['CONFIGPROXY_AUTH_TOKEN']}"})
            self._start("hub", [sys.executable, "-m", "jupyterhub", "-f", str(hub_dir / "jupyterhub_config.py")], env)
            self._wait(f"{self.url}/hub/api/", "hub", timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, argv: list[str], env: dict) -> None:
        with open(self.logs[name], "ab") as log:
            self.procs.append(subprocess.Popen(argv, cwd=self.hub_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True))

    def _wait(self, url: str, name: str, timeout: float, headers: dict | None = None) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[-1].poll() is not None:
                raise CourseError(f"the {name} exited with {self.procs[-1].returncode}: {self.log_tail(name)}")
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.3)
        raise CourseError(f"the {name} did not answer on {url} in {timeout:.0f} s: {self.log_tail(name)}")

    def log_tail(self, name: str = "hub", chars: int = 400) -> str:
        try:
            return one_line(self.logs[name].read_text(errors="replace")[-chars:], chars)
        except OSError:
            return "(no log)"

    def running(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self, timeout: float = 30) -> None:
        """The hub first (it stops the users' servers), then the proxy; a process that does not stop is killed."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.procs.clear()
