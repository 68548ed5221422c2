"""Family B on the shapes the real-bug batches (benchmarks/realbugs/) missed: bad code, the
finding, the fixed code.

Each case is the smallest form of a labelled bug site: a Triton kernel that `tl.store`s into
the incoming gradient (unsloth's RoPE and RMS-norm backward, Megatron's MLA rotary backward).
"""

from __future__ import annotations

from pathlib import Path

from autogradlint import lint_source
from autogradlint.config import Config
from autogradlint.native.index import forget
from autogradlint.native.scan import CHECKED, GUARDED, RAW, STRIDED, Source
from autogradlint.runner import discover, lint_paths


def _b(code: str) -> list[tuple[str, int]]:
    """(rule, line) of every family-B finding."""
    return sorted(
        (f.rule_id, f.line) for f in lint_source(code).findings if f.rule_id.startswith("AGL2")
    )


def _b_severity(code: str) -> tuple[list[tuple[str, int, str]], list[str]]:
    """(rule, line, severity) of every family-B finding, and their help texts."""
    found = [f for f in lint_source(code).findings if f.rule_id.startswith("AGL2")]
    return [(f.rule_id, f.line, f.severity) for f in found], [f.help for f in found]


def _launching(kernel: str, cls: str, backward: str) -> str:
    """A `@triton.jit` kernel and a Function whose backward launches it: the shape of the
    Triton sites below."""
    return (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        f"{kernel}\n\nclass {cls}(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, x):\n        return x * 2\n\n    @staticmethod\n"
        f"{backward}"
    )


# unsloth/kernels/rope_embedding.py (b02-unsloth-1): the kernel rotates the gradient in place
# and backward returns it; autograd shares that buffer with every other consumer (B2.1).
ROPE = _launching(
    """\
def _rope(Q, Q_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    q = tl.load(Q + row * Q_row_stride + cols, mask=cols < n_cols)
    tl.store(Q + row * Q_row_stride + cols, q * 2, mask=cols < n_cols)
""",
    "Rope",
    """\
    def backward(ctx, dY):
        n_rows, n_cols = dY.shape
        {guard}
        _rope[(n_rows,)](dY, dY.stride(0), n_cols, BLOCK=1024)
        return dY
""",
)


def test_agl202_a_triton_kernel_that_stores_into_the_gradient() -> None:
    bad = ROPE.format(guard="dY = dY.reshape(n_rows, n_cols)")
    assert _b(bad) == [("AGL202", 23)]
    fixed = ROPE.format(guard="dY = dY.clone(memory_format=torch.contiguous_format)")
    assert _b(fixed) == []


def test_agl202_a_triton_kernel_store_through_a_keyword_argument() -> None:
    bad = ROPE.format(guard="pass").replace(
        "](dY, dY.stride(0), n_cols,", "](Q=dY, Q_row_stride=dY.stride(0), n_cols=n_cols,"
    )
    assert _b(bad) == [("AGL202", 23)]


def test_agl202_a_gradient_that_is_copied_only_on_one_branch() -> None:
    # unsloth: `dQ.clone() if not dQ.is_contiguous else dQ` (the bound method is always true,
    # so it is always dQ itself): a copy on one branch guards nothing.
    bad = ROPE.format(guard="dY = dY.clone() if not dY.is_contiguous else dY")
    assert _b(bad) == [("AGL202", 23)]
    fixed = ROPE.format(guard="dY = dY.clone() if dY.is_contiguous() else dY.clone()")
    assert _b(fixed) == []
    # FIX-B1's own form passes a None gradient on as it came: that branch holds no tensor
    fixed = ROPE.format(guard="dY = dY if dY is None else dY.clone()")
    assert _b(fixed) == []


# unsloth/kernels/rms_layernorm.py (c02-unsloth-1): `dX = dY` names the gradient again, and the
# kernel stores the input gradient through dX, over the incoming gradient.
RMS = _launching(
    """\
def _rms_backward(dY, dY_row_stride, dX, dX_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    dy = tl.load(dY + row * dY_row_stride + cols, mask=cols < n_cols)
    tl.store(dX + row * dX_row_stride + cols, dy * 2, mask=cols < n_cols)
""",
    "RMS",
    """\
    def backward(ctx, dY):
        n_rows, n_cols = dY.shape
        dX = {out}
        _rms_backward[(n_rows,)](dY, dY.stride(0), dX, dX.stride(0), n_cols, BLOCK=1024)
        return dX
""",
)


