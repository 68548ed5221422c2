"""Family C rows: __torch_function__ overrides and modes that change dtype or device."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import BaseTorchFunctionMode, TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .rows import first_line, rows

H = torch.float16


def up(t: object) -> object:
    return t.float() if isinstance(t, torch.Tensor) and t.dtype == H else t


class Naive(torch.Tensor):  # reads t.dtype / calls t.float() without disabling the override
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(
            func, types, tree_map(up, args), tree_map(up, kwargs or {})
        )


class Upcast(torch.Tensor):  # converts under the disable guard, redispatches through super()
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            args, kwargs = tree_map(up, args), tree_map(up, kwargs or {})
        return super().__torch_function__(func, types, args, kwargs)


class SelfOnly(torch.Tensor):  # converts only its own instances
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            args = tree_map(lambda t: t.float() if isinstance(t, cls) and t.dtype == H else t, args)
        return super().__torch_function__(func, types, args, kwargs or {})


def mover(move_all: bool) -> type[torch.Tensor]:
    class Move(torch.Tensor):  # "meta" stands in for a second device on a CPU-only machine
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kind = torch.Tensor if move_all else cls
            with torch._C.DisableTorchFunctionSubclass():
                args = tree_map(lambda t: t.to("meta") if isinstance(t, kind) else t, args)
            return super().__torch_function__(func, types, args, kwargs or {})

    return Move


class Copies(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._to_copy.default
        return func(*args, **(kwargs or {}))


def true_dtype(t: torch.Tensor) -> torch.dtype:
    """Read with the override disabled: the override itself misreports (C1.3)."""
    with torch._C.DisableTorchFunctionSubclass():
        return t.dtype


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return (
        torch.randn(4, 8, dtype=H),
        torch.randn(3, 8, dtype=H),
        torch.randn(3, dtype=H),
        torch.tensor([0, 1, 2, 0]),
    )


@contextmanager
def recursion_fails() -> Iterator[None]:
    """The block raises RecursionError (under a low limit, so it fails fast)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        with pytest.raises(RecursionError):
            yield
    finally:
        sys.setrecursionlimit(limit)


@rows("C1.1")
def test_a_naive_override_recurses() -> None:
    x, w, b, _ = inputs()
    with recursion_fails():
        F.linear(x.as_subclass(Naive), w, b)


