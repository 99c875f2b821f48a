"""Execution limits per notebook: wall-clock and memory, on top of nbgrader's per-cell timeout.

``LimitedExecute`` replaces nbgrader's ``Execute`` step in autograding
(``nbgrader_config.py``). When a submission runs out of time or memory, the
cells that did run keep their results (and their points); every cell that did
not run gets an error output saying why, so its tests score zero and the
feedback tells the student what happened. The class run goes on.

What the kernel prints is capped too (``max_output_mb`` per notebook, a tenth of
it per cell): past the cap outputs are dropped as they arrive, with one note, so
the grader's own memory stays bounded whatever the kernel prints. Widget comm
messages are ignored (grading needs no widgets, and they can redirect outputs).

A test cell is sent to the kernel with its marks filled in (:mod:`jaxgrader.grading.sandbox.marks`: the
cell's nonce, the sources a stand-in rebuilds); the notebook keeps the cell as written.

The memory limit is enforced from outside the kernel: a watchdog thread sums
the resident memory of the kernel and its children and kills the kernel when
the sum passes the limit. Code inside the kernel cannot raise that limit.
"""

from __future__ import annotations

import collections
import copy
import threading
import time

import psutil
from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Enum, Float, Instance, Integer
from traitlets.utils.importstring import import_item

from .marks import filled_cell

TIME_LIMIT_ENAME = "NotebookTimeLimit"
OUTPUT_MESSAGES = {"stream", "display_data", "execute_result", "error", "update_display_data"}
MEMORY_LIMIT_ENAME = "NotebookMemoryLimit"


class RunLog:
    """What LimitedExecute saw while running one submission's notebooks, for the grading task's record:
    seconds spent executing, notebooks run again in a fresh kernel (with why), how kernels started.

    Handed over explicitly, in the configuration (``c.LimitedExecute.run_log``), by whoever
    runs nbgrader and reads it afterwards (:mod:`jaxgrader.grading.classrun.task`). Shared, not copied:
    traitlets deep-copies configuration values into each preprocessor.
    """

    def __init__(self):
        self.execute_seconds = 0.0
        self.reruns: list[str] = []
        self.kernels: collections.Counter = collections.Counter()  # "forked" / "fresh" (prepared kernels)

    def __deepcopy__(self, memo):
        return self


