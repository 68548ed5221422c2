"""The analysis engine: source in, findings out. Pure: no file system, no printing."""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass, field
from typing import Literal

import libcst as cst

from ..analysis.facts import FileFacts, collect_facts
from ..analysis.names import ImportTable
from ..analysis.parsing import parse_module
from ..analysis.source_text import NeedsParse, rebuilt_tree
from ..checks.base import Check, CheckContext
from ..checks.gates import SUPPRESSIONS, Memo, declarations, subclasses_index
from ..checks.registry import checks_for, reads_for
from ..meta import all_rules
from ..model import FileError, Finding, Violation
from ..settings import Settings
from ..source_io import decode
from ..speed.complexity import too_complex
from ..speed.positions import Layout, Span, node_positions, statement_positions
from ..speed.rebuild import Unsupported, rebuild_module
from ..speed.slicing import slice_source
from ..speed.twins import Twins
from ..view import EMPTY, FileView
from .hygiene import HYGIENE, CommentFix, audit, key
from .request import LintRequest

# The tree the checks read: "rebuilt" from `ast` (the fast path, findings only), libcst's parse of
# the "slice" (the statements a check may read) or of the "whole" file; "" when nothing was parsed.
Route = Literal["", "rebuilt", "slice", "whole"]


@dataclass
class Analysis:
    """One file analysed: the parsed module and what the checks reported (in-process only)."""

    path: str
    text: str | None = None
    module: cst.Module | None = None
    violations: list[Violation] = field(default_factory=list)
    error: FileError | None = None
    parsed: bool = False
    layout: Layout = field(default_factory=Layout)  # how the module sits in the text
    facts: FileFacts | None = None  # what the checks read
    depends: str = ""  # other files the checks read (analysis/dependencies.py)
    # Where the violations' nodes are, by id, when placed already (a rebuilt tree's twins).
    spans: dict[int, Span] | None = None
    route: Route = ""
    # Why the rebuilt tree was left for libcst's: one of the declared "cannot do this exactly"
    # signals (Unsupported, NeedsParse, a finding not placed on its statement); "" when not.
    fallback: str = ""


def analyse(
    source: bytes | str,
    path: str = "<stdin>",
    *,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    project: FileView = EMPTY,
    full: bool = False,
    rebuild: bool = False,
    record_depends: bool = True,
) -> Analysis:
    """Parse and run the checks. `full=True` parses the whole file (fixes rewrite it).
    `project` is what the rest of the project says about this file (view.py).
    `rebuild=True` (findings only, no fixes) checks a tree rebuilt from `ast` and parses with
    libcst only the statements holding what a check reports or quotes (speed/rebuild.py,
    speed/twins.py), or the whole slice when that cannot be done exactly: only the declared
    signals (Unsupported, NeedsParse) send a file there; any other exception on the rebuilt
    tree is a reported internal error, never a silent second run.
    `record_depends=False` leaves out what else the result depends on (only a cache reads
    it; stamping the C++ sources costs a stat per file)."""
    rules = all_rules()
    enabled = frozenset(rules) if enabled is None else enabled
    settings = settings or Settings()
    raw = source.encode("utf-8") if isinstance(source, str) else source
    memo: Memo = {}  # gates share tokens: each is looked for once per file
    mentions_index = bool(project) and (
        subclasses_index(declarations(raw, memo), project.seeds)
        or any(name.encode() in raw for name in project.function_names | project.mixins)
    )
    checks = [
        check
        for check in checks_for(enabled)
        if check.gate.admits(raw, memo) or (mentions_index and check.gate.starts_from_functions)
    ]
    if not checks:
        return Analysis(path)
    text = source if isinstance(source, str) else decode(raw)
    if isinstance(text, FileError):
        return Analysis(path, error=FileError(path, text.message, text.line, text.col))
    if "\r" in text:
        # A lone \r ends a line for Python (old Mac files, or mixed endings); every text scan
        # here splits at \n. Same length, same line numbers, same columns.
        text = _LONE_CR.sub("\n", text)
    parse_input = text
    extra_triton: set[str] = set()
    tree: ast.Module | None = None
    kept: list[bool] | None = None
    line_map: list[int] | None = None
    ast_error: SyntaxError | None = None
    route: Route = "whole"  # until a slice is cut
    fallback = ""
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        return Analysis(path, text=text, error=FileError(path, "source contains a NUL byte", line))
    imports: ImportTable | None = None
    try:
        sliced = slice_source(
            text,
            project.seeds if mentions_index else frozenset(),
            loaders=settings.loaders,
            whole=full,
            reads=reads_for(enabled),
        )
    except SyntaxError as exc:
        if _nesting_depth(text) > MAX_NESTING:
            # libcst's native parser overflows its stack on such input (a segfault, not an
            # exception): never hand it over. CPython's message says what is wrong.
            message, column = f"syntax error: {exc.msg}", (exc.offset or 1) - 1
            return Analysis(path, text=text, error=FileError(path, message, exc.lineno, column))
        sliced = None  # newer syntax than this Python's ast? libcst may still cope
        ast_error = exc
    except (ValueError, RecursionError, MemoryError):
        sliced = None
    else:
        if sliced is None:
            return Analysis(path, text=text)
        extra_triton = sliced.triton_kernels
        imports = ImportTable(sliced.imports)
        tree = sliced.tree
        if not full:
            parse_input = sliced.source
            kept = sliced.kept
            line_map = sliced.line_map
            route = "slice"
    refused = too_complex(parse_input)
    if refused is not None:
        where: int | None = refused.line  # in the text libcst would have parsed
        if line_map:
            where = line_map[refused.line - 1] if refused.line <= len(line_map) else None
        return Analysis(path, text=text, error=FileError(path, refused.describe(), where))
    # What the checks run with, on the rebuilt tree or on libcst's (it holds no state).
    run = _Run(
        path,
        text,
        parse_input,
        checks,
        enabled,
        settings,
        project,
        imports,
        extra_triton,
        record_depends,
    )
    if rebuild and tree is not None and not full:
        # Most files hold nothing to report: check them on a tree built from `ast` (rebuild.py),
        # and let libcst parse only the statements a finding or a quote needs (twins.py).
        quick = run.on_rebuilt(Layout(line_map, tree, kept))
        if isinstance(quick, Analysis):
            return quick
        fallback = quick
    try:
        module = parse_module(parse_input)
    except cst.ParserSyntaxError as exc:
        if ast_error is not None:  # CPython's own message is the one people know
            message = f"syntax error: {ast_error.msg}"
            column = (ast_error.offset or 1) - 1
            return Analysis(
                path, text=text, error=FileError(path, message, ast_error.lineno, column)
            )
        line = (
            line_map[exc.raw_line - 1]
            if line_map and exc.raw_line <= len(line_map)
            else exc.raw_line
        )
        return Analysis(
            path,
            text=text,
            error=FileError(path, f"syntax error: {exc.message}", line, exc.raw_column),
        )
    except RecursionError:
        return Analysis(path, text=text, error=FileError(path, "too deeply nested to parse"))
    except Exception as exc:  # noqa: BLE001 - libcst raises bare exceptions on odd input
        return Analysis(path, text=text, error=FileError(path, f"cannot parse: {exc}"))
    try:
        facts, ctx = run.checks_on(module)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not stop the run
        error = _check_error(path, exc)
        return Analysis(path, text=text, module=module, error=error, parsed=True, route=route)
    return Analysis(
        path,
        text=text,
        module=module,
        violations=ctx.violations,
        parsed=True,
        layout=Layout(line_map, tree, kept),
        facts=facts,
        depends=run.depends(ctx),
        route=route,
        fallback=fallback,
    )


