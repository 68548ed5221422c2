"""AGL412: a backward that reads a gradient it assigned only on some paths raises
UnboundLocalError on the others (semantics D12.1); setting it to None at the top of backward is
the safe fix when the skipped assignment is guarded by `needs_input_grad` (FIX-D1), an unsafe
one otherwise (D12.3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from autogradlint import lint_source
from autogradlint.config import Config
from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.request import LintRequest
from autogradlint.model import Finding
from autogradlint.runner import discover, lint_paths

AGL412 = frozenset({"AGL412"})


def backward(body: str, inputs: str = "x, w") -> str:
    """A module with one Function whose backward (given `g`) runs `body`."""
    return (
        "import torch\n\n\n"
        "class Scale(torch.autograd.Function):\n"
        f"    @staticmethod\n    def forward(ctx, {inputs}):\n"
        f"        ctx.save_for_backward({inputs})\n        return x * w\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n"
        "        x, w = ctx.saved_tensors\n" + textwrap.indent(textwrap.dedent(body), " " * 8)
    )


def _findings(source: str) -> list[Finding]:
    result = lint_source(source, "ops.py", enabled=AGL412)
    assert result.error is None, result.error
    return result.findings


def _found(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in _findings(source)]


GUARDED = backward(
    """\
    if ctx.needs_input_grad[0]:
        grad_x = g * w
    if ctx.needs_input_grad[1]:
        grad_w = g * x
    return grad_x, grad_w
    """
)


def test_gradients_set_only_under_needs_input_grad_are_flagged_where_returned() -> None:
    assert _found(GUARDED) == [
        (
            17,
            "`Scale.backward` uses `grad_x`, which is unset when `ctx.needs_input_grad[0]` is false",
        ),
        (
            17,
            "`Scale.backward` uses `grad_w`, which is unset when `ctx.needs_input_grad[1]` is false",
        ),
    ]
    first, _ = _findings(GUARDED)
    assert (first.col, first.fixable) == (15, "safe")
    assert "raises UnboundLocalError" in first.help


def test_the_fix_sets_each_gradient_to_none_first() -> None:
    fixed = fix_text(LintRequest(GUARDED, enabled=AGL412))
    assert fixed.applied == ["AGL412", "AGL412"]
    assert fixed.source.endswith(
        "    def backward(ctx, g):\n"
        "        grad_w = None\n"
        "        grad_x = None\n"
        "        x, w = ctx.saved_tensors\n"
        "        if ctx.needs_input_grad[0]:\n"
        "            grad_x = g * w\n"
        "        if ctx.needs_input_grad[1]:\n"
        "            grad_w = g * x\n"
        "        return grad_x, grad_w\n"
    )
    assert _found(fixed.source) == []


def test_names_unpacked_from_needs_input_grad_are_the_same_guard() -> None:
    source = backward(
        """\
        needs_x, needs_w = ctx.needs_input_grad
        grad_w = None
        if needs_x:
            grad_x = g * w
        if needs_w:
            grad_w = g * x
        return grad_x if ctx.needs_input_grad[0] else None, grad_w
        """
    )
    assert _found(source) == []
    broken = source.replace("grad_x if ctx.needs_input_grad[0] else None", "grad_x")
    (finding,) = _findings(broken)
    assert finding.message.endswith("unset when `ctx.needs_input_grad[0]` is false")
    assert finding.fixable == "safe"


def test_another_branch_makes_the_fix_unsafe() -> None:
    """None is silently no gradient for an input that requires grad (D12.3)."""
    source = backward(
        """\
        grad_w = g * x
        if ctx.mode == "fast":
            grad_x = g * w
        elif ctx.mode == "exact":
            grad_x = (g.double() * w.double()).float()
        return grad_x, grad_w
        """
    )
    (finding,) = _findings(source)
    assert finding.message == (
        '`Scale.backward` uses `grad_x`, which is unset when `(ctx.mode == "exact")` is false '
        'and `(ctx.mode == "fast")` is false'
    )
    assert finding.fixable == "unsafe"
    assert not fix_text(LintRequest(source, enabled=AGL412)).changed
    assert fix_text(LintRequest(source, enabled=AGL412, plan="unsafe")).applied == ["AGL412"]


def test_a_read_before_the_return_is_flagged_too() -> None:
    source = backward(
        """\
        if ctx.needs_input_grad[1]:
            grad_w = g * x
        out = (g * w, grad_w)
        return out
        """
    )
    assert [line for line, _ in _found(source)] == [15]


def test_the_same_test_twice_binds_on_the_path_that_reads() -> None:
    """Megatron's backward: assigned under `if ctx.sequence_parallel:`, returned under it."""
    source = backward(
        """\
        if ctx.sequence_parallel:
            sub = g.clone()
        grad_w = g * x
        if ctx.sequence_parallel:
            return sub, grad_w
        return g * w, grad_w
        """
    )
    assert _found(source) == []
    assert (
        len(
            _found(
                source.replace(
                    "if ctx.sequence_parallel:\n            return", "if 1:\n            return"
                )
            )
        )
        == 1
    )