def _error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _size(content) -> int:
    """Rough size in bytes of a message's content (strings counted, structure not)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, dict):
        return sum(len(k) + _size(v) for k, v in content.items())
    if isinstance(content, (list, tuple)):
        return sum(_size(v) for v in content)
    return 8


class MemoryWatchdog(threading.Thread):
    """Kill process ``pid`` (and its children) once their summed RSS exceeds ``limit_bytes``."""

    def __init__(self, pid: int, limit_bytes: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.limit, self.interval = pid, limit_bytes, interval
        self.tripped_at = 0
        self._stop = threading.Event()

    def rss(self, proc: psutil.Process) -> int:
        total = 0
        for p in [proc, *proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def run(self) -> None:
        try:
            proc = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.wait(self.interval):
            try:
                used = self.rss(proc)
            except psutil.Error:
                return
            if used > self.limit:
                self.tripped_at = used
                for p in [*proc.children(recursive=True), proc]:
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                return

    def stop(self) -> None:
        self._stop.set()


class LimitedExecute(Execute):
    """nbgrader's Execute with a per-notebook wall-clock limit and a memory limit."""

    notebook_timeout = Integer(
        600, help="Seconds one notebook may run in total; cells after that are not run (score 0)."
    ).tag(config=True)
    memory_limit_mb = Float(
        4096, help="Resident memory (MiB) the kernel and its children may use; the kernel is killed past it."
    ).tag(config=True)

    max_output_mb = Float(
        8, help="Outputs (MiB) kept per notebook, a tenth of that per cell; later outputs are dropped with a note."
    ).tag(config=True)
    run_log = Instance(RunLog, allow_none=True, help="Where to note execution seconds, reruns and kernel "
                       "starts (set by the grading task; None: not noted).").tag(config=True)
    # Once the last cell has run, nothing the kernel does can change the grade: its outputs are in, and
    # the sandbox (or a prepared kernel's zygote) kills whatever it left running. A graceful shutdown
    # waited about 0.4 s per submission for the kernel to exit on its own.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate",
                           help="How a submission's kernel is stopped after its last cell (nbclient's setting; "
                                "'immediate' here: graded outputs are all in by then).").tag(config=True)

    def __init__(self, **kw):
        super().__init__(**kw)
        # nbgrader's Execute passes kernel_manager_class as a keyword, which beats the
        # config: apply the configured one (the sandbox) explicitly.
        for section in ("LimitedExecute", "Execute"):
            name = self.config.get(section, {}).get("kernel_manager_class")
            if name:
                self.kernel_manager_class = import_item(name) if isinstance(name, str) else name
                break

    def process_message(self, msg, cell, cell_index):
        if msg.get("msg_type") in OUTPUT_MESSAGES:
            size = _size(msg.get("content"))
            self._output_bytes += size
            self._cell_bytes[cell_index] = self._cell_bytes.get(cell_index, 0) + size
            limit = self.max_output_mb * 2**20
            if self._output_bytes > limit or self._cell_bytes[cell_index] > limit / 10:
                if cell_index not in self._truncated:
                    self._truncated.add(cell_index)
                    cell.outputs.append(NotebookNode(output_type="stream", name="stdout",
                                                     text="[output truncated by the grader]\n"))
                return None
        return super().process_message(msg, cell, cell_index)

    def handle_comm_msg(self, outs, msg, cell_index):
        return None

    _prepared = True  # whether this run's kernel may be forked (off for a rerun in a fresh kernel)
    _last_km = None

    def create_kernel_manager(self):
        """A submission's kernel may be forked from a prepared process (SandboxedKernelManager.preload)."""
        km = super().create_kernel_manager()
        if hasattr(km, "use_prepared"):
            km.use_prepared = self._prepared
        self._last_km = km
        return km

    def preprocess(self, nb, resources=None, km=None):
        """Run the notebook; again, in a fresh kernel, if its prepared kernel could not run it as a fresh
        one would (it changed an environment variable that imports done ahead of it had read)."""
        start = time.monotonic()
        log = self.run_log if self.run_log is not None else RunLog()
        try:
            fresh = copy.deepcopy(nb)
            self._prepared, self._last_km = True, None
            nb, resources = self._preprocess(nb, resources, km, log)
            changed = getattr(self._last_km, "env_changed", "")
            if not changed:
                return nb, resources
            path = (resources or {}).get("metadata", {}).get("name", "the notebook")
            log.reruns.append(f"{path} ran again in a freshly started kernel: it set {changed}, which modules "
                              "imported ahead of it had already read")
            self.log.info(log.reruns[-1])
            self._prepared = False
            return self._preprocess(fresh, resources, km, log)
        finally:
            log.execute_seconds += time.monotonic() - start

    def _preprocess(self, nb, resources, km, log: RunLog):
        self._nb = nb
        info = (resources or {}).get("nbgrader", {})
        self._notebook_id = f"{info.get('assignment', '')}/{info.get('notebook', '')}"
        self._output_bytes, self._cell_bytes, self._truncated = 0, {}, set()
        self._deadline = time.monotonic() + self.notebook_timeout
        self._cell_timeout = self.timeout
        self._stopped: str = ""
        self._watchdog: MemoryWatchdog | None = None
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if self._watchdog is not None:
                self._watchdog.stop()
            started_as = getattr(self._last_km, "started_as", "")
            if started_as:
                log.kernels[started_as] += 1

    def _start_watchdog(self) -> None:
        if self._watchdog is not None or self.memory_limit_mb <= 0:
            return
        pid = getattr(getattr(self.km, "provisioner", None), "pid", None)
        if pid is None:
            return
        self._watchdog = MemoryWatchdog(pid, int(self.memory_limit_mb * 2**20))
        self._watchdog.start()

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        self._start_watchdog()
        remaining = self._deadline - time.monotonic()
        if not self._stopped and remaining <= 0:
            self._stopped = (TIME_LIMIT_ENAME, f"not run: the notebook passed its {self.notebook_timeout} s limit")
        if self._stopped:
            cell.outputs = [_error_output(*self._stopped)]
            return cell, resources
        clipped = self._cell_timeout is None or remaining < self._cell_timeout
        self.timeout = max(1, int(min(self._cell_timeout or remaining, remaining)))
        # The cell's wall time on the grader's clock, for parts that check a kernel's claimed
        # durations against it (verdict: within_cell_time): code can make a cell slower, never faster.
        seconds = resources.setdefault("jaxgrader", {}).setdefault("cell_seconds", {})
        seconds.pop(index, None)
        written = cell.source
        sent = filled_cell(cell, self._nb, config=self.config, notebook=self._notebook_id)
        started = time.monotonic()
        try:
            if sent is not None:
                cell.source = sent
            cell, resources = super().preprocess_cell(cell, resources, index)
            seconds[index] = time.monotonic() - started
            timed_out = any(o.get("ename") == "CellTimeoutError" for o in cell.get("outputs", []))
            if clipped and timed_out:  # cut short by the notebook's limit, not the cell's own
                self._stopped = (TIME_LIMIT_ENAME,
                                 f"not run: the notebook passed its {self.notebook_timeout} s limit")
                cell.outputs.append(_error_output(TIME_LIMIT_ENAME, "this cell was stopped at the notebook's limit"))
            return cell, resources
        except DeadKernelError:
            if self._watchdog is not None and self._watchdog.tripped_at:
                used = self._watchdog.tripped_at / 2**20
                self._stopped = (MEMORY_LIMIT_ENAME,
                                 f"not run: the kernel used {used:.0f} MiB, over the {self.memory_limit_mb:.0f} MiB limit")
            else:
                self._stopped = ("DeadKernelError", "not run: the kernel died")
            cell.outputs = [_error_output(*self._stopped)]
            return cell, resources
        finally:
            self.timeout = self._cell_timeout
            cell.source = written