def test_agl202_the_kernel_output_is_the_gradient_itself() -> None:
    assert _b(RMS.format(out="dY")) == [("AGL202", 23)]
    assert _b(RMS.format(out="torch.empty_like(dY)")) == []


def test_agl202_a_helper_launches_the_kernel_that_stores_into_the_gradient() -> None:
    # the launch one call deeper, in a function of the file (unsloth's `_rope_embedding`
    # wrappers), still writes into the buffer backward was handed
    helper = ROPE.replace(
        "class Rope(",
        "def rotate(t):\n"
        "    _rope[(t.shape[0],)](t, t.stride(0), t.shape[1], BLOCK=1024)\n"
        "    return t\n\n\nclass Rope(",
    ).replace(
        "        _rope[(n_rows,)](dY, dY.stride(0), n_cols, BLOCK=1024)\n",
        "        dY = rotate(dY)\n",
    )
    assert _b(helper.format(guard="pass")) == [("AGL202", 28)]
    fixed = helper.format(guard="dY = dY.clone(memory_format=torch.contiguous_format)")
    assert _b(fixed) == []


# --- the C++ reader, on small snippets of the missed sites ---------------------------------
def _how(text: str, name: str) -> list[str]:
    """How each definition of `name` reads each of its tensor parameters."""
    return [how for f in Source("x.cpp", text).functions(name) for how, _ in f.reads]


# detectron2 ROIAlign_backward_cpu (b01-detectron2-1): the kernel is handed a contiguous copy's
# pointer, but indexes it with the ORIGINAL gradient's strides: a transposed or stride-0
# gradient is read at the wrong places (the copy is dense, the strides are not).
ROI = """\
template <typename T>
void RoiBackward(int n, const T* grad, T* out, int n_stride, int c_stride) {
  for (int i = 0; i < n; i++) out[i] = grad[(i / 7) * n_stride + (i % 7) * c_stride];
}

at::Tensor roi_backward(const at::Tensor& grad, int n) {
  auto out = at::zeros({n}, grad.options());
  int n_stride = grad.stride(0);
  int c_stride = grad.stride(1);
  RoiBackward<float>(n, grad.contiguous().data_ptr<float>(), out.data_ptr<float>(),
                     n_stride, c_stride);
  return out;
}
"""


def test_a_contiguous_copy_indexed_with_the_original_strides_is_a_raw_read() -> None:
    assert _how(ROI, "roi_backward") == [RAW]
    # the fix: the strides of what is read (or the tensor itself, read through its strides)
    fixed = ROI.replace("grad.contiguous().data_ptr<float>()", "grad.data_ptr<float>()")
    assert _how(fixed, "roi_backward") == [STRIDED]
    # the copy's own strides are its layout: made contiguous first, then read
    copied = (
        ROI.replace(
            "  int n_stride = grad.stride(0);\n",
            "  auto g = grad.contiguous();\n  int n_stride = g.stride(0);\n",
        )
        .replace("grad.stride(1)", "g.stride(1)")
        .replace("grad.contiguous().data_ptr", "g.data_ptr")
    )
    assert _how(copied, "roi_backward") == [GUARDED]


# fast-transformers local_product_cpu.cpp (b01-fasttransformers-1): the accessor picks the row
# through the strides, but `&ga[n][h][l][0]` then goes to a loop that walks E floats one after
# another: the last dimension's stride is taken to be 1.
ROWS = """\
inline float dot(const float *A, const float *B, int D) {
    float s = 0;
    for (int i=0; i<D; i++) { s += (*A) * (*B); A++; B++; }
    return s;
}

torch::Tensor local_backward(const torch::Tensor grad, torch::Tensor values) {
    int N = grad.size(0);
    int E = grad.size(1);
    auto out = torch::zeros({N}, grad.options());
    auto ga = grad.accessor<float, 2>();
    auto va = values.accessor<float, 2>();
    auto oa = out.accessor<float, 1>();
    for (int n = 0; n < N; n++) {
        oa[n] = dot(&ga[n][0], &va[n][0], E);
    }
    return out;
}
"""


