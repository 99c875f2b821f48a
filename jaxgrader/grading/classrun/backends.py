"""Where grading tasks run: a local process pool (default) or a Dask cluster.

Both take the tasks of a run (:func:`jaxgrader.grading.classrun.task.grade_submission`)
and yield one record per task as tasks complete, in completion order, to the
coordinator, which writes them to the gradebook. Neither writes anything.

Failures, the same rule on both: a task whose worker process dies (killed, out of
memory, crashed) is retried on another worker at most twice (``MAX_ATTEMPTS``
runs in all), then yields an error record naming the reason. Other tasks are not
charged for it: each local worker is a pool of its own, and the Dask backend keeps
no more tasks in flight than the cluster has threads, so a worker that dies was
running only its own task.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Iterator

from .records import Record, Shared, Task, one_line
from .task import GRACE_S, grade_submission, warm_up

MAX_ATTEMPTS = 3  # one run and at most two retries


def core_shares(workers: int, cpus: list[int]) -> list[tuple[int, ...]]:
    """The CPUs each of ``workers`` local grading processes keeps its kernels on.

    Why: XLA sizes its CPU thread pools (compilation, Eigen's intra-op threads) to
    the CPUs a process may use. Unpinned, N kernels side by side each start pools as
    wide as the machine and fight over every core (threads spinning and switching
    instead of working); pinned, each kernel's pools are as wide as its share. A
    kernel's results do not depend on it, and the hidden tests' timing checks compare
    measurements taken in the same kernel. One worker, or one CPU: no pinning (``()``).
    """
    cpus = sorted(cpus)
    if workers <= 1 or len(cpus) <= 1:
        return [()] * max(1, workers)
    if workers >= len(cpus):  # as many or more workers than CPUs: one CPU each, round robin
        return [(cpus[i % len(cpus)],) for i in range(workers)]
    bounds = [round(i * len(cpus) / workers) for i in range(workers + 1)]
    return [tuple(cpus[bounds[i]:bounds[i + 1]]) for i in range(workers)]


def _pin(cpus: tuple[int, ...]) -> None:
    """Worker initializer: keep this process, and the kernels it starts, on ``cpus``."""
    if cpus:
        os.sched_setaffinity(0, cpus)


class LocalBackend:
    """``workers`` processes on this machine (spawned, so imports are paid once per process),
    each with its share of the CPUs (:func:`core_shares`) unless ``pin`` is off."""

    def __init__(self, workers: int, pin: bool = True):
        self.workers = max(1, int(workers))
        self.pin = pin
        self._context = multiprocessing.get_context("spawn")  # not fork: the parent may run JAX's threads
        self._slots: list[_Slot] = []

    def describe(self) -> str:
        return f"{self.workers} local worker{'s' if self.workers != 1 else ''}"

    def status(self) -> str:
        return ""

    def shares(self) -> list[tuple[int, ...]]:
        """The CPUs of each worker (empty tuples: unpinned); a reference run timed for comparison with
        a submission's kernel runs on one of them (``references.references_side_by_side``)."""
        return [slot.cpus for slot in self._slots]

    def start(self, tasks: int | None = None) -> None:
        """Start the worker processes now (they import nbgrader while the coordinator prepares).

        No more processes than ``tasks`` when given: a rerun with one changed submission starts one.
        """
        if tasks is not None:
            self.workers = max(1, min(self.workers, tasks))
        if not self._slots:
            can_pin = self.pin and hasattr(os, "sched_getaffinity")  # Linux; elsewhere (macOS) every CPU
            cpus = sorted(os.sched_getaffinity(0)) if can_pin else []
            self._slots = [_Slot(self._context, share) for share in core_shares(self.workers, cpus)]
        for slot in self._slots:
            slot.ensure()

    def run(self, tasks: list[Task], shared: dict[str, Shared]) -> Iterator[Record]:
        if not tasks:
            return
        self.start(len(tasks))
        queue = collections.deque(tasks)
        attempts: collections.Counter = collections.Counter()
        running: dict = {}  # future -> slot
        try:
            while queue or running:
                for slot in self._slots:
                    if slot.task is None and queue:
                        task = queue.popleft()
                        running[slot.submit(task, shared[task.shared])] = slot
                done, _ = wait(list(running), timeout=2.0, return_when=FIRST_COMPLETED)
                for future in done:
                    slot = running.pop(future)
                    task, slot.task = slot.task, None
                    try:
                        record = future.result()
                    except Exception as exc:  # the worker process died: BrokenProcessPool, or it was killed
                        reason = slot.death_reason or _died(exc)
                        slot.restart()
                        key = (task.student, task.assignment)
                        attempts[key] += 1
                        if attempts[key] >= MAX_ATTEMPTS:
                            yield Record.failed(task, f"its grading process died {attempts[key]} times ({reason}); "
                                                     "not retried again")
                        else:
                            queue.appendleft(task)
                        continue
                    tries = attempts[(task.student, task.assignment)]
                    if tries:
                        record.notes.append(f"graded on attempt {tries + 1} (an earlier grading process died)")
                    yield record
                for future, slot in running.items():
                    slot.kill_if_overdue()
        finally:
            if running:  # interrupted: stop what is running, kernels included (they die with their worker)
                for slot in self._slots:
                    slot.kill()

    def close(self) -> None:
        for slot in self._slots:
            slot.close()
        self._slots = []


class _Slot:
    """One worker process in a pool of its own, so that its death fails only its own task."""

    def __init__(self, context, cpus: tuple[int, ...] = ()):
        self.context, self.cpus = context, cpus
        self.pool: ProcessPoolExecutor | None = None
        self.warm = None
        self.task: Task | None = None
        self.limit_s = 3600.0
        self.started = 0.0
        self.death_reason = ""

    def ensure(self) -> None:
        if self.pool is None:
            self.pool = ProcessPoolExecutor(max_workers=1, mp_context=self.context, initializer=_pin,
                                            initargs=(self.cpus,))
            self.warm = self.pool.submit(warm_up)

    def submit(self, task: Task, shared: Shared):
        self.ensure()
        self.task, self.started, self.death_reason = task, time.monotonic(), ""
        self.limit_s = float(shared.limit_s or 3600)
        return self.pool.submit(grade_submission, task, shared)

    def pid(self) -> int | None:
        if self.warm is not None and self.warm.done() and not self.warm.exception():
            return self.warm.result()
        return None

    def kill_if_overdue(self) -> None:
        """Backstop for a process too stuck for its own watchdog (see task._Watchdog)."""
        if self.task is None:
            return
        limit = self.limit_s + GRACE_S + 120
        if time.monotonic() - self.started > limit:
            self.death_reason = f"no answer in {limit:.0f} s; killed"
            self.kill()

    def kill(self) -> None:
        pid = self.pid()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def restart(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = self.warm = None
        self.ensure()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        self.pool = self.warm = None


def _died(exc: BaseException) -> str:
    if isinstance(exc, BrokenProcessPool):
        return "killed by a signal or out of memory"
    return one_line(f"{exc.__class__.__name__}: {exc}", 200)


# --------------------------------------------------------------------------- Dask


def _identity(value):
    return value


def _limit_failures(limit: int, dask_scheduler=None) -> int:
    """On the scheduler: retry a task whose worker died at most ``limit`` times; returns the old setting."""
    before = dask_scheduler.allowed_failures
    if before > limit:
        dask_scheduler.allowed_failures = limit
    return before


def _probe() -> str:
    """On a worker: the jaxgrader version it imports (and nbgrader imported once)."""
    from jaxgrader import __version__

    warm_up()
    return __version__


class DaskBackend:
    """Tasks on a running Dask distributed cluster (``dask scheduler`` + ``dask worker ADDRESS``).

    The coordinator keeps at most as many tasks in flight as the cluster has
    threads, so workers that join later (a SLURM job starting, a pod scheduled)
    get work as they come, and a worker that dies was running only its own task.
    The scheduler's ``allowed-failures`` is lowered to 2 for this rule (the
    coordinator sets it; start the scheduler with
    ``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=2`` to say so yourself).
    """

    def __init__(self, address: str, connect_timeout: float = 30):
        from distributed import Client

        self.address = address
        try:
            self.client = Client(address, timeout=connect_timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConnectionError(f"cannot reach the Dask scheduler at {address}: {one_line(str(exc), 200)}") from None
        try:
            self.previous_allowed_failures = self.client.run_on_scheduler(_limit_failures, MAX_ATTEMPTS - 1)
        except Exception:  # a scheduler that refuses to run code: its own allowed-failures applies
            self.previous_allowed_failures = None
        self._threads_at = 0.0
        self._threads = 0

    def describe(self) -> str:
        return f"Dask at {self.address}"

    def threads(self) -> int:
        now = time.monotonic()
        if now - self._threads_at > 2:
            self._threads = sum(self.client.nthreads().values())
            self._threads_at = now
        return self._threads

    def status(self) -> str:
        n = len(self.client.nthreads())
        return f"{n} worker{'s' if n != 1 else ''}" if n else "waiting for workers"

    def start(self, tasks: int | None = None) -> list[str]:
        """Check that every worker imports the course's package; return problems (one line each)."""
        from jaxgrader import __version__

        problems = []
        for worker, got in self.client.run(_probe, on_error="return").items():
            if isinstance(got, BaseException):
                why = one_line(f"{got.__class__.__name__}: {got}", 200)
                problems.append(f"Dask worker {worker} cannot grade: {why} (start workers in the course's environment)")
            elif got != __version__:
                problems.append(f"Dask worker {worker} runs jaxgrader {got}, the coordinator {__version__}")
        return problems

    def run(self, tasks: list[Task], shared: dict[str, Shared]) -> Iterator[Record]:
        import uuid

        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        if not tasks:
            return
        token = uuid.uuid4().hex[:8]
        # What every task of an assignment shares goes to the cluster once, as a task of its own
        # (not scattered: a computed value is recomputed if the worker holding it dies).
        shared_futures = {key: self.client.submit(_identity, value, key=f"jaxgrader-shared-{key}-{token}", pure=False)
                          for key, value in shared.items()}
        queue = collections.deque(tasks)
        in_flight: dict = {}  # key -> task
        futures = []
        done = as_completed(loop=self.client.loop)
        try:
            while queue or in_flight:
                while queue and len(in_flight) < max(1, self.threads()):
                    task = queue.popleft()
                    key = f"jaxgrader-grade-{task.assignment}-{task.student}-{token}"
                    future = self.client.submit(grade_submission, task, shared_futures[task.shared],
                                                key=key, retries=MAX_ATTEMPTS - 1, pure=False)
                    in_flight[key] = task
                    futures.append(future)
                    done.add(future)
                future = next(done)
                task = in_flight.pop(future.key)
                try:
                    record = future.result()
                except KilledWorker as exc:
                    record = Record.failed(task, f"its Dask worker died {exc.allowed_failures + 1} times while grading "
                                                f"it (last: {getattr(exc.last_worker, 'address', '?')}); "
                                                "not retried again")
                except Exception as exc:
                    record = Record.failed(task, f"on Dask: {exc.__class__.__name__}: {exc}")
                yield record
        finally:
            self.client.cancel([f for f in futures if not f.done()] + list(shared_futures.values()))

    def close(self) -> None:
        self.client.close()


def make_backend(workers: int | None = None, dask: str | None = None, pin: bool = True):
    if dask:
        return DaskBackend(dask)
    return LocalBackend(workers or os.cpu_count() or 1, pin=pin)
