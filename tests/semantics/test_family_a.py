"""Family A rows: building or walking an autograd graph inside Function.backward."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable
from torch.autograd.gradcheck import GradcheckError
from torch.utils.checkpoint import checkpoint

from .rows import first_line, rows

ELEMENT_0 = "element 0 of tensors does not require grad and does not have a grad_fn"
SECOND_TIME = "Trying to backward through the graph a second time"
UNUSED = "The differentiated Tensor at index 0 appears to not have been used in the graph."


def h(x: torch.Tensor) -> torch.Tensor:
    return x * x


def square_with(body):  # a Function whose backward is `body(x, g)`
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return h(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return body(x, g)

    return Square


def leaf() -> torch.Tensor:
    return torch.tensor([1.0, 2.0, 3.0], requires_grad=True)


def outer_backward(fn, leaf_input: bool, create_graph: bool):
    """w.grad after `fn.apply(x).sum().backward(create_graph=...)`, x = w or exp(w)."""
    w = leaf()
    x = w if leaf_input else w.exp()
    fn.apply(x).sum().backward(create_graph=create_graph)
    return w, x


def expected(w: torch.Tensor, leaf_input: bool) -> torch.Tensor:
    x = w.detach() if leaf_input else w.detach().exp()
    return 2 * x * (1 if leaf_input else x)


@rows("A1.1")
def test_grad_mode_in_backward_follows_create_graph() -> None:
    seen: list[bool] = []
    fn = square_with(lambda x, g: seen.append(torch.is_grad_enabled()) or 2 * x * g)
    outer_backward(fn, True, False)
    outer_backward(fn, True, True)
    assert seen == [False, True]


@rows("A1.3")
def test_once_differentiable_runs_backward_without_grad_mode() -> None:
    seen: list[bool] = []

    class Once(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return h(x)

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            seen.append(torch.is_grad_enabled())
            return 2 * ctx.saved_tensors[0] * g

    outer_backward(Once, True, True)
    assert seen == [False]


def readme_example() -> type[Function]:
    """The README's first example, executed from the README itself (its first code block)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {"torch": torch, "F": torch.nn.functional}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    (cls,) = [v for v in namespace.values() if isinstance(v, type) and issubclass(v, Function)]
    return cls