def test_the_address_of_an_accessor_row_walked_densely_is_a_raw_read() -> None:
    assert _how(ROWS, "local_backward") == [RAW, RAW]
    # element by element through the accessor: its strides, every dimension
    fixed = ROWS.replace(
        "oa[n] = dot(&ga[n][0], &va[n][0], E);",
        "for (int e = 0; e < E; e++) oa[n] += ga[n][e] * va[n][e];",
    )
    assert _how(fixed, "local_backward") == [STRIDED, STRIDED]


# causal-conv1d causal_conv1d.cpp (b01-causalconv1d-1): an optional gradient is unwrapped
# with `.value()` and then read through its own strides.
OPTIONAL = """\
void bwd(const c10::optional<at::Tensor> &dfinal_states_, Params &params) {
    if (dfinal_states_.has_value()) {
        auto dfinal_states = dfinal_states_.value();
        params.dfinal_states_ptr = dfinal_states.data_ptr();
        params.dfinal_states_batch_stride = dfinal_states.stride(0);
        params.dfinal_states_c_stride = dfinal_states.stride(1);
    }
}
"""


def test_an_optional_tensor_unwrapped_by_value_is_the_tensor() -> None:
    assert _how(OPTIONAL, "bwd") == [STRIDED]
    raw = OPTIONAL.replace(
        "        params.dfinal_states_batch_stride = dfinal_states.stride(0);\n", ""
    )
    raw = raw.replace("        params.dfinal_states_c_stride = dfinal_states.stride(1);\n", "")
    assert _how(raw, "bwd") != [STRIDED]


# apex setup.py (a02-apex-1, after the fix): two extensions each bind `backward` -> `bwd` ->
# `bwd_cuda`; one writes into the gradient, the other into a fresh tensor. The build names the
# sources of each: the one the Python imports is judged by its own C++, not its neighbour's.
APEX_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
setup(
    name="apexlike",
    ext_modules=[
        CUDAExtension(
            name="masked_softmax_cuda",
            sources=["csrc/masked_softmax.cpp", "csrc/masked_softmax_cuda.cu"],
        ),
        CUDAExtension(
            name="triang_softmax_cuda",
            sources=["csrc/triang_softmax.cpp", "csrc/triang_softmax_cuda.cu"],
        ),
    ],
)
"""
BINDING = """\
#include <torch/extension.h>
torch::Tensor bwd_cuda(torch::Tensor output_grads, float scale);
torch::Tensor bwd(torch::Tensor output_grads, float scale) {
  return bwd_cuda(output_grads, scale);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("backward", &bwd);
}
"""
IN_PLACE = """\
torch::Tensor bwd_cuda(torch::Tensor output_grads_, float scale) {
  auto output_grads = output_grads_.contiguous();
  void* ptr = static_cast<void*>(output_grads.data_ptr());
  softmax_backward(reinterpret_cast<float*>(ptr), scale, output_grads.numel());
  return output_grads;
}
"""
FRESH = """\
torch::Tensor bwd_cuda(torch::Tensor output_grads_, float scale) {
  auto output_grads = output_grads_.contiguous();
  auto input_grads = torch::empty_like(output_grads);
  softmax_backward_out(reinterpret_cast<float*>(input_grads.data_ptr()),
                       reinterpret_cast<const float*>(output_grads.data_ptr()),
                       scale, output_grads.numel());
  return input_grads;
}
"""
APEX_PY = """\
import torch


class MaskedSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, output_grads):
        import {module}

        return {module}.backward(output_grads, 1.0)
