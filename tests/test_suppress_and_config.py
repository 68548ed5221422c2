"""Suppression comments, gitignore patterns and config parsing, as pure functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from autogradlint.config import ConfigError, from_mapping
from autogradlint.engine.pipeline import lint_source
from autogradlint.gitignore import is_ignored, parse_gitignore
from autogradlint.text.suppress import parse_suppressions

BUG = """\
import torch

class Square(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        return torch.autograd.grad(y, x, g)[0]{comment}
"""


@pytest.mark.parametrize(
    ("comment", "silenced"),
    [
        ("  # noqa", True),
        ("  # noqa: AGL101", True),
        ("  # noqa: AGL201", False),
        ("  # autogradlint: ignore[AGL101]", True),
        ("  # autogradlint: ignore[autograd-grad-without-enable-grad]", True),
        ("  # autogradlint: ignore[AGL2]", False),
        ("  # a comment", False),
    ],
)
def test_line_suppressions(comment: str, silenced: bool) -> None:
    result = lint_source(BUG.format(comment=comment))
    assert (result.findings == []) is silenced


def test_ignore_alone_on_the_line_above_and_file_level() -> None:
    above = BUG.replace(
        "        return torch", "        # autogradlint: ignore[AGL101]\n        return torch"
    )
    assert lint_source(above.format(comment="")).findings == []
    file_level = "# autogradlint: file-ignore[AGL1]\n" + BUG.format(comment="")
    assert lint_source(file_level).findings == []


def test_noqa_inside_a_string_does_not_count() -> None:
    sup = parse_suppressions('x = "# noqa"\n')
    assert sup.by_line == {}


def test_gitignore_semantics() -> None:
    rules = parse_gitignore("*.pyc\nbuild/\n/top.py\n!keep.py\ndocs/**/gen_*.py\n")
    assert is_ignored(rules, "a/b/x.pyc", False)
    assert is_ignored(rules, "build", True) and not is_ignored(rules, "build", False)
    assert is_ignored(rules, "top.py", False) and not is_ignored(rules, "sub/top.py", False)
    assert is_ignored(rules, "docs/a/b/gen_x.py", False)
    assert is_ignored(rules, "keep.py", False) is False


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="must be a list of strings"):
        from_mapping({"select": 3}, "pyproject.toml", Path("."))
    with pytest.raises(ConfigError, match="per-file-ignores.x.py"):
        from_mapping({"per-file-ignores": {"x.py": ["NOPE"]}}, "pyproject.toml", Path("."))


def test_extension_modules_config_changes_what_is_compiled() -> None:
    code = """\
import torch
import mykernels

class F(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        return mykernels.bwd(g)
"""
    assert lint_source(code).findings == []
    config = from_mapping({"extend-extension-modules": ["mykernels"]}, "pyproject.toml", Path("."))
    (finding,) = lint_source(code, settings=config.settings).findings
    assert finding.rule_id == "AGL201"
