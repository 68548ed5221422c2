"""The contract rules follow what a Function's methods hand to helpers (module-level functions
and static methods, one and two calls deep) and aliases (`.detach()`, slices): each test is
the bad code, the finding (rule, line), and the fixed code, clean (issue 32, known.md)."""

from __future__ import annotations

from autogradlint import lint_source


def _found(code: str) -> list[tuple[str, int]]:
    result = lint_source(code, "example.py")
    assert result.error is None
    return [(f.rule_id, f.line) for f in result.findings]


# --- AGL405: forward writes an input through a helper ---------------------------------------

FORWARD_HELPER = """\
import torch


def _scale_inner(t):
    t.mul_(2.0)
    return t


def _scale(t):
    return _scale_inner(t)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        _scale(x)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * 2.0
"""


def test_agl405_a_module_helper_two_calls_deep_that_writes_the_input() -> None:
    assert _found(FORWARD_HELPER) == [("AGL405", 17)]
    fixed = FORWARD_HELPER.replace("_scale(x)\n", "_scale(x.clone())\n")
    assert _found(fixed) == []


DECORATED = """\
import functools

import torch


def _traced(f):
    @functools.wraps(f)
    def inner(*a, **k):
        return f(*a, **k)

    return inner


@_traced
def _zero_first(t):
    t[0] = 0.5
    return t


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        _zero_first(x)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * 2.0
"""


def test_agl405_a_decorated_helper_writing_an_item_the_gradient_shows_a_tensor() -> None:
    # `t[0] = v` could be a list; backward's gradient `g * 2.0` for x says x is a tensor
    assert _found(DECORATED) == [("AGL405", 24)]
    fixed = DECORATED.replace("return g * 2.0", "return None")
    assert _found(fixed) == []


LOOP = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        for _ in range(1):
            x *= 2.0
        return out

    @staticmethod
    def backward(ctx, g):
        return g * 2.0
"""


def test_agl405_an_augmented_write_in_a_loop_on_an_input_backward_differentiates() -> None:
    assert _found(LOOP) == [("AGL405", 9)]
    assert _found(LOOP.replace("x *= 2.0", "out *= 2.0")) == []


STATIC_OF_ANOTHER_CLASS = """\
import torch


class _Ops:
    @staticmethod
    def apply_to(t):
        t[0] = 0.5
        return t


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        _Ops.apply_to(x)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * 2.0
"""


def test_agl405_a_static_method_of_a_plain_class_that_writes_the_input() -> None:
    assert [rule for rule, _ in _found(STATIC_OF_ANOTHER_CLASS)] == ["AGL405"]
    fixed = STATIC_OF_ANOTHER_CLASS.replace("_Ops.apply_to(x)", "_Ops.apply_to(x.clone())")
    assert _found(fixed) == []


# --- AGL406: backward writes its gradient through a helper or an alias -----------------------

BACKWARD_HELPER = """\
import torch


def _clip_inner(t):
    t.clamp_(min=0.6)
    return t


def _clip(t):
    return _clip_inner(t)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        grad_x = g * 2.0
        _clip(g)
        return grad_x
"""


def test_agl406_a_helper_two_calls_deep_that_writes_the_gradient() -> None:
    assert _found(BACKWARD_HELPER) == [("AGL406", 21)]
    assert _found(BACKWARD_HELPER.replace("_clip(g)", "_clip(grad_x)")) == []


DETACHED_ALIAS = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        grad_x = g * 2.0
        h = g.detach()
        h[0] = 0.0
        return grad_x
"""


def test_agl406_an_item_written_through_a_detached_alias() -> None:
    # `h[0] = v` right after `h = g.detach()`: the write's order came before the alias's
    assert _found(DETACHED_ALIAS) == [("AGL406", 13)]
    assert _found(DETACHED_ALIAS.replace("g.detach()", "g.clone()")) == []


# --- AGL408: backward consumes ctx state in a helper -----------------------------------------

CONSUMES = """\
import torch


def _take_inner(ctx, x):
    s = ctx.scale
    ctx.scale = None
    return s


def _take(ctx, x):
    return _take_inner(ctx, x)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.scale = 2.0
        return x * w * 2.0

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        s = _take(ctx, x)
        return g * w * s, g * x * s
"""


def test_agl408_a_helper_two_calls_deep_that_clears_what_it_read() -> None:
    assert _found(CONSUMES) == [("AGL408", 24)]
    assert _found(CONSUMES.replace("    ctx.scale = None\n", "")) == []


