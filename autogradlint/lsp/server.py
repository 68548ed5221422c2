"""`autogradlint lsp`: a pygls 2 server over stdio that calls the same engine as `check`.

The analysis runs in a worker process (isolation.Persistent), never in the server: a document
that crashes the parser or runs away costs that lint, not the server. The event loop only waits
for the worker; configuration is read once per directory and again when a configuration file
changes; a code action reuses the fixes computed for the document's current version. Every
request is answered, with a JSON-RPC error where pygls would drop it (protocol.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from ..config import CONFIG_FILES, Config, ConfigError, discover
from ..engine.fix_loop import FixOutcome, SingleFix
from ..isolation import Failure, Persistent
from ..model import FileResult, Finding
from ..runner import discover as discover_files
from ..settings import Settings
from ..source_io import read_source
from ..text.noqa import add_noqa
from ..text.outline import Outline, outline
from ..version import __version__
from ..view import EMPTY, ProjectIndex, Record, project_root
from .convert import SOURCE, hover_markdown, minimal_edit, to_diagnostic
from .jobs import PRELOAD, Job
from .jobs import run as run_job
from .protocol import AnsweringProtocol

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
DEBOUNCE_S = 0.05  # short: a 2,000-line file is linted within the 150 ms budget after typing
WORKER_TIME_BUDGET_S = 20.0  # a document that takes longer is reported; the server goes on


@dataclass
class DocumentState:
    version: int | None = None
    findings: list[Finding] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    fixes: tuple[int | None, list[SingleFix]] | None = None  # the single fixes of one version


class AutogradLintServer(LanguageServer):
    protocol: AnsweringProtocol

    def __init__(self) -> None:
        super().__init__("autogradlint", __version__, protocol_cls=AnsweringProtocol)
        self.documents: dict[str, DocumentState] = {}  # open documents only
        self.configs: dict[Path, Config] = {}  # by directory, until a configuration changes
        self.worker = Persistent(run_job, time_budget=WORKER_TIME_BUDGET_S, preload=PRELOAD)
        # The project view, per project root: every file's record, open documents from their
        # buffers; rebuilt (linear in the candidate classes) when a record changes.
        self.records: dict[Path, dict[str, Record]] = {}
        self.indexes: dict[Path, ProjectIndex] = {}

    def config_for(self, path: Path) -> Config:
        directory = path.parent
        config = self.configs.get(directory)
        if config is not None:
            return config
        try:
            config = discover(path)
        except ConfigError as exc:
            self.window_log_message(
                types.LogMessageParams(type=types.MessageType.Error, message=str(exc))
            )
            config = Config(root=directory)
        self.configs[directory] = config
        return config

    def job(self, kind: str, uri: str) -> tuple[Job, int | None]:
        document = self.workspace.get_text_document(uri)
        path = _path(uri)
        config = self.config_for(path)
        source = document.source
        index = self.index_for(path, config)
        view = EMPTY
        if index is not None:
            view = index.view(str(path), text=source, outline=outline(source.encode("utf-8")))
        job: Job = (kind, source, str(path), config.enabled_for(path), config.settings, view)
        return job, document.version

    # --- the project view: built once per root, kept current from buffers and disk events ------
    def index_for(self, path: Path, config: Config) -> ProjectIndex | None:
        root = project_root(path, config.source)
        if root is None:
            return None  # a loose file: nothing else to know
        index = self.indexes.get(root)
        if index is None:
            files = discover_files([str(root)], config).files
            self.records[root] = {os.path.abspath(f): record_of(f) for f in files}
            self._open_buffers_into(root)
            index = self.indexes[root] = ProjectIndex(root, list(self.records[root].values()))
        return index

    def _open_buffers_into(self, root: Path) -> None:
        for uri in self.documents:
            path = _path(uri)
            if _inside(path, root):
                source = self.workspace.get_text_document(uri).source
                self.records[root][os.path.abspath(path)] = record_of(path, source)

    def refresh(self, path: Path, source: str | None = None) -> None:
        """A file changed (in a buffer, or on disk): its record, then the indexes holding it."""
        for root, records in self.records.items():
            if not _inside(path, root):
                continue
            key = os.path.abspath(path)
            if source is None and not path.exists():
                records.pop(key, None)
            else:
                records[key] = record_of(path, source)
            self.indexes[root] = ProjectIndex(root, list(records.values()))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A body that is not JSON is answered (ParseError); other errors as pygls does."""
        reading = source is JsonRpcException  # what pygls says of a message it could not take
        if reading and isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)):
            self.protocol.unreadable()
            return
        super().report_server_error(error, source)

    async def compute(self, job: Job) -> object:
        """Run a job in the worker process; the event loop only waits."""
        return await asyncio.get_running_loop().run_in_executor(None, self.worker.run, job)

    async def lint(self, uri: str) -> None:
        state = self.documents.get(uri)
        if state is None:
            return  # only open documents: a file the client did not open is never read
        job, version = self.job("lint", uri)
        result = await self.compute(job)
        document = self.workspace.get_text_document(uri)
        if uri not in self.documents or document.version != version:
            return  # closed, or edited meanwhile: a newer lint is on its way
        if isinstance(result, Failure):
            self.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Warning,
                    message=f"autogradlint: {_path(uri)}: not analysed: {result.reason}",
                )
            )
            return  # keep the last good diagnostics
        assert isinstance(result, FileResult)
        if result.error is not None:
            if result.error.message.startswith("internal error"):
                self.window_log_message(
                    types.LogMessageParams(
                        type=types.MessageType.Error,
                        message=f"autogradlint: {result.error.describe()}",
                    )
                )
            return  # half-typed code: keep the last good diagnostics
        state.version = version
        state.findings = result.findings
        state.fixes = None
        lines = [line.rstrip("\r\n") for line in document.lines]
        codec = document.position_codec
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                version=version,
                diagnostics=[to_diagnostic(f, lines, codec) for f in result.findings],
            )
        )

    async def lint_later(self, uri: str, version: int | None) -> None:
        await asyncio.sleep(DEBOUNCE_S)
        document = self.workspace.get_text_document(uri)
        if document.version == version:  # publish only for the version that was linted
            await self.lint(uri)

    async def single_fixes(self, uri: str) -> list[SingleFix]:
        """The fixes of the current version, computed once however often the client asks (it
        asks on every cursor move over a diagnostic)."""
        state = self.documents.get(uri)
        job, version = self.job("fixes", uri)
        if state is not None and state.fixes is not None and state.fixes[0] == version:
            return state.fixes[1]
        result = await self.compute(job)
        fixes = result if isinstance(result, list) else []
        if state is not None:
            state.fixes = (version, fixes)
        return fixes

    def relint_all(self) -> None:
        """A configuration changed: forget what was read, lint every open document again."""
        self.configs.clear()
        self.records.clear()
        self.indexes.clear()
        for uri in list(self.documents):
            asyncio.ensure_future(self.lint(uri))