"""


def _apex(tmp_path: Path, module: str) -> list[tuple[str, int]]:
    root = tmp_path / module
    (root / "csrc").mkdir(parents=True)
    (root / "setup.py").write_text(APEX_SETUP)
    for stem, kernel in (("masked_softmax", FRESH), ("triang_softmax", IN_PLACE)):
        (root / "csrc" / f"{stem}.cpp").write_text(BINDING)
        (root / "csrc" / f"{stem}_cuda.cu").write_text(kernel)
    (root / "softmax.py").write_text(APEX_PY.format(module=module))
    return [(rule, line) for rule, line, _ in _project_b(root)]


def _project_b(root: Path) -> list[tuple[str, int, str]]:
    """(rule, line, severity) of every family-B finding of the project at `root`."""
    config = Config(root=root)
    files = discover([str(root)], config, respect_gitignore=False).files
    forget()
    return sorted(
        (f.rule_id, f.line, f.severity)
        for r in lint_paths(files, config, root=root)
        for f in r.findings
        if f.rule_id.startswith("AGL2")
    )


def test_an_extension_is_judged_by_the_sources_its_build_names(tmp_path: Path) -> None:
    assert _apex(tmp_path, "triang_softmax_cuda") == [("AGL202", 13)]
    assert _apex(tmp_path, "masked_softmax_cuda") == []


# Megatron fused_mla_yarn_rope_apply.py (c01-megatron-1): the launch is given dk's own strides,
# but backward asserts a unit last stride first; the stride-0 gradient of `out.sum()` fails it.
KV = _launching(
    """\
def _kv_backward(dK, out, stride_row, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    dk = tl.load(dK + row * stride_row + cols, mask=cols < n_cols)
    tl.store(out + row * n_cols + cols, dk * 2, mask=cols < n_cols)
""",
    "KV",
    """\
    def backward(ctx, dk):
        {guard}
        assert dk.stride(-1) == 1
        out = dk.new_empty(dk.shape)
        _kv_backward[(dk.shape[0],)](dk, out, dk.stride(0), dk.shape[1], BLOCK=1024)
        return out
""",
)


def test_agl201_warns_where_backward_asserts_the_gradient_layout_before_a_launch() -> None:
    findings = [
        f for f in lint_source(KV.format(guard="pass")).findings if f.rule_id.startswith("AGL2")
    ]
    assert [(f.rule_id, f.line, f.severity) for f in findings] == [("AGL201", 24, "warning")]
    assert "assert" in findings[0].help
    assert _b(KV.format(guard="dk = dk.contiguous()")) == []


# Megatron fused_a2a.py (c03-megatron-2): `buffer = get_buffer(...)` returns DeepEP's compiled
# communicator (`_buffer = Buffer(...)`), and backward hands it a raw incoming gradient.
DEEPEP = """\
import torch

try:
    from deep_ep import Buffer
except ImportError:
    Buffer = None

_buffer = None


def get_buffer(group):
    global _buffer
    if _buffer is None:
        _buffer = Buffer(group)
    return _buffer


class Dispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad_output, grad_probs):
        buffer = get_buffer(ctx.group)
        grad_x, _ = buffer.combine(grad_output.contiguous(), weights={probs})
        return grad_x
"""


def test_agl201_a_method_of_what_a_file_function_makes_with_unreadable_code() -> None:
    findings = [
        f
        for f in lint_source(DEEPEP.format(probs="grad_probs.float()")).findings
        if f.rule_id.startswith("AGL2")
    ]
    assert [(f.rule_id, f.line, f.severity) for f in findings] == [("AGL201", 26, "warning")]
    assert "`get_buffer()` returns, made by `deep_ep.Buffer`" in findings[0].help
    assert _b(DEEPEP.format(probs="grad_probs.float().contiguous()")) == []
    # what a function of the file makes from a class of its own is Python
    own = DEEPEP.replace("    from deep_ep import Buffer\n", "    class Buffer:\n        pass\n")
    assert _b(own.format(probs="grad_probs")) == []


# tiny-cuda-nn modules.py (b01-tcnn-1): backward computes through another Function (so that it
# has a double backward); that Function's forward scales the gradient and hands the product to
# the native module it was given. The product is laid out like the gradient.
TCNN = """\
import torch


