"""Family D rows: the autograd.Function contract (gradient count, static methods, ctx, in-place)."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.autograd import Function

from .rows import first_line, rows

LEGACY = (
    "Legacy autograd function with non-static forward method is deprecated. Please use new-style "
    "autograd function with static forward method."
)


def three(requires_grad: bool = True) -> torch.Tensor:
    return torch.tensor([1.0, 2.0, 3.0], requires_grad=requires_grad)


@rows("D1.1", "D1.2", "D1.3")
def test_backward_must_return_one_gradient_per_input() -> None:
    class TooFew(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    class TooMany(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class ExtraNone(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    with pytest.raises(RuntimeError) as raised:
        TooFew.apply(three(), three()).sum().backward()
    assert first_line(raised.value) == (
        "function TooFewBackward returned an incorrect number of gradients (expected 2, got 1)"
    )
    with pytest.raises(RuntimeError) as raised:
        TooMany.apply(three()).sum().backward()
    assert first_line(raised.value) == (
        "function TooManyBackward returned an incorrect number of gradients (expected 1, got 2)"
    )
    x = three()
    ExtraNone.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0] * 3


@rows("D1.4")
def test_a_backward_of_outputs_all_marked_non_differentiable_never_runs() -> None:
    ran: list[bool] = []

    class ArgMax(Function):
        @staticmethod
        def forward(ctx, a, b):
            index = (a * b).argmax()
            ctx.mark_non_differentiable(index)
            return index

        @staticmethod
        def backward(ctx, g):
            ran.append(True)
            return g  # one gradient for two inputs: never checked, never run

    a = three()
    index = ArgMax.apply(a, three())
    assert not index.requires_grad
    (a[index] * 2 + a.sum()).backward()
    assert ran == [] and a.grad.tolist() == [1.0, 1.0, 3.0]


class ClassForward(Function):
    @classmethod
    def forward(cls, ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g, g, g  # cls is bound by Python: apply passes two inputs


@rows("D1.5")
def test_the_bound_cls_of_a_classmethod_forward_is_no_input() -> None:
    with pytest.raises(RuntimeError) as raised:
        ClassForward.apply(three(), three()).sum().backward()
    assert first_line(raised.value) == (
        "function ClassForwardBackward returned an incorrect number of gradients "
        "(expected 2, got 3)"
    )


class NonStatic(Function):
    def forward(ctx, a):
        return a * 2

    def backward(ctx, g):
        return g * 2


@rows("D2.1", "D2.2")
def test_non_static_methods_work_through_the_class_only() -> None:
    x = three()
    NonStatic.apply(x).sum().backward()  # through the class: a plain function, like a static one
    assert x.grad.tolist() == [2.0] * 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        instance = NonStatic()
    assert any("should not be instantiated" in str(w.message) for w in caught)
    with pytest.raises(TypeError) as raised:
        instance.forward(None, x)  # through an instance, the instance fills the ctx slot
    assert (
        first_line(raised.value)
        == "NonStatic.forward() takes 2 positional arguments but 3 were given"
    )


class ClassMethods(Function):
    """liger's chunked losses: `@classmethod def forward(cls, ctx, ...)`."""

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @classmethod
    def backward(cls, ctx, g):
        return g * 2


@rows("D2.3")
def test_class_methods_work_through_the_class_and_an_instance_alike() -> None:
    x = three()
    ClassMethods.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        instance = ClassMethods()
    # A classmethod binds the class wherever it is looked up: the ctx slot stays the caller's.
    assert instance.forward.__self__ is ClassMethods
    assert instance.backward(None, torch.ones(2)).tolist() == [2.0, 2.0]


def scale_by(keep: str) -> type[Function]:
    class Scale(Function):
        @staticmethod
        def forward(ctx, a, w):
            if keep == "ctx":
                ctx.w = w
            else:
                ctx.save_for_backward(w)
            return a * w

        @staticmethod
        def backward(ctx, g):
            w = ctx.w if keep == "ctx" else ctx.saved_tensors[0]
            return g * w, None

    return Scale


