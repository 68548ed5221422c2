"""Every file named is accounted for: analysed, skipped for having no autograd code, or an error.

A file without autograd code is never parsed (parsing every such file with CPython's own
parser would cost more than ruff's whole run on torch's tree, and would report code written
for a newer Python as broken), but it is always read and decoded: one that is not text is an
error like any other, exit status 2, in `check`, in a cached `check` and in `fix`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main

# No autograd code, and a byte that is not UTF-8 (a Latin-1 `é`) on line 2.
LATIN_1 = b"# notes\nname = 'caf\xe9'\n"


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    (tmp_path / "bug.py").write_text(SQUARE_BUG)
    (tmp_path / "util.py").write_text("def helper(x):\n    return x + 1\n")
    return tmp_path


def test_a_file_that_is_not_utf8_is_an_error_though_it_has_no_autograd_code(
    tree: Path,
) -> None:
    (tree / "latin.py").write_bytes(LATIN_1)
    result = run("check", "--no-cache", str(tree / "latin.py"))
    assert result.exit_code == 2
    assert "latin.py:2:12: cannot decode as utf-8: byte 0xe9 at line 2, column 12" in result.stderr
    assert "All checks passed" not in result.stdout
    (tree / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\n" + LATIN_1)  # declared
    assert run("check", "--no-cache", str(tree / "latin.py")).exit_code == 0


def test_a_cached_run_reports_it_again(tree: Path) -> None:
    (tree / "latin.py").write_bytes(LATIN_1)
    cache = str(tree / ".cache")
    first = run("check", "--cache-dir", cache, str(tree))
    second = run("check", "--cache-dir", cache, str(tree))
    assert first.exit_code == second.exit_code == 2
    assert "cannot decode as utf-8" in second.stderr


def test_fix_reports_it_too(tree: Path) -> None:
    (tree / "latin.py").write_bytes(LATIN_1)
    result = run("fix", str(tree / "latin.py"))
    assert result.exit_code == 2
    assert "latin.py:2:12: cannot decode as utf-8" in result.stderr


def test_the_summary_says_what_was_analysed_and_what_was_skipped(tree: Path) -> None:
    clean = run("check", "--no-cache", str(tree / "util.py"))
    assert clean.stdout == (
        "All checks passed! (1 file checked: 0 analysed, 1 without autograd code)\n"
    )
    found = run("check", "--no-cache", str(tree))
    assert "2 files checked: 1 analysed, 1 without autograd code." in found.stdout


def test_show_files_marks_the_skipped_and_the_unreadable(tree: Path) -> None:
    (tree / "latin.py").write_bytes(LATIN_1)
    result = run("check", "--no-cache", "--show-files", str(tree))
    assert result.exit_code == 2
    assert result.stdout.splitlines() == [
        str((tree / "bug.py").resolve()),
        f"{(tree / 'latin.py').resolve()}  (not checked: see the error)",
        f"{(tree / 'util.py').resolve()}  (skipped: no autograd code)",
    ]
    assert "cannot decode as utf-8" in result.stderr


def test_a_syntax_error_without_autograd_code_is_not_parsed_and_says_so(tree: Path) -> None:
    """The README's exit-code table states it: such a file counts as skipped, not as clean."""
    (tree / "broken.py").write_text("def f(:\n    pass\n")
    result = run("check", "--no-cache", str(tree / "broken.py"))
    assert result.exit_code == 0
    assert "1 file checked: 0 analysed, 1 without autograd code" in result.stdout
    (tree / "broken.py").write_text("import torch\nclass F(torch.autograd.Function):\n  def (:\n")
    assert run("check", "--no-cache", str(tree / "broken.py")).exit_code == 2