@rows("A1.5")
def test_readme_example_runs_under_create_graph_and_fails_every_check() -> None:
    fn = readme_example()
    x = torch.tensor([-1.3, 0.2, 0.9, 2.1], dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(fn.apply(x).sum(), x, create_graph=True)
    assert torch.allclose(gx, torch.sigmoid(x))
    with pytest.raises(RuntimeError) as training:
        fn.apply(x).sum().backward()
    assert first_line(training.value) == ELEMENT_0
    with pytest.raises(RuntimeError) as checked:
        torch.autograd.gradcheck(fn.apply, (x,))
    assert first_line(checked.value) == ELEMENT_0
    with pytest.raises(GradcheckError) as second:
        torch.autograd.gradgradcheck(fn.apply, (x,))
    assert first_line(second.value) == "Numerical gradient for function expected to be zero"


def grad_without_enable_grad(x, g):
    return torch.autograd.grad(h(x), x, g)[0]


@rows("A2.1", "A2.2")
@pytest.mark.parametrize("leaf_input", [True, False])
def test_autograd_grad_without_enable_grad(leaf_input: bool) -> None:
    fn = square_with(grad_without_enable_grad)
    with pytest.raises(RuntimeError) as raised:
        outer_backward(fn, leaf_input, False)
    assert first_line(raised.value) == ELEMENT_0
    w, _ = outer_backward(fn, leaf_input, True)  # works under create_graph: gradgradcheck passes
    assert torch.allclose(w.grad, expected(w, leaf_input))


def backward_on_saved(x, g):
    h(x).backward(g)
    return x.grad


@rows("A2.3")
def test_inner_backward_on_a_saved_leaf() -> None:
    fn = square_with(backward_on_saved)
    with pytest.raises(RuntimeError) as raised:
        outer_backward(fn, True, False)
    assert first_line(raised.value) == ELEMENT_0
    w, _ = outer_backward(fn, True, True)
    assert torch.equal(w.grad.detach(), 2 * expected(w, True))  # silently twice the gradient


@rows("A2.4")
def test_inner_backward_on_a_saved_non_leaf_under_create_graph() -> None:
    with pytest.raises(RuntimeError) as raised:
        outer_backward(square_with(backward_on_saved), False, True)
    assert first_line(raised.value).startswith(SECOND_TIME)


def grad_under_enable_grad(x, g):
    with torch.enable_grad():
        return torch.autograd.grad(h(x), x, g)[0]


@rows("A2.5", "A2.6")
@pytest.mark.parametrize("leaf_input", [True, False])
@pytest.mark.parametrize("create_graph", [False, True])
def test_autograd_grad_under_enable_grad(leaf_input: bool, create_graph: bool) -> None:
    w, _ = outer_backward(square_with(grad_under_enable_grad), leaf_input, create_graph)
    assert torch.allclose(w.grad.detach(), expected(w, leaf_input))


def backward_under_enable_grad(x, g):
    with torch.enable_grad():
        h(x).backward(g)
        return x.grad


@rows("A2.7")
@pytest.mark.parametrize("create_graph", [False, True])
def test_inner_backward_accumulates_into_the_outer_leaf(create_graph: bool) -> None:
    w, _ = outer_backward(square_with(backward_under_enable_grad), True, create_graph)
    assert torch.equal(w.grad.detach(), 2 * expected(w, True))


@rows("A2.7b")
def test_returning_a_clone_does_not_help() -> None:
    def body(x, g):
        with torch.enable_grad():
            h(x).backward(g)
            return x.grad.clone()

    w, _ = outer_backward(square_with(body), True, False)
    assert torch.equal(w.grad, 2 * expected(w, True))


@rows("A2.7c")
def test_inner_backward_writes_grad_under_outer_autograd_grad() -> None:
    w = leaf()
    (gw,) = torch.autograd.grad(square_with(backward_under_enable_grad).apply(w).sum(), w)
    assert torch.equal(gw, expected(w, True))  # the returned gradient is right...
    assert w.grad is not None  # ...but autograd.grad must never write .grad


@rows("A2.8")
@pytest.mark.parametrize("create_graph", [False, True])
def test_inner_backward_consumes_the_parent_graph(create_graph: bool) -> None:
    with pytest.raises(RuntimeError) as raised:
        outer_backward(square_with(backward_under_enable_grad), False, create_graph)
    assert first_line(raised.value).startswith(SECOND_TIME)


@rows("A2.9")
def test_inner_backward_with_retain_graph_walks_into_the_upstream_leaf() -> None:
    def body(x, g):
        with torch.enable_grad():
            h(x).backward(g, retain_graph=True)
        return 2 * x.detach() * g  # what the author meant to return

    w, _ = outer_backward(square_with(body), False, False)
    assert torch.allclose(w.grad, 2 * expected(w, False))


@rows("A2.10", "A2.11")
@pytest.mark.parametrize("leaf_input", [True, False])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("via", ["grad", "backward"])
def test_detached_alias_is_private(leaf_input: bool, create_graph: bool, via: str) -> None:
    def body(x, g):
        xd = x.detach().requires_grad_()
        with torch.enable_grad():
            if via == "grad":
                return torch.autograd.grad(h(xd), xd, g)[0]
            h(xd).backward(g)
        return xd.grad

    w, _ = outer_backward(square_with(body), leaf_input, create_graph)
    assert torch.allclose(w.grad.detach(), expected(w, leaf_input))


def grad_under_no_grad(x, g):
    with torch.no_grad():
        y = (x * x).sum()
        return torch.autograd.grad(y, x)[0] * g


@rows("A2.12")
@pytest.mark.parametrize("leaf_input", [True, False])
@pytest.mark.parametrize("create_graph", [False, True])
def test_autograd_grad_under_no_grad_always_raises(leaf_input: bool, create_graph: bool) -> None:
    with pytest.raises(RuntimeError) as raised:
        outer_backward(square_with(grad_under_no_grad), leaf_input, create_graph)
    assert first_line(raised.value) == ELEMENT_0


@rows("A4.1")
def test_no_grad_recompute_raises_even_at_top_level() -> None:
    x = leaf()
    with torch.no_grad():
        y = (x * x).sum()
        with pytest.raises(RuntimeError) as raised:
            torch.autograd.grad(y, x)
    assert first_line(raised.value) == ELEMENT_0


def cube_with(body):  # h = x**3; backward is `body(x, g)`
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return body(x, g)

    return Cube


def second_order(fn) -> torch.Tensor:
    """d2/dx2 of F(x).sum() + (x*x).sum(): the true value is 6x + 2."""
    x = leaf()
    loss = fn.apply(x).sum() + (x * x).sum()
    (gx,) = torch.autograd.grad(loss, x, create_graph=True)
    (g2,) = torch.autograd.grad(gx.sum(), x)
    return g2


def true_second_order() -> torch.Tensor:
    return 6 * leaf().detach() + 2


@rows("A3.3")
def test_enable_grad_without_create_graph_drops_the_second_order() -> None:
    def body(x, g):
        with torch.enable_grad():
            return torch.autograd.grad(x**3, x, g)[0]

    assert torch.equal(second_order(cube_with(body)), torch.full((3,), 2.0))


@rows("A3.4")
def test_forwarding_create_graph_keeps_the_second_order() -> None:
    def body(x, g):
        create_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            return torch.autograd.grad(x**3, x, g, create_graph=create_graph)[0]

    assert torch.allclose(second_order(cube_with(body)), true_second_order())


@rows("A3.6")
def test_detached_alias_with_create_graph_still_drops_the_second_order() -> None:
    def body(x, g):
        xd = x.detach().requires_grad_()
        create_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            return torch.autograd.grad(xd**3, xd, g, create_graph=create_graph)[0]

    fn = cube_with(body)
    assert torch.equal(second_order(fn), torch.full((3,), 2.0))
    x = leaf()
    (gx,) = torch.autograd.grad(fn.apply(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError) as raised:
        torch.autograd.grad(gx.sum(), x)
    assert first_line(raised.value).startswith(UNUSED)


@rows("A6.2", "A6.3")
def test_reentrant_checkpoint_drops_the_second_order() -> None:
    x = leaf()
    with pytest.raises(RuntimeError) as raised:  # reentrant checkpoint refuses autograd.grad
        torch.autograd.grad(checkpoint(cube_sum, x, use_reentrant=True), x)
    assert first_line(raised.value).startswith(
        "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad()"
    )
    (checkpoint(cube_sum, x, use_reentrant=True) + (x * x).sum()).backward(create_graph=True)
    gx, x.grad = x.grad, None
    gx.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))  # the checkpointed 6x is dropped
    x = leaf()
    loss = checkpoint(cube_sum, x, use_reentrant=False) + (x * x).sum()
    (gx,) = torch.autograd.grad(loss, x, create_graph=True)
    assert torch.allclose(torch.autograd.grad(gx.sum(), x)[0], true_second_order())


