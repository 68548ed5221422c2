"""Execute targets (the only place autogradlint runs analysed code): one sandboxed process per
module imports torch and the module once, and runs each probe in a fork of itself with its own
timeout (child.serve); a fresh interpreter per probe where forking cannot work."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import sandbox
from .child import CONFIRMED, COULD_NOT_RUN, NOT_REPRODUCED
from .plan import Target
from .sandbox import Completed, importable

DEVICE_CHOICES = {"cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu", "cuda"]}
NOT_RUN = "not_run"


@dataclass
class Outcome:
    target: Target
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        verdicts = [d["verdict"] for d in self.devices.values() if d["verdict"] != NOT_RUN]
        if CONFIRMED in verdicts:
            return CONFIRMED
        if verdicts and all(v == NOT_REPRODUCED for v in verdicts):
            return NOT_REPRODUCED
        return COULD_NOT_RUN

    @property
    def disagreement(self) -> bool:
        ran = {d["verdict"] for d in self.devices.values() if d["verdict"] != NOT_RUN}
        return len(ran) > 1

    def to_json(self) -> dict[str, Any]:
        t = self.target
        return {
            "target": t.spec,
            "path": t.path,
            "line": t.line,
            "probe": t.kind,
            "findings": [f.rule_id for f in t.findings],
            "verdict": self.verdict,
            "devices": self.devices,
            "devices_disagree": self.disagreement,
        }


def warm_up(module: str, root: Path, timeout: float, devices: list[str]) -> str | None:
    """Import the module once, outside the probes' timeout: a load_inline build can take minutes
    on a cold cache. Returns the reason it failed, or None."""
    if not importable(module):
        return f"cannot import {module!r}: not a valid module name (the file name is not one)"
    done = sandbox.run(["import", module], root, timeout, devices)
    if done.timed_out:
        return f"importing {module} took longer than {timeout:.0f}s"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return f"import failed: {lines[-1] if lines else f'exit status {done.returncode}'}"
    return None


def run_target(target: Target, devices: list[str], timeout: float, factory: str = "") -> Outcome:
    """One probe in a fresh interpreter."""
    arguments = [target.kind, target.spec, ",".join(devices), factory]
    done = sandbox.run(arguments, target.root, timeout, devices)
    return interpret(target, devices, timeout, done)


def interpret(target: Target, devices: list[str], timeout: float, done: Completed) -> Outcome:
    """The verdicts in a probe's output (its marks, its JSON line, how it ended)."""
    outcome = Outcome(target)
    if done.timed_out:
        step = _last_mark(done.stdout)
        for dev in devices:
            outcome.devices[dev] = {
                "verdict": COULD_NOT_RUN,
                "evidence": [f"timeout after {timeout:g}s (last step: {step})"],
            }
        return outcome
    result = next(
        (json.loads(line) for line in reversed(done.stdout.splitlines()) if line.startswith("{")),
        None,
    )
    if result is not None and done.returncode == 0:
        if "verdict" in result:  # import failure: the same for every device
            for dev in devices:
                outcome.devices[dev] = {
                    "verdict": result["verdict"],
                    "evidence": result["evidence"],
                }
        else:
            outcome.devices.update(result["devices"])
        for dev in devices:
            outcome.devices.setdefault(
                dev, {"verdict": NOT_RUN, "evidence": ["no such device on this machine"]}
            )
        return outcome
    step = _last_mark(done.stdout)
    last_err = (done.stderr.strip().splitlines() or [""])[-1][:200]
    why = f"the child exited with status {done.returncode} during '{step}': {last_err}".rstrip(": ")
    code = done.returncode or 0
    crashed_on_layout = (
        target.kind == "B" and code < 0 and step.startswith("B layout") and "dense" not in step
    )
    for dev in devices:
        if crashed_on_layout and step.endswith(dev):
            outcome.devices[dev] = {
                "verdict": CONFIRMED,
                "evidence": [
                    why + " (a crash on a non-dense gradient layout: a raw out-of-bounds access)"
                ],
            }
        else:
            outcome.devices[dev] = {"verdict": COULD_NOT_RUN, "evidence": [why]}
    return outcome


def _last_mark(stdout: str) -> str:
    marks = [line[7:] for line in stdout.splitlines() if line.startswith("@@MARK ")]
    return marks[-1] if marks else "startup"


