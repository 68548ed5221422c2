"""Rows D12.1-D12.3 and FIX-D1: a gradient that backward assigns only on some paths (AGL412)."""

from __future__ import annotations

import sys

import pytest
import torch
from torch.autograd import Function

from .rows import first_line, rows

UNUSED = (
    "The differentiated Tensor at index 0 appears to not have been used in the graph. "
    "Set allow_unused=True if this is the desired behavior."
)


class Guarded(Function):
    """`gw` is assigned only when input 1 requires grad, and returned on every path."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            gx = g * w
        if ctx.needs_input_grad[1]:
            gw = g * x
        return gx, gw


class Initialised(Function):
    """The same backward with both gradients set to None first (the fix)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        gx = None
        gw = None
        x, w = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            gx = g * w
        if ctx.needs_input_grad[1]:
            gw = g * x
        return gx, gw


def _pair(x_grad: bool, w_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=x_grad)
    w = torch.tensor([4.0, 5.0, 6.0], requires_grad=w_grad)
    return x, w


@rows("D12.1")
def test_a_gradient_set_only_under_needs_input_grad_is_unbound_when_not_needed() -> None:
    x, w = _pair(True, True)
    Guarded.apply(x, w).sum().backward()  # every input requires grad: correct
    assert x.grad.tolist() == [4.0, 5.0, 6.0] and w.grad.tolist() == [1.0, 2.0, 3.0]
    x, w = _pair(True, False)  # a frozen weight
    with pytest.raises(UnboundLocalError) as raised:
        Guarded.apply(x, w).sum().backward()
    if sys.version_info >= (3, 11):
        assert first_line(raised.value) == (
            "cannot access local variable 'gw' where it is not associated with a value"
        )


@rows("D12.2")
def test_a_value_left_from_an_earlier_loop_pass_is_dropped_for_an_input_without_grad() -> None:
    class Loop(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return (x.sum() + w.sum()).reshape(1)

        @staticmethod
        def backward(ctx, g):
            grads = []
            for i, t in enumerate(ctx.saved_tensors):
                if ctx.needs_input_grad[i]:
                    gi = g * torch.ones_like(t)
                grads.append(gi)
            return tuple(grads)

    x = torch.ones(3, requires_grad=True)
    w = torch.ones(4)  # another shape: the stale 3-element gradient is not even checked
    Loop.apply(x, w).sum().backward()
    assert x.grad.tolist() == [1.0] * 3
    with pytest.raises(UnboundLocalError):
        Loop.apply(torch.ones(3), torch.ones(4, requires_grad=True)).sum().backward()


@rows("D12.3")
def test_none_for_an_input_that_requires_grad_is_silently_no_gradient() -> None:
    class Dropped(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None

    x = torch.ones(3, requires_grad=True)
    Dropped.apply(x).sum().backward()
    assert x.grad is None
    x = torch.ones(3, requires_grad=True)
    (Dropped.apply(x) + x).sum().backward()
    assert x.grad.tolist() == [1.0] * 3  # the Function's share (2) is missing, silently
    with pytest.raises(RuntimeError) as raised:
        torch.autograd.grad(Dropped.apply(x).sum(), x)
    assert first_line(raised.value) == UNUSED


@rows("FIX-D1")
def test_none_first_changes_only_the_paths_that_raised() -> None:
    for x_grad, w_grad in ((True, True), (True, False), (False, True)):
        x, w = _pair(x_grad, w_grad)
        Initialised.apply(x, w).sum().backward()
        gx, gw = x.grad, w.grad
        x, w = _pair(x_grad, w_grad)
        try:
            Guarded.apply(x, w).sum().backward()
        except UnboundLocalError:
            # the original raised: the fix hands None to the input that needs none
            assert not (x_grad and w_grad)
            assert (gx is None) != (gw is None)
            continue
        assert torch.equal(x.grad, gx) and torch.equal(w.grad, gw)