@rows("D3.1")
def test_a_tensor_kept_on_ctx_has_no_version_check() -> None:
    a, w = three(), torch.full((3,), 2.0)
    out = scale_by("ctx").apply(a, w)
    w.mul_(10)
    out.sum().backward()
    assert a.grad.tolist() == [20.0] * 3  # silently wrong: the true gradient is 2
    a, w = three(), torch.full((3,), 2.0)
    out = scale_by("saved").apply(a, w)
    w.mul_(10)
    with pytest.raises(RuntimeError) as raised:
        out.sum().backward()
    assert first_line(raised.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation"
    )


@rows("D3.2")
def test_saved_tensor_hooks_never_see_a_tensor_kept_on_ctx() -> None:
    packed: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        packed.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        scale_by("ctx").apply(three(), torch.full((3,), 2.0))
        assert packed == []  # offloading, compression and checkpoint hooks skip it
        scale_by("saved").apply(three(), torch.full((3,), 2.0))
        assert len(packed) == 1


def tiled(keep: bool) -> type[Function]:
    """The tiled-MLP pattern: backward recomputes `fn` and differentiates it with respect to
    the module's parameters, passed in (`keep`: also kept on ctx, read for their length and as
    `inputs=`) or looked up on the module in backward."""

    class Tiled(Function):
        @staticmethod
        def forward(ctx, fn, x, *params):
            ctx.fn = fn
            ctx.save_for_backward(x)
            if keep:
                ctx.params = params
            with torch.no_grad():
                return fn(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            params = ctx.params if keep else tuple(ctx.fn.parameters())
            assert len(params) == 2
            xd = x.detach().requires_grad_()
            with torch.enable_grad():
                y = ctx.fn(xd)
            return (None, *torch.autograd.grad(y, (xd, *params), g))

    return Tiled


@rows("D3.3")
def test_a_tensor_on_ctx_read_only_for_its_identity_adds_no_hazard() -> None:
    grads = {}
    for keep in (True, False):
        torch.manual_seed(0)
        fn = torch.nn.Linear(3, 2).double()
        x = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
        out = tiled(keep).apply(fn, x, *fn.parameters())
        with torch.no_grad():
            fn.weight.mul_(10)  # changed in place between forward and backward
        out.sum().backward()
        grads[keep] = (x.grad.clone(), fn.weight.grad.clone())
    # Kept on ctx or not, backward computes the same: the recomputation reads the module's
    # parameter, and the attribute contributes only which tensors to differentiate.
    assert all(torch.equal(a, b) for a, b in zip(grads[True], grads[False], strict=True))


def test_tensor_api_txt_lists_what_a_tensor_has() -> None:
    from .tensor_api import listed_names, live_names

    assert listed_names() == live_names()  # regenerate: python -m tests.semantics.tensor_api


@rows("D4.1", "D4.2", "D4.3")
def test_save_for_backward_takes_tensors_once() -> None:
    class SaveInt(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a, 3)
            return a * 2

    class SaveNone(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a, None)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    saved: list[int] = []

    class SaveTwice(Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a)
            ctx.save_for_backward(b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            saved.append(len(ctx.saved_tensors))
            return g, g

    with pytest.raises(TypeError) as raised:
        SaveInt.apply(three())
    assert first_line(raised.value) == (
        "save_for_backward can only save variables, but argument 1 is of type int"
    )
    SaveNone.apply(three()).sum().backward()
    SaveTwice.apply(three(), three()).sum().backward()
    assert saved == [1]  # the second call replaced the first


def doubles_input(mark_dirty: bool) -> type[Function]:
    class Double(Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            if mark_dirty:
                ctx.mark_dirty(a)
                return a
            return a.clone()

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Double


@rows("D5.1")
def test_an_unmarked_in_place_change_of_an_input_loses_its_gradient() -> None:
    for mark_dirty, want in ((False, [1.0] * 3), (True, [2.0] * 3)):
        w = three()
        h = w * 1
        doubles_input(mark_dirty).apply(h)
        h.sum().backward()  # h is now 2w: the true gradient is 2
        assert w.grad.tolist() == want, mark_dirty


@rows("D5.2")
def test_a_leaf_changed_in_place() -> None:
    w = three()
    doubles_input(False).apply(w)
    assert w.tolist() == [2.0, 4.0, 6.0]  # silently changed
    with pytest.raises(RuntimeError) as raised:
        doubles_input(True).apply(three())
    assert first_line(raised.value) == (
        "a leaf Variable that requires grad has been used in an in-place operation."
    )


@rows("D5.3")
def test_an_input_that_needs_no_gradient_may_change_in_place() -> None:
    class KMeansStep(Function):
        @staticmethod
        def forward(ctx, x, codebook):
            codebook.copy_(codebook * 0.5 + x.mean())  # the centroid update, on purpose
            return x * codebook.sum()

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    x = three()
    codebook = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    y = x * 2
    (KMeansStep.apply(y, codebook).sum() + y.sum()).backward()
    assert x.grad.tolist() == [6.0] * 3  # 2 * (2 + 1): every gradient as declared
    assert codebook.tolist() == [4.5] * 3  # 0.5 + mean(2x): updated, as meant


@rows("D5.4")
def test_advanced_indexing_copies_and_basic_indexing_views() -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    for index in (torch.tensor([0, 1]), [0, 1], x > 2):
        x[index].neg_()  # changes a copy
        assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]], index
    rows_, cols = torch.tensor([0, 1]), torch.tensor([1, 0])
    x[rows_, cols].add_(10)
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    x[0].neg_()  # a view: the change reaches x
    assert x.tolist() == [[-1.0, -2.0], [3.0, 4.0]]


@rows("D5.5")
def test_copying_a_tensor_onto_itself_changes_no_gradient() -> None:
    class Requantize(Function):
        @staticmethod
        def forward(ctx, t):
            t.copy_(t)
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    w = three()
    h = w * 2
    (Requantize.apply(h).sum() + (h * h).sum()).backward()
    assert w.grad.tolist() == [10.0, 18.0, 26.0]  # 2 + 2 * 2h: right
    w = three()
    h = w * 2
    square = h * h  # saves h before the copy
    out = Requantize.apply(h)
    with pytest.raises(RuntimeError) as raised:
        (out.sum() + square.sum()).backward()
    assert first_line(raised.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation"
    )


@rows("D5.6")
def test_a_placeholder_parameter_given_storage_with_set_() -> None:
    class CreateParameter(Function):
        @staticmethod
        def forward(ctx, tensor, placeholder):
            return placeholder.set_(tensor.detach())

        @staticmethod
        def backward(ctx, g):
            return None, g

    weights = torch.tensor([1.0, 2.0, 3.0])
    placeholder = torch.nn.Parameter(torch.empty(3))
    placeholder.untyped_storage().resize_(0)  # storage-less, as torch._dynamo makes them
    out = CreateParameter.apply(torch.tensor([4.0, 5.0, 6.0]), placeholder)
    ((out * weights).sum() + (placeholder * 3).sum()).backward()
    assert placeholder.tolist() == [4.0, 5.0, 6.0]
    assert placeholder.grad.tolist() == [4.0, 5.0, 6.0]  # weights + 3: right


@rows("D5.7")
def test_forward_giving_an_input_other_memory_through_data() -> None:
    class Shard(Function):
        @staticmethod
        def forward(ctx, x):
            out = x * 1
            x.data = torch.zeros_like(x.data)  # Megatron's distribute_saved_activations
            return out

        @staticmethod
        def backward(ctx, g):
            return g

    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = a * 1
    square = x * x  # saves x before forward runs
    out = Shard.apply(x)
    (square.sum() + out.sum()).backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]  # silently wrong: 2x + 1 is [3, 5, 7]
    assert x.tolist() == [0.0, 0.0, 0.0]
    assert x._version == 0  # the version counter never heard of it