def test_agl408_a_helper_deleting_an_attribute_or_popping_a_key() -> None:
    deleting = CONSUMES.replace("    ctx.scale = None\n", "    del ctx.scale\n")
    assert _found(deleting) == [("AGL408", 24)]
    popping = CONSUMES.replace("ctx.scale = 2.0", "ctx.cache = {'k': 2.0}").replace(
        "    s = ctx.scale\n    ctx.scale = None\n", "    s = ctx.cache.pop('k')\n"
    )
    assert _found(popping) == [("AGL408", 23)]
    assert _found(popping.replace("ctx.cache.pop('k')", "ctx.cache['k']")) == []


# --- AGL409: backward writes a saved tensor through a helper ---------------------------------

SAVED = """\
import torch


class _Ops:
    @staticmethod
    def apply_to(t):
        t.mul_(2.0)
        return t


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_x, grad_w = g * w, g * x
        _Ops.apply_to(x)
        return grad_x, grad_w
"""


def test_agl409_a_static_method_that_writes_a_saved_input() -> None:
    assert _found(SAVED) == [("AGL409", 21)]
    assert _found(SAVED.replace("_Ops.apply_to(x)", "_Ops.apply_to(x.clone())")) == []


def test_agl409_a_helper_that_writes_a_tensor_kept_on_ctx() -> None:
    kept = SAVED.replace(
        "ctx.save_for_backward(x, w)",
        "ctx.save_for_backward(x, w)\n        ctx.buf = w.detach().clone()",
    ).replace("_Ops.apply_to(x)", "_Ops.apply_to(ctx.buf)")
    assert _found(kept) == [("AGL409", 22)]
    assert _found(kept.replace("t.mul_(2.0)", "t = t * 2.0")) == []


# --- AGL401: gradients packed by a helper ---------------------------------------------------

PACKED = """\
import torch


def _pack(*grads):
    return tuple(grads)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return _pack(g * w, g * x, g)
"""


def test_agl401_a_helper_packing_its_args_returns_as_many_as_it_is_given() -> None:
    assert _found(PACKED) == [("AGL401", 17)]
    assert _found(PACKED.replace("_pack(g * w, g * x, g)", "_pack(g * w, g * x)")) == []


# --- AGL404: save_for_backward called again in a helper --------------------------------------

SAVES = """\
import torch


def _save_all(ctx, *tensors):
    for t in tensors:
        ctx.save_for_backward(t)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        _save_all(ctx, x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x
"""


def test_agl404_a_helper_saving_one_tensor_at_a_time_in_a_loop() -> None:
    assert _found(SAVES) == [("AGL404", 12)]
    fixed = SAVES.replace(
        "    for t in tensors:\n        ctx.save_for_backward(t)",
        "    ctx.save_for_backward(*tensors)",
    )
    assert _found(fixed) == []


def test_agl404_a_helper_saving_in_one_branch_or_the_other_saves_once() -> None:
    either = SAVES.replace(
        "    for t in tensors:\n        ctx.save_for_backward(t)",
        "    if len(tensors) > 1:\n        ctx.save_for_backward(*tensors)\n"
        "    else:\n        ctx.save_for_backward(tensors[0], None)",
    )
    assert _found(either) == []
    assert _found(
        either.replace(
            "_save_all(ctx, x, w)", "ctx.save_for_backward(x)\n        _save_all(ctx, x, w)"
        )
    ) == [("AGL404", 15)]


# --- AGL403: a tensor kept on ctx by a helper ------------------------------------------------

KEEPS = """\
import torch


def _keep(ctx, name, value):
    setattr(ctx, name, value)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        _keep(ctx, "w", w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x
"""


def test_agl403_a_helper_keeping_an_input_on_ctx_named_by_the_call() -> None:
    # w is a tensor: backward returns `g * x` for it
    [(rule, line, message)] = [
        (f.rule_id, f.line, f.message) for f in lint_source(KEEPS, "example.py").findings
    ]
    assert (rule, line) == ("AGL403", 12)
    assert "`ctx.w`" in message
    fixed = (
        KEEPS.replace("ctx.save_for_backward(x)\n", "ctx.save_for_backward(x, w)\n")
        .replace('        _keep(ctx, "w", w)\n', "")
        .replace("(x,) = ctx.saved_tensors", "x, w = ctx.saved_tensors")
        .replace("ctx.w", "w")
    )
    assert _found(fixed) == []


