"""The analysis engine: source in, findings out. Pure: no file system, no printing."""

from __future__ import annotations

import io
import tokenize
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .analysis.facts import collect_facts
from .analysis.names import ImportTable, iter_statements
from .checks import ALL_CHECKS, Check, CheckContext
from .meta import all_rules
from .model import FileError, FileResult, Finding, Violation
from .prefilter import class_declarations, subclasses_index
from .settings import Settings
from .slicing import slice_source
from .suppress import parse_suppressions


def checks_for(enabled: Iterable[str]) -> list[type[Check]]:
    wanted = set(enabled)
    return [check for check in ALL_CHECKS if wanted.intersection(check.GATE.ids)]


@dataclass
class Analysis:
    """One file analysed: the parsed module and what the checks reported (in-process only)."""

    path: str
    text: str | None = None
    module: cst.Module | None = None
    violations: list[Violation] = field(default_factory=list)
    error: FileError | None = None
    parsed: bool = False
    starts: list[int] | None = None  # first line of each of module.body's statements
    line_map: list[int] | None = None  # module line i+1 -> original line (sliced modules)


def analyse(
    source: bytes | str,
    path: str = "<stdin>",
    *,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    known_function_bases: frozenset[str] = frozenset(),
    full: bool = False,
) -> Analysis:
    """Parse and run the checks. `full=True` parses the whole file (fixes rewrite it)."""
    rules = all_rules()
    enabled = frozenset(rules) if enabled is None else enabled
    settings = settings or Settings()
    raw = source.encode("utf-8") if isinstance(source, str) else source
    mentions_index = bool(known_function_bases) and subclasses_index(
        class_declarations(raw), known_function_bases
    )
    checks = [
        c
        for c in checks_for(enabled)
        if c.GATE.admits(raw) or (mentions_index and c.GATE.starts_from_functions)
    ]
    if not checks:
        return Analysis(path)
    text = source if isinstance(source, str) else _decode(raw)
    if isinstance(text, FileError):
        return Analysis(path, error=FileError(path, text.message, text.line, text.col))
    parse_input = text
    extra_triton: set[str] = set()
    starts: list[int] | None = None
    line_map: list[int] | None = None
    ast_error: SyntaxError | None = None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        return Analysis(path, text=text, error=FileError(path, "source contains a NUL byte", line))
    imports: ImportTable | None = None
    try:
        sliced = slice_source(
            text,
            known_function_bases if mentions_index else frozenset(),
            loaders=settings.loaders,
            whole=full,
        )
    except SyntaxError as exc:
        if _nesting_depth(text) > MAX_NESTING:
            # libcst's native parser overflows its stack on such input (a segfault, not an
            # exception): never hand it over. CPython's message says what is wrong.
            line, column = exc.lineno, (exc.offset or 1) - 1
            return Analysis(
                path, text=text, error=FileError(path, f"syntax error: {exc.msg}", line, column)
            )
        sliced = None  # newer syntax than this Python's ast? libcst may still cope
        ast_error = exc
    except (ValueError, RecursionError, MemoryError):
        sliced = None
    else:
        if sliced is None:
            return Analysis(path, text=text)
        extra_triton = sliced.triton_kernels
        imports = ImportTable(sliced.imports)
        starts = sliced.all_starts
        if not full:
            parse_input = sliced.source
            starts = sliced.kept_starts
            line_map = sliced.line_map
    try:
        module = cst.parse_module(parse_input)
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
        facts = collect_facts(
            module,
            text,
            loaders=settings.loaders,
            known_function_bases=known_function_bases,
            imports=imports,
        )
        facts.triton_kernels |= extra_triton
        ctx = CheckContext(facts=facts, enabled=enabled, settings=settings)
        ctx.top_of = _top_level_index(module)
        for check in checks:
            check(ctx).run()
    except RecursionError:
        error = FileError(path, "too deeply nested to analyse")
        return Analysis(path, text=text, module=module, error=error, parsed=True)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not stop the run
        message = f"internal error (please report): {type(exc).__name__}: {exc}"
        return Analysis(path, text=text, module=module, error=FileError(path, message), parsed=True)
    if starts is not None and len(starts) != len(module.body):
        starts = None  # e.g. `a = 1; b = 2`: fall back to a whole-module position pass
    return Analysis(
        path,
        text=text,
        module=module,
        violations=ctx.violations,
        parsed=True,
        starts=starts,
        line_map=line_map,
    )


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


def _top_level_index(module: cst.Module) -> dict[int, int]:
    """id(class node) -> index of the module statement that holds it (statement walk only)."""
    out: dict[int, int] = {}
    for index, stmt in enumerate(module.body):
        if isinstance(stmt, cst.ClassDef):
            out[id(stmt)] = index
        if isinstance(stmt, cst.BaseCompoundStatement):
            for inner in iter_statements(stmt):
                if isinstance(inner, cst.ClassDef):
                    out[id(inner)] = index
    return out


