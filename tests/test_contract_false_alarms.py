"""The contract rules stay quiet on code torch runs correctly (issue 31, section 3): each test is
the code a rule used to flag, no finding, and the true bug beside it, still found."""

from __future__ import annotations

from autogradlint import lint_source
from autogradlint.settings import Settings


def _found(
    code: str, rule: str | None = None, settings: Settings | None = None
) -> list[tuple[str, int]]:
    result = lint_source(code, "example.py", settings=settings or Settings())
    assert result.error is None
    return [(f.rule_id, f.line) for f in result.findings if rule is None or f.rule_id == rule]


# --- AGL403 fires only on values that can be tensors -----------------------------------------

NARROWED_INT = """\
import torch


class Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, offsets):
        if isinstance(offsets, int):
            ctx.save_for_backward(cos)
            ctx.offsets = offsets  # an int: save_for_backward cannot take it
        else:
            ctx.save_for_backward(cos, offsets)
            ctx.offsets = None
        ctx.cos_kept = cos  # the tensor input itself: still found
        return x * cos + offsets.sum()

    @staticmethod
    def backward(ctx, g):
        offsets = ctx.offsets
        if offsets is None:
            cos, offsets = ctx.saved_tensors
        return g * ctx.cos_kept, None, None
"""


def test_a_value_an_isinstance_test_proves_an_int_is_not_a_tensor() -> None:
    assert _found(NARROWED_INT) == [("AGL403", 13)]


GROUPS_AND_PROVIDERS = """\
import torch
import torch.distributed as dist


class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, x, provider, cfg):
        ctx.group = group  # a process group: group.size() is its world size
        ctx.provider = provider  # called below: no tensor is callable
        ctx.cfg = cfg  # a config: cfg.dtype, but cfg.block_size is no tensor's
        ctx.x = x  # the tensor input: still found
        world = group.size()
        w = provider(0, world)
        return x.view(-1).to(cfg.dtype)[: cfg.block_size] * w

    @staticmethod
    def backward(ctx, g):
        dist.all_reduce(g, group=ctx.group)
        return None, g * ctx.x * ctx.provider(0, 1), None, ctx.cfg
"""


def test_process_groups_callables_and_configs_are_not_tensors() -> None:
    assert _found(GROUPS_AND_PROVIDERS, "AGL403") == [("AGL403", 11)]


OUTPUTS = """\
import torch


def dispatch(x):
    return x * 2, object()


class Dispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, index):
        recv, handle = dispatch(x)  # a library's handle: nothing says it is a tensor
        counts = index.bincount().tolist()  # a list of ints
        is_tensor = False
        if isinstance(recv, torch.Tensor):
            is_tensor = True
        shape = torch.Size([len(counts)])
        out = recv.contiguous() * 3  # made by a tensor method: a tensor output
        ctx.handle = handle
        ctx.counts = counts
        ctx.is_tensor = is_tensor
        ctx.shape = shape
        ctx.out = out
        return out, handle, counts, is_tensor, shape

    @staticmethod
    def backward(ctx, g, *rest):
        return g * ctx.out * len(ctx.counts) * ctx.is_tensor * ctx.shape[0] + ctx.handle, None
"""


def test_only_outputs_forward_made_as_tensors_count() -> None:
    assert _found(OUTPUTS) == [("AGL403", 22)]


REBOUND = """\
import torch


class Lanczos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, matrix, root, scale, noise):
        ctx.root = root  # the flag passed in; `root` names a tensor only from line 11 on
        ctx.scale = scale.contiguous()  # a view of a tensor input: still found
        q = matrix @ matrix.t()
        root = q * 2
        if noise is None:
            noise = torch.randn_like(q)
        ctx.noise = noise  # the caller's tensor when given, a fresh one otherwise: found
        return root.contiguous() + noise

    @staticmethod
    def backward(ctx, g):
        if ctx.root:
            return g * ctx.scale * ctx.noise, None, None, None
        return None, None, None, None
"""


def test_an_input_rebound_later_is_what_it_was_where_it_is_kept() -> None:
    assert _found(REBOUND) == [("AGL403", 8), ("AGL403", 13)]


