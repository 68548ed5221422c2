"""examples/: check flags every bug and nothing in the fixed twins; the code behaves as claimed."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECTED = {
    "reentrant_bug.py": [("AGL101", 25), ("AGL103", 40)],
    "extension_grads_bug.py": [("AGL201", 21), ("AGL202", 32)],
    "torch_function_bug.py": [("AGL301", 14)],
    "custom_op_bug.py": [("AGL201", 28), ("AGL413", 35), ("AGL401", 44)],
    "triton_op_bug.py": [("AGL201", 37)],
}


def test_check_reports_every_bug_and_nothing_in_fixed_twins() -> None:
    found = discover([str(EXAMPLES)], Config(root=EXAMPLES))
    results = {Path(r.path).name: r for r in lint_paths(found.files, Config(root=EXAMPLES))}
    assert not found.errors
    for name, result in results.items():
        assert result.error is None
        got = [(f.rule_id, f.line) for f in result.findings]
        assert got == EXPECTED.get(name, []), name
    for bug in EXPECTED:
        assert bug.replace("_bug", "_fixed") in results


@pytest.fixture(scope="module")
def examples_on_path():
    pytest.importorskip("torch")
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


def _load(name: str):
    return importlib.import_module(name)


def test_reentrant_bug_crashes_in_training_and_doubles_grads(examples_on_path) -> None:
    import torch

    bug = _load("reentrant_bug")
    w = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        bug.SoftplusRecompute.apply(w).sum().backward()
    w.grad = None
    bug.CubeInnerBackward.apply(w).sum().backward()
    assert torch.allclose(w.grad, 2 * 3 * w.detach() ** 2)  # silently doubled


def test_reentrant_fixed_passes_gradcheck_and_gradgradcheck(examples_on_path) -> None:
    import torch

    fixed = _load("reentrant_fixed")
    w = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    for fn in (fixed.SoftplusRecompute, fixed.CubeInnerBackward):
        assert torch.autograd.gradcheck(fn.apply, (w,))
        assert torch.autograd.gradgradcheck(fn.apply, (w,))


def test_torch_function_bug_upcasts_and_fixed_does_not(examples_on_path) -> None:
    import torch

    assert _load("torch_function_bug").demo() == torch.float32
    assert _load("torch_function_fixed").demo() == torch.float16


@pytest.mark.slow
def test_extension_examples_corrupt_and_fixed_are_correct(examples_on_path) -> None:
    """Builds the C++ extension once (about a minute on 2 cores; cached afterwards)."""
    import torch

    bug = _load("extension_grads_bug").demo()
    fixed = _load("extension_grads_fixed").demo()
    assert not torch.equal(bug["scale"], torch.full_like(bug["scale"], 2.0))  # raw stride-0 read
    assert torch.equal(bug["victim"], torch.full((3,), 2.0))  # the other consumer corrupted
    assert torch.equal(fixed["scale"], torch.full_like(fixed["scale"], 2.0))
    assert torch.equal(fixed["victim"], torch.ones(3))


@pytest.mark.slow
def test_custom_op_example_reads_the_cat_view_wrong_and_fixed_is_right(examples_on_path) -> None:
    """The narrow gradient `torch.cat`'s backward hands a custom op, read densely: wrong."""
    import torch

    bug = _load("custom_op_bug")
    fixed = _load("custom_op_fixed")
    got, truth = bug.demo()
    assert not torch.equal(got, truth)  # rows 1-3 read from the wrong places of the 4x8 buffer
    got, truth = fixed.demo()
    assert torch.equal(got, truth)
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        bug.scaled(x, 2.0).sum().backward()
    x.grad = None
    fixed.scaled(x, 2.0).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


@pytest.mark.slow
def test_opcheck_passes_on_the_fixed_custom_ops_and_not_on_the_buggy_one(examples_on_path) -> None:
    """The fixed ops have fakes, and their backward reaches the kernel through the op, so
    torch.compile's tracing works (semantics D13.1, D13.5); the buggy `scaled` has no fake."""
    import torch

    bug = _load("custom_op_bug")
    fixed = _load("custom_op_fixed")
    for op, extra in ((fixed.double, ()), (fixed.scaled, (2.0,))):
        x = torch.randn(4, 3, requires_grad=True)
        results = torch.library.opcheck(op, (x, *extra), raise_exception=False)
        assert set(results.values()) == {"SUCCESS"}, results
    results = torch.library.opcheck(
        bug.scaled, (torch.randn(4, 3, requires_grad=True), 2.0), raise_exception=False
    )
    assert "There was no fake impl registered" in str(results["test_faketensor"])


@pytest.fixture(scope="module")
def fixed_examples(tmp_path_factory):
    """A copy of examples/ after `autogradlint fix --apply --unsafe-fixes`."""
    pytest.importorskip("torch")
    import shutil

    from click.testing import CliRunner

    from autogradlint.cli import main

    copy = tmp_path_factory.mktemp("fixed") / "examples"
    shutil.copytree(EXAMPLES, copy)
    result = CliRunner().invoke(main, ["fix", "--apply", "--unsafe-fixes", str(copy)])
    assert "Fixed 7 findings in 3 files" in result.output, result.output
    check = CliRunner().invoke(main, ["check", "--output-format", "json", str(copy)])
    import json

    left = {(Path(item["filename"]).name, item["code"]) for item in json.loads(check.output)}
    # family C has no codemod; a gradient count and a fake implementation need a human;
    # `.contiguous()` is no safe fix for a Triton launch given another tensor's strides
    assert left == {
        ("torch_function_bug.py", "AGL301"),
        ("custom_op_bug.py", "AGL401"),
        ("custom_op_bug.py", "AGL413"),
        ("triton_op_bug.py", "AGL201"),
    }
    sys.path.insert(0, str(copy))
    for name in ("reentrant_bug", "extension_grads_bug"):
        sys.modules.pop(name, None)
    yield copy
    sys.path.remove(str(copy))
    for name in ("reentrant_bug", "extension_grads_bug"):
        sys.modules.pop(name, None)


def test_fixed_reentrant_example_has_correct_gradients(fixed_examples) -> None:
    import torch

    module = importlib.import_module("reentrant_bug")
    assert Path(module.__file__).parent == fixed_examples
    w = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
    for fn in (module.SoftplusRecompute, module.CubeInnerBackward):
        assert torch.autograd.gradcheck(fn.apply, (w,))
        assert torch.autograd.gradgradcheck(fn.apply, (w,))


@pytest.mark.slow
def test_fixed_extension_example_has_correct_gradients(fixed_examples) -> None:
    import torch

    module = importlib.import_module("extension_grads_bug")
    assert Path(module.__file__).parent == fixed_examples
    result = module.demo()
    assert torch.equal(result["scale"], torch.full_like(result["scale"], 2.0))
    assert torch.equal(result["victim"], torch.ones(3))
