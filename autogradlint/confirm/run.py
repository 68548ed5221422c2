"""Execute targets (the only place autogradlint runs analysed code): one sandboxed process per
module imports torch and the module once, and runs each probe in a fork of itself with its own
timeout (child.serve); a fresh interpreter per probe where forking cannot work. The timeout
bounds the module's import as well as each probe."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import sandbox
from .draws import CONFIRMED, COULD_NOT_RUN, NOT_REPRODUCED
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


def run_target(target: Target, devices: list[str], timeout: float, factory: str = "") -> Outcome:
    """One probe in a fresh interpreter: the import, then the probe, each within `timeout`."""
    if not importable(target.module):
        return _failed(target, devices, _not_importable(target.module))
    arguments = [target.kind, target.spec, ",".join(devices), factory, f"{timeout:g}"]
    done = sandbox.run(arguments, target.root, 2 * timeout, devices)
    in_import = _last_mark(done.messages).startswith(("import ", "startup"))
    if in_import and _result(done.messages) is None:  # it ended, or ran out of time, importing
        return _failed(target, devices, _import_failure(target.module, timeout, done))
    return interpret(target, devices, timeout, done)


def _not_importable(module: str) -> str:
    return f"cannot import {module!r}: not a valid module name (the file name is not one)"


def _result(messages: list[str], prefix: str = "@@RESULT ") -> dict[str, Any] | None:
    """The last result line's JSON, if one came whole and has the shape the child writes."""
    for line in reversed(messages):
        if line.startswith(prefix):
            with contextlib.suppress(ValueError):
                parsed = json.loads(line[len(prefix) :])
                if _well_formed(parsed):
                    return dict(parsed)
            return None
    return None


def _well_formed(result: Any) -> bool:
    """{"verdict", "evidence"} for all devices, or {"devices": {dev: {"verdict", "evidence"}}}."""

    def one(entry: Any) -> bool:
        return (
            isinstance(entry, dict)
            and entry.get("verdict") in (CONFIRMED, NOT_REPRODUCED, COULD_NOT_RUN)
            and isinstance(entry.get("evidence"), list)
        )

    if not isinstance(result, dict):
        return False
    if "verdict" in result:
        return one(result)
    devices = result.get("devices")
    return isinstance(devices, dict) and all(one(entry) for entry in devices.values())


def _import_failure(module: str, timeout: float, done: Completed) -> str:
    """Why the module did not import: it took too long, or it ended the process."""
    what = "torch" if _last_mark(done.messages) == "import torch" else module
    if done.timed_out:
        if what == "torch":
            return f"importing torch took longer than {sandbox.STARTUP_SECONDS:.0f}s"
        return f"importing {module} took longer than {timeout:g}s (the timeout covers the import)"
    last_err = (done.stderr.strip().splitlines() or [""])[-1][:200]
    why = f"importing {what} ended the process with status {done.returncode}: {last_err}"
    return why.rstrip(": ")


def interpret(target: Target, devices: list[str], timeout: float, done: Completed) -> Outcome:
    """The verdicts in a probe's report (its marks, its result line, how it ended)."""
    outcome = Outcome(target)
    step = _last_mark(done.messages)
    if done.timed_out:
        for dev in devices:
            outcome.devices[dev] = {
                "verdict": COULD_NOT_RUN,
                "evidence": [f"timeout after {timeout:g}s (last step: {step})"],
            }
        return outcome
    result = _result(done.messages)
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
    if done.returncode == 0:
        # The code under test ended the process itself (os._exit(0), sys.exit in a thread...).
        why = (
            f"the child exited with status 0 during the probe, without a result (last step: "
            f"{step}): the code under test ended the process"
        )
    else:
        last_err = (done.stderr.strip().splitlines() or [""])[-1][:200]
        why = f"the child exited with status {done.returncode} during '{step}': {last_err}"
        why = why.rstrip(": ")
    code = done.returncode or 0
    crashed_on_layout = (
        target.kind == "B" and code < 0 and step.startswith("B layout") and "dense" not in step
    )
    for dev in devices:
        if crashed_on_layout and f" {dev}," in step:
            outcome.devices[dev] = {
                "verdict": CONFIRMED,
                "evidence": [
                    why + " (a crash on a non-dense gradient layout: a raw out-of-bounds access)"
                ],
            }
        else:
            outcome.devices[dev] = {"verdict": COULD_NOT_RUN, "evidence": [why]}
    return outcome


