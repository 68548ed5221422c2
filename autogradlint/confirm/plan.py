"""What to execute: findings and the clean classes beside them, as importable targets (static)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from ..checks import CheckContext
from ..checks.compiled_grads import CompiledGradients
from ..config import Config
from ..engine import analyse
from ..model import FileResult, Finding
from ..positions import node_positions

# Which probe confirms which finding (semantics A.9, B.6, C.3; the arity rule has its own).
PROBE_OF_FAMILY = {"A": "A", "B": "B"}
PROBE_OF_RULE = {"AGL301": "C", "AGL302": "C", "AGL401": "arity"}


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


def plan(results: list[FileResult], config: Config, include_clean: bool = True) -> list[Target]:
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
            for kind, name, line in _clean_classes(path, config, flagged):
                targets.setdefault(
                    (result.path, name, kind), Target(kind, result.path, line, module, name, root)
                )
    return sorted(targets.values(), key=lambda t: (t.path, t.line, t.kind))


def _clean_classes(path: Path, config: Config, flagged: set[str]) -> list[tuple[str, str, int]]:
    """Top-level Function and override classes without findings: probed to show they are clean."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    result = analyse(
        text, str(path), enabled=config.enabled_rules(), settings=config.settings, full=True
    )
    if result.module is None or result.facts is None:
        return []
    facts = result.facts
    ctx = CheckContext(facts=facts, enabled=frozenset({"AGL201"}), settings=config.settings)
    compiled = CompiledGradients(ctx)
    top_level = {
        stmt.name.value: stmt for stmt in result.module.body if isinstance(stmt, cst.ClassDef)
    }
    names = [stmt.name for stmt in top_level.values()]
    lines = node_positions(result.module, names, result.layout, text)
    out: list[tuple[str, str, int]] = []
    for info in facts.classes:
        if info.name in flagged or info.name not in top_level:
            continue
        line = lines[id(top_level[info.name].name)][0]
        if info.is_function and "backward" in info.methods:
            flow = ctx.flow(info.methods["backward"])
            uses_compiled = any(compiled._compiled_callee(site.node) for site in flow.calls)
            out.append(("B" if uses_compiled else "A", info.name, line))
        elif "__torch_function__" in info.methods or "__torch_dispatch__" in info.methods:
            out.append(("C", info.name, line))
    return out
