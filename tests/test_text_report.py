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
from test_native import BACKWARD_VIA

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


# --- a quoted line cannot drive the terminal (issue 34, 13) ------------------------------------
# What a source file can hold that a terminal acts on: clear the screen and home the cursor
# (the finding and summary vanish), colour, a carriage return, a CSI in its one-byte form, a
# right-to-left override.
HOSTILE = "\x1b[2J\x1b[H\x1b[31m\rhidden\x9b0m\u202e"
_CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0))]


def _raw_controls(output: str, allowed: str = "") -> list[str]:
    """Control characters written as they are (`allowed`: rich's own styles)."""
    cleaned = output.replace(allowed, "") if allowed else output
    return sorted({c for c in cleaned if c in _CONTROLS or c == "\u202e"} - {"\n"})


def _plain(results: list[FileResult], sources: dict[str, list[str]]) -> list[str]:
    written: list[str] = []
    render_text(PlainLines(written.append), results, [], sources)
    return written


@pytest.mark.parametrize(
    "prefix",
    ["", HOSTILE, "\t", "\t\t x\t", "漢字\t", "e\u0301e\u0301\t", "\x00\x7f\t"],
)
def test_a_quoted_line_is_escaped_and_the_carets_stay_under_the_finding(prefix: str) -> None:
    from rich.cells import cell_len

    line = f"    y = {prefix}grad  # {HOSTILE}"
    col = line.index("grad")
    finding = _finding("m.py", f"uses `{HOSTILE}grad`", 2, col=col, end_col=col + 4, help=HOSTILE)
    written = _plain([FileResult("m.py", [finding])], {"m.py": ["x = 1", line, "z = 2"]})
    assert _raw_controls("\n".join(written)) == []
    (help_line,) = [w for w in written if "= help" in w]
    assert "\\x1b[2J" in written[0] and "\\x1b[2J" in help_line
    code = next(w for w in written if w.startswith("2 |"))
    carets = next(w for w in written if "^" in w)
    assert "\\x1b[2J\\x1b[H\\x1b[31m\\x0dhidden\\x9b0m\\u202e" in code
    # the carets start at the cell where `grad` starts, and cover its four cells
    assert cell_len(carets[: carets.index("^")]) == cell_len(code[: code.index("grad")])
    assert carets.count("^") == 4


def test_a_terminal_gets_escapes_and_its_own_styles_only() -> None:
    line = f"y = grad  # {HOSTILE}"
    finding = _finding("m.py", f"about `{HOSTILE}`", 1, col=4, end_col=8, help=HOSTILE)
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, highlight=False, soft_wrap=True)
    render_text(RichLines(console), [FileResult("m.py", [finding])], [], {"m.py": [line]})
    output = stream.getvalue()
    assert "\x1b[2J" not in output and "\r" not in output and "\u202e" not in output
    assert "\\x1b[2J" in output


def test_concise_output_escapes_the_message() -> None:
    from autogradlint.report.json_format import render_concise

    finding = _finding("m.py", f"about `{HOSTILE}`", 1)
    assert _raw_controls(render_concise([FileResult("m.py", [finding])], [], quiet=True)) == []


_EXTENSION = """\
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
setup(name="pkg", ext_modules=[CUDAExtension("pkg._k", sources=["k.cpp"])])
"""
# A form feed (a page break, common in older code) before the finding: str.splitlines breaks
# a line there and every frame after it quoted the line above the finding. (Not the carriage
# return of HOSTILE: alone, Python reads one as a line break.)
ONE_LINE = HOSTILE.replace("\r", "")
_HOSTILE_MODULE = "import torch\nfrom . import _k\n\f" + BACKWARD_VIA.format(
    call=f"_k.scale(\tgrad, 2.0)  # {ONE_LINE}"
)


@pytest.mark.parametrize(
    "options",
    [
        ["--output-format", "text"],
        ["--output-format", "full"],  # the fix's diff quotes the line too
        ["--show-fixes", "--output-format", "text"],
        ["--output-format", "concise"],
        ["--output-format", "github"],
        ["--output-format", "junit"],
        ["--output-format", "json"],
        ["--output-format", "sarif"],
        ["--statistics"],
        ["--color", "always"],
    ],
)
def test_no_output_format_writes_a_control_character_from_the_source(
    tmp_path: os.PathLike[str], options: list[str]
) -> None:
    from pathlib import Path

    from click.testing import CliRunner

    from autogradlint.cli import main

    root = Path(tmp_path)
    (root / "pkg").mkdir()
    (root / "setup.py").write_text(_EXTENSION)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "ops.py").write_text(_HOSTILE_MODULE)
    result = CliRunner().invoke(main, ["check", "--no-cache", *options, str(root / "pkg")])
    assert result.exit_code == 1, result.output
    styles = "\x1b[" if "always" in options else ""  # rich's own: `\x1b[1;31m` ... `\x1b[0m`
    assert "\x1b[2J" not in result.output and "\x1b[H" not in result.output
    assert _raw_controls(result.output, styles) == []
    if options[-1] == "text":
        quoted = [line for line in result.output.splitlines() if line.startswith("11 |")]
        escapes = "\\x1b[2J\\x1b[H\\x1b[31mhidden\\x9b0m\\u202e"
        assert quoted == [f"11 |         return _k.scale(        grad, 2.0)  # {escapes}"]