EXTENSION_OBJECTS = """\
import torch

import sparse_backend._C as _C


class Conv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feats, key, noise):
        if key is None:
            key = _C.CoordinateMapKey(3)  # the extension's own object, made from a size
        if noise is None:
            noise = _C.gaussian(feats.contiguous())  # a kernel given a tensor: a tensor
        ctx.key = key
        ctx.noise = noise
        return _C.conv_forward(feats.contiguous(), key) + noise

    @staticmethod
    def backward(ctx, g):
        return _C.conv_backward(g * ctx.noise, ctx.key), None, None
"""


def test_an_extension_object_made_from_a_size_is_not_a_tensor() -> None:
    # Names are never evidence: the user's override says `_C` is compiled (it is not installed here)
    compiled = Settings(extension_modules=("_C",))
    assert _found(EXTENSION_OBJECTS, "AGL403", compiled) == [("AGL403", 14)]


SHAPES = """\
import torch


class Expand(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, *sizes):
        ctx.sizes = sizes  # ints: they are the shape of the view below
        return x.view(*sizes)

    @staticmethod
    def backward(ctx, g):
        return (g.reshape(-1),) + (None,) * len(ctx.sizes)


class Stack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *tensors):
        ctx.tensors = tensors  # the tensor inputs: still found
        return torch.stack(tensors)

    @staticmethod
    def backward(ctx, g):
        return tuple(g[i] * t for i, t in enumerate(ctx.tensors))
"""


def test_star_args_that_are_a_shape_are_not_tensors() -> None:
    assert _found(SHAPES) == [("AGL403", 18)]


BRANCH_ALTERNATIVE = """\
import torch

old_torch = torch.__version__ < "0.4"


class LML(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        if old_torch:
            ctx.y = y  # the path where save_for_backward did not exist
        else:
            ctx.save_for_backward(y)
        ctx.x = x  # no alternative: still found
        return y

    @staticmethod
    def backward(ctx, g):
        y = ctx.y if old_torch else ctx.saved_tensors[0]
        return g * y * (1 - y) + 0 * ctx.x
"""


def test_a_tensor_saved_on_the_other_branch_of_the_same_if_is_not_reported() -> None:
    assert _found(BRANCH_ALTERNATIVE) == [("AGL403", 14)]


# --- AGL403 needs a read of the values (semantics D3.1, D3.3) -------------------------------

READS = """\
import torch


class TiledMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, fn, x, *params):
        ctx.fn = fn
        ctx.params = params  # read for its length and as autograd.grad's inputs: identity
        ctx.unused = x  # never read by backward
        ctx.x = x  # read for its values: found
        with torch.no_grad():
            return fn(x.contiguous())

    @staticmethod
    def backward(ctx, g):
        x = ctx.x.detach().requires_grad_()
        with torch.enable_grad():
            y = ctx.fn(x)
        grads = torch.autograd.grad(y, (x, *ctx.params), g, allow_unused=True)
        assert len(grads) == 1 + len(ctx.params)
        return (None, *grads)
"""


HANDED_ON = """\
import torch


def _backward(ctx, g):
    return g * ctx.x


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x.mul(x)

    @staticmethod
    def backward(ctx, g):
        return _backward(ctx, g)
"""


def test_attributes_backward_never_reads_for_their_values_are_not_reported() -> None:
    assert _found(READS) == [("AGL403", 10)]
    # a backward that hands ctx itself on may read anything
    assert _found(HANDED_ON) == [("AGL403", 11)]


# --- AGL405 knows which indexing copies, and what has no history to go stale ---------------

INDEXING = """\
import torch
from torch import Tensor


class CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, inputs: Tensor, index: Tensor, mask: Tensor):
        out = inputs[index[0], index[1]]  # advanced indexing: a copy
        out.neg_()
        picked = inputs[[0, 2]]  # a list: a copy
        picked.mul_(2)
        inputs[inputs > 0].zero_()  # a mask: a copy
        mask.copy_(mask)  # onto itself: the values never change
        row = inputs[0]  # basic indexing: a view of the input
        row.add_(1)
        return out.sum() + picked.sum() + row.sum()

    @staticmethod
    def backward(ctx, g):
        return g, None, None
"""


def test_advanced_indexing_copies_and_basic_indexing_does_not() -> None:
    assert _found(INDEXING) == [("AGL405", 15)]