def _check_error(path: str, exc: Exception, where: str = "") -> FileError:
    """What a check that raised reports: too deep a tree, else an internal error (a bug)."""
    if isinstance(exc, RecursionError):
        return FileError(path, "too deeply nested to analyse")
    return FileError(path, f"internal error{where} (please report): {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class _Run:
    """What the checks of one file are run with, whichever tree they read."""

    path: str
    text: str
    parse_input: str
    checks: list[type[Check]]
    enabled: frozenset[str]
    settings: Settings
    project: FileView
    imports: ImportTable | None
    extra_triton: set[str]
    record_depends: bool

    def depends(self, ctx: CheckContext) -> str:
        return ctx.depends() if self.record_depends else ""

    def checks_on(self, module: cst.Module) -> tuple[FileFacts, CheckContext]:
        facts = collect_facts(
            module,
            self.text,
            loaders=self.settings.loaders,
            project=self.project,
            imports=self.imports,
        )
        facts.triton_kernels |= self.extra_triton
        facts.parsed = self.parse_input
        ctx = CheckContext(
            facts=facts, enabled=self.enabled, settings=self.settings, path=self.path
        )
        for check in self.checks:
            check(ctx).run()
        return facts, ctx

    def on_rebuilt(self, layout: Layout) -> Analysis | str:
        """The analysis on a tree rebuilt from `ast`, its findings placed and quoted on their
        statements' libcst twins; or why libcst must parse the slice instead (a declared
        signal only: any other exception is the file's internal error)."""
        assert layout.tree is not None
        try:
            module = rebuild_module(layout.tree, self.text, layout.kept)
        except Unsupported as exc:
            return f"Unsupported: {exc}"
        try:
            twins = Twins(module, layout.tree, layout.kept, self.parse_input, layout.line_map)
            with rebuilt_tree(twins):
                facts, ctx = self.checks_on(module)
            violations = [
                dataclasses.replace(
                    v,
                    node=twins.twin(v.node),
                    anchor=None if v.anchor is None else twins.twin(v.anchor),
                )
                for v in ctx.violations
            ]
        except NeedsParse:
            return "NeedsParse"
        except Exception as exc:  # noqa: BLE001 - a bug of ours: reported, not rerun on libcst
            error = _check_error(self.path, exc, " on the rebuilt tree")
            return Analysis(
                self.path, text=self.text, module=module, error=error, parsed=True, route="rebuilt"
            )
        spans: dict[int, Span] | None = None
        if violations:
            module = twins.module()
            wanted = {id(v.anchor or v.node): v.anchor or v.node for v in violations}
            spans = statement_positions(module, wanted, layout, self.text)
            if spans is None:
                return "a finding's statement could not be placed"
        return Analysis(
            self.path,
            text=self.text,
            module=module,
            violations=violations,
            parsed=True,
            layout=layout,
            facts=facts,
            depends=self.depends(ctx),
            spans=spans,
            route="rebuilt",
        )


_LONE_CR = re.compile(r"\r(?!\n)")
MAX_NESTING = 200  # CPython's own parser refuses deeper bracket nesting


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting (strings are not skipped: an upper bound is enough here)."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif char in ")]}":
            depth = max(0, depth - 1)
    return deepest


