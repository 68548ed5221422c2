"""The one door: every front end lints a file through `lint(LintRequest)`: check of a path or
of stdin, JSON and SARIF (each finding's fix), `fix` (the loop asks for a tier's plan on every
pass), the language server (its incremental runs, quick fixes and fix-all), pre-commit and the
confirmer (the classes it can execute). They all read one analysis of the file, so they can
never disagree."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from ..analysis.compiled import compiled_callee
from ..analysis.facts import CustomOpAutograd
from ..analysis.flow import analyse_method
from ..model import ClassSummary, FileResult, Finding
from ..settings import Settings
from ..source_io import decode
from ..speed.positions import node_positions
from .fixes import fix_plan, single_fixes
from .pipeline import Analysis, examine
from .request import LintRequest


def lint(request: LintRequest) -> FileResult:
    """The file's findings and what else the request wants. Errors become FileResult.error.

    Findings alone are read from a tree rebuilt from `ast`; fixes, a plan and classes need
    libcst's own tree of the slice (fixes rewrite it, classes are placed on it)."""
    source = request.source
    if not (request.fixes or request.classes or request.plan is not None):
        step = examine(request, "rebuilt")
        return _result(request.path, step.result, step.reported)
    text = source if isinstance(source, str) else decode(source)
    if not isinstance(text, str):  # undecodable: the findings' route says why
        step = examine(request, "rebuilt")
        return _result(request.path, step.result, step.reported)
    request = replace(request, source=text)
    step = examine(request, "slice")
    analysis = step.result
    result = _result(request.path, analysis, step.reported)
    if analysis.error is not None:
        return result
    if request.fixes and (any(v.fix for _, v in step.located) or step.comment_fixes):
        result.fixes = single_fixes(text, request, step)
    if request.classes:
        result.classes = class_summaries(analysis, request.settings)
    if request.plan is not None:
        result.plan = fix_plan(text, request, step, unsafe=request.plan == "unsafe")
    return result


def _result(path: str, analysis: Analysis, findings: list[Finding]) -> FileResult:
    if analysis.error is not None:
        return FileResult(path, error=analysis.error, parsed=analysis.parsed, route=analysis.route)
    return FileResult(
        path,
        findings=findings,
        parsed=analysis.parsed,
        depends=analysis.depends,
        route=analysis.route,
    )


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
        # the op's own kernel counts too: a backward may reach it by calling the op
        calls = [
            site
            for method in (op.backward, op.schema)
            if method is not None
            for site in analyse_method(method, facts.imports).calls
        ]
        uses = any(compiled_callee(site.node, facts, settings) for site in calls)
        out.append(ClassSummary(op.subject, places[id(anchor(op))][0], "B" if uses else "A"))
    return out
