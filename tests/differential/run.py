"""Run a generated module, original and fixed, over the same inputs and compare what happened.

A scenario is one way autograd exercises the code: which input layout and grad_output layout,
leaf or non-leaf input, `torch.autograd.grad` or `.backward()`, `create_graph`, and the
module-level switches (`FLAG`, `MODE`) the generated code branches on. The outcome of a
scenario is either the exception's type, or the exact bytes, dtypes and shapes of everything
the caller can observe: the returned gradients, `.grad` of the leaves, second-order gradients
under create_graph, and what a Tensor subclass's operations return. A fix is equivalent when,
on every scenario where the original did not raise, the fixed code does not raise either and
observes the same bytes. (The caller's own grad_outputs buffer is deliberately not compared:
not writing into it is what AGL202 and AGL406 fix.)
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

Outcome = tuple[str, Any]


def fake_extension() -> types.ModuleType:
    """A stand-in for a compiled extension: stride-correct kernels, as FIX-B1/B2 assume."""
    module = types.ModuleType("fake_ext")

    def scale_bwd(g: torch.Tensor, s: float) -> torch.Tensor:
        return g * s

    def scale_(g: torch.Tensor, s: float) -> torch.Tensor:
        with torch.no_grad():
            g.mul_(s)  # writes into its argument, honouring its strides
        return g

    def add_into_(out: torch.Tensor, g: torch.Tensor) -> None:
        with torch.no_grad():
            out.add_(g)

    module.scale_bwd = scale_bwd  # type: ignore[attr-defined]
    module.scale_ = scale_  # type: ignore[attr-defined]
    module.add_into_ = add_into_  # type: ignore[attr-defined]
    return module


def load(source: str, name: str) -> types.ModuleType:
    """Execute `source` as a fresh module (the fake extension importable beside it)."""
    sys.modules.setdefault("fake_ext", fake_extension())
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def _observe(value: Any) -> Any:
    """What a caller can see of a value: for tensors, dtype, shape, and exact bytes."""
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous()
        raw = data.view(torch.uint8) if data.numel() else data
        return ("tensor", str(data.dtype), tuple(data.shape), tuple(raw.flatten().tolist()))
    if isinstance(value, (tuple, list)):
        return tuple(_observe(v) for v in value)
    if value is None or isinstance(value, (int, float, bool, str)):
        return value
    return type(value).__name__


def outcome(call: Callable[..., Any], *args: Any) -> Outcome:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", _observe(call(*args)))
    except RecursionError:
        return ("raised", "RecursionError")
    except Exception as exc:  # noqa: BLE001 - any exception is an outcome to compare
        return ("raised", type(exc).__name__)


@dataclass(frozen=True)
class Layout:
    name: str
    make: Callable[[torch.Tensor], torch.Tensor]


def _expanded(t: torch.Tensor) -> torch.Tensor:
    return t.flatten()[:1].reshape([1] * t.dim()).expand_as(t)


def _transposed(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous().t() if t.dim() == 2 else t


def _offset(t: torch.Tensor) -> torch.Tensor:
    big = torch.zeros(t.numel() + 3, dtype=t.dtype)
    big[3:] = t.flatten()
    return big[3:].view_as(t)


GRAD_LAYOUTS = (
    Layout("dense", lambda t: t.clone()),
    Layout("expanded", _expanded),
    Layout("transposed", _transposed),
    Layout("offset", _offset),
)


def function_scenarios(
    module: types.ModuleType,
    layouts: tuple[Layout, ...] = GRAD_LAYOUTS,
    sum_backward: bool = True,
) -> Iterator[tuple[str, Outcome]]:
    """Every scenario for the module's `Fn` (an autograd.Function of one tensor input): each
    gradient layout of `layouts`, and `out.sum().backward()` when `sum_backward`."""
    fn = module.Fn
    for flag in (False, True):
        for mode in (0, 1):
            module.FLAG, module.MODE = flag, mode
            for leaf in (True, False):
                for create_graph in (False, True):
                    for layout in layouts:
                        key = f"flag={flag} mode={mode} leaf={leaf} cg={create_graph} {layout.name}"
                        yield (
                            key + " grad",
                            outcome(_via_grad, module, fn, leaf, create_graph, layout),
                        )
                    if not sum_backward:
                        continue
                    key = f"flag={flag} mode={mode} leaf={leaf} cg={create_graph}"
                    yield (
                        key + " backward",
                        outcome(_via_backward, module, fn, leaf, create_graph),
                    )
            yield f"flag={flag} mode={mode} direct", outcome(_direct, module)


def _inputs(leaf: bool) -> tuple[torch.Tensor, torch.Tensor]:
    w = torch.linspace(0.5, 2.0, 12, dtype=torch.float32).reshape(3, 4).requires_grad_()
    return w, (w if leaf else w * 1.5)


def _second_order(first: torch.Tensor, w: torch.Tensor) -> Any:
    if not first.requires_grad:
        return "no graph"
    (second,) = torch.autograd.grad(first.sum(), w, allow_unused=True)
    return second


def _via_grad(
    module: types.ModuleType, fn: Any, leaf: bool, create_graph: bool, layout: Layout
) -> Any:
    w, x = _inputs(leaf)
    out = fn.apply(x)
    out = out[0] if isinstance(out, tuple) else out
    g = layout.make(torch.linspace(-1.0, 1.0, out.numel()).reshape(out.shape) * _scale(module))
    (gw,) = torch.autograd.grad(out, w, g, create_graph=create_graph, allow_unused=True)
    extra = _second_order(gw, w) if create_graph and gw is not None else None
    return gw, w.grad, extra, _state(module)


def _via_backward(module: types.ModuleType, fn: Any, leaf: bool, create_graph: bool) -> Any:
    w, x = _inputs(leaf)
    out = fn.apply(x)
    out = out[0] if isinstance(out, tuple) else out
    (out.sum() * _scale(module)).backward(create_graph=create_graph)
    grad = w.grad
    extra = _second_order(grad, w) if create_graph and grad is not None else None
    return grad, extra, _state(module)


def _scale(module: types.ModuleType) -> float:
    """`GRAD_SCALE` of the module, else 1: what a program run on several ranks sets to tell
    the ranks' gradients apart (a sum of equal gradients would hide which buffer was written)."""
    return float(getattr(module, "GRAD_SCALE", 1.0))


