"""What to execute: findings and the clean classes beside them, as importable targets (static)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..model import FileResult, Finding

# Which probe confirms which finding (semantics A.9, B.6, C.3; the arity rule has its own).
PROBE_OF_FAMILY = {"A": "A", "B": "B"}
# AGL409 (backward writes a saved tensor): the B probe compares forward's inputs before and after.
PROBE_OF_RULE = {"AGL301": "C", "AGL302": "C", "AGL401": "arity", "AGL409": "B"}


@dataclass
class Target:
    """One class to execute with one probe, and the findings it would confirm (none: clean)."""

    kind: str  # A | B | C | arity
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


def plan(results: list[FileResult], include_clean: bool = True) -> list[Target]:
    """Targets from results linted with the "classes" want (lint_paths): classes with findings,
    and, with `include_clean`, the other top-level Function and override classes beside them,
    probed to show they are clean."""
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
        if include_clean and result.parsed:
            flagged = {subject for (p, subject, _k) in targets if p == result.path}
            for summary in result.classes:
                if summary.name in flagged:
                    continue
                targets.setdefault(
                    (result.path, summary.name, summary.probe),
                    Target(summary.probe, result.path, summary.line, module, summary.name, root),
                )
    return sorted(targets.values(), key=lambda t: (t.path, t.line, t.kind))
