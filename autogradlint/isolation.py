"""Run each file's parse and analysis where a crash costs that file only.

libcst's native parser can segfault, recurse for minutes or allocate gigabytes on hostile input
(complexity.py refuses the shapes known to do so; this catches the rest). Jobs run in forked
worker processes, one at a time each; the parent knows which job every worker holds. A worker
that dies, passes the per-job time budget, or hits its memory limit (RLIMIT_AS) is replaced, and
its job becomes a `Failure` the caller turns into a per-file error: the run, and the language
server, go on. Workers are forked after the engine is loaded, so none imports libcst again.

No helper process imports what the working directory holds: a project's `types.py` or
`json.py` would otherwise run in place of the standard module (`python -c` puts the working
directory first on `sys.path`, and the language server is started in the project). Forks drop
it from their path; the language server's worker (and off Linux every worker) is a fresh
interpreter started with a safe path (`-P`, or `-I` before Python 3.11) in the root directory
(`safe_path`, `start_worker`).
"""

from __future__ import annotations

import faulthandler
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe, wait
from typing import Any

from .runtime.collector import for_a_command

DEFAULT_TIME_BUDGET = float(os.environ.get("AUTOGRADLINT_FILE_TIMEOUT", "60"))
DEFAULT_MEMORY_BUDGET = int(os.environ.get("AUTOGRADLINT_FILE_MEMORY_MB", "4096")) << 20
QUEUED_PER_WORKER = 2  # the running job and the next...
# ...when that next one is small: the parent's send of a job the pipe cannot hold would wait for
# the worker to read it, while the worker may be waiting for the parent to read its result.
SMALL_JOB = 32 << 10


@dataclass(frozen=True)
class Failure:
    """A job whose worker did not come back with a result."""

    reason: str  # "crashed (signal 11)", "took longer than 60 s", ...


def safe_path(path: Sequence[str], cwd: str) -> list[str]:
    """`path` without the entries that name the working directory (`''`, `.`, the directory
    itself), the others made absolute: what the process imports never comes from the project
    it was started in, and means the same from any directory."""
    here = os.path.realpath(cwd)
    out: list[str] = []
    for entry in path:
        absolute = os.path.join(cwd, entry) if entry else cwd
        if os.path.realpath(absolute) != here:
            out.append(os.path.normpath(absolute) if not os.path.isabs(entry) else entry)
    return out


def clean_path() -> None:
    """Drop the working directory from this process's path (a fork inherits it from a parent
    run as `python -m autogradlint`; the fork keeps the directory, to read the paths given
    relative to it)."""
    sys.path[:] = safe_path(sys.path, _working_directory())


def _working_directory() -> str:
    try:
        return os.getcwd()
    except OSError:  # removed since: nothing can be imported from it
        return NEUTRAL_DIRECTORY


def _worker(conn: Connection, fn: Callable[[Any], Any], memory_budget: int) -> None:
    """Loop: receive a job, send back its result, until the parent hangs up."""
    clean_path()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    faulthandler.disable()  # a crash is reported by the parent, not as a dump of this stack
    _limit_memory(memory_budget)
    # libcst allocates ~100,000 nodes per file and frees them at once: collecting every 700
    # allocations only costs time (5-7% of a parse). Workers are short-lived.
    for_a_command()
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result: Any = ("ok", fn(job))
        except MemoryError:
            result = ("failed", f"needed more than the memory budget ({memory_budget >> 20} MB)")
        except RecursionError:
            result = ("failed", "too deeply nested to analyse")
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not stop the run
            result = ("failed", f"internal error (please report): {type(exc).__name__}: {exc}")
        try:
            conn.send(result)
        except (OSError, ValueError):
            return


def _limit_memory(budget: int) -> None:
    """RLIMIT_AS at what is mapped now plus `budget` (the engine is already loaded)."""
    try:
        import resource

        with open("/proc/self/statm") as handle:
            mapped = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = mapped + budget
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass  # not Linux: no memory budget, the time budget still applies