def _last_mark(messages: list[str]) -> str:
    marks = [line[7:] for line in messages if line.startswith("@@MARK ")]
    return marks[-1] if marks else "startup"


def confirm(
    targets: list[Target],
    devices: list[str],
    timeout: float,
    factories: dict[str, str] | None = None,
) -> list[Outcome]:
    """Every target's outcome, in the order given. `timeout` bounds each module's import and
    each probe."""
    factories = factories or {}
    groups: dict[tuple[Path, str], list[int]] = {}
    for index, target in enumerate(targets):
        groups.setdefault((target.root, target.module), []).append(index)
    outcomes: dict[int, Outcome] = {}
    for (root, module), members in groups.items():
        chosen = [targets[i] for i in members]
        if not importable(module):
            for index in members:
                outcomes[index] = _failed(targets[index], devices, _not_importable(module))
            continue
        served = _serve(root, module, chosen, devices, timeout, factories)
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
) -> list[Outcome]:
    """One module's targets through child.serve; any probe the server could not report on (it
    died, or asked for a fresh interpreter) runs on its own."""
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
    # The import has `timeout`, and each probe its own inside the server.
    budget = timeout + len(jobs) * (timeout + 5 + sandbox.PHASE_GRACE_SECONDS)
    done = sandbox.run(["serve", module, json.dumps(jobs)], root, budget, devices)
    failed_import = next(
        (
            line[len("@@IMPORTFAIL ") :]
            for line in done.messages
            if line.startswith("@@IMPORTFAIL ")
        ),
        None,
    )
    if failed_import is not None:
        with contextlib.suppress(ValueError):
            failed_import = str(json.loads(failed_import))
        return [_failed(t, devices, f"import failed: {failed_import}") for t in targets]
    if "@@IMPORTED" not in done.messages:
        why = _import_failure(module, timeout, done)
        return [_failed(t, devices, why) for t in targets]
    sections = _sections(done.messages)
    err_sections = _sections(done.stderr.splitlines())
    outcomes: list[Outcome] = []
    for index, target in enumerate(targets):
        section = sections.get(index)
        if section is None or f"@@FALLBACK {index}" in section:
            outcomes.append(run_target(target, devices, timeout, str(jobs[index]["factory"])))
            continue
        output = _job_output(index, section, err_sections.get(index, []), done)
        outcomes.append(interpret(target, devices, timeout, output))
    return outcomes


def _sections(lines: list[str]) -> dict[int, list[str]]:
    """The lines after each `@@JOB i` marker, by i."""
    sections: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("@@JOB "):
            with contextlib.suppress(ValueError, IndexError):
                current = sections.setdefault(int(line.split()[1]), [])
        elif current is not None:
            current.append(line)
    return sections


def _job_output(index: int, lines: list[str], errors: list[str], server: Completed) -> Completed:
    """One job's part of the server's report, as if it had run alone."""
    messages: list[str] = []
    code: int | None = 0
    ended = False
    for line in lines:
        if line.startswith(f"@@RESULT {index} "):
            messages.append("@@RESULT " + line[len(f"@@RESULT {index} ") :])
        elif line == f"@@TIMEOUT {index}":
            code, ended = None, True
        elif line.startswith(f"@@EXIT {index} "):
            with contextlib.suppress(ValueError, IndexError):
                code, ended = int(line.split()[2]), True
        else:
            messages.append(line)
    if not ended:  # the server itself ended during this job
        code = None if server.timed_out else server.returncode
    return Completed(code, "", "\n".join(errors), messages)
