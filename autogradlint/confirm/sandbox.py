"""How the confirmer runs the project's code: the only place autogradlint executes it.

What each run gets (the parent, here; the supervisor, reaper.py; the child, child.py):
- Module names are data: they reach the child as arguments, never as code (a file named
  `os;open('x','w').py` is a name that cannot be imported, not a command).
- A supervisor that runs none of the project's code starts the child in a session of its own,
  with limits: address space (RLIMIT_AS; with CUDA, whose reservations dwarf its use, the data
  segment), file size (RLIMIT_FSIZE) and process count (RLIMIT_NPROC: the user's count plus a
  margin, since the kernel counts all of the user's processes; root is exempt). At the end it
  kills the session and, as a Linux child subreaper, every process that left it.
- The working directory is a fresh private temporary directory, removed afterwards. The tool's
  own imports see no project file: no working directory on sys.path (`-P`, and the child drops
  it on 3.10), the project's root is added only to import the target.
- The timeout covers the target's import: the child announces each phase's budget on its
  channel (`@@LIMIT seconds`), and the parent stops the run when a phase outlives it. Only the
  interpreter's start and torch's import, which run nothing of the project, have their own
  allowance.
- Output is streamed: of stdout and stderr the head and the tail are kept, the rest drained;
  the protocol travels on a pipe of its own, so nothing the code prints is read as a verdict.

What it does not stop: the code can read and write any file the user can, outside its temporary
directory too, open network connections, and talk to any process or service of the user (one
that a daemon starts for it is out of reach). Run `confirm` only on code you trust.
"""

from __future__ import annotations

import contextlib
import json
import keyword
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import autogradlint

CHANNEL_ENV = "AUTOGRADLINT_CONFIRM_CHANNEL"  # the descriptor the child writes the protocol to
ROOT_ENV = "AUTOGRADLINT_CONFIRM_ROOT"  # the folder the target is imported from
STARTUP_SECONDS = 120.0  # the interpreter and torch's import: the tool's own, not the project's
GRACE_SECONDS = 10.0  # for the supervisor to clean up once asked to stop
PHASE_GRACE_SECONDS = 2.0  # beyond a phase's announced limit (the pipe's and the poll's delay)
KEEP_BYTES = 64 << 10  # of stdout and of stderr, the head and the tail
CHANNEL_BYTES = 8 << 20  # protocol kept; beyond, the run's report is lost (could_not_run)


@dataclass(frozen=True)
class Limits:
    """What each child may use (set by the supervisor before the child runs)."""

    memory_mb: int = 8192
    file_mb: int = 1024
    processes: int = 512  # above the user's count when the child starts


LIMITS = Limits()


def importable(module: str) -> bool:
    """Whether `module` is a dotted name `import` accepts (anything else is refused unrun)."""
    return bool(module) and all(
        part.isidentifier() and not keyword.iskeyword(part) for part in module.split(".")
    )


@dataclass(frozen=True)
class Completed:
    returncode: int | None  # None: stopped at a time limit
    stdout: str  # head and tail
    stderr: str  # head and tail
    messages: list[str] = field(default_factory=list)  # the protocol lines, in order

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class _Kept:
    """A stream's head and tail, with the count of what was dropped between them."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        del self.tail[: max(0, len(self.tail) - self.keep)]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        gap = f"\n[{dropped} bytes left out]\n".encode() if dropped else b""
        return bytes(self.head + gap + self.tail).decode("utf-8", "replace")


class _Channel:
    """The protocol pipe: whole lines, up to CHANNEL_BYTES; `@@LIMIT` lines set the deadline."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.partial = bytearray()
        self.size = 0
        self.limits: list[float] = []  # each phase's seconds, as announced

    def feed(self, data: bytes) -> None:
        if self.size > CHANNEL_BYTES:
            return
        self.size += len(data)
        self.partial += data
        *complete, rest = self.partial.split(b"\n")
        self.partial = bytearray(rest)
        for raw in complete:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if line.startswith("@@LIMIT "):
                with contextlib.suppress(ValueError, IndexError):
                    self.limits.append(float(line.split()[1]))


def tool_path() -> str:
    """The folder autogradlint itself is imported from."""
    return str(Path(autogradlint.__file__).resolve().parent.parent)