class Started:
    """A worker started as a fresh interpreter, seen as multiprocessing sees a process."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.popen = process

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        self.popen.kill()

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    @property
    def exitcode(self) -> int | None:
        return self.popen.returncode


# `-P` keeps `python -c` from putting the working directory first on the path (3.11+); before
# 3.11 `-I` does it, and ignores PYTHONPATH and the user's site-packages too: the worker is
# handed this process's path (less the working directory) before it imports anything of ours.
SAFE_FLAGS = ("-P",) if sys.version_info >= (3, 11) else ("-I",)
NEUTRAL_DIRECTORY = os.path.abspath(os.sep)  # nothing a project puts there


def start_worker(fn: Callable[[Any], Any], memory_budget: int, preload: Sequence[str]) -> Worker:
    """A worker in a fresh interpreter, with a safe path, in a neutral working directory: it
    imports `preload`, then serves `fn`. Its stdout is not the caller's (the language server's
    stdout is its protocol)."""
    path = safe_path(sys.path, _working_directory())
    # `python -m autogradlint` from a checkout: the package came from the working directory.
    # Last, so that nothing there shadows a standard or installed module.
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if package not in path:
        path.append(package)
    parent, child = Pipe()
    boot = (
        f"import sys; sys.path[:] = {path!r}\n"
        f"from autogradlint.isolation import serve; serve({child.fileno()})"
    )
    try:
        process = subprocess.Popen(
            [sys.executable, *SAFE_FLAGS, "-c", boot],
            cwd=NEUTRAL_DIRECTORY,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(child.fileno(),),
        )
    finally:
        child.close()
    worker = Worker(Started(process), parent)
    try:
        parent.send((fn, memory_budget, tuple(preload)))
    except (OSError, ValueError):
        pass  # it died at once: the first job reports how
    return worker


def serve(fd: int) -> None:
    """A started worker's life: the function to serve and what to import first, then jobs."""
    conn = Connection(fd)
    try:
        fn, memory_budget, preload = conn.recv()
    except (EOFError, OSError):
        return
    for module in preload:
        __import__(module)
    _worker(conn, fn, memory_budget)


class Worker:
    """One worker process and the job it holds."""

    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process  # a multiprocessing.Process, or a Started one
        self.conn = conn
        # Jobs sent and not answered yet, oldest first: the first is the one running (a
        # worker answers in order), the others wait in its pipe, so it never idles for a
        # round trip to the parent between two jobs.
        self.queue: deque[int] = deque()
        self.started = 0.0  # when the running job started (as near as the parent can tell)

    @classmethod
    def fork(cls, fn: Callable[[Any], Any], memory_budget: int) -> Worker:
        """A worker forked from this process, which holds the engine already (Linux). macOS
        forks badly: a started one there; multiprocessing's spawn where nothing else works
        (Windows: its child starts with the working directory on its path)."""
        if sys.platform != "linux":  # pragma: no cover - not Linux
            if os.name == "posix":
                return start_worker(fn, memory_budget, ())
            context = multiprocessing.get_context("spawn")
        else:
            context = multiprocessing.get_context("fork")
        parent, child = context.Pipe()
        process = context.Process(target=_worker, args=(child, fn, memory_budget), daemon=True)
        process.start()
        child.close()
        return cls(process, parent)

    @property
    def job(self) -> int | None:
        return self.queue[0] if self.queue else None

    def give(self, index: int, job: Any) -> None:
        if not self.queue:
            self.started = time.monotonic()
        self.queue.append(index)
        self.conn.send(job)

    def answered(self) -> int:
        """The running job is done; the next one (if any) starts now."""
        index = self.queue.popleft()
        self.started = time.monotonic()
        return index

    def stop(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)

    def death(self) -> str:
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the parser crashed ({name})"
        return f"the analysis process exited unexpectedly (status {code})"


