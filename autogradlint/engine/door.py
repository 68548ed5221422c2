"""The one entry point every front end lints a file through: check, fix previews, the
language server, SARIF and JSON fixes, and the confirmer's plan all read one analysis of the
file, so they can never disagree."""

from __future__ import annotations

import libcst as cst

from ..analysis.compiled import compiled_callee
from ..analysis.facts import CustomOpAutograd
from ..analysis.flow import analyse_method
from ..model import ClassSummary, FileResult, FixSuggestion
from ..settings import Settings
from ..speed.positions import node_positions
from ..view import EMPTY, FileView
from .fix_loop import analysed_pass, single_fixes
from .pipeline import Analysis


def lint_file(
    source: bytes | str,
    path: str = "<stdin>",
    *,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    project: FileView = EMPTY,
    fixes: bool = False,
    classes: bool = False,
    record_depends: bool = True,
) -> FileResult:
    """Findings of one file; with `fixes`, each fixable finding's fix as edits; with
    `classes`, the classes the confirmer can execute. Errors become FileResult.error."""
    settings = settings or Settings()
    if isinstance(source, bytes) and (fixes or classes):
        from ..source_io import decode

        decoded = decode(source)
        if not isinstance(decoded, str):
            from .pipeline import lint_source

            return lint_source(
                source,
                path,
                enabled=enabled,
                settings=settings,
                project=project,
                record_depends=record_depends,
            )
        source = decoded
    if not (fixes or classes):
        from .pipeline import lint_source

        return lint_source(
            source,
            path,
            enabled=enabled,
            settings=settings,
            project=project,
            record_depends=record_depends,
        )
    assert isinstance(source, str)
    step = analysed_pass(source, path, enabled=enabled, settings=settings, project=project)
    analysis = step.result
    if analysis.error is not None:
        return FileResult(path, error=analysis.error, parsed=analysis.parsed)
    result = FileResult(
        path, findings=step.reported, parsed=analysis.parsed, depends=analysis.depends
    )
    if fixes and (any(v.fix for _, v in step.located) or step.comment_fixes):
        result.fixes = [
            FixSuggestion(
                fix.finding.rule_id,
                fix.finding.line,
                fix.finding.col,
                fix.title,
                fix.safety,
                fix.note,
                fix.edits,
            )
            for fix in single_fixes(
                source, path, analysed=step, enabled=enabled, settings=settings, project=project
            )
        ]
    if classes:
        result.classes = class_summaries(analysis, settings)
    return result


def class_summaries(analysis: Analysis, settings: Settings) -> list[ClassSummary]:
    """Top-level Function and override classes, with the probe that fits each: B when
    backward calls compiled code, A for another backward, C for a hook."""
    facts, module = analysis.facts, analysis.module
    if facts is None or module is None or analysis.text is None:
        return []
    top = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    chosen = [info for info in facts.classes if info.name in top and top[info.name] is info.node]
    # torch.library custom ops the file defines and gives a backward: probed the same way
    ops = [op for op in facts.custom_ops if op.backward is not None and op.subject is not None]

    def anchor(op: CustomOpAutograd) -> cst.CSTNode:
        """Where an op is: its Python definition, else its `register_autograd` call."""
        return op.schema.name if op.schema is not None else op.call

    places = node_positions(
        module,
        [info.node.name for info in chosen] + [anchor(op) for op in ops],
        analysis.layout,
        analysis.text,
    )
    out: list[ClassSummary] = []
    for info in chosen:
        line = places[id(info.node.name)][0]
        if info.is_function and "backward" in info.methods:
            flow = analyse_method(info.methods["backward"], facts.imports)
            uses = any(compiled_callee(site.node, facts, settings) for site in flow.calls)
            out.append(ClassSummary(info.name, line, "B" if uses else "A"))
        elif "__torch_function__" in info.methods or "__torch_dispatch__" in info.methods:
            out.append(ClassSummary(info.name, line, "C"))
    for op in ops:
        assert op.backward is not None and op.subject is not None
        flow = analyse_method(op.backward, facts.imports)
        uses = any(compiled_callee(site.node, facts, settings) for site in flow.calls)
        out.append(ClassSummary(op.subject, places[id(anchor(op))][0], "B" if uses else "A"))
    return out
