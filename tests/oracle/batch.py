"""Run a batch of programs on both sides: write them as packages of one project, lint the project
once, and run the programs under torch in a few subprocesses (several programs each, so
`import torch` is paid once per subprocess). Programs that need a process group run together
in a gloo group of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import lint_side
from .harms import Disagreement, judge
from .lint_side import Finding
from .program import PKG, Program

TORCH_SIDE = Path(__file__).with_name("torch_side.py")


@dataclass
class Result:
    program: Program
    package: str
    harms: list[str]
    findings: list[Finding]

    @property
    def codes(self) -> list[str]:
        return sorted({code for f in self.findings for code in f.codes})

    def disagreements(self) -> list[Disagreement]:
        return judge(self.program.family, self.harms, self.codes)


def write(root: Path, programs: list[Program]) -> list[str]:
    """Each program as package `pNNNN` of one project rooted at `root`."""
    (root / "pyproject.toml").write_text("")  # the project root, for the cross-file index
    packages = []
    for i, prog in enumerate(programs):
        package = f"p{i:04d}"
        packages.append(package)
        for path, text in prog.files.items():
            target = root / package / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.replace(PKG, package))
    return packages


def _env(rank: int = 0, world: int = 0) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        PYTHONHASHSEED="0",
        PYTHONDONTWRITEBYTECODE="1",
        ORACLE_RANK=str(rank),
        ORACLE_WORLD=str(world),
    )
    return env


@dataclass
class Log:
    """One child's output: results by id; the program a dead child was running (if any), the
    scenario it was in, and the harms it had shown before it died."""

    done: dict[str, list[str]]
    started: str | None
    scenario: str
    seen: list[str]
    first: bool = True  # the program it was running was the first this process ran


def _parse(stdout: str) -> Log:
    log = Log({}, None, "import", [])
    for line in stdout.splitlines():
        if line.startswith("@@START "):
            log.first = log.started is None and not log.done
            log.started, log.scenario, log.seen = line.split(" ", 1)[1], "import", []
        elif line.startswith("@@SCEN "):
            log.scenario = line.split(" ", 1)[1]
        elif line.startswith("@@HARM "):
            log.seen.append(line.split(" ", 1)[1])
        elif line.startswith("{"):
            item = json.loads(line)
            log.done[item["id"]] = item["harms"]
            log.started = None
    return log


def _children(
    root: Path, specs: list[dict[str, object]], world: int, timeout: float, alone: bool = False
) -> dict[str, list[str]]:
    """Run the specs in one subprocess (world 0) or one gloo group of `world` ranks, each rank
    running every spec; a program's harms are those of any rank. A child that dies costs only
    the program it was running: the rest run again without it, and, unless it was the first
    its process ran, that program runs again alone, in fresh processes (`alone`), whose verdict
    is its own: an earlier program of the same process may have corrupted the heap (an
    in-place collective past the storage of a stride-0 gradient, B2.9) and the abort shown
    later. Dying first or alone is `crash:<scenario>:...`, beside the harms seen before it."""
    tag = str(specs[0]["id"]) + ("-alone" if alone else "")
    path = root / f"batch-{tag}.json"
    results: dict[str, list[str]] = {}
    attempt = 0
    while len(results) < len(specs):
        attempt += 1
        store = root / f"gloo-{tag}-{attempt}"
        path.write_text(json.dumps({"root": str(root), "programs": specs, "store": str(store)}))
        logs = [root / f"out-{tag}-{attempt}-{rank}.txt" for rank in range(max(world, 1))]
        procs = []
        for rank, log in enumerate(logs):
            env = _env(rank, world)
            env["ORACLE_SKIP"] = ",".join(results)
            with open(log, "w") as out:
                procs.append(
                    subprocess.Popen(
                        [sys.executable, str(TORCH_SIDE), str(path)],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        cwd=root,
                        env=env,
                    )
                )
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs):
            failed = any(p.returncode not in (None, 0) for p in procs)
            if failed or time.monotonic() > deadline:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                break
            time.sleep(0.05)
        found: dict[str, list[str]] = {}
        dead: tuple[str, str, str] | None = None
        before: list[str] = []  # the harms the dead program showed before it died, any rank
        own = alone  # whether the death is the dead program's own (it ran first, or alone)
        parsed = [_parse(log.read_text()) for log in logs]
        for p, log, out in zip(procs, logs, parsed, strict=True):
            for key, harms in out.done.items():
                merged = found.setdefault(key, [])
                merged += [h for h in harms if h not in merged]
            if out.started is not None and p.returncode not in (0, None) and dead is None:
                text = log.read_text()
                tail = [line for line in text.splitlines() if not line.startswith(("@@", "{"))]
                why = f"rc={p.returncode}:{(tail[-1] if tail else '')[:120]}"
                dead, own = (out.started, out.scenario, why), own or out.first
        if dead is not None:
            for out in parsed:
                if out.started == dead[0]:
                    before += [h for h in out.seen if h not in before]
        complete = {k: v for k, v in found.items() if k not in results}
        # With several ranks, a program counts only once every rank finished it.
        if world:
            counts = {k: sum(k in out.done for out in parsed) for k in complete}
            complete = {k: v for k, v in complete.items() if counts[k] == len(logs)}
        results.update(complete)
        if len(results) < len(specs):
            pending = [str(s["id"]) for s in specs if s["id"] not in results]
            if dead is None or dead[0] in results:
                dead, before, own = (pending[0], "unknown", "no result"), [], alone
            if own:
                results[dead[0]] = [*before, f"crash:{dead[1]}:{dead[2]}"]
            else:
                spec = next(s for s in specs if s["id"] == dead[0])
                results.update(_children(root, [spec], world, timeout, alone=True))
    return results


def run(
    programs: list[Program], jobs: int = 2, world: int = 2, keep: Path | None = None
) -> list[Result]:
    """Both verdicts for every program. `world`: ranks for programs that need a process group."""
    root = Path(tempfile.mkdtemp(prefix="agl-oracle-")) if keep is None else keep
    root.mkdir(parents=True, exist_ok=True)
    try:
        packages = write(root, programs)
        lint = lint_side.start(root)
        specs = [dict(p.spec(pkg), id=pkg) for p, pkg in zip(programs, packages, strict=True)]
        local = [s for s, p in zip(specs, programs, strict=True) if not p.world]
        group = [s for s, p in zip(specs, programs, strict=True) if p.world]
        chunks = [local[i::jobs] for i in range(jobs) if local[i::jobs]]
        harms: dict[str, list[str]] = {}
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(chunks) + 1) as pool:
            futures = [
                pool.submit(_children, root, chunk, 0, 120 + 20 * len(chunk)) for chunk in chunks
            ]
            if group:
                futures.append(pool.submit(_children, root, group, world, 120 + 20 * len(group)))
            for future in futures:
                harms.update(future.result())
        findings = lint_side.finish(lint, root)
        return [
            Result(p, pkg, harms[pkg], findings.get(pkg, []))
            for p, pkg in zip(programs, packages, strict=True)
        ]
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
