"""The analysis engine: source in, findings out. Pure: no file system, no printing."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .analysis.facts import collect_facts
from .checks import ALL_CHECKS, Check, CheckContext
from .meta import all_rules
from .model import FileError, FileResult, Finding, Violation
from .prefilter import index_pattern
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
    mentions_index = bool(known_function_bases) and (
        index_pattern(known_function_bases).search(raw) is not None
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
        return Analysis(path, error=FileError(path, text.message))
    parse_input = text
    extra_triton: set[str] = set()
    try:
        sliced = slice_source(text, known_function_bases if mentions_index else frozenset())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        sliced = None  # let libcst parse the whole file: it reports the error, or copes
    else:
        if sliced is None:
            return Analysis(path, text=text)
        extra_triton = sliced.triton_kernels
        if not full:
            parse_input = sliced.source
    try:
        module = cst.parse_module(parse_input)
    except cst.ParserSyntaxError as exc:
        return Analysis(
            path,
            text=text,
            error=FileError(path, f"syntax error: {exc.message}", exc.raw_line, exc.raw_column),
        )
    except RecursionError:
        return Analysis(path, text=text, error=FileError(path, "too deeply nested to parse"))
    except Exception as exc:  # noqa: BLE001 - libcst raises bare exceptions on odd input
        return Analysis(path, text=text, error=FileError(path, f"cannot parse: {exc}"))
    try:
        facts = collect_facts(
            module, text, loaders=settings.loaders, known_function_bases=known_function_bases
        )
        facts.triton_kernels |= extra_triton
        ctx = CheckContext(facts=facts, enabled=enabled, settings=settings)
        for check in checks:
            check(ctx).run()
    except RecursionError:
        error = FileError(path, "too deeply nested to analyse")
        return Analysis(path, text=text, module=module, error=error, parsed=True)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not stop the run
        message = f"internal error (please report): {type(exc).__name__}: {exc}"
        return Analysis(path, text=text, module=module, error=FileError(path, message), parsed=True)
    return Analysis(path, text=text, module=module, violations=ctx.violations, parsed=True)


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
    located = locate(result.module, result.text, result.violations, path)
    return FileResult(path, findings=[finding for finding, _ in located], parsed=True)


def _decode(raw: bytes) -> str | FileError:
    """Decode like Python does: BOM, then a PEP 263 coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        return FileError("", f"cannot decode: {exc}")


def locate(
    module: cst.Module, text: str, violations: list[Violation], path: str
) -> list[tuple[Finding, Violation]]:
    """Positions for unsuppressed violations; only files with findings pay for PositionProvider."""
    rules = all_rules()
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    suppressions = parse_suppressions(text)
    findings: dict[tuple[str, int, int], tuple[Finding, Violation]] = {}
    for violation in violations:
        node = violation.anchor or violation.node
        where = positions[node]
        meta = rules[violation.rule_id]
        if suppressions.silences(meta.id, meta.name, where.start.line):
            continue
        finding = Finding(
            path=path,
            rule_id=meta.id,
            name=meta.name,
            family=meta.family,
            severity=meta.severity,
            message=violation.message,
            line=where.start.line,
            col=where.start.column,
            end_line=where.end.line,
            end_col=where.end.column,
            fix_safety=meta.fix,
            fixable=violation.fix.safety if violation.fix is not None else None,
        )
        findings.setdefault((meta.id, finding.line, finding.col), (finding, violation))
    return sorted(findings.values(), key=lambda pair: pair[0].sort_key)
