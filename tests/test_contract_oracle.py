"""The contract rules' misses that the oracle (tests/oracle) found, each a class of known.md
that torch shows and the linter did not: the bad code, the finding, and the fixed code."""

from __future__ import annotations

from autogradlint import lint_source
from autogradlint.settings import Settings


def _found(code: str, rule: str) -> list[tuple[str, int]]:
    result = lint_source(code, "example.py", settings=Settings())
    assert result.error is None
    return [(f.rule_id, f.line) for f in result.findings if f.rule_id == rule]


# --- AGL401: a lone gradient returned as a bare name (K10, K13) -------------------------------

BARE_NAME = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_x = g * w
        grad_w = g * x
        if not torch.is_grad_enabled():
            return grad_x  # expected 2, got 1
        return grad_x, grad_w


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        grad_x = g * ctx.scale
        return grad_x  # apply passes 2 arguments: expected 2, got 1


def model(x, w):
    return Fn.apply(x, w) + Scaled.apply(x, 3.0)
"""

BARE_NAME_FIXED = BARE_NAME.replace(
    "return grad_x  # expected 2, got 1", "return grad_x, None"
).replace("return grad_x  # apply passes", "return grad_x, None  # apply passes")


MAYBE_TUPLE = """\
import torch


def _grads(g, x, w):
    return g * w, g * x


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grads = _grads(g, x, w)  # a tuple of both: the count is what the helper returns
        return grads
"""


def test_a_lone_gradient_returned_by_name_is_counted_as_one() -> None:
    # `grad_x` is bound only to arithmetic: one tensor, never a tuple of gradients
    assert _found(BARE_NAME, "AGL401") == [("AGL401", 16), ("AGL401", 29)]
    assert _found(BARE_NAME_FIXED, "AGL401") == []
    # a name bound to a call may hold a tuple of every gradient: its count is unknown
    assert _found(MAYBE_TUPLE, "AGL401") == []


KEYWORD_ONLY = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, *, scale=2.0):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x * w * scale

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale, g  # expected 2, got 3


def model(x, w):
    return Fn.apply(x, w)
"""


def test_keyword_only_parameters_are_not_inputs() -> None:
    # apply cannot pass `scale` (a keyword binds only to a positional parameter): torch
    # expects one gradient per positional input (a third is accepted only as None) (K12)
    assert _found(KEYWORD_ONLY, "AGL401") == [("AGL401", 14)]
    fixed = KEYWORD_ONLY.replace(", g  # expected 2, got 3", "")
    assert _found(fixed, "AGL401") == []


PACKED = """\
import torch


def _pack(*grads):
    return tuple(grads)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return _pack(g * ctx.scale, g)  # apply passes 1 argument: expected 1, got 2


def model(x):
    return Fn.apply(x)
"""


def test_a_gradient_packed_by_a_helper_past_what_apply_passes() -> None:
    # `_pack` returns what it is given: `g` lands past the one argument apply passes (K13)
    assert _found(PACKED, "AGL401") == [("AGL401", 16)]
    assert _found(PACKED.replace("ctx.scale, g)", "ctx.scale, None)"), "AGL401") == []
    # nor is `scale` a tensor for the gradient in its slot: apply never passes it
    assert _found(PACKED, "AGL403") == []


# --- AGL403: tensors kept on ctx (K18, K19, K20) ----------------------------------------------

KEPT = """\
import torch


class Plain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.w = w  # no annotation, but backward returns a gradient for w: a tensor
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x


class Listed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.ws = [w]  # the list holds w itself
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.ws[0], g * x


class Setup(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x)
        ctx.w = w.detach()  # shares w's storage

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x
"""

KEPT_FIXED = """\
import torch


class Plain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x


class Setup(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x
"""


SCALE_KEPT = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale  # backward returns None for it: a float as far as anyone knows
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None
"""


def test_an_input_kept_on_ctx_is_a_tensor_when_backward_returns_its_gradient() -> None:
    # a change to w in place between forward and backward silently changes the gradient
    # (semantics D3.1); save_for_backward would raise instead
    assert _found(KEPT, "AGL403") == [("AGL403", 8), ("AGL403", 21), ("AGL403", 39)]
    assert _found(KEPT_FIXED, "AGL403") == []
    # backward returning None for an input says nothing of it
    assert _found(SCALE_KEPT, "AGL403") == []


SAVED_NUMBER = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale=2.0):
        ctx.save_for_backward(x, w, scale)  # AGL404: save_for_backward takes only tensors
        ctx.scale = scale  # a float: nothing can change it in place
        return x * w * scale
"""


def test_a_number_handed_to_save_for_backward_is_not_kept_as_a_tensor() -> None:
    # torch raises at save_for_backward (AGL404 says so); `ctx.scale` holds the float (K23)
    assert _found(SAVED_NUMBER, "AGL404") == [("AGL404", 7)]
    assert _found(SAVED_NUMBER, "AGL403") == []