def run_isolated(
    fn: Callable[[Any], Any],
    jobs: list[Any],
    *,
    workers: int = 1,
    time_budget: float = DEFAULT_TIME_BUDGET,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    order: Iterable[int] | None = None,
    tick: Callable[[], None] | None = None,
    size: Callable[[Any], int] | None = None,
) -> list[Any]:
    """`fn(job)` for every job, each in a worker process; a `Failure` where none came back.

    `fn` must be importable by the workers (they are forked, so any module-level function is).
    Results come back in job order; `order` is the order to start them in (largest first).
    `size` tells how big a job is: small ones are queued behind the running one."""
    if not jobs:
        return []
    results: list[Any] = [None] * len(jobs)
    pending = deque(order if order is not None else range(len(jobs)))
    gc.freeze()  # what is loaded so far is never garbage: keep it out of every collection
    pool: list[Worker] = []

    def lost(worker: Worker, reason: str) -> None:
        """The running job failed with its worker; the ones queued behind it go back."""
        results[worker.answered()] = Failure(reason)
        pending.extendleft(reversed(worker.queue))
        _replace(pool, worker)
        if tick is not None:
            tick()

    try:
        while pending or any(w.queue for w in pool):
            while len(pool) < min(workers, len(pending)):
                pool.append(Worker.fork(fn, memory_budget))
            for worker in list(pool):
                while pending and (
                    not worker.queue
                    or (
                        len(worker.queue) < QUEUED_PER_WORKER
                        and size is not None
                        and size(jobs[pending[0]]) <= SMALL_JOB
                    )
                ):
                    index = pending.popleft()
                    try:
                        worker.give(index, jobs[index])
                    except (OSError, ValueError):
                        pending.appendleft(index)
                        lost(worker, worker.death()) if worker.queue else _replace(pool, worker)
                        break
            busy = [w for w in pool if w.queue]
            if not busy:
                continue
            deadline = min(w.started for w in busy) + time_budget
            ready = wait([w.conn for w in busy], timeout=max(0.0, deadline - time.monotonic()))
            for worker in busy:
                if worker.conn in ready:
                    try:
                        status, value = worker.conn.recv()
                    except (EOFError, OSError):
                        lost(worker, worker.death())
                        continue
                    results[worker.answered()] = value if status == "ok" else Failure(value)
                    if tick is not None:
                        tick()
                elif time.monotonic() - worker.started >= time_budget:
                    lost(worker, f"took longer than {time_budget:g} s to analyse")
    finally:
        for worker in pool:
            worker.stop()
        gc.unfreeze()
    return results


def _replace(pool: list[Worker], worker: Worker) -> None:
    """Drop a dead or overdue worker; a fresh one is forked when a job needs it."""
    worker.stop()
    pool.remove(worker)


class Persistent:
    """One long-lived worker for a long-lived process (the language server): jobs one at a
    time (callers on several threads queue on a lock), a fresh worker after a crash or an
    overrun. Each worker is a fresh interpreter that imports `preload` (`start_worker`):
    forking the server itself, which runs threads, could deadlock a child, and a
    multiprocessing fork server starts with the working directory on its path."""

    def __init__(
        self,
        fn: Callable[[Any], Any],
        *,
        time_budget: float = DEFAULT_TIME_BUDGET,
        memory_budget: int = DEFAULT_MEMORY_BUDGET,
        preload: tuple[str, ...] = (),
    ) -> None:
        self.fn = fn
        self.time_budget = time_budget
        self.memory_budget = memory_budget
        self.preload = preload
        self.worker: Worker | None = None
        self.lock = threading.Lock()

    def run(self, job: Any) -> Any:
        """`fn(job)` in the worker, or a Failure."""
        with self.lock:
            if self.worker is None or not self.worker.process.is_alive():
                self.worker = start_worker(self.fn, self.memory_budget, self.preload)
            worker = self.worker
            try:
                worker.give(0, job)
            except (OSError, ValueError):
                return self._lost(worker, worker.death())
            if not worker.conn.poll(self.time_budget):
                return self._lost(worker, f"took longer than {self.time_budget:g} s to analyse")
            try:
                status, value = worker.conn.recv()
            except (EOFError, OSError):
                return self._lost(worker, worker.death())
            worker.answered()
            return value if status == "ok" else Failure(value)

    def _lost(self, worker: Worker, reason: str) -> Failure:
        worker.stop()
        self.worker = None
        return Failure(reason)

    def close(self) -> None:
        with self.lock:
            if self.worker is not None:
                self.worker.stop()
                self.worker = None