def test_agl403_a_helper_keeping_an_input_from_setup_context() -> None:
    code = KEEPS.replace(
        "    def forward(ctx, x, w):\n        ctx.save_for_backward(x)\n"
        '        _keep(ctx, "w", w)\n        return x * w\n',
        "    def forward(x, w):\n        return x * w\n\n    @staticmethod\n"
        "    def setup_context(ctx, inputs, output):\n        x, w = inputs\n"
        '        ctx.save_for_backward(x)\n        _keep(ctx, "w", w)\n',
    )
    assert _found(code) == [("AGL403", 17)]


def test_agl403_the_backward_of_a_subclass_here_says_the_input_is_a_tensor() -> None:
    code = KEEPS.replace("class Fn(", "class _Base(").replace(
        "    @staticmethod\n    def backward",
        "\nclass Fn(_Base):\n    @staticmethod\n    def backward",
    )
    assert _found(code) == [("AGL403", 12)]


# --- AGL404: a second call that saves everything the first did -------------------------------

TWICE = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.save_for_backward(w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x
"""


def test_agl404_a_second_call_is_reported_unless_it_saves_all_the_first_did() -> None:
    assert _found(TWICE) == [("AGL404", 8)]
    # the second call replaces the first (D4.3), but backward unpacks all it saved
    assert _found(TWICE.replace("ctx.save_for_backward(w)", "ctx.save_for_backward(x, w)")) == []


# --- AGL410: apply given a keyword forward does not take positionally ------------------------

KEYWORD = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, *, scale=1.0):
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g


def model(x):
    return Fn.apply(x, scale=3.0)
"""


def test_agl410_a_keyword_apply_cannot_bind_raises() -> None:
    # torch 2.13: `forward() got an unexpected keyword argument 'scale'`, keyword-only or absent
    result = lint_source(KEYWORD, "example.py")
    [finding] = result.findings
    assert (finding.rule_id, finding.line) == ("AGL410", 15)
    assert "unexpected keyword argument 'scale'" in finding.help
    absent = KEYWORD.replace("x, *, scale=1.0", "x").replace("x * scale", "x * 2")
    assert [(f.rule_id, f.line) for f in lint_source(absent, "example.py").findings] == [
        ("AGL410", 15)
    ]
    positional = KEYWORD.replace("x, *, scale=1.0", "x, scale=1.0").replace(
        "return g\n", "return g, None\n"
    )
    assert _found(positional) == []


# --- AGL410: apply unpacking a module constant (oracle K42) -----------------------------------

UNPACKED = """\
import torch

ARGS_EXTRA = (1.0,)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0


def model(x):
    return Fn.apply(*(x,), *ARGS_EXTRA)
"""


def test_agl410_counts_a_module_constant_the_call_unpacks() -> None:
    # torch 2.13: TypeError, forward takes 1 input and `*ARGS_EXTRA` passes a second (D10)
    result = lint_source(UNPACKED, "example.py")
    [finding] = result.findings
    assert (finding.rule_id, finding.line) == ("AGL410", 17)
    assert "takes 2 positional arguments but 3 were given" in finding.help
    # fixed: the constant holds nothing more, or forward takes what it holds
    assert _found(UNPACKED.replace("(1.0,)", "()")) == []
    assert (
        _found(UNPACKED.replace("ctx, x)", "ctx, x, scale)").replace("g * 2.0\n", "g, None\n"))
        == []
    )
    # only a name bound exactly once, at module scope, to a tuple or list literal is counted
    rebound = UNPACKED + "\n\ndef widen():\n    global ARGS_EXTRA\n    ARGS_EXTRA = ()\n"
    local = UNPACKED.replace("    return Fn.apply", "    ARGS_EXTRA = ()\n    return Fn.apply")
    computed = UNPACKED.replace("(1.0,)", "tuple(range(1))")
    starred = UNPACKED.replace("(1.0,)", "(*OTHER,)")
    for code in (rebound, local, computed, starred):
        assert _found(code) == []


# --- AGL404: non-tensors saved by setup_context, and a number default saved -------------------

SETUP_SAVES = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x, w, x.shape)

    @staticmethod
    def backward(ctx, g):
        x, w, _ = ctx.saved_tensors
        return g * w, g * x
