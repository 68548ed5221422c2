"""The confirmer's supervisor process: starts the child with its limits in a session of its own,
and at the end kills everything the child started, also what left that session.

It runs none of the project's code. On Linux it is a child subreaper (PR_SET_CHILD_SUBREAPER):
a process that double-forks and calls setsid() to escape the child's session is reparented to
this process, not to init, so it can still be found (by parent pid, in /proc) and killed.
Arguments of main (sandbox.python starts it): CONFIG_JSON -- COMMAND...; CONFIG_JSON holds the
limits, the channel's descriptor, and the budget after which it stops on its own. It writes
`@@STATUS <exit status>` (or `@@STATUS stopped`) on the channel when all is dead.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS_SECONDS = 10.0  # a bound on the cleanup, for processes the kernel cannot end


def become_subreaper() -> bool:
    """Orphans of our descendants become our children (Linux 3.4+); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def user_processes(uid: int) -> int | None:
    """How many tasks (threads included: RLIMIT_NPROC counts them) the user runs now."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    total = 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue  # gone meanwhile
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1"))
    return total


def apply_limits(limits: dict[str, Any]) -> None:
    """In the child, before it executes anything: memory, file size and process count."""
    import resource

    memory = resource.RLIMIT_DATA if limits["memory_kind"] == "data" else resource.RLIMIT_AS
    wanted = [(memory, limits["memory_mb"] << 20), (resource.RLIMIT_FSIZE, limits["file_mb"] << 20)]
    # RLIMIT_NPROC counts every process of the user, not only ours: the user's count now plus
    # a margin bounds a fork bomb without starving the user's other work.
    running = user_processes(os.getuid())
    if running is not None:
        wanted.append((resource.RLIMIT_NPROC, running + limits["processes"]))
    for which, value in wanted:
        with contextlib.suppress(ValueError, OSError):
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, hard))


def children() -> list[int]:
    """Our own children, zombies included (an orphan reparented to us is one of them)."""
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def reap() -> dict[int, int]:
    """Collect every child that has ended: pid -> wait status."""
    ended: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended[pid] = status


def kill_all(session: int) -> None:
    """The child's session, then every process left under us, until none is left: each one
    killed hands its own children to us, so each round finds the next generation."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)
    end = time.monotonic() + KILL_ROUNDS_SECONDS
    while time.monotonic() < end:
        left = children()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        reap()
        if not left:
            return
        time.sleep(0.01)


def supervise(config: dict[str, Any], command: list[str]) -> None:
    channel: int = config["channel"]
    stop: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: stop.append(number))
    become_subreaper()
    parent = os.getppid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    pid = os.fork()
    if pid == 0:  # the child: its own session, its limits, then the command
        try:
            os.setsid()
            os.dup2(devnull, 0)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            apply_limits(config["limits"])
            os.execv(command[0], command)
        finally:
            os._exit(127)
    os.close(devnull)
    deadline = time.monotonic() + float(config["budget"])
    status: int | None = None
    while status is None:
        ended = reap()
        if pid in ended:
            status = ended[pid]
            break
        if stop or os.getppid() != parent or time.monotonic() > deadline:
            break  # the parent asked, died, or forgot us
        time.sleep(0.02)
    kill_all(pid)
    result = "stopped" if status is None else str(os.waitstatus_to_exitcode(status))
    with contextlib.suppress(OSError):
        os.write(channel, f"@@STATUS {result}\n".encode())


def main(argv: list[str]) -> None:
    config = json.loads(argv[0])
    separator = argv.index("--")
    supervise(config, argv[separator + 1 :])


if __name__ == "__main__":
    main(sys.argv[1:])
