"""AGL409 on saved tensors the real-bug batches wrote in backward and the rule missed (issue 31):
an input saved under another name and saved twice (Megatron's cross entropy), and what a
`setup_context` saved (a custom op's, gsplat's absgrad holder; a Function's). Each: the bad code,
the finding, the fixed code."""

from __future__ import annotations

from autogradlint import lint_source
from autogradlint.settings import Settings


def _found(code: str, rule: str = "AGL409") -> list[tuple[int, str]]:
    result = lint_source(code, "example.py", settings=Settings())
    assert result.error is None
    return [(f.line, f.severity) for f in result.findings if f.rule_id == rule]


# --- an input saved under a local name, with the same call twice -----------------------------

CROSS_ENTROPY = """\
import torch


class CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        exp_logits.div_(exp_logits.sum(dim=-1, keepdim=True))
        ctx.save_for_backward(exp_logits, target)

        ctx.save_for_backward(exp_logits, target)
        return exp_logits.gather(-1, target[:, None]).log().neg().sum()

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target = ctx.saved_tensors
        grad_input = softmax
        grad_input[torch.arange(target.numel()), target] -= 1.0
        return grad_input * grad_output, None
"""

CROSS_ENTROPY_FIXED = CROSS_ENTROPY.replace(
    "        grad_input = softmax\n", "        grad_input = softmax.clone()\n"
)


def test_a_saved_alias_of_an_input_written_in_backward_is_the_callers_tensor() -> None:
    # `exp_logits` is `logits` itself: the caller's tensor (an error, not an intermediate's
    # warning), though forward saves it twice (the second call replaces the first with the same)
    assert _found(CROSS_ENTROPY) == [(19, "error")]
    assert _found(CROSS_ENTROPY_FIXED) == []


def test_a_saved_intermediate_under_a_rebound_input_name_stays_a_warning() -> None:
    made = CROSS_ENTROPY.replace(
        "        exp_logits = logits\n", "        exp_logits = logits - logits.amax(-1, True)\n"
    )
    assert _found(made) == [(19, "warning")]


# --- what a custom op's setup_context saved -------------------------------------------------

HOOKS = """\
import torch


class RasterizeHooks:
    base = "rasterize"

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        means2d, colors = inputs
        render, absgrad = output
        ctx.mark_non_differentiable(absgrad)
        ctx.save_for_backward(means2d, colors, absgrad)

    @classmethod
    def backward(cls, ctx, v_render, v_absgrad):
        means2d, colors, absgrad = ctx.saved_tensors
        v_abs, v_means2d, v_colors = torch.ops.mylib.rasterize_bwd(means2d, colors, v_render)
        absgrad.copy_(v_abs)
        return v_means2d, v_colors


def _register(hooks: type) -> None:
    torch.library.register_autograd(
        f"mylib::{hooks.base}", hooks.backward, setup_context=hooks.setup_context
    )


_register(RasterizeHooks)
"""

HOOKS_FIXED = HOOKS.replace(
    "        absgrad.copy_(v_abs)\n        return v_means2d, v_colors\n",
    "        return v_means2d, v_colors\n",
)


def test_a_custom_op_backward_writing_an_output_its_setup_context_saved() -> None:
    # the op's output is the caller's tensor: the write changes it (semantics D9.2)
    assert _found(HOOKS) == [(18, "error")]
    assert _found(HOOKS_FIXED) == []


SETUP_STYLE = """\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        x.mul_(g)
        return g * w, x
"""

SETUP_STYLE_FIXED = SETUP_STYLE.replace(
    "        x.mul_(g)\n        return g * w, x\n", "        return g * w, x * g\n"
)


def test_a_function_backward_writing_an_input_its_setup_context_saved() -> None:
    # forward has no ctx: setup_context decides what was saved (semantics D9.1)
    assert _found(SETUP_STYLE) == [(17, "error")]
    assert _found(SETUP_STYLE_FIXED) == []


# --- AGL405: a torch op's `out=`, and `.data =` on an element of `*args` ---------------------

EXP_OUT = """\
import torch


class Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits):
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        return exp_logits / exp_logits.sum(-1, keepdim=True)

    @staticmethod
    def backward(ctx, g):
        return g
"""

EXP_OUT_FIXED = EXP_OUT.replace(
    "        exp_logits = logits\n", "        exp_logits = logits.clone()\n"
)


def test_a_torch_op_writing_an_input_through_out() -> None:
    assert _found(EXP_OUT, "AGL405") == [(8, "error")]
    assert _found(EXP_OUT_FIXED, "AGL405") == []


CHECKPOINT = """\
import torch


def set_data(tensor, new_data):
    assert tensor._base is None
    tensor.data = new_data


class Checkpoint(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, distribute, *args):
        ctx.run_function = run_function
        ctx.distribute = distribute
        with torch.no_grad():
            outputs = run_function(*args)
        if distribute:
            ctx.shape = args[0].data.shape
            set_data(args[0], args[0].data.view(-1)[:8].clone())
        ctx.save_for_backward(*args)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        inputs = ctx.saved_tensors
        if ctx.distribute:
            set_data(inputs[0], inputs[0].data.view(ctx.shape))
        detached = [x.detach().requires_grad_() for x in inputs]
        with torch.enable_grad():
            outputs = ctx.run_function(*detached)
        torch.autograd.backward(outputs, grads)
        return (None, None) + tuple(x.grad for x in detached)
"""