def confirm(
    targets: list[Target],
    devices: list[str],
    timeout: float,
    factories: dict[str, str] | None = None,
    build_timeout: float = 900.0,
) -> list[Outcome]:
    """Every target's outcome, in the order given."""
    factories = factories or {}
    groups: dict[tuple[Path, str], list[int]] = {}
    for index, target in enumerate(targets):
        groups.setdefault((target.root, target.module), []).append(index)
    outcomes: dict[int, Outcome] = {}
    for (root, module), members in groups.items():
        chosen = [targets[i] for i in members]
        if not importable(module):
            why = f"cannot import {module!r}: not a valid module name (the file name is not one)"
            for index in members:
                outcomes[index] = _failed(targets[index], devices, why)
            continue
        served = _serve(root, module, chosen, devices, timeout, factories, build_timeout)
        for index, outcome in zip(members, served, strict=True):
            outcomes[index] = outcome
    return [outcomes[i] for i in range(len(targets))]


def _failed(target: Target, devices: list[str], why: str) -> Outcome:
    return Outcome(target, {dev: {"verdict": COULD_NOT_RUN, "evidence": [why]} for dev in devices})


def _serve(
    root: Path,
    module: str,
    targets: list[Target],
    devices: list[str],
    timeout: float,
    factories: dict[str, str],
    build_timeout: float,
) -> list[Outcome]:
    """One module's targets through child.serve; any probe the server could not report on (it
    died, or asked for a fresh interpreter) runs on its own, after a warm-up import."""
    jobs = [
        {
            "kind": t.kind,
            "target": t.spec,
            "devices": devices,
            "factory": factories.get(t.spec, ""),
            "timeout": timeout,
        }
        for t in targets
    ]
    # The import may build an extension (minutes on a cold cache): it has build_timeout; each
    # probe has its own timeout inside the server.
    budget = build_timeout + len(jobs) * (timeout + 5)
    done = sandbox.run(["serve", module, json.dumps(jobs)], root, budget, devices)
    failed_import = next(
        (
            line[len("@@IMPORTFAIL ") :]
            for line in done.stdout.splitlines()
            if line.startswith("@@IMPORTFAIL ")
        ),
        None,
    )
    if failed_import is not None:
        why = f"import failed: {json.loads(failed_import)}"
        return [_failed(t, devices, why) for t in targets]
    out_sections = _sections(done.stdout)
    err_sections = _sections(done.stderr)
    outcomes: list[Outcome] = []
    warmed: str | None | bool = False  # False: the warm-up import has not run yet
    for index, target in enumerate(targets):
        section = out_sections.get(index)
        if section is None and done.timed_out and not out_sections:
            outcomes.append(
                _failed(
                    target, devices, f"importing {module} took longer than {build_timeout:.0f}s"
                )
            )
            continue
        if section is None or any(line.startswith(f"@@FALLBACK {index}") for line in section):
            if warmed is False:
                warmed = warm_up(module, root, build_timeout, devices)
            if warmed is not None:
                outcomes.append(_failed(target, devices, str(warmed)))
            else:
                outcomes.append(run_target(target, devices, timeout, str(jobs[index]["factory"])))
            continue
        output = _job_output(index, section, err_sections.get(index, []), done)
        outcomes.append(interpret(target, devices, timeout, output))
    return outcomes


def _sections(text: str) -> dict[int, list[str]]:
    """The lines after each `@@JOB i` marker, by i."""
    sections: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@JOB "):
            current = sections.setdefault(int(line.split()[1]), [])
        elif current is not None:
            current.append(line)
    return sections


def _job_output(index: int, lines: list[str], errors: list[str], server: Completed) -> Completed:
    """One job's part of the server's output, as if it had run alone."""
    stdout: list[str] = []
    code: int | None = 0
    ended = False
    for line in lines:
        if line.startswith(f"@@RESULT {index} "):
            stdout.append(line[len(f"@@RESULT {index} ") :])
            ended = True
        elif line == f"@@TIMEOUT {index}":
            code, ended = None, True
        elif line.startswith(f"@@EXIT {index} "):
            code, ended = int(line.split()[2]), True
        else:
            stdout.append(line)
    if not ended:  # the server itself ended during this job
        code = None if server.timed_out else (server.returncode or -9)
    return Completed(code, "\n".join(stdout), "\n".join(errors))
