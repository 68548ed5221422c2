"""Run a generated module, original and fixed, over the same inputs and compare what happened.

A scenario is one way autograd exercises the code: which input layout and grad_output layout,
leaf or non-leaf input, `torch.autograd.grad` or `.backward()`, `create_graph`, and the
module-level switches (`FLAG`, `MODE`) the generated code branches on. The outcome of a
scenario is either the exception's type, or the exact bytes, dtypes and shapes of everything
the caller can observe: the returned gradients, `.grad` of the leaves, second-order gradients
under create_graph, what a Tensor subclass's operations return, what the project's other
modules' `use()` functions return, and whether the module imports at all where torch is not
installed. A fix is equivalent when, on every scenario where the original did not raise, the
fixed code does not raise either and observes the same bytes. (The caller's own grad_outputs
buffer is deliberately not compared: not writing into it is what AGL202 and AGL406 fix.)

A program is one module (`generated.py`) or a project of several (`{"generated.py": ...,
"user.py": ...}`), imported by module name from the texts given. Compiled extensions are
stand-ins: `fake_ext` (no C++ in the project), and `load_inline(...)`, which the linter reads the
C++ of while the run gets a Python kernel of the same behaviour (FAKE_KERNELS, by name).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.cpp_extension

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
    module.opaque_bwd = scale_bwd  # type: ignore[attr-defined]  # a name no C++ source defines
    module.scale_ = scale_  # type: ignore[attr-defined]
    module.add_into_ = add_into_  # type: ignore[attr-defined]
    return module


def _scale_opt(g: torch.Tensor | None, s: float) -> torch.Tensor:
    """A kernel that takes an optional gradient (`c10::optional<at::Tensor>`): zeros for None."""
    return torch.zeros(3, 4) if g is None else g * s


def _scale_strided_(g: torch.Tensor, s: float) -> float:
    """Writes into its argument through its strides and returns a scalar (issue 34, item 6)."""
    with torch.no_grad():
        g.mul_(s)
    return 0.0


# What a `load_inline` module's functions do at run time, by name (the C++ the linter reads
# says the same: a dense read, an optional argument, a write through its strides).
FAKE_KERNELS: dict[str, Callable[..., Any]] = {
    "scale_bwd": lambda g, s: g * s,
    "scale_opt": _scale_opt,
    "scale_strided": _scale_strided_,
}


def _fake_load_inline(*args: Any, functions: Any = (), **kwargs: Any) -> types.ModuleType:
    module = types.ModuleType(str(kwargs.get("name", "inline_ext")))
    for name in [functions] if isinstance(functions, str) else functions:
        setattr(module, name, FAKE_KERNELS[name])
    return module


Program = str | Mapping[str, str]
MAIN = "generated.py"


def files_of(program: Program) -> dict[str, str]:
    """A program as its files: one module is `generated.py`."""
    return {MAIN: program} if isinstance(program, str) else dict(program)


class _Texts(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the program's modules from their texts, by module name."""

    def __init__(self, files: dict[str, str]) -> None:
        self.sources = {name.removesuffix(".py"): text for name, text in files.items()}

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.sources:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        module.__file__ = f"<{name}>"
        exec(compile(self.sources[name], f"<{name}>", "exec"), module.__dict__)


_INSTALLED: list[_Texts] = []  # the program loaded last: importable until the next load


@contextlib.contextmanager
def _faked_load_inline() -> Iterator[None]:
    real = torch.utils.cpp_extension.load_inline
    torch.utils.cpp_extension.load_inline = _fake_load_inline  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.utils.cpp_extension.load_inline = real


def _install(files: dict[str, str]) -> _Texts:
    """Make the program's modules importable by name, in place of the last program's: they
    stay so while its scenarios run (a function may import one of them when called)."""
    sys.modules.setdefault("fake_ext", fake_extension())
    for finder in _INSTALLED:
        sys.meta_path.remove(finder)
        for name in finder.sources:
            sys.modules.pop(name, None)
    _INSTALLED.clear()
    finder = _Texts(files)
    for name in finder.sources:
        sys.modules.pop(name, None)
    sys.meta_path.insert(0, finder)
    _INSTALLED.append(finder)
    return finder


def load(program: Program, name: str = "generated") -> types.ModuleType:
    """Import the program's main module fresh (its other modules with it, as it imports them)
    and note the `use()` functions of the others, which the direct scenarios call."""
    finder = _install(files_of(program))
    with _faked_load_inline():
        module = importlib.import_module(MAIN.removesuffix(".py"))
        others = [
            importlib.import_module(n) for n in sorted(finder.sources) if n != module.__name__
        ]
    module.__dict__["__agl_uses__"] = [
        (other.__name__, other.use) for other in others if callable(getattr(other, "use", None))
    ]
    return module


def imports_without_torch(program: Program) -> Outcome:
    """Whether the main module imports where torch is not installed (a module that imports
    torch only inside a function does; a fix must not add a module-level import to it)."""
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    _install(files_of(program))
    try:
        with _faked_load_inline():
            for key in saved:
                sys.modules[key] = None  # type: ignore[assignment]
            return outcome(importlib.import_module, MAIN.removesuffix(".py"))
    finally:
        sys.modules.update(saved)


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


def _functions(module: types.ModuleType) -> list[tuple[str, Any]]:
    """The Functions to exercise: `Fn` (or what the module's `build()` factory returns, where
    it imports torch lazily), and a subclass `Sub` where there is one."""
    fn = getattr(module, "Fn", None)
    if fn is None:
        fn = module.build()
    found = [("", fn)]
    sub = getattr(module, "Sub", None)
    if sub is not None:
        found.append(("Sub ", sub))
    return found


def function_scenarios(
    module: types.ModuleType,
    layouts: tuple[Layout, ...] = GRAD_LAYOUTS,
    sum_backward: bool = True,
) -> Iterator[tuple[str, Outcome]]:
    """Every scenario for the module's `Fn` (an autograd.Function of one tensor input): each
    gradient layout of `layouts`, and `out.sum().backward()` when `sum_backward`."""
    for flag in (False, True):
        for mode in (0, 1):
            module.FLAG, module.MODE = flag, mode
            for prefix, fn in _functions(module):
                for leaf in (True, False):
                    for create_graph in (False, True):
                        for layout in layouts:
                            key = (
                                f"{prefix}flag={flag} mode={mode} leaf={leaf} cg={create_graph} "
                                f"{layout.name}"
                            )
                            yield (
                                key + " grad",
                                outcome(_via_grad, module, fn, leaf, create_graph, layout),
                            )
                        if not sum_backward:
                            continue
                        key = f"{prefix}flag={flag} mode={mode} leaf={leaf} cg={create_graph}"
                        yield (
                            key + " backward",
                            outcome(_via_backward, module, fn, leaf, create_graph),
                        )
            yield f"flag={flag} mode={mode} direct", outcome(_direct, module)
            for name, use in module.__dict__.get("__agl_uses__", ()):
                yield f"flag={flag} mode={mode} {name}.use", outcome(use)


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
    original: Program,
    fixed: Program,
    scenarios: Callable[[types.ModuleType], Iterator[tuple[str, Outcome]]],
) -> list[str]:
    """The scenarios where the original did not raise and the fixed code behaved otherwise."""
    before = {"imports without torch": imports_without_torch(original)}
    before.update(scenarios(load(original)))
    after = {"imports without torch": imports_without_torch(fixed)}
    after.update(scenarios(load(fixed)))
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
