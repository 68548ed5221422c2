"""The text report written plainly to a pipe is, character for character, what rich prints to a
stream that is not a terminal; a terminal still gets rich's styles."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from conftest import ROOT
from rich.console import Console

from autogradlint.model import FileError, FileResult, Finding
from autogradlint.report.text import PlainLines, RichLines, plain_stream, render_text

# Text a markup printer would misread, or a terminal would act on.
AWKWARD = [
    "plain",
    "[bold]not markup[/bold] and \\[escaped]",
    ":thumbs_up: :smile: emoji codes",
    "tab\tinside\tand trailing\t",
    "wide 漢字\tthen a tab, combining e\u0301\tand another",
    "bell\x07 backspace\x08 escape\x1b[31m red",
    "wide 漢字 and combining e\u0301",
    "a very long line " * 30,
    "",
]


def _finding(path: str, message: str, line: int, **extra: object) -> Finding:
    fields: dict[str, object] = {
        "path": path,
        "rule_id": "AGL201",
        "name": "raw-grad-to-extension",
        "family": "B",
        "severity": "error",
        "message": message,
        "line": line,
        "col": 4,
        "end_line": line,
        "end_col": 9,
    }
    fields.update(extra)
    return Finding(**fields)  # type: ignore[arg-type]


def _cases() -> list[tuple[list[FileResult], list[FileError], dict[str, list[str]]]]:
    source = [f"x = {text!r}  # {text}" for text in AWKWARD] + ["\ty = 1", "z = [1]"]
    path = "pkg/[odd]\x1bname.py"
    findings = [
        _finding(path, text or "empty", 1 + i, help=text, fixable="safe" if i % 2 else None)
        for i, text in enumerate(AWKWARD)
    ]
    findings.append(_finding(path, "on a tab line", len(source) - 1, severity="warning"))
    findings.append(_finding(path, "past the end", 999, end_line=1000, fixable="unsafe"))
    findings.append(_finding("elsewhere.py", "no source", 3))
    results = [FileResult(path, findings), FileResult("clean.py")]
    errors = [FileError("bad.py", "syntax error", 1, 0)]
    return [
        (results, [], {path: source}),
        (results, errors, {}),
        ([FileResult("clean.py")], [], {}),
        ([FileResult("clean.py")], errors, {}),
        ([], [], {}),
    ]


@pytest.mark.parametrize("case", range(len(_cases())))
@pytest.mark.parametrize("quiet", [False, True])
def test_plain_output_is_what_rich_prints_to_a_pipe(case: int, quiet: bool) -> None:
    results, errors, sources = _cases()[case]
    stream = io.StringIO()
    console = Console(file=stream, highlight=False, soft_wrap=True)
    assert not console.is_terminal
    render_text(RichLines(console), results, errors, sources, quiet=quiet)
    written: list[str] = []
    render_text(PlainLines(written.append), results, errors, sources, quiet=quiet)
    assert "".join(f"{line}\n" for line in written) == stream.getvalue()


def test_a_terminal_gets_styles() -> None:
    results, errors, sources = _cases()[0]
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True)
    render_text(RichLines(console), results, errors, sources)
    assert "\x1b[1;31mAGL201" in stream.getvalue()


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "color", "env", "plain"),
    [
        (False, "auto", {}, True),
        (False, "never", {}, True),
        (False, "always", {}, False),
        (False, "auto", {"FORCE_COLOR": "1"}, False),
        (False, "auto", {"TTY_COMPATIBLE": "1"}, False),
        (True, "auto", {}, False),
        (True, "never", {}, False),  # rich keeps bold on a terminal without colour
    ],
)
def test_which_streams_are_written_plainly(
    tty: bool, color: str, env: dict[str, str], plain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert plain_stream(_Stream(tty), color) is plain


def test_check_to_a_pipe_does_not_import_rich(tmp_path: os.PathLike[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "autogradlint", "check", "--no-cache"]
        + [str(ROOT / "examples")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert "AGL" in done.stdout and "Found " in done.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "autogradlint.engine.pipeline" in imported  # the run was seen
    assert not [name for name in imported if name.startswith("rich")]