def lint_source(
    source: bytes | str,
    path: str = "<stdin>",
    *,
    enabled: frozenset[str] | None = None,
    settings: Settings | None = None,
    known_function_bases: frozenset[str] = frozenset(),
) -> FileResult:
    """Lint one file's contents. Parse errors become FileResult.error, never exceptions."""
    result = analyse(
        source,
        path,
        enabled=enabled,
        settings=settings,
        known_function_bases=known_function_bases,
    )
    if result.error is not None:
        return FileResult(path, error=result.error, parsed=result.parsed)
    if not result.violations or result.module is None or result.text is None:
        return FileResult(path, parsed=result.parsed)
    located = locate(
        result.module, result.text, result.violations, path, result.starts, result.line_map
    )
    return FileResult(path, findings=[finding for finding, _ in located], parsed=True)


def _decode(raw: bytes) -> str | FileError:
    """Decode like Python does: BOM, then a PEP 263 coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except (SyntaxError, LookupError) as exc:
        return FileError("", f"cannot decode: {exc}")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1)
        byte = raw[exc.start : exc.start + 1].hex()
        return FileError(
            "",
            f"cannot decode as {encoding}: byte 0x{byte} at line {line}, column {column + 1} "
            "(declare the encoding with a `# -*- coding: ... -*-` line)",
            line,
            column,
        )


def _positions(
    module: cst.Module,
    violations: list[Violation],
    starts: list[int] | None,
    line_map: list[int] | None = None,
) -> dict[int, tuple[int, int, int, int]]:
    """(line, col, end_line, end_col) by node id, for the nodes violations point at.

    PositionProvider generates the code of whatever it is given; on a big file that is most of
    the cost of a lint. When the first line of each top-level statement is known (from the `ast`
    pass), only the statements that hold a violation are generated, and shifted into place.
    """
    wanted = {id(v.anchor or v.node): v.anchor or v.node for v in violations}
    out: dict[int, tuple[int, int, int, int]] = {}
    if starts is None or any(v.top is None for v in violations):
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

        def original(line: int) -> int:
            return line_map[line - 1] if line_map and 0 < line <= len(line_map) else line

        for key, node in wanted.items():
            where = positions[node]
            out[key] = (
                original(where.start.line),
                where.start.column,
                original(where.end.line),
                where.end.column,
            )
        return out
    for top in sorted({v.top for v in violations if v.top is not None}):
        stmt = module.body[top]
        bare = stmt.with_changes(leading_lines=()) if hasattr(stmt, "leading_lines") else stmt
        sub = cst.Module(body=[bare])
        positions = MetadataWrapper(sub, unsafe_skip_copy=True).resolve(PositionProvider)
        # Line n of the statement is line first+n of the parsed text; a slice may have dropped
        # lines inside the statement (a long def around a Function class), so map each one.
        first = bisect_left(line_map, starts[top]) if line_map else starts[top] - 1

        def original(line: int, first: int = first) -> int:
            index = first + line - 1  # 0-based line of the parsed text
            return line_map[index] if line_map and index < len(line_map) else index + 1

        for key, node in wanted.items():
            where = positions.get(node)
            if where is not None:
                out[key] = (
                    original(where.start.line),
                    where.start.column,
                    original(where.end.line),
                    where.end.column,
                )
    missing = [node for key, node in wanted.items() if key not in out]
    if missing:  # a node outside the statement we expected: use the exact, slower pass
        return _positions(module, violations, None, line_map)
    return out


def locate(
    module: cst.Module,
    text: str,
    violations: list[Violation],
    path: str,
    starts: list[int] | None = None,
    line_map: list[int] | None = None,
) -> list[tuple[Finding, Violation]]:
    """Positions for unsuppressed violations; only files with findings pay for positions."""
    rules = all_rules()
    positions = _positions(module, violations, starts, line_map)
    suppressions = parse_suppressions(text)
    findings: dict[tuple[str, int, int], tuple[Finding, Violation]] = {}
    for violation in violations:
        line, col, end_line, end_col = positions[id(violation.anchor or violation.node)]
        meta = rules[violation.rule_id]
        if suppressions.silences(meta.id, meta.name, line):
            continue
        finding = Finding(
            path=path,
            rule_id=meta.id,
            name=meta.name,
            family=meta.family,
            severity=meta.severity,
            message=violation.message,
            line=line,
            col=col,
            end_line=end_line,
            end_col=end_col,
            fix_safety=meta.fix,
            fixable=violation.fix.safety if violation.fix is not None else None,
            subject=violation.subject,
        )
        findings.setdefault((meta.id, finding.line, finding.col), (finding, violation))
    return sorted(findings.values(), key=lambda pair: pair[0].sort_key)
