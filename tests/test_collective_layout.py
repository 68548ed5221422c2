"""AGL201 on `torch.distributed` collectives: a backward that hands its incoming gradient, not
made contiguous, to a collective, directly or through a project function, stops training on
NCCL with `ValueError: Tensors must be contiguous` when the gradient arrives transposed or
expanded (semantics B2.10-B2.11; Megatron-LM's sequence-parallel mappings, realbugs
e03-megatron-1). A warning: it raises, loudly. `.contiguous()` on the way silences it."""

from __future__ import annotations

import textwrap

from autogradlint import lint_source
from autogradlint.model import Finding

AGL201 = frozenset({"AGL201"})


def _findings(source: str) -> list[Finding]:
    result = lint_source(textwrap.dedent(source), "mappings.py", enabled=AGL201)
    assert result.error is None, result.error
    return result.findings


def _lines(source: str) -> list[int]:
    return [f.line for f in _findings(source)]


def backward(body: str, helpers: str = "") -> str:
    """A module with one Function whose backward runs `body` (given `grad_output`)."""
    return (
        "import torch\nimport torch.distributed as dist\n\n\n"
        + textwrap.dedent(helpers)
        + "class Region(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        + textwrap.indent(textwrap.dedent(body), " " * 8)
    )


# Megatron-LM's megatron/mpu/mappings.py before its fix (e03-megatron-1), shortened
GATHER = """\
def _gather_along_first_dim(input_):
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * 2
    output = torch.empty(dim_size, dtype=input_.dtype)
    torch.distributed._all_gather_base(output, input_)
    return output


"""


def test_a_gradient_handed_raw_to_a_gather_through_a_helper_is_a_warning() -> None:
    (finding,) = _findings(backward("return _gather_along_first_dim(grad_output)\n", GATHER))
    assert (finding.line, finding.col, finding.severity) == (20, 39, "warning")
    # the message shortens a long callee
    assert finding.message.startswith(
        "gradient `grad_output` reaches compiled `torch.distributed._all_gather"
    )
    assert finding.help.startswith(
        "`torch.distributed._all_gather_base` (reached through `_gather_along_first_dim`) "
        "refuses a non-contiguous tensor on NCCL: it raises `ValueError: Tensors must be "
        "contiguous`"
    )
    # fixed: `_all_gather_base(output, input_.contiguous())`, or a contiguous local first
    for fixed in (
        GATHER.replace("(output, input_)", "(output, input_.contiguous())"),
        GATHER.replace(
            "    output = torch.empty", "    input_ = input_.contiguous()\n    output = torch.empty"
        ),
    ):
        assert _lines(backward("return _gather_along_first_dim(grad_output)\n", fixed)) == []


def test_direct_collectives_on_every_checked_argument() -> None:
    for body in (
        "dist.all_reduce(grad_output)\nreturn grad_output\n",
        "dist.broadcast(grad_output.t(), src=0)\nreturn grad_output\n",
        "out = torch.empty(2)\ndist._reduce_scatter_base(out, grad_output)\nreturn out\n",
        "out = torch.empty(2)\ndist.reduce_scatter_tensor(out, input=grad_output)\nreturn out\n",
        "parts = [torch.empty(4) for _ in range(2)]\ndist.all_gather(parts, grad_output)\n"
        "return torch.cat(parts)\n",
        "out = torch.empty(4)\ndist.all_to_all_single(out, grad_output.view(-1))\nreturn out\n",
    ):
        found = _findings(backward(body))
        assert [f.severity for f in found] == ["warning"], body
    # fixed: a contiguous gradient, or a fresh result, is quiet
    for body in (
        "g = grad_output.contiguous()\ndist.all_reduce(g)\nreturn g\n",
        "out = torch.empty(2)\ndist._reduce_scatter_base(out, grad_output.contiguous())\n"
        "return out\n",
        "g = grad_output.clone(memory_format=torch.contiguous_format)\n"
        "dist.all_reduce(g)\nreturn g\n",
        # a matmul's result is a fresh dense tensor (Megatron's layers.py, line 285)
        "grad_input = grad_output.matmul(torch.ones(3, 3))\n"
        "out = torch.empty(2)\ndist._reduce_scatter_base(out, grad_input)\nreturn out\n",
    ):
        assert _lines(backward(body)) == [], body


# megatron-core's helper: only the uneven-split branch hands the tensor raw to a collective
SPLIT_GATHER = """\
def _gather_along_first_dim(input_, group, output_split_sizes=None):
    if output_split_sizes is None:
        output = torch.empty(8)
        dist.all_gather_into_tensor(output, input_.contiguous(), group=group)
    else:
        output = torch.empty(sum(output_split_sizes))
        parts = list(torch.split(output, output_split_sizes, dim=0))
        dist.all_gather(parts, input_, group=group)
    return output


"""


def test_a_branch_the_call_never_takes_is_not_a_path() -> None:
    even = "return _gather_along_first_dim(grad_output, None)\n"
    assert _lines(backward(even, SPLIT_GATHER)) == []
    uneven = "return _gather_along_first_dim(grad_output, None, ctx.sizes)\n"
    assert _lines(backward(uneven, SPLIT_GATHER)) == [23]
    by_keyword = "return _gather_along_first_dim(grad_output, None, output_split_sizes=[4, 4])\n"
    assert _lines(backward(by_keyword, SPLIT_GATHER)) == [23]


def test_a_gradient_sent_raw_to_a_peer_is_refused_by_gloo() -> None:
    # the oracle's K64: gloo's `send`/`recv` raise `RuntimeError: input tensor has to be
    # contiguous` on a transposed, narrow or stride-0 gradient (B2.10); NCCL only warns (B2.11)
    bad = (
        "peer = 1 - dist.get_rank()\nout = grad_output.new_empty(grad_output.shape)\n"
        "req = dist.isend(grad_output, peer)\ndist.recv(out, peer)\nreq.wait()\nreturn out\n"
    )
    (finding,) = _findings(backward(bad))
    assert (finding.line, finding.severity) == (14, "warning")
    assert finding.help.startswith(
        "`torch.distributed.isend` refuses a non-contiguous tensor on gloo: it raises "
        "`RuntimeError: input tensor has to be contiguous`"
    )
    assert "NCCL only warns" in finding.help
    for body in (
        "dist.send(grad_output, 1)\nreturn grad_output\n",
        "dist.irecv(grad_output, 1)\nreturn grad_output\n",
    ):
        assert len(_findings(backward(body))) == 1, body
    # fixed: send a contiguous gradient
    fixed = bad.replace(
        "dist.isend(grad_output, peer)", "dist.isend(grad_output.contiguous(), peer)"
    )
    assert _lines(backward(fixed)) == []
