"""AGL203: a forward input saved as it came reaches compiled code in backward (semantics
B4.1-B4.3). Bad code, the finding, the fixed code; and what stays quiet without evidence."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from autogradlint import lint_source
from autogradlint.model import Finding

# Two kernels that read `data_ptr()` densely (a `load_inline` source, so the C++ is read).
KERNELS = '''\
import torch
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>

torch::Tensor raw_double(torch::Tensor x) {
  auto out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = 2 * in[i];
  return out;
}

torch::Tensor raw_times(torch::Tensor x, torch::Tensor g) {
  auto out = torch::empty_like(g);
  const float* in = x.data_ptr<float>();
  const float* gi = g.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < g.numel(); ++i) o[i] = 2 * in[i] * gi[i];
  return out;
}
"""
ext = load_inline(name="sq_ext", cpp_sources=[SOURCE], functions=["raw_double", "raw_times"])
'''


def _findings(code: str) -> list[Finding]:
    """AGL203's findings on `code`, written to a file of its own (the C++ of a `load_inline`
    is read from the file on disk, like any of the project's sources)."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "example.py"
        path.write_text(code, encoding="utf-8")
        found = lint_source(code, os.fspath(path)).findings
    return [f for f in found if f.rule_id == "AGL203"]


def _saved(code: str) -> list[tuple[int, str]]:
    """(line, severity) of every AGL203 finding."""
    return sorted((f.line, f.severity) for f in _findings(code))


def _function(forward: str, backward: str) -> str:
    return (
        KERNELS
        + "\n\nclass Square(torch.autograd.Function):\n    @staticmethod\n"
        + forward
        + "\n    @staticmethod\n"
        + backward
    )


COPYING_FORWARD = """\
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ext.raw_double(x.contiguous()) * x
"""
LINE = KERNELS.count("\n") + 12  # the backward kernel's call


def _backward(arg: str, unpack: str = "(x,) = ctx.saved_tensors") -> str:
    return f"""\
    def backward(ctx, grad):
        {unpack}
        return ext.raw_times({arg}, grad.contiguous())
"""


def test_forward_copies_for_its_kernel_but_saves_the_input_raw() -> None:
    # B4.2: forward's kernel gets a dense copy, backward's reads the saved transposed input.
    assert _saved(_function(COPYING_FORWARD, _backward("x"))) == [(LINE, "error")]
    assert _saved(_function(COPYING_FORWARD, _backward("ctx.saved_tensors[0]", "pass"))) == [
        (LINE, "error")
    ]
    help_text = _findings(_function(COPYING_FORWARD, _backward("x")))[0].help
    assert "saves its input `x` as it came, yet hands its kernel a dense copy" in help_text
    assert "reads it through `data_ptr()` with dense indexing" in help_text
    # Fixed: backward makes it contiguous, or forward saves the dense copy it made.
    assert _saved(_function(COPYING_FORWARD, _backward("x.contiguous()"))) == []
    saves_copy = COPYING_FORWARD.replace(
        "        ctx.save_for_backward(x)\n",
        "        x = x.contiguous()\n        ctx.save_for_backward(x)\n",
    )
    assert _saved(_function(saves_copy, _backward("x"))) == []


def test_a_saved_output_or_intermediate_is_not_an_input() -> None:
    saves_output = """\
    def forward(ctx, x):
        y = ext.raw_double(x.contiguous())
        ctx.save_for_backward(y)
        return y
"""
    assert _saved(_function(saves_output, _backward("x"))) == []


def test_no_copy_in_forward_fires_only_on_a_proven_raw_read() -> None:
    aten_forward = """\
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
"""
    # No copy in forward, but the C++ reads the saved input raw (B4.2): an error.
    assert _saved(_function(aten_forward, _backward("x"))) == [(LINE, "error")]
    # Forward hands it raw to a dense kernel itself: a layout it refuses fails there first.
    raw_forward = """\
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ext.raw_double(x) * x
"""
    assert _saved(_function(raw_forward, _backward("x"))) == []
    assert (
        _saved(
            _function(raw_forward.replace("raw_double(x)", "raw_double(x.data)"), _backward("x"))
        )
        == []
    )
    # The same through a project function that hands it on as it is.
    through_helper = """\
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return launch(x) * x
"""
    helper = "\n\ndef launch(t):\n    return ext.raw_double(t)\n"
    assert _saved(_function(through_helper, _backward("x")) + helper) == []
    # Nothing read of the backward kernel and no copy in forward: no evidence, no finding.
    unknown = """\
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return fused_square_cuda.backward(x, grad.contiguous())
"""
    assert _saved("import fused_square_cuda\n" + _function(aten_forward, unknown)) == []
    # A dense copy that only torch's own operators read is no kernel's: still no evidence.
    viewing = aten_forward.replace("return x * x", "return x.contiguous().view(-1) * 2")
    assert _saved("import fused_square_cuda\n" + _function(viewing, unknown)) == []
    assert _saved("import fused_square_cuda\n" + _function(COPYING_FORWARD, unknown)) == [
        (LINE + 1, "warning")
    ]


# spconv/pytorch/functional.py before its fix (e01-spconv-1): forward's helper makes the
# features contiguous for its kernel; backward's hands the raw address of the saved ones to
# `cumm.tensorview` (not installed where the linter runs), after asserting they are dense.
SPCONV = """\
import torch
from cumm import tensorview as tv


def torch_tensor_to_tv(ten):
    assert ten.is_contiguous(), "must be contiguous tensor"
    return tv.from_blob(ten.data_ptr(), list(ten.shape), 0)


def indice_conv(features, filters):
    if not features.is_contiguous():
        features = features.contiguous()
    return tv.conv(torch_tensor_to_tv(features), torch_tensor_to_tv(filters))


def indice_conv_backward(features, filters, out_bp):
    out_bp = out_bp.contiguous()
    {guard}
    return tv.conv_backward(torch_tensor_to_tv(features), torch_tensor_to_tv(out_bp))


class SparseConvFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features, filters):
        ctx.save_for_backward(features, filters)
        return indice_conv(features, filters)

    @staticmethod
    def backward(ctx, grad_output):
        features, filters = ctx.saved_tensors
        return indice_conv_backward(features, filters, grad_output)
"""


def test_a_dense_copy_in_a_helper_of_forward_is_the_evidence() -> None:
    bad = SPCONV.format(guard="pass")
    # The code behind the address is not read: a warning that names it.
    assert _saved(bad) == [(SPCONV.count("\n"), "warning")]
    help_text = _findings(bad)[0].help
    assert "hands it to `indice_conv`, which makes it contiguous" in help_text
    assert "`cumm.tensorview.from_blob`" in help_text
    assert "how it reads the tensor is not known" in help_text  # AGL201's words, of an input
    fixed = SPCONV.format(guard="features = features.contiguous()")
    assert _saved(fixed) == []
    # Without the copy in forward there is no evidence the input ever arrives strided.
    trusting = bad.replace(
        "    if not features.is_contiguous():\n        features = features.contiguous()\n", ""
    )
    assert trusting != bad
    assert _saved(trusting) == []


def test_setup_context_and_custom_ops_save_inputs_too() -> None:
    new_style = (
        KERNELS
        + """

class Square(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return ext.raw_double(x.contiguous()) * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ext.raw_times(x, grad.contiguous())
"""
    )
    assert _saved(new_style) == [(new_style.count("\n"), "error")]
    custom_op = (
        KERNELS
        + """

@torch.library.custom_op("demo::square", mutates_args=())
def square(x: torch.Tensor) -> torch.Tensor:
    return ext.raw_double(x.contiguous()) * x


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return ext.raw_times(x, grad.contiguous())


square.register_autograd(backward, setup_context=setup_context)
"""
    )
    assert _saved(custom_op) == [(custom_op.count("\n") - 3, "error")]
    assert _saved(custom_op.replace("raw_times(x,", "raw_times(x.contiguous(),")) == []


TRITON = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


@triton.jit
def _bwd(x_ptr, g_ptr, out_ptr, stride_g, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    g = tl.load(g_ptr + offsets * stride_g, mask=offsets < n)
    tl.store(out_ptr + offsets, x * g, mask=offsets < n)


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        out = torch.empty_like(x)
        _fwd[(triton.cdiv(x.numel(), 1024),)](x.contiguous(), out, x.numel(), BLOCK=1024)
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = torch.empty_like(g)
        _bwd[(triton.cdiv(g.numel(), 1024),)](x, g, out, {stride}, g.numel(), BLOCK=1024)
        return out
"""


def test_a_triton_launch_given_no_strides_for_the_saved_input() -> None:
    # Forward's launch gets a dense copy; backward's indexes the saved input as dense.
    assert _saved(TRITON.format(stride="1")) == [(TRITON.count("\n") - 1, "error")]
    # Given the strides of the tensors beside it, the launch is stride-aware code: the saved
    # input's own not being matched is no evidence of a dense read.
    assert _saved(TRITON.format(stride="g.stride(0)")) == []