class _backward_fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ctx_fwd, doutput, x):
        scaled_grad = doutput * ctx_fwd.loss_scale
        return ctx_fwd.native_module.bwd(ctx_fwd.native_ctx, x, scaled_grad)

    @staticmethod
    def backward(ctx, dinput_grad):
        return None, None, None


class _module_fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, native_module, x):
        ctx.native_module = native_module
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, doutput):
        (x,) = ctx.saved_tensors
        return None, _backward_fn.apply(ctx, {grad}, x)
"""


def test_agl201_a_gradient_handed_through_another_functions_apply() -> None:
    findings = [
        f for f in lint_source(TCNN.format(grad="doutput")).findings if f.rule_id == "AGL201"
    ]
    assert [(f.line, f.severity) for f in findings] == [(8, "warning")]
    assert "`_backward_fn.apply` hands it to `_backward_fn.forward`" in findings[0].help
    assert _b(TCNN.format(grad="doutput.contiguous()")) == []


ARITHMETIC = """\
import torch
import fused_ext_not_installed


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return fused_ext_not_installed.bwd({grad})
"""


def test_agl201_an_elementwise_product_is_laid_out_like_the_gradient() -> None:
    (finding,) = lint_source(ARITHMETIC.format(grad="g * 2.0")).findings
    assert (finding.rule_id, finding.line) == ("AGL201", 12)
    assert "Pass `(g * 2.0).contiguous()`" in finding.help
    assert _b(ARITHMETIC.format(grad="g.contiguous() * 2.0")) == []
    assert _b(ARITHMETIC.format(grad="g @ g.T")) == []  # a matrix product is made dense


# apex's fused_rope.py (d01-apex-3): `import fused_rotary_positional_embedding` in backward, a
# build that does not declare it, and csrc/megatron/fused_rotary_positional_embedding.cpp
# binding TORCH_EXTENSION_NAME: the build names such a module after its source file, so the C++
# is read (its wrapper makes the gradient contiguous) instead of the module being unknown.
ROPE_BINDING = """\
#include <torch/extension.h>
torch::Tensor bwd_cuda(const torch::Tensor &output_grads);
torch::Tensor bwd(const torch::Tensor &output_grads_) {{
  {guard}
  return bwd_cuda(output_grads);
}}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{
  m.def("backward", &bwd);
}}
"""
ROPE_KERNEL = """\
torch::Tensor bwd_cuda(const torch::Tensor &output_grads) {
  auto out = torch::empty_like(output_grads);
  rope_backward(reinterpret_cast<float*>(out.data_ptr()),
                reinterpret_cast<const float*>(output_grads.data_ptr()), output_grads.numel());
  return out;
}
"""


def _rope_project(tmp_path: Path, guard: str) -> list[tuple[str, int, str]]:
    root = tmp_path / "apex"
    (root / "csrc").mkdir(parents=True)
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='apex')\n")
    (root / "csrc" / "fused_rope.cpp").write_text(ROPE_BINDING.format(guard=guard))
    (root / "csrc" / "fused_rope_cuda.cu").write_text(ROPE_KERNEL)
    (root / "rope.py").write_text(APEX_PY.format(module="fused_rope").replace(", 1.0", ""))
    return _project_b(root)


def test_an_undeclared_extension_is_read_from_the_source_named_like_it(tmp_path: Path) -> None:
    bad = _rope_project(tmp_path / "bad", "const torch::Tensor &output_grads = output_grads_;")
    assert bad == [("AGL201", 13, "error")]
    fixed = _rope_project(tmp_path / "fixed", "auto output_grads = output_grads_.contiguous();")
    assert fixed == []


# spline_conv_gpu.py (d02-splineconv-1): a legacy Function keeps the CuPy kernel its
# constructor was handed on `self`, and backward launches it with `grad_output.data_ptr()`:
# a raw address, read as dense memory by whatever kernel it is.
CUPY_LAUNCH = """\
import torch
from torch.autograd import Function