def record_of(path: str | Path, source: str | None = None) -> Record:
    """The index's record of one file, from an editor buffer or from disk."""
    data = source.encode("utf-8", "surrogatepass") if source is not None else read_source(path)
    if not isinstance(data, bytes):
        return Record(str(path), Outline(), lambda: None)
    return Record(str(path), outline(data), lambda: data)


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(root)
    except ValueError:
        return False
    return True


server = AutogradLintServer()


def _path(uri: str) -> Path:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(unquote(uri))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: AutogradLintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.documents.setdefault(params.text_document.uri, DocumentState())
    await ls.lint(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: AutogradLintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    state = ls.documents.get(uri)
    if state is None:
        return
    if state.task is not None:
        state.task.cancel()
    ls.refresh(_path(uri), ls.workspace.get_text_document(uri).source)
    state.task = asyncio.ensure_future(ls.lint_later(uri, params.text_document.version))


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: AutogradLintServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if _path(uri).name in CONFIG_FILES:
        ls.relint_all()
    await ls.lint(uri)  # a no-op unless the document is open: a save never reads the disk


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: AutogradLintServer, params: types.DidCloseTextDocumentParams) -> None:
    state = ls.documents.pop(params.text_document.uri, None)
    if state is not None and state.task is not None:
        state.task.cancel()
    job: Job = ("close", "", str(_path(params.text_document.uri)), frozenset(), Settings(), EMPTY)
    asyncio.ensure_future(ls.compute(job))
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
    )


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(
    ls: AutogradLintServer, params: types.DidChangeConfigurationParams
) -> None:
    ls.relint_all()


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(
    ls: AutogradLintServer, params: types.DidChangeWatchedFilesParams
) -> None:
    paths = [_path(change.uri) for change in params.changes]
    if any(path.name in CONFIG_FILES for path in paths):
        ls.relint_all()
        return
    open_paths = {_path(uri) for uri in ls.documents}
    for path in paths:
        if path not in open_paths:  # an open document's buffer is what counts
            ls.refresh(path)
    for uri in list(ls.documents):
        asyncio.ensure_future(ls.lint(uri))


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
async def code_action(
    ls: AutogradLintServer, params: types.CodeActionParams
) -> list[types.CodeAction] | None:
    uri = params.text_document.uri
    if uri not in ls.documents:
        return None
    document = ls.workspace.get_text_document(uri)
    source = document.source
    codec = document.position_codec
    only = params.context.only
    actions: list[types.CodeAction] = []
    wants_quickfix = not only or any(k.startswith("quickfix") for k in only)
    wants_fix_all = not only or any(FIX_ALL.startswith(k) or k.startswith(FIX_ALL) for k in only)
    ours = [d for d in params.context.diagnostics if d.source == SOURCE and isinstance(d.code, str)]
    if wants_quickfix and ours:
        fixes = await ls.single_fixes(uri)
        lines = [line.rstrip("\r\n") for line in document.lines]
        for diagnostic in ours:
            for fix in fixes:
                same = fix.finding.rule_id == diagnostic.code and (
                    to_diagnostic(fix.finding, lines, codec).range == diagnostic.range
                )
                if not same:
                    continue
                tier = "" if fix.safety == "safe" else " (unsafe)"
                actions.append(
                    types.CodeAction(
                        title=f"{fix.title or 'Fix'}{tier} ({diagnostic.code})",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=fix.safety == "safe",
                        edit=_workspace_edit(uri, document.version, source, fix.source, codec),
                    )
                )
                break
            actions.append(_noqa_action(uri, document, diagnostic))
    if wants_fix_all:
        job, _version = ls.job("fix_all", uri)
        outcome = await ls.compute(job)
        if isinstance(outcome, FixOutcome) and outcome.error is None and outcome.changed:
            actions.append(
                types.CodeAction(
                    title="autogradlint: fix all safe fixes",
                    kind=FIX_ALL,
                    edit=_workspace_edit(uri, document.version, source, outcome.source, codec),
                )
            )
    return actions