@rows("C1.10")
def test_an_override_that_returns_for_unhandled_calls_first_does_not_recurse() -> None:
    class Guarded(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is not F.linear:
                return super().__torch_function__(func, types, args, kwargs or {})
            assert args[0].dtype == H  # re-enters once, as the dtype getter, and returns
            return super().__torch_function__(func, types, args, kwargs or {})

    class OnlyAdd(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.add:
                return super().__torch_function__(func, types, args, kwargs or {})
            assert args[0].dtype == H  # the getter does not take the return above
            return super().__torch_function__(func, types, args, kwargs or {})

    x, w, b, _ = inputs()
    assert F.linear(x.as_subclass(Guarded), w, b).shape == (4, 3)
    with recursion_fails():
        F.linear(x.as_subclass(OnlyAdd), w, b)


@rows("C1.2", "C1.4")
def test_an_upcasting_subclass_changes_results_and_copies_every_call() -> None:
    x, w, b, target = inputs()
    losses = []
    for wrapped, dtype, copies in ((x, H, 0), (x.as_subclass(Upcast), torch.float32, 3)):
        counter = Copies()
        with counter:
            y = F.linear(wrapped, w, b)
            loss = F.cross_entropy(y, target)
        assert true_dtype(y) == dtype and true_dtype(loss) == dtype
        assert counter.count == copies
        losses.append(round(loss.item(), 6))
    assert losses == [1.018555, 1.01807]


@rows("C1.3")
def test_the_subclass_misreports_its_own_dtype() -> None:
    x = inputs()[0].as_subclass(Upcast)
    assert x.dtype == torch.float32 and x.element_size() == 4
    assert true_dtype(x) == H


@rows("C1.6")
def test_converting_only_its_own_instances_mixes_dtypes() -> None:
    x, w, b, _ = inputs()
    with pytest.raises(RuntimeError) as raised:
        F.linear(x.as_subclass(SelfOnly), w, b)
    assert (
        first_line(raised.value) == "mat1 and mat2 must have the same dtype, but got Float and Half"
    )
    assert true_dtype(torch.add(x.as_subclass(SelfOnly), x)) == torch.float32  # silent


@rows("C1.8")
def test_moving_only_its_own_instances_fails_on_another_device() -> None:
    x, w, b = torch.randn(4, 8), torch.randn(3, 8), torch.randn(3)
    with pytest.raises(RuntimeError) as raised:
        F.linear(x.as_subclass(mover(False)), w, b)
    assert first_line(raised.value) == "Tensor on device cpu is not on the expected device meta!"


@rows("C1.9")
def test_moving_every_argument_is_silent() -> None:
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    y = F.linear(x.as_subclass(mover(True)), w)
    with torch._C.DisableTorchFunctionSubclass():
        assert y.device.type == "meta"
    assert F.linear(x, w).device.type == "cpu"


class UpMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*tree_map(up, args), **tree_map(up, kwargs or {}))


class UpBaseMode(BaseTorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return super().__torch_function__(
            func, types, tree_map(up, args), tree_map(up, kwargs or {})
        )


@rows("C2.1", "C2.2")
@pytest.mark.parametrize("mode", [UpMode, UpBaseMode])
def test_an_upcasting_mode_changes_every_result_inside_it(mode: type) -> None:
    x, w, b, target = inputs()
    with mode():
        y = F.linear(x, w, b)
        loss = F.cross_entropy(y, target)
        unrelated = torch.ones(2, dtype=H) + torch.ones(2, dtype=H)
    assert y.dtype == loss.dtype == unrelated.dtype == torch.float32
    assert type(y) is torch.Tensor


@rows("C2.3")
def test_a_torch_function_mode_has_no_super_implementation() -> None:
    class BadSuper(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    with pytest.raises(NotImplementedError), BadSuper():
        torch.ones(2) + 1


@rows("C2.5")
def test_a_mode_misreports_dtype_too() -> None:
    x = inputs()[0]
    with UpMode():
        seen = x.dtype
    assert seen == torch.float32 and x.dtype == H


@rows("C4.1")
def test_a_plain_method_override_is_deprecated() -> None:
    class Plain(torch.Tensor):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    # PyTorch warns once per process: make it warn here whatever ran before.
    was = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.ones(2).as_subclass(Plain) + 1
    finally:
        torch.set_warn_always(was)
    assert any(
        str(w.message).startswith(
            "Defining your `__torch_function__` as a plain method is deprecated and will be an "
            "error in future, please define it as a classmethod."
        )
        for w in caught
    )


@rows("C3.1")
def test_autocast_hides_the_upcast_in_outputs_but_not_in_copies() -> None:
    x, w, b, _ = inputs()
    counts = []
    for wrapped in (x, x.as_subclass(Upcast)):
        counter = Copies()
        with torch.autocast("cpu", dtype=torch.bfloat16), counter:
            y = F.linear(wrapped, w, b)
        assert true_dtype(y) == torch.bfloat16  # autocast re-casts below the override
        counts.append(counter.count)
    assert counts[1] > counts[0]


class _Wrapped(torch.Tensor):
    """A wrapper subclass holding its data, as quantized and sharded tensors do."""

    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_wrapper_subclass(
            cls, data.shape, dtype=data.dtype, device=data.device
        )

    def __init__(self, data):
        self._data = data


class IgnoresRequests(_Wrapped):
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func is aten.empty_like.default:
            return IgnoresRequests(torch.empty_like(args[0]._data))
        if func is aten.new_zeros.default:
            return IgnoresRequests(torch.zeros_like(args[0]._data))
        if func is aten._to_copy.default:
            return args[0]._data.clone()
        raise NotImplementedError(func)


class PassesRequests(_Wrapped):
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        aten = torch.ops.aten
        if func in (aten.empty_like.default, aten.new_zeros.default, aten._to_copy.default):
            return PassesRequests(func(args[0]._data, *args[1:], **kwargs))
        raise NotImplementedError(func)


@rows("C5.1", "C5.2", "C5.3", "C5.4")
def test_dispatch_handlers_that_ignore_the_request_answer_with_their_own_dtype_size_device() -> (
    None
):
    ignoring = IgnoresRequests(torch.ones(2, 3))
    assert torch.empty_like(ignoring, dtype=torch.float64).dtype == torch.float32
    assert tuple(ignoring.new_zeros((5,)).shape) == (2, 3)
    moved = ignoring.to(device="meta")
    assert type(moved) is torch.Tensor and moved.device.type == "cpu"
    passing = PassesRequests(torch.ones(2, 3))
    assert torch.empty_like(passing, dtype=torch.float64).dtype == torch.float64
    assert tuple(passing.new_zeros((5,)).shape) == (5,)
    moved = passing.to(device="meta")
    assert type(moved) is PassesRequests and moved.device.type == "meta"


class ReadsDeviceOnly(_Wrapped):
    """torchao's optimizer states: `device = kwargs.get("device")`, the dtype "ignored"."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from torch.utils._python_dispatch import return_and_correct_aliasing

        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default:
            device = kwargs.get("device", None)
            out = ReadsDeviceOnly(args[0]._data.to(device=device))
            return return_and_correct_aliasing(func, args, kwargs, out)
        if func is torch.ops.aten.detach.default:
            return ReadsDeviceOnly(args[0]._data)
        raise NotImplementedError(func)


class AliasingOnly(_Wrapped):
    """kwargs handed to return_and_correct_aliasing only: it fixes aliasing, not the request."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        from torch.utils._python_dispatch import return_and_correct_aliasing

        if func is torch.ops.aten._to_copy.default:
            return return_and_correct_aliasing(func, args, kwargs or {}, args[0])
        if func is torch.ops.aten.detach.default:
            return AliasingOnly(args[0]._data)
        raise NotImplementedError(func)


@rows("C5.5")
def test_a_handler_that_reads_some_of_the_request_ignores_the_rest() -> None:
    device_only = ReadsDeviceOnly(torch.ones(2, 3))
    converted = device_only.to(torch.float64)
    assert type(converted) is ReadsDeviceOnly and converted.dtype == torch.float32
    aliasing_only = AliasingOnly(torch.ones(2, 3))
    converted = aliasing_only.to(torch.float64)
    assert converted.dtype == torch.float32 and converted is aliasing_only


class ComputesOnAConvertedCopy(_Wrapped):
    """torchao's UInt4Tensor: the handler of one op computes that op itself on a converted copy
    (`aten._to_copy.default(self, dtype=...).unbind(dim)`) instead of redispatching `func`."""

    request = {"dtype": torch.float64}

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func is aten.unbind.int:
            data, dim = args[0]._data, args[1] if len(args) > 1 else 0  # a default is dropped
            return aten._to_copy.default(data, **cls.request).unbind(dim)
        if func is aten.detach.default:
            return cls(args[0]._data)
        raise NotImplementedError(func)


class MovesToComputeOnACopy(ComputesOnAConvertedCopy):
    request = {"device": torch.device("meta")}  # meta stands in for another device


@rows("C5.6")
def test_a_handler_computing_its_op_on_a_converted_copy_changes_the_result_dtype() -> None:
    wrapped = ComputesOnAConvertedCopy(torch.ones(2, 3))
    assert wrapped.dtype == torch.float32
    parts = wrapped.unbind(0)
    assert len(parts) == 2 and all(p.dtype == torch.float64 for p in parts)
    assert torch.ones(2, 3).unbind(0)[0].dtype == torch.float32
    moved = MovesToComputeOnACopy(torch.ones(2, 3)).unbind(0)
    assert all(p.device.type == "meta" for p in moved)
