"""AGL204: a backward `.view(...)`s its incoming gradient into a shape that may merge dims, with
no `.contiguous()` before it. A transposed gradient, or the narrow view `torch.cat`'s backward
hands each input, then raises (semantics B1.7); views that merge no dims never do (B1.8). The
fix is `.reshape(...)`: the same view where `.view` works (B1.9), unsafe where a write into the
result would be lost on the paths that raised (B1.10, FIX-B3)."""

from __future__ import annotations

import textwrap

import pytest

from autogradlint import lint_source
from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.request import LintRequest
from autogradlint.model import Finding

AGL204 = frozenset({"AGL204"})


def backward(body: str, params: str = "ctx, grad_output", head: str = "") -> str:
    """A module with one Function whose backward runs `body`."""
    return (
        f"import torch\n{head}\n\n"
        "class Linear(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x, w):\n"
        "        ctx.save_for_backward(x, w)\n        return x.matmul(w.t())\n\n"
        f"    @staticmethod\n    def backward({params}):\n"
        + textwrap.indent(textwrap.dedent(body), " " * 8)
    )


def _findings(source: str) -> list[Finding]:
    result = lint_source(source, "layers.py", enabled=AGL204)
    assert result.error is None, result.error
    return result.findings


def _fixed(source: str, unsafe: bool = False) -> str:
    outcome = fix_text(
        LintRequest(source, "layers.py", enabled=AGL204, plan="unsafe" if unsafe else "safe")
    )
    assert outcome.error is None
    return outcome.source


DEEPSPEED = """\
x, w = ctx.saved_tensors
grad_w = grad_output.view(-1, grad_output.shape[-1]).t().matmul(x.view(-1, x.shape[-1]))
return grad_output.matmul(w), grad_w
"""


def test_a_merging_view_of_the_gradient_is_flagged_and_fixed_with_reshape() -> None:
    source = backward(DEEPSPEED)
    (finding,) = _findings(source)  # the saved input `x` is not the gradient
    assert (finding.line, finding.severity) == (13, "warning")
    assert finding.message == (
        "`grad_output.view(-1, grad_out...` may raise on gradient `grad_output`: "
        "use `.reshape(...)`"
    )
    assert "view size is not compatible" in finding.help
    fixed = _fixed(source)
    assert "grad_output.reshape(-1, grad_output.shape[-1]).t().matmul(x.view(" in fixed
    assert _findings(fixed) == []


@pytest.mark.parametrize(
    "body",
    [
        "g = grad_output\nreturn g.view(-1), None",
        "g = grad_output.transpose(0, 1)\nreturn g.view(-1), None",
        "g = grad_output * 2\nreturn g.view(4, -1), None",
        "g = grad_output[:, :3]\nreturn g.view(-1), None",
        "g = grad_output.float()\nreturn g.view(-1), None",
        # a plain clone keeps a transposed gradient's strides (B1.4b)
        "g = grad_output.clone()\nreturn g.view(-1), None",
        "return grad_output.view_as(ctx.saved_tensors[0]), None",
    ],
)
def test_views_of_aliases_of_the_gradient_are_flagged(body: str) -> None:
    assert len(_findings(backward(body))) == 1


def test_every_gradient_of_star_grads_is_one() -> None:
    body = "return grads[0].view(-1).view(2, -1), None"  # one finding for the chain
    (finding,) = _findings(backward(body, params="ctx, *grads"))
    assert finding.message.startswith("`grads[0].view(-1)` may raise on gradient `grads`")


@pytest.mark.parametrize(
    "body",
    [
        # made dense first (B1.3, B3.2): every view of it works
        "g = grad_output.contiguous()\nreturn g.view(-1), None",
        "g = grad_output.clone(memory_format=torch.contiguous_format)\nreturn g.view(-1), None",
        # views that merge no dims (B1.8)
        "return grad_output.view(grad_output.shape), None",
        "return grad_output.view(grad_output.size()), None",
        "return grad_output.view_as(grad_output), None",
        "return grad_output.view(1, *grad_output.shape)[0], None",
        "return grad_output.view(*grad_output.shape, 1)[..., 0], None",
        "return grad_output.view(*grad_output.shape[:-1], 2, -1).flatten(-2), None",
        # a dtype view, and the per-sample idiom `view(-1, 1, 1)` (a 1-D gradient)
        "return grad_output.view(torch.int32).float(), None",
        "return grad_output.view(grad_output.dtype), None",
        "x, w = ctx.saved_tensors\nreturn x * grad_output.view(-1, 1), None",
        # reshaped from the gradient and viewed back into its own shape (unsloth's RMS norm)
        "shape = grad_output.shape\nflat = grad_output.reshape(-1, shape[-1])\n"
        "return flat.view(*shape), None",
        "flat = grad_output.flatten()\nreturn flat.view_as(grad_output), None",
        "shape = grad_output.shape\nflat = grad_output.reshape(-1, shape[-1])\n"
        "out = torch.empty_like(flat) if ctx.needs_input_grad[1] else flat\n"
        "return out.view(*shape), None",
        # not the gradient: a saved input, a fresh result
        "x, w = ctx.saved_tensors\nreturn x.view(-1), None",
        "return grad_output.matmul(ctx.saved_tensors[1]).view(-1), None",
        "return grad_output.reshape(-1), None",
    ],
)
def test_views_that_cannot_raise_or_not_of_the_gradient_are_quiet(body: str) -> None:
    # the bad code beside it: the gradient viewed flat as it came
    assert len(_findings(backward("return grad_output.view(-1), None"))) == 1
    assert _findings(backward(body)) == []