def _direct(module: types.ModuleType) -> Any:
    use = getattr(module, "use", None)
    return use() if use is not None else None


def _state(module: types.ModuleType) -> Any:
    """Module-level tensors the code may update (a parameter changed in backward)."""
    return tuple(
        value
        for key, value in sorted(vars(module).items())
        if key.isupper() and isinstance(value, torch.Tensor)
    )


def subclass_scenarios(module: types.ModuleType) -> Iterator[tuple[str, Outcome]]:
    """Operations on the module's Tensor subclass `T`."""
    for flag in (False, True):
        module.FLAG = flag
        for name, op in (
            ("add", lambda t: t + 1),
            ("mul", lambda t: torch.mul(t, 2)),
            ("sum", lambda t: t.sum()),
            ("linear", lambda t: torch.nn.functional.linear(t, torch.ones(4, 4))),
        ):
            yield f"flag={flag} {name}", outcome(_observe_op, module, op)


def _observe_op(module: types.ModuleType, op: Callable[[Any], Any]) -> Any:
    t = torch.linspace(0.5, 2.0, 12).reshape(3, 4).as_subclass(module.T)
    result = op(t)
    with torch._C.DisableTorchFunctionSubclass():
        kind = type(result).__name__
        return kind, result.detach().clone() if isinstance(result, torch.Tensor) else result


def differences(
    original: str,
    fixed: str,
    scenarios: Callable[[types.ModuleType], Iterator[tuple[str, Outcome]]],
) -> list[str]:
    """The scenarios where the original did not raise and the fixed code behaved otherwise."""
    before = dict(scenarios(load(original, "original")))
    after = dict(scenarios(load(fixed, "fixed")))
    out = []
    for key, result in before.items():
        if result[0] == "raised":
            continue
        if after.get(key) != result:
            out.append(f"{key}: original {_short(result)}, fixed {_short(after.get(key))}")
    return out


def _short(result: Outcome | None) -> str:
    text = repr(result)
    return text if len(text) < 300 else text[:300] + "..."
