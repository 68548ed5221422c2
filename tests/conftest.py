"""Shared helpers: expected-finding markers (`# AGL201`) in example and fixture code, and which
tests run only when asked for: those marked `corpus`, `network` (they download) or `slow`."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from autogradlint.meta import all_rules
from benchmarks.corpus import corpus_dir

ROOT = Path(__file__).resolve().parent.parent

# Every rule but AGL413 (custom op without a fake): tests of other rules write custom ops without
# fakes on purpose, to keep their examples small; tests/test_custom_op_fake.py owns AGL413.
BUT_FAKES = frozenset(all_rules()) - {"AGL413"}

# The smallest real bug (AGL101 at 13:16), shared by the CLI, output, cache and safety tests.
SQUARE_BUG = """\
import torch

class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        return torch.autograd.grad(y, x, g)[0]
"""
MARKER = re.compile(r"#\s*(?P<codes>AGL\d{3}(?:[ ,]+AGL\d{3})*)\b")
# On a line with a suppression comment, only a marker in the last comment of the line counts
# (`x  # noqa: AGL201  # AGL901`): the codes inside the directive are not expectations.
LAST_MARKER = re.compile(r"#\s*(?P<codes>AGL\d{3}(?:[ ,]+AGL\d{3})*)\s*$")


def expected_findings(code: str) -> list[tuple[str, int]]:
    """(rule, line) for every line that carries a `# AGL123` marker comment."""
    out: list[tuple[str, int]] = []
    for number, line in enumerate(code.splitlines(), start=1):
        if "noqa" in line or "autogradlint:" in line:
            match = LAST_MARKER.search(line)
            before = line[: match.start()] if match else ""
            if match is None or not re.search(r"noqa|autogradlint:", before):
                continue
        else:
            match = MARKER.search(line)
        if match:
            for code_id in re.split(r"[ ,]+", match.group("codes")):
                out.append((code_id, number))
    return sorted(out)


@pytest.fixture
def root() -> Path:
    return ROOT


# Tests that download or take minutes run only when asked for, by `-m` or by their environment
# switch, so that `python -m pytest` needs no network, writes nothing outside the checkout and
# /tmp, and takes under three minutes on two cores.
OPT_IN = {
    "corpus": "AUTOGRADLINT_CORPUS",  # the public corpus, ~450 MB into the user cache
    "network": "AUTOGRADLINT_NETWORK",  # pre-commit's hook environments from PyPI, ~150 MB
    "slow": "AUTOGRADLINT_SLOW",  # builds (a wheel, the C++ example) and long sweeps: minutes
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.markexpr:
        return  # `-m` says exactly what runs
    off = {mark for mark, switch in OPT_IN.items() if os.environ.get(switch) != "1"}
    kept, skipped = [], []
    for item in items:
        (skipped if off & {m.name for m in item.iter_markers()} else kept).append(item)
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = kept


def announce(config: pytest.Config, line: str) -> None:
    """Say what a test is about to download before it starts, even with output captured."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


def corpus_and_torch_trees() -> list[Path]:
    """The public corpus's sources and torch's installed source, those present (the calling
    test is skipped when neither is)."""
    trees = []
    if (corpus_dir() / "src").is_dir():
        trees.append(corpus_dir() / "src")
    spec = importlib.util.find_spec("torch")  # its source, without importing it
    if spec is not None and spec.origin is not None:
        trees.append(Path(spec.origin).parent)
    if not trees:
        pytest.skip("neither the corpus (tests/corpus/fetch.sh) nor torch is present")
    return trees
