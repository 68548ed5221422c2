"""How the confirmer runs the project's code: the only place autogradlint executes it.

- Module names are data: they reach the child as arguments, never as code (a file named
  `os;open('x','w').py` is a name that cannot be imported, not a command).
- Each run is its own process group, killed as a group when it ends or times out, so a probe's
  forked grandchildren do not outlive it.
- The child caps its own address space (RLIMIT_AS) before importing anything of the project;
  CUDA reserves address space far beyond what it uses, so with CUDA in play the cap is the data
  segment (RLIMIT_DATA) instead.
- The working directory is a fresh private temporary directory; the project is on sys.path
  only. Output goes to files, so a grandchild holding a pipe cannot stall the wait.
"""

from __future__ import annotations

import contextlib
import keyword
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MEMORY_ENV = "AUTOGRADLINT_CONFIRM_MEMORY_MB"
DEFAULT_MEMORY_MB = 8192


def importable(module: str) -> bool:
    """Whether `module` is a dotted name `import` accepts (anything else is refused unrun)."""
    return bool(module) and all(
        part.isidentifier() and not keyword.iskeyword(part) for part in module.split(".")
    )


@dataclass(frozen=True)
class Completed:
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def environment(root: Path, devices: list[str], memory_mb: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("PYTHONSTARTUP", None)
    env[MEMORY_ENV] = f"{memory_mb}:{'data' if 'cuda' in devices else 'as'}"
    return env


def run(
    arguments: list[str],
    root: Path,
    timeout: float,
    devices: list[str],
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> Completed:
    """`python -m autogradlint.confirm.child ARGUMENTS` in a sandbox (see the module doc)."""
    command = [sys.executable, "-m", "autogradlint.confirm.child", *arguments]
    with tempfile.TemporaryDirectory(prefix="autogradlint-confirm-") as workdir:
        out_path, err_path = Path(workdir, ".stdout"), Path(workdir, ".stderr")
        cwd = Path(workdir, "cwd")
        cwd.mkdir(mode=0o700)
        with open(out_path, "w+b") as out, open(err_path, "w+b") as err:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                env=environment(root, devices, memory_mb),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group
            )
            try:
                code: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                _kill_group(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
            out.seek(0)
            err.seek(0)
            return Completed(
                code,
                out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace"),
            )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def limit_memory() -> None:
    """In the child, before the project's code runs: cap memory as the parent asked."""
    spec = os.environ.get(MEMORY_ENV)
    if not spec:
        return
    megabytes, _, kind = spec.partition(":")
    try:
        import resource

        which = resource.RLIMIT_DATA if kind == "data" else resource.RLIMIT_AS
        limit = int(megabytes) << 20
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(which, (limit, hard))
    except (ImportError, ValueError, OSError):
        pass
