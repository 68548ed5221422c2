"""The speed contract: the fast path reports exactly what a whole-file libcst analysis reports.

`check` runs the checks on a tree rebuilt from `ast` of the file's slice (speed/rebuild.py,
speed/twins.py). Only the declared "cannot do this exactly" signals (Unsupported, NeedsParse, a
finding that cannot be placed) send a file to libcst's parse of the slice; any other exception
on the rebuilt tree is the file's internal error, never a silent second run. Over every rule
example, fixture, example, slicing case and (when present) the corpus and torch's tree: the same
findings, messages and positions as libcst's parse of the whole file, with the route asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, SQUARE_BUG
from test_rebuild import _corpus_files
from test_slicing import CASES

from autogradlint.checks.base import Check
from autogradlint.checks.registry import REGISTRY
from autogradlint.engine import pipeline
from autogradlint.engine.door import lint
from autogradlint.engine.pipeline import Pass, examine
from autogradlint.engine.request import LintRequest
from autogradlint.meta import all_rules

DECLARED = ("Unsupported: ", "NeedsParse", "a finding's statement could not be placed")


def _sources() -> list[tuple[str, str]]:
    """(name, source) of every example, fixture, rule example and slicing case."""
    files = [
        *sorted((ROOT / "examples").rglob("*.py")),
        *sorted((ROOT / "tests" / "fixtures").rglob("*.py")),
        *sorted((ROOT / "tests" / "fixes").rglob("*.py")),
    ]
    sources = [(str(path.relative_to(ROOT)), path.read_text()) for path in files]
    for rule in all_rules().values():
        sources += [(f"{rule.id} valid {i}", code) for i, code in enumerate(rule.valid)]
        sources += [(f"{rule.id} invalid {i}", case.code) for i, case in enumerate(rule.invalid)]
        sources += [
            (f"{rule.id} fixed {i}", case.fixed)
            for i, case in enumerate(rule.invalid)
            if case.fixed
        ]
    sources += [(f"slicing case {name}", code) for name, code in sorted(CASES.items())]
    return sources


def _both_ways(source: bytes | str, path: str) -> tuple[Pass, Pass]:
    request = LintRequest(source, path, record_depends=False)
    return examine(request, "rebuilt"), examine(request, "whole")


def _differences(fast: Pass, whole: Pass, name: str) -> list[str]:
    """How the fast path's answer differs from the whole file's, and a route that is wrong."""
    problems = []
    if fast.result.error != whole.result.error:
        problems.append(f"{name}: errors differ: {fast.result.error} / {whole.result.error}")
    elif fast.reported != whole.reported:
        problems.append(f"{name}: fast path {fast.reported} / whole file {whole.reported}")
    if whole.result.parsed and whole.result.route != "whole":
        problems.append(f"{name}: the whole file was read as {whole.result.route!r}")
    if fast.result.route == "slice" and not fast.result.fallback.startswith(DECLARED):
        problems.append(f"{name}: left the rebuilt tree for {fast.result.fallback!r}")
    return problems


def test_the_fast_path_reports_what_the_whole_file_reports() -> None:
    sources = _sources()
    assert len(sources) > 140
    problems: list[str] = []
    routes: dict[str, list[str]] = {}
    for name, source in sources:
        fast, whole = _both_ways(source, "example.py")
        assert fast.result.error is None, (name, fast.result.error)
        problems += _differences(fast, whole, name)
        routes.setdefault(fast.result.route, []).append(name)
    assert problems == []
    # The fast path is really taken: libcst parses the slice for a declared reason only, and
    # rarely (2 of ~145 sources when this was written: AGL104 quoting a call's text).
    parsed = len(routes.get("rebuilt", [])) + len(routes.get("slice", []))
    assert len(routes.get("slice", [])) <= parsed // 20, routes.get("slice")
    assert set(routes) <= {"", "rebuilt", "slice"}


# Parts of a file only some checks read, which no rule example shows on its own, with what
# they hold (written out: a part no check declared would be missing from any run's findings).
PARTS = [
    (
        "a dispatch handler registered by decorator",
        "import torch\naten = torch.ops.aten\n\n"
        "@implements(aten.empty_like.default)\n"
        "def _empty_like(func, types, args, kwargs):\n"
        "    return Wrapper(torch.empty_like(args[0]._data))\n",
        [("AGL306", 5)],
    ),
    (
        "a custom op's backward",
        "import torch\n\n"
        '@torch.library.custom_op("mylib::square", mutates_args=())\n'
        "def square(x: torch.Tensor) -> torch.Tensor:\n    return x * x\n\n"
        "def _backward(ctx, grad):\n    x, = ctx.saved_tensors\n    y = x * x\n"
        "    grad.mul_(2)\n    return torch.autograd.grad(y, x, grad)[0]\n\n"
        "def _setup(ctx, inputs, output):\n    ctx.save_for_backward(inputs[0])\n\n"
        'torch.library.register_autograd("mylib::square", _backward, setup_context=_setup)\n',
        [("AGL413", 4), ("AGL406", 10), ("AGL101", 11)],
    ),
]


@pytest.mark.parametrize("check", REGISTRY, ids=lambda check: check.__name__)
def test_each_check_alone_reads_only_what_it_declares(check: type[Check]) -> None:
    """With one check enabled, the slicer keeps only what that check declares it reads
    (`Check.reads`, checks/reads.py): the fast path must still report that check's findings
    of the whole file with every rule enabled (where the slicer keeps what every check reads).
    A check reading a part of the file it does not declare fails here."""
    enabled = frozenset(check.codes)
    problems: list[str] = []
    for name, source in _sources():
        alone = examine(LintRequest(source, "example.py", enabled=enabled), "rebuilt")
        every = examine(LintRequest(source, "example.py"), "whole")
        assert alone.result.error is None, (name, alone.result.error)
        wanted = [finding for finding in every.reported if finding.rule_id in enabled]
        if alone.reported != wanted:
            problems.append(f"{name}: alone {alone.reported} / with every rule {wanted}")
    for name, source, held in PARTS:
        alone = examine(LintRequest(source, "example.py", enabled=enabled), "rebuilt")
        found = [(finding.rule_id, finding.line) for finding in alone.reported]
        if found != [(rule, line) for rule, line in held if rule in enabled]:
            problems.append(f"{name}: alone {found} / it holds {held}")
    assert problems == []


def test_a_crash_on_the_rebuilt_tree_is_reported_not_rerun_on_libcst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in the fast path used to be caught and the file silently analysed again on
    libcst's tree: the findings came out right, and the bug stayed invisible."""

    class Broken(pipeline.Twins):
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise ValueError("a bug of the fast path")

    monkeypatch.setattr(pipeline, "Twins", Broken)
    result = lint(LintRequest(SQUARE_BUG, "m.py"))
    assert result.error is not None
    assert result.error.message == (
        "internal error on the rebuilt tree (please report): ValueError: a bug of the fast path"
    )
    assert result.route == "rebuilt"


def test_the_result_says_which_tree_the_checks_read() -> None:
    assert lint(LintRequest(SQUARE_BUG, "m.py")).route == "rebuilt"
    assert lint(LintRequest(SQUARE_BUG, "m.py", fixes=True)).route == "slice"
    assert lint(LintRequest("x = 1\n", "m.py")).route == ""  # nothing a check could read


@pytest.mark.corpus
def test_every_file_of_the_corpus_reports_the_same_both_ways() -> None:
    problems: list[str] = []
    for path in _corpus_files():
        fast, whole = _both_ways(path.read_bytes(), str(path))
        problems += _differences(fast, whole, str(Path(path)))
    assert problems == []
