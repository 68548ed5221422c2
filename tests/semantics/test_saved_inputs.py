"""Family B rows B4.x: a forward input saved as it came, read raw by backward's kernel."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.autograd import Function

from .raw_kernel import raw_read
from .rows import first_line, rows

CHECKED = "x must be contiguous"


def raw_square(x: torch.Tensor) -> torch.Tensor:
    """A forward kernel: squares `numel` floats read at `data_ptr()` (dense indexing)."""
    return torch.tensor([v * v for v in raw_read(x)]).view(x.shape)


def raw_square_grad(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Its backward kernel: `2 * x * g`, both read at `data_ptr()` as if row-major."""
    return torch.tensor([2 * a * b for a, b in zip(raw_read(x), raw_read(g), strict=True)]).view(
        g.shape
    )


def checked_square_grad(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The same kernel behind a `TORCH_CHECK(x.is_contiguous())`."""
    if not x.is_contiguous():
        raise RuntimeError(CHECKED)
    return raw_square_grad(x, g)


def square(
    kernel: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    dense_in_backward: bool = False,
    save_dense: bool = False,
) -> type[Function]:
    """A Function whose forward hands its kernel a dense copy of `x` and saves `x` itself
    (or, `save_dense`, the copy); backward hands the saved tensor to `kernel` (made dense
    first when `dense_in_backward`)."""

    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            dense = x.contiguous()
            ctx.save_for_backward(dense if save_dense else x)
            return raw_square(dense)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return kernel(x.contiguous() if dense_in_backward else x, g.contiguous())

    return Square


def transposed() -> torch.Tensor:
    """A 2x3 leaf; its transpose, the input, is 3x2, dense, not contiguous: strides (1, 3)."""
    return torch.arange(1.0, 7.0).reshape(2, 3).requires_grad_()


def run(fn: type[Function], base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(forward's output, the gradient of the transposed input) for loss (out * c).sum()."""
    x = base.t()
    out = fn.apply(x)
    c = torch.arange(1.0, 7.0).reshape(3, 2)
    (grad,) = torch.autograd.grad((out * c).sum(), base)
    return out.detach(), grad


def reference(base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = base.t()
    out = x * x
    (grad,) = torch.autograd.grad((out * torch.arange(1.0, 7.0).reshape(3, 2)).sum(), base)
    return out.detach(), grad


@rows("B4.1")
def test_save_for_backward_keeps_the_input_as_it_came() -> None:
    seen: list[torch.Tensor] = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return raw_square(x.contiguous())

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            seen.append(x)
            return g

    base = transposed()
    x = base.t()
    Spy.apply(x).sum().backward()
    assert not x.is_contiguous() and x.stride() == (1, 3)
    assert seen[0].stride() == (1, 3) and not seen[0].is_contiguous()
    assert seen[0].data_ptr() == x.data_ptr()  # the input itself, not forward's dense copy


@rows("B4.2")
def test_a_raw_backward_read_of_the_saved_input_is_a_wrong_gradient() -> None:
    base = transposed()
    out, grad = run(square(raw_square_grad), base)
    right_out, right_grad = reference(base)
    assert torch.equal(out, right_out)  # forward made its own dense copy: right
    assert not torch.equal(grad, right_grad)  # backward read the transposed storage as rows
    for fixed in (
        square(raw_square_grad, dense_in_backward=True),
        square(raw_square_grad, save_dense=True),
    ):
        assert torch.equal(run(fixed, base)[1], right_grad)
    # A contiguous input hides it: the same Function is right there.
    dense = torch.arange(1.0, 7.0).reshape(3, 2).requires_grad_()
    (grad,) = torch.autograd.grad(
        (square(raw_square_grad).apply(dense) * torch.arange(1.0, 7.0).reshape(3, 2)).sum(), dense
    )
    assert torch.equal(grad, 2 * dense.detach() * torch.arange(1.0, 7.0).reshape(3, 2))


@rows("B4.3")
def test_a_contiguity_check_on_the_saved_input_raises_in_backward_only() -> None:
    base = transposed()
    x = base.t()
    out = square(checked_square_grad).apply(x)
    assert torch.equal(out.detach(), x.detach() * x.detach())  # forward ran, and is right
    with pytest.raises(RuntimeError) as raised:
        out.sum().backward()
    assert first_line(raised.value) == CHECKED
    assert torch.equal(
        run(square(checked_square_grad, dense_in_backward=True), base)[1], reference(base)[1]
    )
