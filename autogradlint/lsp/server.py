"""`autogradlint lsp`: a pygls 2 server over stdio that calls the same engine as `check`."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..config import Config, ConfigError, discover
from ..engine import analyse, locate
from ..fix.loop import fix_text, single_fixes
from ..model import Finding
from .convert import SOURCE, hover_markdown, minimal_edit, to_diagnostic

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
DEBOUNCE_S = 0.05  # short: a 2,000-line file is linted within the 150 ms budget after typing


@dataclass
class DocumentState:
    version: int | None = None
    findings: list[Finding] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class AutogradLintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("autogradlint", __version__)
        self.documents: dict[str, DocumentState] = {}

    # --- configuration: re-read when the file changes, no restart needed ---------------------
    def config_for(self, path: Path) -> Config:
        try:
            config = discover(path)
        except ConfigError as exc:
            self.window_log_message(
                types.LogMessageParams(type=types.MessageType.Error, message=str(exc))
            )
            return Config(root=path.parent)
        return config

    def lint(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        state = self.documents.setdefault(uri, DocumentState())
        path = _path(uri)
        config = self.config_for(path)
        result = analyse(
            document.source,
            str(path),
            enabled=config.enabled_for(path),
            settings=config.settings,
        )
        if result.error is not None:
            return  # half-typed code: keep the last good diagnostics
        findings: list[Finding] = []
        if result.module is not None and result.text is not None and result.violations:
            findings = [
                f
                for f, _ in locate(
                    result.module,
                    result.text,
                    result.violations,
                    str(path),
                    result.layout,
                )
            ]
        state.version = document.version
        state.findings = findings
        lines = [line.rstrip("\r\n") for line in document.lines]
        codec = document.position_codec
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                version=document.version,
                diagnostics=[to_diagnostic(f, lines, codec) for f in findings],
            )
        )

    async def lint_later(self, uri: str, version: int | None) -> None:
        await asyncio.sleep(DEBOUNCE_S)
        document = self.workspace.get_text_document(uri)
        if document.version == version:  # publish only for the version that was linted
            self.lint(uri)


server = AutogradLintServer()


def _path(uri: str) -> Path:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(unquote(uri))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: AutogradLintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.lint(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: AutogradLintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    state = ls.documents.setdefault(uri, DocumentState())
    if state.task is not None:
        state.task.cancel()
    state.task = asyncio.ensure_future(ls.lint_later(uri, params.text_document.version))


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: AutogradLintServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.lint(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: AutogradLintServer, params: types.DidCloseTextDocumentParams) -> None:
    state = ls.documents.pop(params.text_document.uri, None)
    if state is not None and state.task is not None:
        state.task.cancel()
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
    )


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(
    ls: AutogradLintServer, params: types.DidChangeConfigurationParams
) -> None:
    for uri in list(ls.documents):
        ls.lint(uri)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(
    ls: AutogradLintServer, params: types.DidChangeWatchedFilesParams
) -> None:
    for uri in list(ls.documents):
        ls.lint(uri)


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: AutogradLintServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    state = ls.documents.get(uri)
    if state is None:
        return None
    document = ls.workspace.get_text_document(uri)
    lines = [line.rstrip("\r\n") for line in document.lines]
    for finding in state.findings:
        diagnostic = to_diagnostic(finding, lines, document.position_codec)
        if _contains(diagnostic.range, params.position):
            return types.Hover(
                contents=types.MarkupContent(
                    kind=types.MarkupKind.Markdown, value=hover_markdown(finding.rule_id)
                ),
                range=diagnostic.range,
            )
    return None


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=False
    ),
)
def code_action(
    ls: AutogradLintServer, params: types.CodeActionParams
) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    document = ls.workspace.get_text_document(uri)
    source = document.source
    path = _path(uri)
    config = ls.config_for(path)
    codec = document.position_codec
    only = params.context.only
    actions: list[types.CodeAction] = []
    wants_quickfix = not only or any(k.startswith("quickfix") for k in only)
    wants_fix_all = not only or any(FIX_ALL.startswith(k) or k.startswith(FIX_ALL) for k in only)
    if wants_quickfix:
        for diagnostic in params.context.diagnostics:
            if diagnostic.source != SOURCE or not isinstance(diagnostic.code, str):
                continue
            fixed = _quick_fix(source, str(path), config, diagnostic, document)
            if fixed is not None:
                title, new_source = fixed
                actions.append(
                    types.CodeAction(
                        title=f"{title} ({diagnostic.code})",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=True,
                        edit=_workspace_edit(uri, document.version, source, new_source, codec),
                    )
                )
            actions.append(_noqa_action(uri, document, diagnostic))
    if wants_fix_all:
        outcome = fix_text(
            source, str(path), enabled=config.enabled_for(path), settings=config.settings
        )
        if outcome.error is None and outcome.changed:
            actions.append(
                types.CodeAction(
                    title="autogradlint: fix all safe fixes",
                    kind=FIX_ALL,
                    edit=_workspace_edit(uri, document.version, source, outcome.source, codec),
                )
            )
    return actions


def _quick_fix(source, path, config, diagnostic, document):  # type: ignore[no-untyped-def]
    """The fix of the finding under this diagnostic, applied alone to the full text."""
    lines = [line.rstrip("\r\n") for line in document.lines]
    for fix in single_fixes(
        source, path, enabled=config.enabled_for(Path(path)), settings=config.settings
    ):
        if fix.finding.rule_id != diagnostic.code:
            continue
        candidate = to_diagnostic(fix.finding, lines, document.position_codec)
        if candidate.range != diagnostic.range:
            continue
        tier = "" if fix.safety == "safe" else " (unsafe)"
        return f"{fix.title or 'Fix'}{tier}", fix.source
    return None


def _noqa_action(uri, document, diagnostic) -> types.CodeAction:  # type: ignore[no-untyped-def]
    line_number = diagnostic.range.start.line
    line = document.lines[line_number].rstrip("\r\n")
    existing = re.search(r"#\s*noqa:\s*([\w,\s-]+)$", line)
    if existing:
        codes = sorted(
            {*(c.strip() for c in existing.group(1).split(",") if c.strip()), diagnostic.code}
        )
        new_line = line[: existing.start()] + "# noqa: " + ", ".join(codes)
    else:
        new_line = f"{line}  # noqa: {diagnostic.code}"
    codec = document.position_codec
    lines = [text.rstrip("\r\n") for text in document.lines]
    end = codec.position_to_client_units(
        lines, types.Position(line=line_number, character=len(line))
    )
    edit = types.TextEdit(
        range=types.Range(start=types.Position(line=line_number, character=0), end=end),
        new_text=new_line,
    )
    return types.CodeAction(
        title=f"Suppress {diagnostic.code} with `# noqa`",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=types.WorkspaceEdit(changes={uri: [edit]}),
    )


def _workspace_edit(uri, version, old, new, codec) -> types.WorkspaceEdit:  # type: ignore[no-untyped-def]
    return types.WorkspaceEdit(changes={uri: [minimal_edit(old, new, codec)]})


def _contains(rng: types.Range, pos: types.Position) -> bool:
    after_start = (pos.line, pos.character) >= (rng.start.line, rng.start.character)
    before_end = (pos.line, pos.character) <= (rng.end.line, rng.end.character)
    return after_start and before_end


def run() -> None:
    server.start_io()
