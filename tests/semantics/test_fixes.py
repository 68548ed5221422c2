"""FIX rows: which rewrites are safe (bitwise-equal results on every path that did not raise).

tests/differential holds the fixes autogradlint writes to the same standard over generated
programs; these rows are the PyTorch facts those fixes rest on."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.autograd import Function
from torch.utils._pytree import tree_map

from .rows import rows

Body = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def cube_with(body: Body) -> type[Function]:
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            return body(ctx.saved_tensors[0], g)

    return Cube


def outcomes(body: Body) -> dict[str, object]:
    """First order (create_graph off/on, leaf/non-leaf input), second order, .grad side effects."""
    seen: dict[str, object] = {}
    for leaf in (True, False):
        for create_graph in (False, True):
            w = torch.tensor([0.5, 1.0, 1.5], dtype=torch.float64, requires_grad=True)
            x = w if leaf else w * 1.0
            key = f"leaf={leaf} create_graph={create_graph}"
            try:
                loss = cube_with(body).apply(x).sum() + (x * x).sum()
                (gw,) = torch.autograd.grad(loss, w, create_graph=create_graph)
            except RuntimeError:
                seen[key] = "raised"
                continue
            seen[key] = gw.detach().tolist()
            seen[key + " .grad written"] = w.grad is not None
            if create_graph:
                seen[key + " 2nd"] = torch.autograd.grad(gw.sum(), w)[0].tolist()
    return seen


def safe(before: Body, after: Body) -> bool:
    old, new = outcomes(before), outcomes(after)
    return all(new.get(k) == v for k, v in old.items() if v != "raised")


def grad_plain(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return torch.autograd.grad(x**3, x, g)[0]


def grad_enabled(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():
        return torch.autograd.grad(x**3, x, g)[0]


def grad_no_grad(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.autograd.grad(x**3, x, g)[0]


def grad_create_graph(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    create_graph = torch.is_grad_enabled()
    with torch.enable_grad():
        return torch.autograd.grad(x**3, x, g, create_graph=create_graph)[0]


def inner_backward(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():
        (x**3).backward(g)
        return x.grad


@rows("FIX-A1")
def test_wrapping_in_enable_grad_is_safe() -> None:
    assert safe(grad_plain, grad_enabled)


@rows("FIX-A2")
def test_no_grad_to_enable_grad_is_safe() -> None:
    assert all(v == "raised" for k, v in outcomes(grad_no_grad).items() if "written" not in k)
    assert safe(grad_no_grad, grad_enabled)


@rows("FIX-A3")
def test_inner_backward_to_autograd_grad_changes_results() -> None:
    assert not safe(inner_backward, grad_enabled)


@rows("FIX-A4")
def test_forwarding_create_graph_changes_the_second_order() -> None:
    assert not safe(grad_enabled, grad_create_graph)


def layouts() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    dense = torch.randn(4, 6)
    return {
        "dense": dense,
        "expanded": torch.full((), 1.5).expand(4, 6),
        "transposed": dense.t().contiguous().t(),
        "offset": torch.cat([torch.randn(1, 6), dense])[1:],
    }


def strided_kernel(g: torch.Tensor) -> torch.Tensor:
    """A kernel that honours strides (ATen's)."""
    return torch.mul(g, 2.0)


@rows("FIX-B1")
def test_contiguous_before_a_stride_correct_kernel_is_bitwise_equal() -> None:
    for g in layouts().values():
        assert torch.equal(strided_kernel(g), strided_kernel(g.contiguous()))
    dense = layouts()["dense"]
    assert dense.contiguous().data_ptr() == dense.data_ptr()  # no copy, and no write guard


@rows("FIX-B2")
def test_a_contiguous_copy_before_the_kernel_is_bitwise_equal() -> None:
    for g in layouts().values():
        copy = g.clone(memory_format=torch.contiguous_format)
        assert torch.equal(strided_kernel(g), strided_kernel(copy))
        assert copy.data_ptr() != g.data_ptr()


@rows("FIX-C1")
def test_casting_results_back_does_not_restore_the_numerics() -> None:
    half = torch.float16

    class CastBack(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            def up(t: object) -> object:
                return t.float() if isinstance(t, torch.Tensor) and t.dtype == half else t

            def down(t: object) -> object:
                floating = isinstance(t, torch.Tensor) and t.is_floating_point()
                return t.to(half) if floating else t

            with torch._C.DisableTorchFunctionSubclass():
                args = tree_map(up, args)
            out = super().__torch_function__(func, types, args, kwargs or {})
            with torch._C.DisableTorchFunctionSubclass():
                return tree_map(down, out)

    torch.manual_seed(0)
    x, w, b = torch.randn(64, 256, dtype=half), torch.randn(128, 256, dtype=half), torch.randn(128)
    b = b.to(half)
    signal, kernel = torch.randn(1, 64, 256, dtype=half), torch.randn(8, 64, 5, dtype=half)
    cases = [(F.linear, (x, w, b)), (F.conv1d, (signal, kernel))]
    differing = 0
    for op, inputs in cases:
        plain = op(*inputs)
        cast_back = op(inputs[0].as_subclass(CastBack), *inputs[1:])
        with torch._C.DisableTorchFunctionSubclass():
            # The dtype is back, and the values are the float32 result rounded once...
            assert cast_back.dtype == plain.dtype
            rounded = op(*(t.float() for t in inputs)).to(half)
            assert torch.equal(cast_back, rounded)
            # ...which is not what a float16 kernel computes wherever it rounds on its own
            # (which ops do depends on the CPU: see the row).
            differing += int((cast_back != plain).sum())
    assert differing > 0