def _noqa_action(uri, document, diagnostic) -> types.CodeAction:  # type: ignore[no-untyped-def]
    """Add (or extend) `# noqa: CODE` where it counts and breaks nothing: the end of the
    finding's line, or of the last line a `\\` or a multi-line string joins it to."""
    source = document.source
    new, _ = add_noqa(source, [(diagnostic.range.start.line + 1, str(diagnostic.code))])
    return types.CodeAction(
        title=f"Suppress {diagnostic.code} with `# noqa`",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=_workspace_edit(uri, document.version, source, new, document.position_codec),
    )


def _workspace_edit(uri, version, old, new, codec) -> types.WorkspaceEdit:  # type: ignore[no-untyped-def]
    return types.WorkspaceEdit(changes={uri: [minimal_edit(old, new, codec)]})


def _contains(rng: types.Range, pos: types.Position) -> bool:
    after_start = (pos.line, pos.character) >= (rng.start.line, rng.start.character)
    before_end = (pos.line, pos.character) <= (rng.end.line, rng.end.character)
    return after_start and before_end


def run() -> None:
    """Serve over stdio until `exit` or the end of input; exit 0 only after `shutdown` (LSP)."""
    try:
        server.start_io()
    finally:
        server.worker.close()
    sys.exit(0 if server.protocol.shut_down else 1)