class SplineWeighting(Function):
    def __init__(self, weighting_backward_kernel):
        super().__init__()
        self.f_weighting_bw = weighting_backward_kernel

    def forward(self, x):
        return x * 2

    def backward(self, grad_output):
        {guard}
        grad_input = grad_output.new(grad_output.size()).fill_(0)
        self.f_weighting_bw(
            block=(1024, 1, 1),
            args=[grad_output.data_ptr(), grad_input.data_ptr(), grad_output.numel()],
        )
        return grad_input
"""


def test_agl201_a_raw_address_of_the_gradient_handed_to_a_kernel_on_self() -> None:
    found, helps = _b_severity(CUPY_LAUNCH.format(guard="pass"))
    assert found == [("AGL201", 18, "warning")]
    assert "`grad_output.data_ptr()`, a raw address with no strides" in helps[0]
    assert "Pass `grad_output.contiguous()`" in helps[0]
    assert _b(CUPY_LAUNCH.format(guard="grad_output = grad_output.contiguous()")) == []
    # Handed the tensor itself, what the caller handed is taken as Python (a hook, a state
    # object): the corpus's callers pass those there.
    tensor = CUPY_LAUNCH.format(guard="pass").replace("grad_output.data_ptr()", "grad_output")
    assert _b(tensor) == []


# Megatron's dsa_cudnn_kernels.py (c02-megatron-1): a keyword-only helper parameter, a name
# reassigned only under `if`, a module-level `_dsa: Optional[...] = None` set at run time, and
# a call under `if all_rows_nonempty:` that a caller leaving the flag at False never reaches.
DSA = """\
from typing import Optional

import torch

_dsa: Optional[object] = None


def _ensure() -> None:
    global _dsa
    from cudnn import DSA as _ns
    _dsa = _ns


def _run_backward(*, q, grad_output, pad: bool = False, all_rows_nonempty: bool = False):
    dO = grad_output.reshape(-1, q.size(-1))
    bwd_dO = dO
    if pad:
        bwd_dO = dO.new_zeros((dO.size(0) + 1, dO.size(1)))
    _ensure()
    if all_rows_nonempty:
        return _dsa.sparse_attention_backward_wrapper(q, bwd_dO)
    return _dsa.sparse_attention_backward_wrapper(q, bwd_dO.index_select(0, q[0]).contiguous())


class Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q):
        ctx.save_for_backward(q)
        ctx.all_rows_nonempty = True
        return q * 2

    @staticmethod
    def backward(ctx, grad_output):
        (q,) = ctx.saved_tensors
        return _run_backward(
            q=q, grad_output={grad}, all_rows_nonempty=ctx.all_rows_nonempty
        )


class Compact(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q):
        ctx.save_for_backward(q)
        return q * 2

    @staticmethod
    def backward(ctx, grad_output):
        (q,) = ctx.saved_tensors
        return _run_backward(q=q, grad_output=grad_output)
"""


def test_agl201_through_a_keyword_only_helper_to_a_module_set_at_run_time() -> None:
    found, helps = _b_severity(DSA.format(grad="grad_output"))
    assert found == [("AGL201", 36, "warning")]
    assert "a module-level name set at run time" in helps[0]
    assert _b(DSA.format(grad="grad_output.contiguous()")) == []


# unsloth's grouped_gemm/interface.py (d03-unsloth-1): the helper asserts the gradient
# contiguous, views it, and launches one of two kernels (`a if autotune else b`) with its
# arguments unpacked from a dict (`kernel[grid](**kernel_args)`), indexing it densely.
GROUPED = _launching(
    """\