SHAPE_IN_SUBCLASS = """\
import torch


class _Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w
        ctx.x = x
        return x * 2.0 + w


class Fn(_Base):
    @staticmethod
    def backward(ctx, g):
        # w is a tensor (a gradient is returned for it), read only for its shape: harmless;
        # x is read for its values: a change to it in place changes this gradient
        return g * ctx.x, g * torch.ones(ctx.w.shape, dtype=g.dtype)
"""


def test_what_a_subclass_backward_reads_decides_for_the_forward_it_inherits() -> None:
    assert _found(SHAPE_IN_SUBCLASS, "AGL403") == [("AGL403", 8)]


KEPT_TWICE = """\
import torch


def _keep(ctx, name, value):
    setattr(ctx, name, value)
    ctx.kept = value  # the same tensor under a second name backward never reads


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(x, w):
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.save_for_backward(x)
        _keep(ctx, "w", w)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        w_kept = ctx.w
        return g * w_kept, g * x
"""


def test_a_helper_keeping_a_tensor_under_two_names() -> None:
    # `ctx.w` is read for its values (`ctx.kept` is not): the finding names it
    result = lint_source(KEPT_TWICE, "example.py", settings=Settings())
    found = [(f.rule_id, f.line) for f in result.findings if f.rule_id == "AGL403"]
    assert found == [("AGL403", 18)]
    assert "kept as `ctx.w`" in result.findings[0].message
    fixed = KEPT_TWICE.replace(
        'ctx.save_for_backward(x)\n        _keep(ctx, "w", w)', "ctx.save_for_backward(x, w)"
    ).replace("(x,) = ctx.saved_tensors\n        w_kept = ctx.w", "x, w_kept = ctx.saved_tensors")
    assert _found(fixed, "AGL403") == []


# --- AGL407 / AGL410: calls through a name bound to apply or forward (K34, K41) ---------------

ALIASED = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4.0) / 4.0

    @staticmethod
    def backward(ctx, g):
        return g  # the straight-through gradient autograd cannot derive


scaled_op = Fn.apply


def model(x):
    f = Fn.forward
    return f(None, x) + scaled_op(x, 1.0)
"""


def test_a_name_bound_to_apply_or_forward_is_checked_at_its_calls() -> None:
    # `f(None, x)` skips the custom backward (round's gradient is 0); `scaled_op(x, 1.0)`
    # raises TypeError: forward takes 1 input
    assert _found(ALIASED, "AGL407") == [("AGL407", 19)]
    assert _found(ALIASED, "AGL410") == [("AGL410", 19)]
    fixed = ALIASED.replace("f(None, x) + scaled_op(x, 1.0)", "Fn.apply(x) + scaled_op(x)")
    assert _found(fixed, "AGL407") == _found(fixed, "AGL410") == []


# --- AGL405: advanced indexing in a helper copies (K26) ---------------------------------------

INDEXED_HELPER = """\
import torch


def _scale_rows(t):
    t[[0, 1]].mul_(2.0)  # advanced indexing: a copy is scaled, t is unchanged
    return t


def _scale_first(t):
    t[0:2].mul_(2.0)  # a slice is a view: t itself changes
    return t


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        _scale_rows(x)
        _scale_first(x)
        return out

    @staticmethod
    def backward(ctx, g):
        return g * 2.0
"""


def test_a_helper_writing_into_an_advanced_index_writes_a_copy() -> None:
    assert _found(INDEXED_HELPER, "AGL405") == [("AGL405", 19)]


# --- AGL403: a container of tensors kept on ctx (K65, K66) -------------------------------------

KEPT_CONTAINERS = """\
import torch


class Setup(torch.autograd.Function):
    @staticmethod
    def forward(x, ws: list[torch.Tensor]):
        return x * ws[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ws, *_ = inputs
        ctx.ws = ws  # forward's annotation says what setup_context unpacked (K65)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.ws[0], None


class Copied(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ws: list[torch.Tensor]):
        ctx.ws = tuple(ws)  # a new tuple of the very same tensors (K66)
        return x * ws[0]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.ws[0], None
"""

KEPT_CONTAINERS_FIXED = """\
import torch


class Setup(torch.autograd.Function):
    @staticmethod
    def forward(x, ws: list[torch.Tensor]):
        return x * ws[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ws, *_ = inputs
        ctx.save_for_backward(*ws)

    @staticmethod
    def backward(ctx, g):
        (w0, *_) = ctx.saved_tensors
        return g * w0, None


class Copied(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ws: list[torch.Tensor]):
        ctx.save_for_backward(*ws)
        ctx.sizes = tuple(w.shape for w in ws)  # a tuple of shapes holds no tensor
        return x * ws[0]

    @staticmethod
    def backward(ctx, g):
        (w0, *_) = ctx.saved_tensors
        return g * w0 * len(ctx.sizes), None
"""


def test_a_container_of_tensors_kept_in_setup_context_or_copied() -> None:
    # changing a kept tensor in place before backward silently changes the gradient (D3.1)
    assert _found(KEPT_CONTAINERS, "AGL403") == [("AGL403", 12), ("AGL403", 22)]
    assert _found(KEPT_CONTAINERS_FIXED, "AGL403") == []