@rows("D7.1", "D7.2", "D7.3")
def test_calling_forward_directly_bypasses_backward() -> None:
    class Cube(Function):
        @staticmethod
        def forward(ctx, a):
            return a**3

        @staticmethod
        def backward(ctx, g):
            return g * 0  # deliberately not the derivative: shows which backward runs

    class Saves(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

    with pytest.raises(TypeError) as raised:
        Cube.forward(three())
    assert first_line(raised.value).endswith(
        "Cube.forward() missing 1 required positional argument: 'a'"
    )
    x = three()
    Cube.forward(None, x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0, 27.0]  # forward's own ops were differentiated
    with pytest.raises(AttributeError) as raised:
        Saves.forward(None, three())
    assert first_line(raised.value) == "'NoneType' object has no attribute 'save_for_backward'"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(RuntimeError) as raised:
            Cube()(three())
    assert first_line(raised.value).startswith(LEGACY)


@rows("D7.4")
def test_forward_called_directly_with_grad_mode_off_is_what_apply_gives() -> None:
    class Cube(Function):
        @staticmethod
        def forward(ctx, a):
            if ctx is not None:
                ctx.save_for_backward(a)
            return a**3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a * a * g

    def cube(a: torch.Tensor) -> torch.Tensor:  # the deliberate no-grad fast path
        if torch.is_grad_enabled():
            return Cube.apply(a)
        return Cube.forward(None, a)

    x = three()
    with torch.no_grad():
        fast, applied = cube(x), Cube.apply(x)
    assert torch.equal(fast, applied) and fast.grad_fn is None and applied.grad_fn is None
    cube(x).sum().backward()  # grad mode on: through apply
    assert x.grad.tolist() == [3.0, 12.0, 27.0]


@rows("D8.1")
def test_deleting_ctx_state_breaks_a_second_backward() -> None:
    class Del(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.k = 2.0
            return a * 2

        @staticmethod
        def backward(ctx, g):
            k = ctx.k
            del ctx.k
            return g * k

    loss = Del.apply(three()).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(AttributeError) as raised:
        loss.backward()
    assert first_line(raised.value) == "'DelBackward' object has no attribute 'k'"


@rows("D8.2")
def test_clearing_state_of_an_object_on_ctx_breaks_a_second_backward() -> None:
    class Holder:
        def __init__(self, tensor: torch.Tensor) -> None:
            self.tensor = tensor

    class Clear(Function):
        @staticmethod
        def forward(ctx, a, holder):
            ctx.holder = holder
            return a * 2

        @staticmethod
        def backward(ctx, g):
            t = ctx.holder.tensor
            ctx.holder.tensor = None  # frees the buffer: a second backward reads None
            return g * t, None

    loss = Clear.apply(three(), Holder(torch.ones(3))).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(TypeError) as raised:
        loss.backward()
    assert first_line(raised.value) == "unsupported operand type(s) for *: 'Tensor' and 'NoneType'"


@rows("D8.3")
def test_setting_ctx_state_to_none_breaks_a_second_backward() -> None:
    import gc
    import weakref

    class Release(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.buffer = a.detach() * 3  # an intermediate kept on ctx
            return a * 3

        @staticmethod
        def backward(ctx, g):
            buffer = ctx.buffer
            ctx.buffer = None  # "release context memory": a second backward reads None
            return g * buffer / buffer * 3

    loss = Release.apply(three()).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(TypeError) as raised:
        loss.backward()
    assert first_line(raised.value) == "unsupported operand type(s) for *: 'Tensor' and 'NoneType'"

    # Why people write it: a ctx attribute lives as long as the graph (the output the caller
    # holds); a tensor given to save_for_backward is freed by the first backward.
    class Keep(Function):
        @staticmethod
        def forward(ctx, a):
            kept, saved = a.detach() * 3, a.detach() * 3
            ctx.kept = kept
            ctx.save_for_backward(saved)
            Keep.refs = (weakref.ref(kept), weakref.ref(saved))
            return a * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    out = Keep.apply(three())
    out.sum().backward()
    gc.collect()
    on_ctx, saved = Keep.refs
    assert on_ctx() is not None and saved() is None


@rows("D8.4")
def test_a_hand_off_refilled_by_the_paired_backward_survives_a_second_backward() -> None:
    class Inner(Function):  # thunder's ThunderFunction: its backward takes what Outer left
        @staticmethod
        def forward(ctx, side, x):
            ctx.side = side
            return x.new_zeros(())

        @staticmethod
        def backward(ctx, g):
            return None, ctx.side.pop("bw")

    class Outer(Function):  # ThunderOutputFunction: its backward runs first, every pass
        @staticmethod
        def forward(ctx, dummy, side, x):
            ctx.side = side
            return x * 3

        @staticmethod
        def backward(ctx, g):
            ctx.side["bw"] = g * 3
            return torch.zeros(()), None, None

    x = three()
    side: dict[str, torch.Tensor] = {}
    loss = Outer.apply(Inner.apply(side, x), side, x).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # the pop took what this pass put there
    assert x.grad.tolist() == [6.0] * 3 and side == {}


@rows("D9.1", "D9.2")
def test_backward_writing_a_saved_tensor_changes_the_callers_tensor() -> None:
    class MulSaved(Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return w * g, x.mul_(g)  # the gradient of w, computed in x's own storage

    x, w = three(), three()
    loss = (MulSaved.apply(x, w) * 2).sum()
    loss.backward(retain_graph=True)
    assert w.grad.tolist() == [2.0, 4.0, 6.0]
    assert x.tolist() == [2.0, 4.0, 6.0]  # the caller's input, silently changed
    with pytest.raises(RuntimeError) as raised:
        loss.backward()
    assert first_line(raised.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [torch.FloatTensor [3]] is at version 1; expected version 0 instead."
    )

    class ExpOut(Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            (out,) = ctx.saved_tensors
            return out.mul_(g)

    x = three()
    y = ExpOut.apply(x)
    before = y.detach().clone()
    (y * 2).sum().backward()
    assert torch.equal(x.grad, before * 2)  # the gradient is right...
    assert torch.equal(y.detach(), before * 2)  # ...and the output the caller holds is not


@rows("D9.3")
def test_backward_writing_a_saved_intermediate_breaks_a_second_backward() -> None:
    class Scale(Function):
        @staticmethod
        def forward(ctx, x):
            grad_x = torch.full_like(x, 3.0)  # the gradient, computed in forward
            ctx.save_for_backward(grad_x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            (grad_x,) = ctx.saved_tensors
            grad_x *= g
            return grad_x

    x = three()
    loss = (Scale.apply(x) * 2).sum()
    loss.backward(retain_graph=True)
    assert x.grad.tolist() == [6.0, 6.0, 6.0]  # the first backward is right
    with pytest.raises(RuntimeError) as raised:
        loss.backward()
    assert first_line(raised.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation"
    )


@rows("D9.4")
def test_backward_writing_a_tensor_kept_on_ctx_scales_again_on_a_second_backward() -> None:
    class Loss(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.grads = torch.full_like(x, 3.0).detach()  # the kernel's gradient buffer
            return (x * 3).sum()

        @staticmethod
        def backward(ctx, g):
            return ctx.grads.mul_(g)

    x = three()
    loss = Loss.apply(x) * 2
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    x.grad = None
    loss.backward()
    assert first.tolist() == [6.0, 6.0, 6.0]
    assert x.grad.tolist() == [12.0, 12.0, 12.0]  # silently scaled twice


def _raw_scale(t: torch.Tensor, factor: float) -> None:
    """What a Triton or C++ kernel does to a tensor it is handed: write through its pointer.
    The tensor's version counter never hears of it."""
    import ctypes

    assert t.dtype == torch.float32 and t.is_contiguous()
    memory = (ctypes.c_float * t.numel()).from_address(t.data_ptr())
    for i in range(t.numel()):
        memory[i] *= factor


@rows("D9.5")
def test_a_kernel_writing_a_saved_tensor_goes_unnoticed_and_scales_again() -> None:
    class Loss(Function):
        @staticmethod
        def forward(ctx, x):
            grads = torch.full_like(x, 3.0)  # the gradient computed in forward, as liger does
            ctx.save_for_backward(grads)
            return (x * 3).sum()

        @staticmethod
        def backward(ctx, g):
            (grads,) = ctx.saved_tensors
            _raw_scale(grads, float(g))  # an element-wise kernel scaling it in place
            return grads

    x = three()
    loss = Loss.apply(x) * 2
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    x.grad = None
    loss.backward()  # no "modified by an inplace operation": the version counter is unchanged
    assert first.tolist() == [6.0, 6.0, 6.0]
    assert x.grad.tolist() == [12.0, 12.0, 12.0]  # silently scaled twice


@rows("D10.1", "D10.2")
def test_apply_checks_forwards_arity_at_the_first_call() -> None:
    class Two(Function):
        @staticmethod
        def forward(ctx, a, b, scale=1.0):
            return a * b * scale

        @staticmethod
        def backward(ctx, g):
            return g, g, None

    with pytest.raises(TypeError) as raised:
        Two.apply(three())
    assert first_line(raised.value).endswith(
        "Two.forward() missing 1 required positional argument: 'b'"
    )
    with pytest.raises(TypeError) as raised:
        Two.apply(three(), three(), 2.0, 3.0)
    assert first_line(raised.value).endswith(
        "Two.forward() takes from 3 to 4 positional arguments but 5 were given"
    )
    Two.apply(three(), three())  # a default need not be passed


@rows("D11.1")
def test_a_custom_op_backward_returns_one_gradient_per_input() -> None:
    from torch.library import custom_op

    inputs_seen: dict[str, int] = {}

    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        ctx.s = inputs[1]
        inputs_seen["setup_context"] = len(ctx.needs_input_grad)

    def backward(ctx, g):  # type: ignore[no-untyped-def]
        inputs_seen["backward"] = len(ctx.needs_input_grad)
        return g * ctx.s

    @custom_op("agl_sem::d11_short", mutates_args=())
    def short(x: torch.Tensor, s: float) -> torch.Tensor:
        return x * s

    short.register_autograd(backward, setup_context=setup_context)
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError) as raised:
        short(x, 2.0).sum().backward()
    assert first_line(raised.value) == (
        "function GeneratedBackwardFor_agl_sem_d11_short_defaultBackward returned an incorrect "
        "number of gradients (expected 3, got 2)"
    )
    # What the counts count: the generated autograd Function is applied to the op's 2 inputs
    # and 1 hidden metadata argument (its forward, where setup_context runs, sees 3), and
    # torch hides that one from the registered backward (2) and appends a None for it to
    # what backward returns (1 + 1 = 2 gradients for 3).
    assert inputs_seen == {"setup_context": 3, "backward": 2}

    @custom_op("agl_sem::d11_long", mutates_args=())
    def long(x: torch.Tensor, s: float) -> torch.Tensor:
        return x * s

    long.register_autograd(lambda ctx, g: (g * ctx.s, None, None), setup_context=setup_context)
    x = torch.randn(3, requires_grad=True)
    long(x, 2.0).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


@rows("D11.2")
def test_setup_context_is_called_by_keyword() -> None:
    from torch.library import custom_op

    @custom_op("agl_sem::d112", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    double.register_autograd(lambda ctx, g: g * 2, setup_context=lambda ctx, inputs, out: None)
    double(torch.randn(3))  # no grad: setup_context is never called
    with pytest.raises(TypeError) as raised:
        double(torch.randn(3, requires_grad=True))
    assert first_line(raised.value).endswith(
        "<lambda>() got an unexpected keyword argument 'output'"
    )