FROZEN = """\
import torch
from torch import nn


class VectorQuantizer(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.codebook = nn.Parameter(torch.empty(n, dim), requires_grad=False)
        self.register_buffer("counts", torch.zeros(n))
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return KMeansStep.apply(x, self.codebook, self.counts, self.scale)


class KMeansStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, codebook, counts, scale):
        codebook.copy_(codebook * 0.5 + x.mean())  # requires_grad=False: no gradient path
        counts.add_(1)  # a buffer: no gradient path
        scale.mul_(0.9)  # a parameter that requires grad: found
        return x * codebook.sum() * scale.sum()

    @staticmethod
    def backward(ctx, g):
        return g * 2, None, None, None
"""


def test_an_input_that_never_requires_grad_may_change_in_place() -> None:
    assert _found(FROZEN) == [("AGL405", 21)]


PLACEHOLDER = """\
import torch


class CreateParameter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, placeholder):
        return placeholder.set_(tensor.detach())

    @staticmethod
    def backward(ctx, g):
        return None, g


class Fill(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, target):
        return target.set_(tensor.detach())

    @staticmethod
    def backward(ctx, g):
        return None, g


def create_parameter(tensor: torch.Tensor, placeholder: torch.nn.Parameter):
    return CreateParameter.apply(tensor, placeholder)


def fill(tensor: torch.Tensor, target: torch.Tensor):
    return Fill.apply(tensor, target)  # any tensor, a non-leaf too: found
"""


def test_a_leaf_parameter_given_storage_and_returned_is_not_reported() -> None:
    assert _found(PLACEHOLDER) == [("AGL405", 17)]


# --- AGL408: a hand-off the paired backward refills is not consumed (semantics D8.4) ----------

HAND_OFF = """\
import torch


class Inner(torch.autograd.Function):
    @staticmethod
    def forward(ctx, side, x):
        ctx.side = side
        return x.new_zeros(())

    @staticmethod
    def backward(ctx, g):
        grads = ctx.side.pop("bw")  # refilled by Outer.backward before every pass
        ctx.side.pop("extra")  # nobody puts it back: found
        return None, grads


class Outer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dummy, side, x):
        ctx.side = side
        return x * 3

    @staticmethod
    def backward(ctx, g):
        ctx.side["bw"] = g * 3
        return torch.zeros(()), None, None
"""


def test_a_key_the_paired_backward_refills_is_not_consumed_state() -> None:
    assert _found(HAND_OFF) == [("AGL408", 13)]


# --- AGL407 fires only where grad mode may be on, and only on Functions (semantics D7.4) -------

FAST_PATHS = """\
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        if ctx is not None:
            ctx.save_for_backward(a)
        return a**3

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return 3 * a * a * g


def if_else(a):
    if torch.is_grad_enabled():
        return Cube.apply(a)
    else:
        return Cube.forward(None, a)


def early_return(a):
    if torch.is_grad_enabled():
        return Cube.apply(a)
    return Cube.forward(None, a)


def negated(a):
    if not torch.is_grad_enabled():
        return Cube.forward(None, a)
    return Cube.apply(a)


def in_no_grad(a):
    with torch.no_grad():
        return Cube.forward(None, a)


@torch.inference_mode()
def decorated(a):
    return Cube.forward(None, a)


def grad_may_be_on(a):
    return Cube.forward(None, a)  # found


def forgot_ctx(a):
    with torch.no_grad():
        return Cube.forward(a)  # raises whatever the grad mode: found
"""


def test_the_no_grad_fast_path_is_not_reported() -> None:
    assert _found(FAST_PATHS) == [("AGL407", 47), ("AGL407", 52)]


NAMESAKES = """\
import torch


def test_function():
    class Storage(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Storage()(torch.ones(2))  # found: the Function, instantiated and called


def test_storage():
    class Storage:
        def __call__(self, x):
            return x

    return Storage()(1)  # a plain class of the same name
"""


def test_a_plain_class_named_like_a_function_is_not_one() -> None:
    assert _found(NAMESAKES) == [("AGL407", 14)]


# --- AGL401 counts what `apply` passes (semantics D1.4, D1.5) -------------------------------