Tree = Literal["rebuilt", "slice", "whole"]


@dataclass
class Pass:
    """One analysis of a file, its findings placed and its suppression comments applied."""

    result: Analysis
    located: list[tuple[Finding, Violation]]  # the findings no comment silences, with checks'
    reported: list[Finding]  # everything reported, suppression hygiene (AGL9xx) included
    comment_fixes: dict[tuple[str, int, int], CommentFix]  # hygiene fixes, by finding key


def examine(request: LintRequest, tree: Tree) -> Pass:
    """Analyse, place, audit: the one sequence every answer of the engine is read from.

    `tree` is what the checks run on: "rebuilt" (findings only: a tree rebuilt from `ast`,
    libcst parsing only what a finding needs), "slice" (libcst's parse of the statements a
    check may read: fixes edit it) or "whole" (the whole file, where a fix on the slice cannot
    be placed). Parse errors become the result's error, never exceptions."""
    enabled = frozenset(all_rules()) if request.enabled is None else request.enabled
    source, path = request.source, request.path
    result = analyse(
        source,
        path,
        enabled=enabled,
        settings=request.settings,
        project=request.view,
        full=tree == "whole",
        rebuild=tree == "rebuilt",
        record_depends=request.record_depends,
    )
    if result.error is not None:
        return Pass(result, [], [], {})
    located: list[tuple[Finding, Violation]] = []
    if result.violations and result.module is not None and result.text is not None:
        located = locate(
            result.module, result.text, result.violations, path, result.layout, result.spans
        )
    unaudited = Pass(result, located, [f for f, _ in located], {})
    if not request.suppress:
        return unaudited
    if tree == "rebuilt":
        text = result.text if result.text is not None else _audited_text(source, enabled)
    else:  # a fix edits the text as given: its comments are audited as they are
        text = source if isinstance(source, str) else result.text
    if text is None:
        return unaudited
    audited = audit(text, path, unaudited.reported, enabled)
    kept = {key(f) for f in audited.findings}
    located = [(f, v) for f, v in located if key(f) in kept]
    return Pass(result, located, audited.findings, audited.fixes)


def _audited_text(source: bytes | str, enabled: frozenset[str]) -> str | None:
    """The text of a file no check needed to read, when its comments still need an audit."""
    if not enabled & HYGIENE:
        return None
    raw = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    if not SUPPRESSIONS.admits(raw):
        return None
    if isinstance(source, str):
        return source
    text = decode(source)
    return text if isinstance(text, str) else None


def locate(
    module: cst.Module,
    text: str,
    violations: list[Violation],
    path: str,
    layout: Layout | None = None,
    spans: dict[int, Span] | None = None,
) -> list[tuple[Finding, Violation]]:
    """Positions for violations (suppressions are hygiene.audit's); only files with findings
    pay for positions. `spans`: positions already known, by node id."""
    rules = all_rules()
    anchors = [v.anchor or v.node for v in violations]
    positions = (
        spans if spans is not None else node_positions(module, anchors, layout or Layout(), text)
    )
    findings: dict[tuple[str, int, int], tuple[Finding, Violation]] = {}
    for violation in violations:
        line, col, end_line, end_col = positions[id(violation.anchor or violation.node)]
        meta = rules[violation.rule_id]
        finding = Finding(
            path=path,
            rule_id=meta.id,
            name=meta.name,
            family=meta.family,
            severity=violation.severity or meta.severity,
            message=violation.message,
            line=line,
            col=col,
            end_line=end_line,
            end_col=end_col,
            fix_safety=meta.fix,
            fixable=violation.fix.safety if violation.fix is not None else None,
            subject=violation.subject,
            help=violation.help,
        )
        findings.setdefault((meta.id, finding.line, finding.col), (finding, violation))
    return sorted(findings.values(), key=lambda pair: pair[0].sort_key)
