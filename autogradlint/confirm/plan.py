"""What to execute: findings and the clean classes that make a verdict evidence, as importable targets (static)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..model import FileResult, Finding

# Which probe confirms which finding (semantics A.9, B.6, C.3; the arity rule has its own).
PROBE_OF_FAMILY = {"A": "A", "B": "B"}
# AGL409 (backward writes a saved tensor): the B probe compares forward's inputs before and after.
# AGL412 (a gradient set only on some paths): backward with each input in turn not requiring grad.
# AGL413 (a custom op without a fake): opcheck's test_faketensor.
# AGL406 (backward writes into its gradient): another consumer of the gradient, on 2 gloo ranks.
PROBE_OF_RULE = {
    "AGL301": "C",
    "AGL302": "C",
    "AGL401": "arity",
    "AGL406": "shared",
    "AGL409": "B",
    "AGL412": "needs",
    "AGL413": "fake",
}


@dataclass
class Target:
    """One class to execute with one probe, and the findings it would confirm (none: clean)."""

    kind: str  # A | B | C | arity | fake | needs | shared
    path: str
    line: int
    module: str
    qualname: str
    root: Path
    findings: list[Finding] = field(default_factory=list)

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.qualname}"


def module_name(path: Path) -> tuple[Path, str]:
    """(sys.path root, dotted module) for a file: climb while the folder is a package."""
    path = path.resolve()
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.append(folder.name)
        folder = folder.parent
    return folder, ".".join(reversed(parts))


def probe_for(finding: Finding) -> str | None:
    return PROBE_OF_RULE.get(finding.rule_id) or PROBE_OF_FAMILY.get(finding.family)


CLEAN = ("twins", "all", "none")


def plan(results: list[FileResult], clean: str = "twins") -> list[Target]:
    """Targets from results linted with the "classes" want (lint_paths): the classes with
    findings, and the clean classes probed to show that a clean verdict is evidence too:
    `twins` (the default) the clean classes beside a finding (same file) and those named like a
    flagged class elsewhere (the fixed twin of a buggy example), `all` every Function, custom
    op and override class of the parsed files, `none` no clean class."""
    targets: dict[tuple[str, str, str], Target] = {}
    for result in results:
        if result.error is not None:
            continue
        path = Path(result.path)
        root, module = module_name(path)
        for finding in result.findings:
            kind = probe_for(finding)
            if kind is None or finding.subject is None:
                continue
            key = (result.path, finding.subject, kind)
            target = targets.get(key)
            if target is None:
                target = Target(kind, result.path, finding.line, module, finding.subject, root)
                targets[key] = target
            target.findings.append(finding)
    probed = {(path, subject) for (path, subject, _kind) in targets}
    flagged_files = {path for path, _subject in probed}
    flagged_names = {subject for _path, subject in probed}
    # A fixed twin runs the probes its buggy twin ran as well: only the same probe's clean
    # verdict is evidence about the same finding.
    twin_kinds: dict[str, set[str]] = {}
    for _path, subject, kind in targets:
        twin_kinds.setdefault(subject, set()).add(kind)
    for result in results if clean != "none" else ():
        if result.error is not None or not result.parsed:
            continue
        root, module = module_name(Path(result.path))
        for summary in result.classes:
            if (result.path, summary.name) in probed:
                continue  # flagged (probed for its findings), or already planned
            if clean == "twins" and not (
                result.path in flagged_files or summary.name in flagged_names
            ):
                continue
            probed.add((result.path, summary.name))
            # A twin runs its buggy twin's probes: only those verdicts are evidence about the
            # findings, and its own guess (from names alone) would probe what nothing flagged.
            for kind in twin_kinds.get(summary.name) or {summary.probe}:
                targets.setdefault(
                    (result.path, summary.name, kind),
                    Target(kind, result.path, summary.line, module, summary.name, root),
                )
    return sorted(targets.values(), key=lambda t: (t.path, t.line, t.kind))