CLASSMETHODS = """\
import torch


class ChunkedLoss(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, logits, target):
        ctx.save_for_backward(logits, target)
        return (logits - target).square().sum()

    @staticmethod
    def backward(ctx, g):
        logits, target = ctx.saved_tensors
        return 2 * g * (logits - target), None


class Shifted(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, x, shift):
        return x + shift

    @classmethod
    def backward(cls, ctx, g):
        return g * 1  # found: two inputs


def run(logits, target, x):
    return ChunkedLoss.apply(logits, target), Shifted.apply(x, 1.0)
"""


def test_the_bound_cls_of_a_classmethod_is_not_an_input() -> None:
    assert _found(CLASSMETHODS) == [("AGL401", 23)]


NON_DIFFERENTIABLE = """\
import torch


class ArgMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        index = (a * b).argmax()
        ctx.mark_non_differentiable(index)
        return index

    @staticmethod
    def backward(ctx, g):
        return g * 1  # never runs: the only output is marked non-differentiable


class TopK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, k):
        values, index = a.topk(k)
        ctx.mark_non_differentiable(index)
        return values, index

    @staticmethod
    def backward(ctx, g_values, g_index):
        return g_values * 1  # found: `values` is differentiable, and k needs its None
"""


def test_a_backward_that_can_never_run_is_not_counted() -> None:
    assert _found(NON_DIFFERENTIABLE) == [("AGL401", 25)]


# --- AGL306: a request honoured before the branch, and tokens with no data ---------------------

READ_BEFORE = """\
import torch

aten = torch.ops.aten


class Wrapper(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        kwargs = dict(kwargs or {})
        dtype = kwargs.pop("dtype", None)
        device = kwargs.get("device")
        if func is aten._to_copy.default:
            return Wrapper(args[0]._data.to(dtype=dtype, device=device))  # both honoured
        if func is aten.empty_like.default:
            return Wrapper(torch.empty_like(args[0]._data, device=device))  # dtype: found
        return NotImplemented
"""


def test_request_keys_read_before_the_branch_are_honoured_in_it() -> None:
    assert _found(READ_BEFORE, "AGL306") == [("AGL306", 14)]


TOKENS = """\
import torch

aten = torch.ops.aten


class Token(torch.Tensor):
    @staticmethod
    def __new__(cls):
        return torch.Tensor._make_wrapper_subclass(cls, (), device="meta")

    def __tensor_flatten__(self):
        return [], None

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func is aten.empty_like.default:
            return Token()  # nothing inside to give a dtype
        raise NotImplementedError


class Wrapped(torch.Tensor):
    @staticmethod
    def __new__(cls, data):
        r = torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype)
        r._data = data
        return r

    def __tensor_flatten__(self):
        return ["_data"], None

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func is aten.empty_like.default:
            return Wrapped(torch.empty_like(args[0]._data))  # data inside: found
        raise NotImplementedError
"""


def test_a_wrapper_with_no_tensor_inside_has_no_dtype_to_honour() -> None:
    assert _found(TOKENS, "AGL306") == [("AGL306", 33)]


APPLY_COUNTS = """\
import torch


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale=2.0):
        ctx.save_for_backward(x, w)
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x, g  # apply passes 2: a third gradient that is not None raises


class Packed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        x, w = args
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w  # apply passes 2: one gradient is too few


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, bias=None):
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None
        return x @ w.t() if bias is None else x @ w.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_bias = g.sum(0) if ctx.has_bias else None  # None when apply passed no bias: fine
        return g @ w, g.t() @ x, grad_bias


def model(x, w):
    return Scaled.apply(x, w) + Packed.apply(x, w) + Linear.apply(x, w)
"""


def test_the_gradient_count_is_what_apply_passes() -> None:
    # torch counts the arguments apply receives, not forward's parameters (tests/oracle K13)
    assert _found(APPLY_COUNTS, "AGL401") == [("AGL401", 13), ("AGL401", 26)]


SETUP_DEFAULTS = """\
import torch


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(x, w, scale=2.0):
        return x * w * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, scale = inputs
        ctx.save_for_backward(x, w)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale  # apply binds scale: 3 gradients


class Fixed(Scaled):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale, None
"""


