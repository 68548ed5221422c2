"""Bad input: each case is a clear one-line error with the path (and line), the run goes on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main

HEADER = "import torch\n\n\nclass F(torch.autograd.Function):\n"
GOOD_BACKWARD = "    @staticmethod\n    def backward(ctx, g):\n        return g\n"
BUG = SQUARE_BUG


def check(*paths: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["check", "--no-cache", *paths])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "bug.py").write_text(BUG)  # a real finding: proves the run went on
    return tmp_path


def _assert_error(result, needle: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert any(needle in line for line in errors), result.output
    assert "AGL101" in result.output  # the other file was still checked


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        (
            "syntax.py",
            HEADER + "    def backward(ctx, g:\n",
            "syntax.py:5:17: syntax error: '(' was never closed",
        ),
        (
            "undecodable.py",
            HEADER.encode() + b"    # caf\xe9\n" + GOOD_BACKWARD.encode(),
            "undecodable.py:5:10: cannot decode as utf-8: byte 0xe9 at line 5, column 10",
        ),
        (
            "nul.py",
            HEADER + GOOD_BACKWARD + "x = 1\x00\n",
            "nul.py:8:1: source contains a NUL byte",
        ),
    ],
)
def test_broken_files_are_reported_with_path_and_line(
    tree: Path, name: str, content, needle
) -> None:
    path = tree / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    _assert_error(check(str(tree)), needle)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        (
            "latin1_cookie.py",
            b"# -*- coding: latin-1 -*-\n"
            + HEADER.encode()
            + b"    # caf\xe9\n"
            + GOOD_BACKWARD.encode(),
        ),
        ("bom.py", b"\xef\xbb\xbf" + (HEADER + GOOD_BACKWARD).encode()),
        ("crlf.py", (HEADER + GOOD_BACKWARD).replace("\n", "\r\n").encode()),
        ("mixed.py", (HEADER + GOOD_BACKWARD).replace("\n", "\r\n", 2).encode()),
        ("empty.py", b""),
        (
            "py312.py",
            b"import torch\n\ntype Alias = int\n\nclass F[T](torch.autograd.Function):\n"
            b"    @staticmethod\n    def backward(ctx, g):\n        return f'{g!r:{\"x\"}}'\n",
        ),
        (
            "deep.py",
            (
                HEADER
                + "    @staticmethod\n    def backward(ctx, g):\n        return "
                + "(" * 150
                + "g"
                + ")" * 150
                + "\n"
            ).encode(),
        ),
    ],
)
def test_unusual_but_valid_files_are_checked(tree: Path, name: str, content: bytes) -> None:
    (tree / name).write_bytes(content)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "json", str(tree)])
    assert result.exit_code == 1, result.output
    assert "error:" not in result.output


def test_very_deep_nesting_is_an_error_not_a_crash(tree: Path) -> None:
    (tree / "deeper.py").write_text(
        HEADER
        + "    @staticmethod\n    def backward(ctx, g):\n        return "
        + "[" * 3000
        + "]" * 3000
        + "\n"
    )
    result = check(str(tree))
    assert result.exit_code == 2
    assert "deeper.py" in result.output and "Traceback" not in result.output


def test_five_megabyte_file(tree: Path) -> None:
    lines = [HEADER + GOOD_BACKWARD]
    lines += [f"def f{i}(a, b):\n    return a + b * {i}\n" for i in range(115_000)]
    (tree / "big.py").write_text("\n".join(lines))
    assert (tree / "big.py").stat().st_size > 5_000_000
    result = check(str(tree))
    assert result.exit_code == 1 and "error:" not in result.output


def test_paths_that_are_not_files(tree: Path) -> None:
    (tree / "pkg.py").mkdir()  # a directory named like a module: walked, not an error
    (tree / "pkg.py" / "inner.py").write_text(BUG)
    (tree / "loop.py").symlink_to(tree / "loop.py")
    (tree / "notes.txt").write_text("x")
    result = check(
        str(tree), str(tree / "missing.py"), str(tree / "loop.py"), str(tree / "notes.txt")
    )
    assert result.exit_code == 2
    assert f"{tree / 'missing.py'}: no such file or directory" in result.output
    assert f"{tree / 'loop.py'}: cannot open: Too many levels of symbolic links" in result.output
    assert f"{tree / 'notes.txt'}: not a Python file (expected .py or .pyi)" in result.output
    assert result.output.count("AGL101") >= 2  # bug.py and pkg.py/inner.py


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a file without read permission")
def test_unreadable_file(tree: Path) -> None:
    path = tree / "secret.py"
    path.write_text(BUG)
    path.chmod(0)
    try:
        _assert_error(check(str(tree)), "secret.py: cannot read: Permission denied")
    finally:
        path.chmod(0o644)


# --- configuration and baselines nested thousands deep (issue 34, item 14) ------------------
DEEP = 2500  # far past the interpreter's recursion limit, as a generated file can be
NESTED_CONFIGS = [
    ("pyproject.toml", "[tool.autogradlint]\nselect = " + "[" * DEEP + "]" * DEEP + "\n"),
    ("pyproject.toml", "[tool.autogradlint]\nselect = " + "{a = " * DEEP + "1" + "}" * DEEP),
    (".autogradlint.yaml", "select: " + "[" * DEEP + "]" * DEEP + "\n"),
    (".autogradlint.yaml", "select: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n"),
]


@pytest.mark.parametrize(("name", "text"), NESTED_CONFIGS)
def test_a_configuration_nested_thousands_deep_is_an_error_naming_it(
    tree: Path, name: str, text: str
) -> None:
    (tree / name).write_text(text)
    result = CliRunner().invoke(main, ["check", "--no-cache", str(tree)])
    # It used to end in RecursionError: a traceback and exit 1, read as "findings".
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert f"error: {tree / name}: invalid" in result.output
    assert "nested too deeply" in result.output


@pytest.mark.parametrize(("name", "text"), NESTED_CONFIGS[::2])
def test_the_language_server_lints_on_beside_a_nested_configuration(
    tree: Path, name: str, text: str
) -> None:
    from autogradlint.lsp.server import AutogradLintServer

    (tree / name).write_text(text)
    server = AutogradLintServer()
    logged: list[str] = []
    server.window_log_message = lambda params: logged.append(params.message)
    config = server.config_for(tree / "bug.py")  # used to raise, and the server stopped linting
    assert config.source is None and "AGL101" in config.enabled_rules()
    assert logged == [
        f"{tree / name}: invalid {'TOML' if name.endswith('toml') else 'YAML'}: "
        "nested too deeply to read"
    ]


def test_a_baseline_nested_thousands_deep_is_an_error_naming_it(tree: Path) -> None:
    baseline = tree / "baseline.json"
    baseline.write_text("[" * DEEP + "]" * DEEP)
    result = CliRunner().invoke(
        main, ["check", "--no-cache", "--baseline", str(baseline), str(tree)]
    )
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert f"error: {baseline}: not a baseline file (nested too deeply)" in result.output


def test_a_pyproject_whose_tool_is_not_a_table_is_an_error_naming_it(tree: Path) -> None:
    (tree / "pyproject.toml").write_text("tool = 3\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", str(tree)])
    assert isinstance(result.exception, SystemExit), result.exception  # was AttributeError
    assert result.exit_code == 2
    assert f"error: {tree / 'pyproject.toml'}: `tool` must be a table" in result.output