def _dX_kernel(dY_ptr, dX_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    g = tl.load(dY_ptr + row * N + cols, mask=cols < N)
    tl.store(dX_ptr + row * N + cols, g, mask=cols < N)


def grouped_gemm_dX(dY, autotune=False):
    assert dY.is_contiguous()
    dY = dY.view(-1, dY.shape[-1])
    dX = torch.zeros_like(dY)
    kernel_args = {{"dY_ptr": dY, "dX_ptr": dX, "N": dY.shape[1]}}
    kernel = _dX_kernel if autotune else _dX_kernel
    kernel[(dY.shape[0],)](**kernel_args, BLOCK=1024)
    return dX
""",
    "GroupedGemm",
    """\
    def backward(ctx, dY):
        return grouped_gemm_dX(dY={grad})
""",
)


def test_agl201_a_kernel_picked_by_a_condition_and_launched_with_unpacked_arguments() -> None:
    found, helps = _b_severity(GROUPED.format(grad="dY"))
    assert found == [("AGL201", 31, "warning")]
    assert "`grouped_gemm_dX()` asserts it contiguous first: training raises" in helps[0]
    assert _b(GROUPED.format(grad="dY.contiguous()")) == []


# mamba_ssm's angle_dt.py: the launch is given the gradient's own strides through a name
# (`s = g.stride()`, then `s[0], s[1]`): read through its strides, whatever its layout.
STRIDES_BY_NAME = _launching(
    """\
def _bwd_kernel(g_ptr, out_ptr, s0, s1, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    g = tl.load(g_ptr + row * s0 + cols * s1)
    tl.store(out_ptr + row * BLOCK + cols, g)


def bwd(grad_state=None, like=None):
    out = torch.empty_like(like)
    if grad_state is None:
        grad_state = out  # a dummy the kernel never reads
        strides = (0, 0)
    else:
        strides = {strides}
    _bwd_kernel[(out.shape[0],)](grad_state, out, strides[0], strides[1], BLOCK=64)
    return out
""",
    "Angle",
    """\
    def backward(ctx, g):
        return bwd(grad_state=g, like=g)
""",
)


def test_agl201_strides_handed_through_a_name_are_the_gradients_own() -> None:
    assert _b(STRIDES_BY_NAME.format(strides="grad_state.stride()")) == []
    assert _b(STRIDES_BY_NAME.format(strides="out.stride()")) == [("AGL201", 32)]


# MinkowskiEngine's coo_spmm (a01-minkowski-5): the contiguity of the gradient is asserted
# before the copy that would make it contiguous: a non-contiguous gradient raises first.
SPMM = """\
torch::Tensor coo_spmm(torch::Tensor const &vals, torch::Tensor const &mat2) {{
  {first}
  {second}
  spmm_kernel(vals.data_ptr<float>(), mat2_contig.data_ptr<float>(), mat2.size(0));
  return vals;
}}
"""


def test_a_contiguity_check_before_the_copy_raises_first() -> None:
    check = 'TORCH_CHECK(mat2.is_contiguous(), "mat2 must be contiguous");'
    copy = "torch::Tensor const mat2_contig = mat2.contiguous();"
    assert _how(SPMM.format(first=check, second=copy), "coo_spmm")[1] == CHECKED
    assert _how(SPMM.format(first=copy, second=check), "coo_spmm")[1] == GUARDED


# Megatron's fused_kernels/__init__.py (a02-megatron-3): no setup.py; `load(args)` builds each
# extension at run time through a nested helper that hands `cpp_extension.load` its own `name`
# and `sources`, and fused_softmax.py then does `import scaled_masked_softmax_cuda`. The module
# is the project's own C++, read like a setup.py declaration: the in-place backward writes the
# gradient (AGL202); the one that allocates its result and makes the gradient contiguous is
# clean, not an "unknown module" warning.
JIT_LOADER = """\
import pathlib

from torch.utils import cpp_extension


def load(args):
    srcpath = pathlib.Path(__file__).parent.absolute()

    def _load_helper(name, sources, extra_cuda_flags):
        return cpp_extension.load(name=name, sources=sources, extra_cuda_cflags=extra_cuda_flags)

    sources = [srcpath / "masked_softmax.cpp", srcpath / "masked_softmax_cuda.cu"]
    masked_softmax_cuda = _load_helper("masked_softmax_cuda", sources, [])
    sources = [srcpath / "triang_softmax.cpp", srcpath / "triang_softmax_cuda.cu"]
    triang_softmax_cuda = _load_helper("triang_softmax_cuda", sources, [])
"""


def _megatron(tmp_path: Path, module: str) -> list[tuple[str, int, str]]:
    root = tmp_path / module
    kernels = root / "fused_kernels"
    kernels.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'megatronlike'\n")
    (kernels / "__init__.py").write_text(JIT_LOADER)
    for stem, kernel in (("masked_softmax", FRESH), ("triang_softmax", IN_PLACE)):
        (kernels / f"{stem}.cpp").write_text(BINDING)
        (kernels / f"{stem}_cuda.cu").write_text(kernel)
    (root / "softmax.py").write_text(APEX_PY.format(module=module))
    return _project_b(root)


def test_an_extension_loaded_at_run_time_through_a_helper_is_read_from_its_sources(
    tmp_path: Path,
) -> None:
    assert _megatron(tmp_path, "triang_softmax_cuda") == [("AGL202", 13, "error")]
    assert _megatron(tmp_path, "masked_softmax_cuda") == []


def test_the_loads_a_python_file_makes_name_their_sources() -> None:
    from autogradlint.native.loaders import loads_in

    found = loads_in(JIT_LOADER, (".cpp", ".cu"))
    assert found["masked_softmax_cuda"] == {"masked_softmax.cpp", "masked_softmax_cuda.cu"}
    assert found["triang_softmax_cuda"] == {"triang_softmax.cpp", "triang_softmax_cuda.cu"}
    # a `load` that is not torch's (names are not evidence) declares nothing
    assert loads_in(JIT_LOADER.replace("cpp_extension.load(", "other.load("), (".cu",)) == {}


# tiny-cuda-nn's bindings/torch/tinycudann/modules.py (e02-tcnn-1): the double backward calls
# `ctx.ctx_fwd.native_module.bwd_bwd_input(..., dinput_grad, ...)`. `ctx_fwd` is the first
# Function's ctx, handed to `apply` by its backward; that ctx keeps the module its `apply`
# caller was handed, `self.native_module`, which a subclass makes with `_C.create_network()`:
# compiled code, so the raw gradient reaching it is a warning, not a Python hook taken as safe.
TCNN_CALLERS = """\
import torch
from tcnn_bindings import _C


class _module_function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, native_module, input, params):
        ctx.native_module = native_module
        return native_module.fwd(input, params)

    @staticmethod
    def backward(ctx, doutput):
        return None, *_module_function_backward.apply(ctx, doutput.contiguous(), 1)


class _module_function_backward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ctx_fwd, doutput, input):
        ctx.ctx_fwd = ctx_fwd
        return doutput * 2, None

    @staticmethod
    def backward(ctx, dinput_grad, dweight_grad):
        out = ctx.ctx_fwd.native_module.bwd_bwd_input({grad})
        return None, out, None


