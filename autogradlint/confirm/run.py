"""Execute targets: one fresh subprocess per (probe, class), with a timeout (the only place
autogradlint runs analysed code)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import sandbox
from .child import CONFIRMED, COULD_NOT_RUN, NOT_REPRODUCED
from .plan import Target
from .sandbox import importable

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
    outcome = Outcome(target)
    arguments = [target.kind, target.spec, ",".join(devices), factory]
    done = sandbox.run(arguments, target.root, timeout, devices)
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
    outcomes: list[Outcome] = []
    warmed: dict[tuple[Path, str], str | None] = {}
    for target in targets:
        key = (target.root, target.module)
        if key not in warmed:
            warmed[key] = warm_up(target.module, target.root, build_timeout, devices)
        failure = warmed[key]
        if failure is not None:
            outcomes.append(
                Outcome(
                    target,
                    {dev: {"verdict": COULD_NOT_RUN, "evidence": [failure]} for dev in devices},
                )
            )
            continue
        factory = (factories or {}).get(target.spec, "")
        outcomes.append(run_target(target, devices, timeout, factory))
    return outcomes
