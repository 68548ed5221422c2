"""Family B rows B1.7-B1.10 and FIX-B3: which `.view(...)` of an incoming gradient raises, which
never does, and what `.reshape(...)` gives in its place (AGL204)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from .rows import first_line, rows
from .test_family_b import grad_seen

NOT_VIEWABLE = (
    "view size is not compatible with input tensor's size and stride (at least one dimension "
    "spans across two contiguous subspaces). Use .reshape(...) instead."
)


def weights(*shape: int) -> torch.Tensor:
    return torch.arange(1.0, torch.Size(shape).numel() + 1.0).reshape(shape)


def layouts(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The incoming gradients of B1.1 and B1.6 for an output of `shape` (2-D or 3-D)."""
    tail = shape[-1]
    swapped = (shape[1], shape[0], *shape[2:])
    wider = (*shape[:-1], tail + 5)
    return {
        "expanded": grad_seen(lambda out: out.sum(), shape),  # stride 0 everywhere
        "rows": grad_seen(lambda out: out.sum(-1).mean(), shape),  # stride 0 in the last dim
        "transposed": grad_seen(lambda out: (out.transpose(0, 1) * weights(*swapped)).sum(), shape),
        "narrow": grad_seen(
            lambda out: (torch.cat([out, torch.zeros(*shape[:-1], 5)], -1) * weights(*wider)).sum(),
            shape,
        ),
        "dense": grad_seen(lambda out: (out * weights(*shape)).sum(), shape),
    }


@rows("B1.7")
def test_a_view_that_merges_dims_raises_on_transposed_and_narrow_gradients() -> None:
    grads = layouts((2, 3))
    assert grads["transposed"].stride() == (1, 2) and grads["narrow"].stride() == (8, 1)
    assert grads["rows"].stride() == (1, 0)
    for name in ("transposed", "narrow", "rows"):
        with pytest.raises(RuntimeError) as raised:
            grads[name].view(-1)
        assert first_line(raised.value) == NOT_VIEWABLE
    # the stride-0 gradient of `out.sum()` merges: every dim has stride 0
    assert grads["expanded"].view(-1).stride() == (0,)
    assert grads["dense"].view(-1).stride() == (1,)
    # a 2x3x4 gradient transposed in its first two dims: merging either pair raises
    transposed = layouts((2, 3, 4))["transposed"]
    assert transposed.stride() == (4, 8, 1)
    for shape in ((-1, 4), (2, -1), (-1,)):
        with pytest.raises(RuntimeError):
            transposed.view(shape)
    with pytest.raises(RuntimeError):
        transposed.view_as(torch.empty(6, 4))


@rows("B1.8")
def test_views_that_merge_no_dims_work_on_every_layout() -> None:
    for shape in ((2, 3, 4), (2, 1, 4)):
        for g in layouts(shape).values():
            assert torch.equal(g.view(g.shape), g)  # the same shape
            assert torch.equal(g.view_as(g), g)
            assert torch.equal(g.view(1, *g.shape)[0], g)  # a size-1 dim added
            assert torch.equal(g.view(*g.shape, 1)[..., 0], g)
            assert torch.equal(g.view(*g.shape[:-1], 2, 2).flatten(-2), g)  # the last dim split
            assert torch.equal(g.view(2, 1, *g.shape[1:]).flatten(0, 1), g)  # the first split
    for g in layouts((2, 1, 4)).values():  # a size-1 dim removed
        assert torch.equal(g.view(2, 4), g[:, 0])


@rows("B1.9")
def test_reshape_is_the_same_view_where_view_works_and_a_copy_where_it_raises() -> None:
    for shape in ((2, 3), (2, 3, 4)):
        for g in layouts(shape).values():
            for target in ((-1,), (g.shape[0], -1), (-1, g.shape[-1]), tuple(g.shape)):
                reshaped = g.reshape(target)
                try:
                    viewed = g.view(target)
                except RuntimeError as raised:
                    assert first_line(raised) == NOT_VIEWABLE
                    assert reshaped.is_contiguous()
                    assert reshaped.untyped_storage().data_ptr() != g.untyped_storage().data_ptr()
                    assert torch.equal(reshaped, g.contiguous().view(target))
                    continue
                assert reshaped.data_ptr() == viewed.data_ptr()
                assert reshaped.stride() == viewed.stride()
                assert torch.equal(reshaped, viewed)
    # under create_graph the two record the same backward node where view works
    x = torch.randn(2, 3, requires_grad=True)
    view_fn, reshape_fn = x.view(-1).grad_fn, x.reshape(-1).grad_fn
    assert view_fn is not None and reshape_fn is not None
    assert type(view_fn).__name__ == type(reshape_fn).__name__ == "ViewBackward0"


@rows("B1.10")
def test_a_write_into_the_reshape_of_a_non_viewable_gradient_reaches_a_copy() -> None:
    grads = layouts((2, 3))
    dense, transposed = grads["dense"], grads["transposed"]
    before = transposed.clone()
    transposed.reshape(-1).mul_(2)  # `view` raised here; `reshape` copied
    assert torch.equal(transposed, before)
    before = dense.clone()
    dense.reshape(-1).mul_(2)  # a view: the write reaches the gradient, as `view`'s would
    assert torch.equal(dense, before * 2)


@rows("FIX-B3")
def test_view_to_reshape_changes_only_the_paths_that_raised() -> None:
    def backward_with(method: str) -> Callable[[torch.Tensor], torch.Tensor]:
        def backward(g: torch.Tensor) -> torch.Tensor:
            flat = getattr(g, method)(-1, g.shape[-1])
            return (flat * 3).view_as(g) if method == "view" else (flat * 3).reshape_as(g)

        return backward

    for shape in ((2, 3), (2, 3, 4)):
        for g in layouts(shape).values():
            fixed = backward_with("reshape")(g)
            try:
                before = backward_with("view")(g)
            except RuntimeError as raised:
                assert first_line(raised) == NOT_VIEWABLE
                assert torch.equal(fixed, g * 3)  # right where view raised
                continue
            assert torch.equal(fixed, before)
            assert fixed.stride() == before.stride()