def test_a_custom_op_backward_gets_the_same_layouts() -> None:
    source = textwrap.dedent(
        """\
        import torch


        @torch.library.custom_op("mylib::scale", mutates_args=())
        def scale(x: torch.Tensor) -> torch.Tensor:
            return x * 2


        def _backward(ctx, g):
            return g.view(-1).mul(2).view(g.shape)


        scale.register_autograd(_backward)
        """
    )
    (finding,) = _findings(source)
    assert finding.line == 10


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("flat = grad_output.view(-1)\nflat.mul_(2)\nreturn grad_output, None", "flat.mul_(2)"),
        ("flat = grad_output.view(-1)\nflat[0] = 0\nreturn grad_output, None", "flat[0] = 0"),
        (
            "flat = grad_output.view(-1)\nhead = flat[:3]\nhead += 1\nreturn grad_output, None",
            "head += 1",
        ),
        (
            "flat = grad_output.view(-1)\ntorch.mul(flat, 2, out=flat)\nreturn grad_output, None",
            "out=",
        ),
        (
            "ext.scale_(grad_output.view(-1), 2.0)\nreturn grad_output, None",
            "handed to `ext.scale_`",
        ),
    ],
)
def test_a_write_into_the_result_makes_the_fix_unsafe(body: str, why: str) -> None:
    source = backward(body, head="import ext\n")
    (finding,) = [f for f in _findings(source) if f.rule_id == "AGL204"]
    assert finding.fixable == "unsafe"
    assert why in finding.help and "nothing writes into the view's result" in finding.help
    assert _fixed(source) == source  # the safe tier leaves it
    assert "grad_output.reshape(-1)" in _fixed(source, unsafe=True)


def test_a_result_only_read_keeps_the_fix_safe() -> None:
    body = (
        "flat = grad_output.view(-1)\nw = ctx.saved_tensors[1]\nreturn flat.mul(2).sum() * w, None"
    )
    (finding,) = _findings(backward(body))
    assert finding.fixable == "safe"


DECORATED = """\
import functools

import torch


def make_dense(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
        return fn(ctx, *args)

    return wrapper


class Flat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    {decorator}
    def backward(ctx, g):
        return g.view(-1).mul(2).view(g.shape)
"""


def test_a_decorator_whose_source_makes_the_arguments_contiguous_guards_the_view() -> None:
    # liger's @ensure_contiguous: read from the decorator's source, as AGL201 reads it
    (finding,) = _findings(DECORATED.format(decorator="@functools.lru_cache"))
    assert finding.line == 23
    assert _findings(DECORATED.format(decorator="@make_dense")) == []


TILED = """\
import torch


class TiledMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shards):
        ctx.save_for_backward(x)
        ctx.shards = shards
        return x * 2

    @staticmethod
    def backward(ctx, *grads):
        (x,) = ctx.saved_tensors
        hidden_size = x.shape[-1]
        x = x.reshape(-1, hidden_size)
        incoming_grad = grads[0].reshape(-1, hidden_size)
        x_shards = list(torch.chunk(x, chunks=ctx.shards, dim=0))
        offset = 0
        for i, x_shard in enumerate(x_shards):
            step = x_shard.shape[0]
            shard = incoming_grad.narrow(0, offset, step).view_as({target})
            offset += step
        return shard, None
"""


def test_rows_of_the_same_width_viewed_as_each_other_are_quiet() -> None:
    # DeepSpeed's tiled MLP: a row slice of the gradient reshaped to width H, viewed as a
    # dim-0 chunk of the input reshaped to the same width: the same shape
    assert _findings(TILED.format(target="x_shard")) == []
    (finding,) = _findings(TILED.format(target="x_shard.flatten()"))
    assert finding.line == 21