"""


def test_agl404_setup_context_saving_a_non_tensor() -> None:
    assert _found(SETUP_SAVES) == [("AGL404", 12)]
    fixed = SETUP_SAVES.replace("x, w, x.shape)", "x, w)\n        ctx.shape = x.shape").replace(
        "x, w, _ = ctx", "x, w = ctx"
    )
    assert _found(fixed) == []


def test_agl404_setup_context_saving_twice() -> None:
    twice = SETUP_SAVES.replace(
        "ctx.save_for_backward(x, w, x.shape)",
        "ctx.save_for_backward(x)\n        ctx.save_for_backward(w)",
    )
    assert _found(twice) == [("AGL404", 13)]


NUMBER_DEFAULT = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale=2.0):
        ctx.save_for_backward(x, w, scale)
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        x, w, _ = ctx.saved_tensors
        return g * w * 2.0, g * x * 2.0, None
"""


def test_agl404_an_unannotated_parameter_with_a_number_default_saved() -> None:
    assert _found(NUMBER_DEFAULT) == [("AGL404", 7)]
    fixed = NUMBER_DEFAULT.replace("(x, w, scale)", "(x, w)").replace("x, w, _ = ctx", "x, w = ctx")
    assert _found(fixed) == []


# --- AGL405: a collective writes an input of forward (semantics D5.1, B2.4) -----------------

FORWARD_COLLECTIVE = """\
import torch
import torch.distributed as dist


def _reduce(input_):
    if dist.get_world_size() == 1:
        return input_
    dist.all_reduce(input_)
    return input_


class ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce(input_)  # the caller's tensor is summed in place

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ReduceDirect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        dist.all_reduce(input_)
        return input_

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ReduceCopy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce(input_.clone())

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class GatherReads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        out = input_.new_empty((2, *input_.shape))
        dist.all_gather_into_tensor(out, input_)  # only reads its input (B2.7)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output[0]
"""


def test_forward_handing_an_input_to_a_collective_that_writes_it() -> None:
    # Megatron's _ReduceFromModelParallelRegion.forward returns _reduce(input_), which
    # all-reduces the caller's tensor in place without ctx.mark_dirty
    assert [f for f in _found(FORWARD_COLLECTIVE) if f[0] == "AGL405"] == [
        ("AGL405", 15),
        ("AGL405", 25),
    ]


# --- AGL405: a Triton kernel launched in forward stores into an input (D5.1, B3.5) -----------

FORWARD_KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _rotate(Q, stride, cos, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    q = tl.load(Q + row * stride + offs, mask=offs < n_cols)
    c = tl.load(cos + offs, mask=offs < n_cols)
    tl.store(Q + row * stride + offs, q * c, mask=offs < n_cols)


class Rotary(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, cos):
        n_rows, n_cols = Q.shape
        Q = Q.reshape(n_rows, n_cols)  # a view of the caller's tensor when it is contiguous
        _rotate[(n_rows,)](Q, Q.stride(0), cos, n_cols, BLOCK=128)
        ctx.save_for_backward(cos)
        return Q

    @staticmethod
    def backward(ctx, g):
        (cos,) = ctx.saved_tensors
        return g * cos, None


class RotaryCopy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, cos):
        n_rows, n_cols = Q.shape
        out = Q.clone()
        _rotate[(n_rows,)](out, out.stride(0), cos, n_cols, BLOCK=128)
        ctx.save_for_backward(cos)
        return out

    @staticmethod
    def backward(ctx, g):
        (cos,) = ctx.saved_tensors
        return g * cos, None
"""


def test_forward_launching_a_kernel_that_stores_into_an_input() -> None:
    # unsloth's Fast_RoPE_Embedding and Megatron's ApplyMLARotaryEmbQ rotate the caller's
    # tensor in place through tl.store; `n_cols`, in the store's offsets, is no write
    assert [f for f in _found(FORWARD_KERNEL) if f[0] == "AGL405"] == [("AGL405", 20)]


FORWARD_COLLECTIVE_MARKED = """\
import torch
import torch.distributed as dist


def _reduce(ctx, input_):
    if ctx:
        ctx.mark_dirty(input_)
    dist.all_reduce(input_)
    return input_


class ReduceMarked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce(ctx, input_)  # the helper marks the input dirty with forward's ctx

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class ReduceUnmarked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce(None, input_)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output
"""


def test_a_helper_that_marks_the_input_dirty_with_forwards_ctx() -> None:
    # fairscale's _ReduceFromModelParallelRegion: `_reduce(ctx, input_)` calls
    # `ctx.mark_dirty(input_)` before the all-reduce, so torch knows of the change
    assert [f for f in _found(FORWARD_COLLECTIVE_MARKED) if f[0] == "AGL405"] == [("AGL405", 25)]