class Module(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.native_module = self._native_module()
        self.params = torch.nn.Parameter(torch.zeros(4))

    def forward(self, x):
        return _module_function.apply(self.native_module, x.contiguous(), self.params)


class Network(Module):
    def _native_module(self):
        return {maker}
"""


def test_agl201_a_module_the_apply_callers_hand_forward_is_judged_by_what_made_it() -> None:
    bad = TCNN_CALLERS.format(grad="dinput_grad", maker="_C.create_network(4, 4)")
    found, helps = _b_severity(bad)
    assert found == [("AGL201", 24, "warning")]
    assert "`tcnn_bindings._C.create_network` made" in helps[0]
    fixed = TCNN_CALLERS.format(grad="dinput_grad.contiguous()", maker="_C.create_network(4, 4)")
    assert _b(fixed) == []
    # b01-tcnn-1: `_C` bound by `importlib.import_module` in a loop over compute capabilities
    dynamic = bad.replace(
        "from tcnn_bindings import _C\n",
        "import importlib\n\n_C = None\nfor cc in (86, 80):\n    try:\n"
        '        _C = importlib.import_module(f"tcnn_bindings_{cc}._C")\n'
        "        break\n    except ImportError:\n        pass\n",
    )
    found, helps = _b_severity(dynamic)
    assert [rule for rule, _, _ in found] == ["AGL201"]
    assert "dynamic import" in helps[0]
    # a module the file's own Python makes: its methods are Python, followed as before
    python = TCNN_CALLERS.format(grad="dinput_grad", maker="torch.nn.Linear(4, 4)")
    assert _b(python) == []