# keep the shard aside (a ctx attribute of the Function's own) instead of the caller's tensor
CHECKPOINT_FIXED = (
    CHECKPOINT.replace(
        "            set_data(args[0], args[0].data.view(-1)[:8].clone())\n",
        "            ctx.shard = args[0].data.view(-1)[:8].clone()\n",
    )
    .replace("        ctx.save_for_backward(*args)\n", "        ctx.save_for_backward(*args[1:])\n")
    .replace(
        "            set_data(inputs[0], inputs[0].data.view(ctx.shape))\n",
        "            inputs = (ctx.shard.view(ctx.shape), *inputs)\n",
    )
)


def test_data_swapped_on_an_element_of_args_in_forward_and_backward() -> None:
    # forward gives the caller's args[0] other memory (D5.7); backward gives the saved one
    # (the same tensor: save_for_backward(*args) saved every input) other memory again
    assert _found(CHECKPOINT, "AGL405") == [(18, "error")]
    assert _found(CHECKPOINT, "AGL409") == [(26, "error")]
    assert _found(CHECKPOINT_FIXED, "AGL405") == []
    assert _found(CHECKPOINT_FIXED, "AGL409") == []


PARTITION = """\
import torch


class Partition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        for arg in args:
            arg.data = arg.data.view(-1)[:4].clone()
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + grads
"""

PARTITION_FIXED = PARTITION.replace(
    "            arg.data = arg.data.view(-1)[:4].clone()\n",
    "            ctx.parts = [arg.data.view(-1)[:4].clone() for arg in args]\n",
)


def test_data_swapped_on_each_element_of_args_in_a_loop() -> None:
    assert _found(PARTITION, "AGL405") == [(9, "error")]
    assert _found(PARTITION_FIXED, "AGL405") == []


# --- AGL403: an input forward asks only for `.new()` (old code's empty tensor of its kind) ----

POOL = """\
import torch

import pool_backend


class MaxPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_features, kernel_size=2):
        ctx.in_feat = input_features
        ctx.kernel_size = kernel_size
        out_feat = input_features.new()
        pool_backend.max_pool_forward(input_features, out_feat, kernel_size)
        return out_feat

    @staticmethod
    def backward(ctx, grad_out_feat):
        grad_in_feat = grad_out_feat.new()
        pool_backend.max_pool_backward(ctx.in_feat, grad_in_feat, grad_out_feat, ctx.kernel_size)
        return grad_in_feat, None
"""

POOL_FIXED = POOL.replace(
    "        ctx.in_feat = input_features\n", "        ctx.save_for_backward(input_features)\n"
).replace(
    "        pool_backend.max_pool_backward(ctx.in_feat,",
    "        (in_feat,) = ctx.saved_tensors\n        pool_backend.max_pool_backward(in_feat,",
)


def test_an_input_forward_calls_new_on_is_a_tensor() -> None:
    # `.new()` is a Tensor method; nothing else forward reads of the input says otherwise
    assert _found(POOL, "AGL403") == [(9, "warning")]
    assert _found(POOL_FIXED, "AGL403") == []


# --- AGL403: forward's outputs kept in a tuple that backward unpacks --------------------------

UNPACKED = """\
import torch
from torch import Tensor


class Interpolate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, key: str):
        weights = x.softmax(-1)
        out = x * weights
        ctx.inputs = (weights, key)
        return out, weights

    @staticmethod
    def backward(ctx, grad_out, grad_weights):
        weights, key = ctx.inputs
        return grad_out * weights, None
"""

UNPACKED_FIXED = UNPACKED.replace(
    "        ctx.inputs = (weights, key)\n",
    "        ctx.save_for_backward(weights)\n        ctx.key = key\n",
).replace("        weights, key = ctx.inputs\n", "        (weights,) = ctx.saved_tensors\n")


def test_an_output_kept_in_a_tuple_that_backward_unpacks_is_read() -> None:
    # `weights, key = ctx.inputs`: each element read stands for the attribute (semantics D3.1)
    assert _found(UNPACKED, "AGL403") == [(10, "warning")]
    assert _found(UNPACKED_FIXED, "AGL403") == []


NEW_OUTPUT = """\
import torch


class InstanceNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, in_feat):
        norm_feat = in_feat.new()
        torch.nn.functional.instance_norm(in_feat.unsqueeze(0), out=norm_feat)
        ctx.norm_feat = norm_feat
        return norm_feat

    @staticmethod
    def backward(ctx, out_grad):
        return out_grad - ctx.norm_feat * (out_grad * ctx.norm_feat).mean()
"""