def test_the_setup_context_style_counts_every_parameter() -> None:
    # apply binds forward's defaults in this style: one gradient each (tests/oracle K13)
    assert _found(SETUP_DEFAULTS, "AGL401") == [("AGL401", 18)]


SPLIT_VARARG = """\
import torch


class Layer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, n, *inputs):
        keys = inputs[:n]  # strings: *inputs packs keys, then their tensors
        values = inputs[n : 2 * n]
        ctx.keys = keys
        ctx.names = inputs[:n]
        ctx.everything = inputs  # the whole pack holds the tensors: still found
        ctx.save_for_backward(*values)
        return sum(v.sum() for v in values)

    @staticmethod
    def backward(ctx, g):
        grads = dict(zip(ctx.keys, ctx.saved_tensors))
        scale = ctx.everything[len(ctx.names)]
        return (None, *(None for _ in ctx.names), *(g * scale for _ in grads))
"""


def test_a_slice_of_a_vararg_split_into_parts_is_not_a_tensor() -> None:
    # theseus TheseusLayerDLMForward: `input_keys = inputs[:n]` kept on ctx (labelled ok)
    assert _found(SPLIT_VARARG, "AGL403") == [("AGL403", 11)]


# --- AGL407: a Function instantiated with arguments and called (semantics D7.3) ---------------

LEGACY_INSTANCES = """\
import torch


class Scale(torch.autograd.Function):
    def __init__(self, k):
        self.k = k

    def forward(self, x):
        return x * self.k

    def backward(self, g):
        return g * self.k


def direct(x):
    return Scale(3.0)(x)  # found: calling any Function instance raises


def held(x):
    fn = Scale(3.0)
    return fn(x)  # found: the same instance, held first


def rebound(x, other):
    fn = Scale(3.0)
    fn = other
    return fn(x)  # `fn` may be anything here


class Plain:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


def not_a_function(x):
    return Plain(3.0)(x)
"""


def test_a_function_instantiated_with_arguments_and_called_is_found() -> None:
    # torch 2.13: `Scale(3.0)(x)` raises "Legacy autograd function with non-static forward
    # method is deprecated", exactly as `Scale()(x)` does
    assert _found(LEGACY_INSTANCES, "AGL407") == [("AGL407", 16), ("AGL407", 21)]


def test_the_legacy_call_gets_no_rewrite_that_drops_the_constructor_arguments() -> None:
    result = lint_source(LEGACY_INSTANCES, "example.py", settings=Settings())
    direct = [f for f in result.findings if f.rule_id == "AGL407"]
    assert direct and all(f.fixable is None for f in direct)


# --- AGL409: indexing a saved tensor with a tensor copies (semantics D5.4) --------------------

SAVED_INDEXED = """\
import torch


class Mean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, row, rowcount, value):
        ctx.save_for_backward(row, rowcount)
        return value * 2

    @staticmethod
    def backward(ctx, grad_out):
        row, rowcount = ctx.saved_tensors
        count = rowcount[row].clamp_(min=1)  # advanced indexing: a copy of the saved tensor
        first = rowcount[0]
        first.zero_()  # basic indexing: a view, the caller's `rowcount` changes (found)
        return None, None, grad_out * count.pow_(-1)
"""


def test_a_write_into_a_saved_tensor_indexed_by_a_saved_tensor_is_private() -> None:
    # torch_sparse SPMM.backward: `rowcount[row].to(dtype).clamp_(min=1)` leaves rowcount alone
    assert _found(SAVED_INDEXED, "AGL409") == [("AGL409", 15)]


SAVED_SETITEM = """\
import torch


class VocabCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        softmax = torch.softmax(logits, dim=-1)
        ctx.save_for_backward(softmax, target)
        return softmax.sum()

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target = ctx.saved_tensors
        rows = torch.arange(softmax.size(0))
        softmax[rows, target] -= 1.0  # written through an advanced index: softmax changes
        return softmax * grad_output, None
"""


def test_a_write_through_an_advanced_index_still_writes_the_saved_tensor() -> None:
    # Megatron's vocab-parallel cross entropy: `grad_2d[arange_1d, target] -= ...` (D9.3)
    assert _found(SAVED_SETITEM, "AGL409") == [("AGL409", 15)]