def test_branches_that_only_compound_conditions_tie_together() -> None:
    """ColossalAI: `if a or not b: ...` / `elif b: handle = ...` / `if b and not a: handle.wait()`."""
    source = backward(
        """\
        if ctx.fp8 or not ctx.async_op:
            grad_x = g * w
        elif ctx.async_op:
            grad_x = g * w
            handle = object()
        if ctx.async_op and not ctx.fp8:
            handle.wait()
        if ctx.fp8:
            handle.wait()
        return grad_x, g * x
        """
    )
    assert [line for line, _ in _found(source)] == [21]


def test_loops_asserts_and_a_cache_filled_on_the_first_pass() -> None:
    source = backward(
        """\
        head = None
        assert ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        for chunk in g.split(2):
            if head is None:
                head = w.t()
                scale = 2.0
            grad_x = chunk * scale
        return grad_x, None
        """
    )
    assert _found(source) == []
    while_loop = source.replace("for chunk in g.split(2):", "while ctx.more:").replace(
        "chunk * scale", "g * scale"
    )
    assert [line for line, _ in _found(while_loop)] == [20]


def test_a_custom_op_backward_is_checked_too() -> None:
    source = textwrap.dedent(
        """\
        import torch

        @torch.library.custom_op("mylib::scale", mutates_args=())
        def scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return x * w

        def _setup(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        def _backward(ctx, g):
            x, w = ctx.saved_tensors
            if ctx.needs_input_grad[0]:
                grad_x = g * w
            return grad_x, g * x

        scale.register_autograd(_backward, setup_context=_setup)
        """
    )
    assert [line for line, _ in _found(source)] == [14]


def test_a_flag_set_beside_the_assignment_decides_the_read() -> None:
    """`done = True` beside `grad_w = ...`, `done = False` on the other branch: `if done:`
    follows the branch that set it, so the read is on a path that assigned it."""
    source = backward(
        """\
        if ctx.needs_input_grad[1]:
            done = True
            grad_w = g * x
        else:
            done = False
        if done:
            return g * w, grad_w
        return g * w, None
        """
    )
    assert _found(source) == []


STALE_NONE = backward(
    """\
    grad_x = grad_w = None
    if ctx.needs_input_grad[0]:
        grad_x = g * w
        grad_w = g * x
    return grad_x, grad_w
    """
)


def test_a_gradient_computed_under_another_inputs_test_is_none_when_needed() -> None:
    """`grad_w` (input 1's gradient) is computed only when input 0 needs one: a weight that
    requires grad beside an input that does not gets None, silently (semantics D12.3)."""
    assert _found(STALE_NONE) == [
        (
            17,
            "`Scale.backward` uses `grad_w`, which is unset when `ctx.needs_input_grad[0]` is "
            "false, yet it is input 1's gradient (None then)",
        )
    ]
    own_test = STALE_NONE.replace(
        "            grad_w = g * x\n",
        "        if ctx.needs_input_grad[1]:\n            grad_w = g * x\n",
    )
    assert _found(own_test) == []