def environment(root: Path, channel: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("PYTHONSTARTUP", None)
    env[CHANNEL_ENV] = str(channel)
    env[ROOT_ENV] = str(root)
    return env


def python(module: str, arguments: list[str]) -> list[str]:
    """`main(arguments)` of autogradlint.confirm.MODULE in a fresh interpreter, without the
    working directory on sys.path where Python can say so (-P; the child drops it on 3.10),
    and with autogradlint's own folder appended, last: found where it is installed, it shadows
    nothing (on PYTHONPATH, a site-packages folder would come before the standard library)."""
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    code = (
        "import sys; sys.path.append(sys.argv.pop(1)); "
        f"from autogradlint.confirm.{module} import main; main(sys.argv[1:])"
    )
    return [sys.executable, *safe, "-c", code, tool_path(), *arguments]


def run(
    arguments: list[str],
    root: Path,
    budget: float,
    devices: list[str],
    limits: Limits | None = None,
) -> Completed:
    """autogradlint.confirm.child with ARGUMENTS under the supervisor, in the sandbox of the
    module doc. `budget` bounds the whole run; the child's `@@LIMIT` lines bound each phase."""
    limits = limits or LIMITS
    with tempfile.TemporaryDirectory(prefix="autogradlint-confirm-") as workdir:
        cwd = Path(workdir, "cwd")
        cwd.mkdir(mode=0o700)
        read_end, write_end = os.pipe()
        config = {
            "channel": write_end,
            "budget": STARTUP_SECONDS + budget + 2 * GRACE_SECONDS,
            "limits": {
                **asdict(limits),
                "memory_kind": "data" if "cuda" in devices else "as",
            },
        }
        child = python("child", arguments)
        try:
            proc = subprocess.Popen(
                python("reaper", [json.dumps(config), "--", *child]),
                cwd=cwd,
                env=environment(root, write_end),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(write_end,),
            )
        finally:
            os.close(write_end)
        try:
            return _watch(proc, read_end, STARTUP_SECONDS + budget + GRACE_SECONDS)
        finally:
            os.close(read_end)


def _watch(proc: subprocess.Popen[bytes], channel_fd: int, budget: float) -> Completed:
    """Read the three pipes until they close, stopping the run at its deadline."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err, channel = _Kept(KEEP_BYTES), _Kept(KEEP_BYTES), _Channel()
    sinks = {
        proc.stdout.fileno(): out.feed,
        proc.stderr.fileno(): err.feed,
        channel_fd: channel.feed,
    }
    selector = selectors.DefaultSelector()
    for fd in sinks:
        selector.register(fd, selectors.EVENT_READ)
    start = time.monotonic()
    hard_end = start + budget
    phase_end, phases = start + STARTUP_SECONDS, 0
    stopped_at: float | None = None
    exited_at: float | None = None
    with selector:
        while selector.get_map():
            now = time.monotonic()
            if len(channel.limits) > phases:  # a new phase began: its own limit from now
                phases = len(channel.limits)
                phase_end = now + channel.limits[-1] + PHASE_GRACE_SECONDS
            if stopped_at is None and now > min(phase_end, hard_end):
                stopped_at = now
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)  # the supervisor kills all, then exits
            if stopped_at is not None and now > stopped_at + GRACE_SECONDS:
                proc.kill()  # the supervisor itself does not end: stop reading
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now > exited_at + 2.0:
                break  # something outside the supervisor's reach holds a pipe open
            for key, _events in selector.select(timeout=0.2):
                data = os.read(key.fd, 1 << 16)
                if data:
                    sinks[key.fd](data)
                else:
                    selector.unregister(key.fd)
    proc.stdout.close()
    proc.stderr.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=GRACE_SECONDS)
    statuses = [line.split()[1] for line in channel.lines if line.startswith("@@STATUS ")]
    code: int | None
    if stopped_at is not None:
        code = None
    elif statuses and statuses[-1].lstrip("-").isdigit():
        code = int(statuses[-1])
    else:
        code = None if statuses else proc.returncode
    messages = [line for line in channel.lines if not line.startswith("@@STATUS ")]
    return Completed(code, out.text(), err.text(), messages)