def cube_sum(x: torch.Tensor) -> torch.Tensor:
    return (x * x * x).sum()


@rows("A7.2")
def test_grad_written_by_a_nested_backward_survives_a_failed_backward() -> None:
    class Fails(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("Simulate error on backward pass")

    t1 = leaf()
    t2 = leaf()
    t3 = leaf()
    failing = Fails.apply(t1 * t1)  # created first: runs last on CPU
    child_root = t2 * t2

    class Nested(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            with torch.enable_grad():
                child_root.backward(torch.ones_like(child_root))
            return g

    nested = Nested.apply(t3)
    with pytest.raises(ValueError, match="Simulate error on backward pass"):
        torch.autograd.backward([failing.sum(), (nested * nested).sum()])
    assert t2.grad is not None and t3.grad is not None  # not rolled back


@rows("A1.4")
def test_grad_mode_is_off_in_a_custom_op_backward() -> None:
    from torch.library import custom_op

    seen: list[bool] = []

    @custom_op("agl_sem::a14", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def backward(ctx, g):  # type: ignore[no-untyped-def]
        seen.append(torch.is_grad_enabled())
        return g * 2

    double.register_autograd(backward)
    x = torch.randn(3, requires_grad=True)
    double(x).sum().backward()
    assert seen == [False]