HELPER = """\
import torch


def _grads(ctx, g):
    x, w = ctx.saved_tensors
{body}

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        return _grads(ctx, g)
"""


def test_a_helper_that_backward_returns_is_read_too() -> None:
    unset = HELPER.format(
        body="    if ctx.needs_input_grad[0]:\n        grad_x = g * w\n    return grad_x, g * x\n"
    )
    assert _found(unset) == [
        (
            19,
            "`Scale.backward` uses `grad_x`, which is unset when `ctx.needs_input_grad[0]` is "
            "false (in `_grads`, which backward calls)",
        )
    ]
    stale = HELPER.format(
        body="    grad_x = grad_w = None\n    if ctx.needs_input_grad[0]:\n"
        "        grad_x = g * w\n        grad_w = g * x\n    return grad_x, grad_w\n"
    )
    assert [message for _, message in _found(stale)] == [
        "`Scale.backward` uses `grad_w`, which is unset when `ctx.needs_input_grad[0]` is "
        "false, yet it is input 1's gradient (None then) (in `_grads`, which backward calls)"
    ]
    fine = HELPER.format(
        body="    grad_x = None\n    if ctx.needs_input_grad[0]:\n        grad_x = g * w\n"
        "    return grad_x, g * x\n"
    )
    assert _found(fine) == []


def test_a_helper_in_another_module_is_read_from_its_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    helper, _, cls = HELPER.partition("\nclass Scale")
    (package / "grads.py").write_text(
        helper.format(
            body="    if ctx.needs_input_grad[1]:\n        grad_w = g * x\n    return g * w, grad_w\n"
        )
    )
    (package / "layers.py").write_text(
        "import torch\n\nfrom .grads import _grads\n\n\nclass Scale" + cls
    )
    config = Config(root=tmp_path, select=("AGL412",))
    results = lint_paths(discover([str(tmp_path)], config).files, config)
    flagged = [(Path(r.path).name, f.line) for r in results for f in r.findings]
    assert flagged == [("layers.py", 14)]


class _Backwards(set):  # type: ignore[type-arg]
    """A set of paths that iterates in the reverse of its sorted order: another hash seed."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(sorted(super().__iter__(), key=repr, reverse=True))


def test_the_path_a_message_tells_does_not_depend_on_the_hash_seed() -> None:
    # megatron LinearWithGradAccumulationAndAsyncCommunication.backward: `total_input` unset
    # when `wgrad_compute` is false, on paths where `ctx.sequence_parallel` was true or false;
    # the message named one or the other as the set of paths happened to iterate.
    import libcst as cst

    from autogradlint.analysis.unbound import Path, _Walker

    read = cst.parse_expression("total")
    told = []
    for kind in (set, _Backwards):
        walker = _Walker({"total"})
        paths = kind(
            {
                Path(frozenset(), frozenset({("ctx.sequence_parallel", True)})),
                Path(frozenset(), frozenset({("ctx.sequence_parallel", False)})),
            }
        )
        walker.read_all([read], paths, returned=True)
        told.append(walker.found["total"].facts)
    assert told[0] == told[1] == {("ctx.sequence_parallel", False)}


UNDECIDED = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        wgrad = ctx.wgrad
        if ctx.sequence_parallel:
            total = x * 2
        if wgrad:
            total = x
        return g * w, g * total
"""


def test_the_branch_the_unsafe_fix_names_does_not_depend_on_the_hash_seed() -> None:
    # megatron's layers.py again: `total` is unset when both tests are false, and why the fix
    # is unsafe named one or the other of them as the set of skipped tests happened to iterate
    code = (
        "import sys\nfrom autogradlint import lint_source\n"
        "result = lint_source(sys.stdin.read(), 'ops.py', enabled=frozenset({'AGL412'}))\n"
        "print([f.help for f in result.findings])\n"
    )
    told = {
        subprocess.run(
            [sys.executable, "-c", code],
            input=UNDECIDED,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(1, 7)
    }
    assert len(told) == 1
    assert "(`ctx.sequence_parallel` decides it)" in told.pop()