NEW_OUTPUT_FIXED = (
    NEW_OUTPUT.replace(
        "        ctx.norm_feat = norm_feat\n", "        ctx.save_for_backward(norm_feat)\n"
    )
    .replace(
        "        return out_grad - ctx.norm_feat",
        "        (norm_feat,) = ctx.saved_tensors\n        return out_grad - norm_feat",
    )
    .replace("(out_grad * ctx.norm_feat)", "(out_grad * norm_feat)")
)


def test_an_output_made_by_new_on_a_tensor_input_is_a_tensor() -> None:
    # the output kept on ctx: output -> grad_fn -> ctx -> output, and no version check
    assert _found(NEW_OUTPUT, "AGL403") == [(9, "warning")]
    assert _found(NEW_OUTPUT_FIXED, "AGL403") == []


# --- AGL403: an input the callers annotate `Optional[Tensor]` ---------------------------------

CALLER_ANNOTATED = """\
from typing import Optional

import torch


class Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cu_seqlens):
        seq_num = 1 if cu_seqlens is None else len(cu_seqlens) - 1
        ctx.cu_seqlens = cu_seqlens
        return x * seq_num

    @staticmethod
    def backward(ctx, g):
        if ctx.cu_seqlens is not None:
            g = g.index_select(0, ctx.cu_seqlens[1:] - 1)
        return g, None


def apply_rope(x: torch.Tensor, cu_seqlens: Optional[torch.Tensor] = None) -> torch.Tensor:
    return Rope.apply(x, cu_seqlens)
"""

CALLER_ANNOTATED_FIXED = CALLER_ANNOTATED.replace(
    "        ctx.cu_seqlens = cu_seqlens\n", "        ctx.save_for_backward(cu_seqlens)\n"
).replace(
    "        if ctx.cu_seqlens is not None:\n            g = g.index_select(0, ctx.cu_seqlens[1:] - 1)\n",
    "        (cu_seqlens,) = ctx.saved_tensors\n"
    "        if cu_seqlens is not None:\n            g = g.index_select(0, cu_seqlens[1:] - 1)\n",
)


def test_an_input_every_caller_annotates_as_a_tensor() -> None:
    # forward reads only `len()` of it; the one `apply` call hands it an Optional[Tensor]
    assert _found(CALLER_ANNOTATED, "AGL403") == [(10, "warning")]
    assert _found(CALLER_ANNOTATED_FIXED, "AGL403") == []
    # an int from the caller is no tensor
    plain = CALLER_ANNOTATED.replace(
        "cu_seqlens: Optional[torch.Tensor]", "cu_seqlens: Optional[int]"
    )
    assert _found(plain, "AGL403") == []


# --- AGL405: the input on one branch of a conditional expression ----------------------------

CONDITIONAL = """\
import torch


class Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, cos):
        q_out = q.clone() if not q.is_contiguous else q
        q_out.mul_(cos)
        ctx.save_for_backward(cos)
        return q_out

    @staticmethod
    def backward(ctx, g):
        (cos,) = ctx.saved_tensors
        return g * cos, None
"""

CONDITIONAL_FIXED = CONDITIONAL.replace(
    "        q_out = q.clone() if not q.is_contiguous else q\n", "        q_out = q.clone()\n"
)


def test_an_input_on_one_branch_of_a_conditional_expression() -> None:
    # `not q.is_contiguous` tests a bound method (always true): q_out is q itself
    assert _found(CONDITIONAL, "AGL405") == [(8, "error")]
    assert _found(CONDITIONAL_FIXED, "AGL405") == []


UNPACKED_UNREAD = """\
import torch
from torch import Tensor


class Int8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor):
        scale = a.abs().amax()
        ctx.tensors = (scale, a, b)
        return (a / scale).round() @ b

    @staticmethod
    def backward(ctx, g):
        scale, _a, b = ctx.tensors
        return g @ b.t() / scale, None
"""


def test_a_kept_tuple_counts_only_the_tensors_backward_reads() -> None:
    # `_a` is never read: the input kept at element 1 escapes no check backward relies on
    # (D3.1 needs a read); `b`, element 2, is read for its values
    assert _found(UNPACKED_UNREAD, "AGL403") == [(9, "warning")]
    b_unread = UNPACKED_UNREAD.replace("scale, _a, b = ctx.tensors", "scale, _a, _b = ctx.tensors")
    b_unread = b_unread.replace("return g @ b.t() / scale, None", "return g / scale, None")
    assert _found(b_unread, "AGL403") == []


def test_an_input_chosen_by_a_flag_the_caller_passes_is_not_followed() -> None:
    # `overwrite` is the caller asking for its tensor to be reused, and the write below is
    # guarded by `not overwrite`: on that path the buffer is the fresh one
    flagged = """\
import torch


class FusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, overwrite=False):
        grad = torch.empty_like(hidden) if not overwrite else hidden
        if not overwrite:
            grad.zero_()
        ctx.save_for_backward(grad)
        return hidden.sum()

    @staticmethod
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad * g, None
"""
    assert _found(flagged, "AGL405") == []
