"""Family B rows: the layouts gradients arrive in, and what raw kernels do with them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.autograd import Function

from .raw_kernel import in_bounds, raw_read, raw_scale_
from .rows import first_line, rows

OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def grad_seen(
    loss_of: Callable[[torch.Tensor], torch.Tensor], shape: tuple[int, ...] = (2, 3)
) -> torch.Tensor:
    """The grad_output a Function's backward receives for a float32 input of `shape`."""
    seen: list[torch.Tensor] = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            seen.append(g)
            return g

    x = torch.arange(float(torch.Size(shape).numel())).reshape(shape).requires_grad_()
    loss_of(Spy.apply(x)).backward()
    return seen[0]


def transposed_sum(out: torch.Tensor) -> torch.Tensor:
    c = torch.arange(1.0, 7.0).reshape(3, 2)
    return (out.t() * c).sum()


@rows("B1.1")
def test_gradient_layouts() -> None:
    expanded = grad_seen(lambda out: out.sum())
    assert expanded.stride() == (0, 0) and not expanded.is_contiguous()
    assert expanded.untyped_storage().nbytes() == 4  # dense would need 24
    assert grad_seen(lambda out: out.sum(1).mean()).stride() == (1, 0)
    transposed = grad_seen(transposed_sum)
    assert transposed.stride() == (1, 2) and not transposed.is_contiguous()
    assert grad_seen(lambda out: out.mean()).is_contiguous()


@rows("B1.2", "B3.1")
def test_a_raw_read_of_the_expanded_gradient_leaves_its_storage() -> None:
    expanded = grad_seen(lambda out: out.sum())
    assert not in_bounds(expanded)  # numel floats from data_ptr: 20 of 24 bytes out of bounds


@rows("B1.3")
def test_contiguous_and_clone_densify_the_expanded_gradient() -> None:
    expanded = grad_seen(lambda out: out.sum())
    for dense in (expanded.contiguous(), expanded.clone()):
        assert dense.stride() == (3, 1) and raw_read(dense) == [1.0] * 6


@rows("B1.4", "B3.1")
def test_a_raw_read_of_the_transposed_gradient_is_permuted() -> None:
    transposed = grad_seen(transposed_sum)
    assert transposed.flatten().tolist() == [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
    assert raw_read(transposed) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # silently permuted
    assert raw_read(transposed.contiguous()) == transposed.flatten().tolist()


@rows("B1.4b", "B3.2")
def test_clone_keeps_the_transposed_strides() -> None:
    transposed = grad_seen(transposed_sum)
    assert transposed.clone().stride() == (1, 2)
    assert raw_read(transposed.clone()) != transposed.flatten().tolist()
    fixed = transposed.clone(memory_format=torch.contiguous_format)
    assert fixed.stride() == (3, 1) and raw_read(fixed) == transposed.flatten().tolist()


@rows("B1.5")
def test_aten_refuses_an_in_place_write_to_the_expanded_gradient() -> None:
    expanded = grad_seen(lambda out: out.sum())
    with pytest.raises(RuntimeError) as raised:
        expanded.mul_(2)
    assert first_line(raised.value) == OVERLAP


def consumers(writer: Callable[[torch.Tensor], torch.Tensor], writer_first: bool):
    """loss = W(a) + V(b), backward(gy): (a.grad, b.grad, gy, gy's version, pointers seen).
    On CPU the node created last runs first."""
    pointers: list[int] = []

    class Writer(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            pointers.append(g.data_ptr())
            return writer(g)

    class Victim(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            pointers.append(g.data_ptr())
            return g

    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    if writer_first:
        v = Victim.apply(b)
        w = Writer.apply(a)
    else:
        w = Writer.apply(a)
        v = Victim.apply(b)
    gy = torch.ones(3)
    (w + v).backward(gy)
    return a.grad, b.grad, gy, gy._version, pointers


def aten_double(g: torch.Tensor) -> torch.Tensor:
    return g.mul_(2)


@rows("B2.1", "B2.2")
def test_every_consumer_gets_the_callers_tensor() -> None:
    a_grad, b_grad, gy, version, pointers = consumers(aten_double, writer_first=True)
    assert pointers[0] == pointers[1] == gy.data_ptr()  # no copy per consumer
    assert b_grad.tolist() == [2.0] * 3 and version == 1


@rows("B2.3")
def test_a_late_writer_still_changes_the_callers_tensor() -> None:
    a_grad, b_grad, gy, version, _ = consumers(aten_double, writer_first=False)
    assert b_grad.tolist() == [1.0] * 3 and gy.tolist() == [2.0] * 3


def raw_double(g: torch.Tensor) -> torch.Tensor:
    raw_scale_(g, 2.0)
    return g


@rows("B3.3", "B3.5")
def test_a_raw_write_corrupts_the_other_consumer_without_a_version_bump() -> None:
    a_grad, b_grad, gy, version, _ = consumers(raw_double, writer_first=True)
    assert a_grad.tolist() == [2.0] * 3
    assert b_grad.tolist() == [2.0] * 3  # true value 1
    assert gy.tolist() == [2.0] * 3 and version == 0


@rows("B3.4")
def test_contiguous_is_no_write_guard_but_a_copy_is() -> None:
    _, b_grad, gy, _, _ = consumers(lambda g: raw_double(g.contiguous()), writer_first=True)
    assert b_grad.tolist() == [2.0] * 3 and gy.tolist() == [2.0] * 3
    for copy in (torch.Tensor.clone, lambda g: g.clone(memory_format=torch.contiguous_format)):
        _, b_grad, gy, _, _ = consumers(lambda g, c=copy: raw_double(c(g)), writer_first=True)
        assert b_grad.tolist() == [1.0] * 3 and gy.tolist() == [1.0] * 3


@rows("B1.6")
def test_a_custom_op_backward_gets_the_same_layouts() -> None:
    from torch.library import custom_op

    seen: list[torch.Tensor] = []

    @custom_op("agl_sem::b16", mutates_args=())
    def ident(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    def backward(ctx, g):  # type: ignore[no-untyped-def]
        seen.append(g)
        return g

    ident.register_autograd(backward)
    a = torch.randn(4, 3, requires_grad=True)
    torch.cat([ident(a), torch.randn(4, 5)], dim=1).backward(torch.randn(4, 8))
    assert seen[-1].stride() == (8, 1) and not seen[-1].is_contiguous()
    ident(a).sum().backward()
    assert seen[-1].stride() == (0, 0)
