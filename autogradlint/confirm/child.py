"""Runs inside the confirmer's subprocess: imports the target and runs one family's probe.

Protocol (from the verified prototype, semantics "Common confirmer contract"), written to the
channel the parent gave (sandbox.CHANNEL_ENV), never to stdout, so nothing the code prints is
read as a verdict: `@@MARK <step>` before each probe step, `@@LIMIT <seconds>` when a phase
with its own time limit begins, then `@@RESULT {"verdict", "evidence", "torch", "devices"}`.
Arguments of main (sandbox.python starts it): `KIND module:Qualname DEVICES FACTORY TIMEOUT`
(one probe), or `serve MODULE JOBS_JSON` (a module's probes, each in a fork).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from . import opcheck
from .draws import (
    CONFIRMED,
    COULD_NOT_RUN,
    NOT_REPRODUCED,
    SEEDS,
    agree,
    general_values,
    prepare,
    probe_tensor,
    reseed,
)

CHANNEL_ENV = "AUTOGRADLINT_CONFIRM_CHANNEL"  # as in sandbox (not imported: it imports more)
ROOT_ENV = "AUTOGRADLINT_CONFIRM_ROOT"


def say(line: str) -> None:
    """One protocol line to the parent (stdout when run by hand, without a channel)."""
    channel = os.environ.get(CHANNEL_ENV)
    if not channel:
        print(line, flush=True)
        return
    data = (line + "\n").encode()
    while data:
        data = data[os.write(int(channel), data) :]


def mark(step: str) -> None:
    say(f"@@MARK {step}")


def limit(seconds: float) -> None:
    """A phase begins that may take `seconds` (the parent stops the run beyond)."""
    say(f"@@LIMIT {seconds:g}")


def enter_project() -> None:
    """Put the project's root on sys.path, first, as running its code from there would; the
    tool's own lazy imports are done before, so no project file stands in for them."""
    import inspect  # noqa: F401 - default_inputs needs it later
    import traceback  # noqa: F401 - serve needs it later

    prepare()

    root = os.environ.get(ROOT_ENV)
    if root and root not in sys.path:
        sys.path.insert(0, root)


def import_target(module: str) -> Any:
    enter_project()
    return importlib.import_module(module)


def load(target: str) -> Any:
    module, _, qualname = target.partition(":")
    if "::" in qualname:
        # An op defined from a schema string: importing the module registers it; torch.ops
        # finds it by its qualified name.
        import torch

        import_target(module)
        namespace, _, name = qualname.partition("::")
        return getattr(getattr(torch.ops, namespace), name)
    obj: Any = import_target(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def caller(fn: Any) -> Callable[..., Any]:
    """How to run the target: a Function through `apply`, a torch.library custom op as is."""
    return fn.apply if hasattr(fn, "apply") else fn


def default_inputs(
    fn: Any, dtype: Any, device: str, shape: tuple[int, ...], seed: int
) -> list[Any]:
    """One small float tensor per required forward input (after ctx), its values the draw's;
    for a custom op, per parameter of the op's own function, a tensor where it takes one and
    2.0 or 2 elsewhere."""
    import inspect

    import torch

    own = getattr(fn, "_init_fn", None)  # a CustomOpDef: the Python function it was made from
    schema = _schema_of(fn) if own is None and not hasattr(fn, "forward") else None
    if schema is not None:
        return _inputs_from_schema(schema, dtype, device, shape, seed)
    if own is not None:
        params = list(inspect.signature(own).parameters.values())
    else:
        params = list(inspect.signature(fn.forward).parameters.values())
        # With the setup_context style forward has no ctx; torch's base class defines a stub.
        stub = torch.autograd.Function.setup_context
        uses_setup_context = getattr(fn, "setup_context", stub) is not stub
        if params and not uses_setup_context:
            params = params[1:]
    required = [
        p
        for p in params
        if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        raise TypeError("forward takes *args: inputs cannot be synthesised")
    base = probe_tensor(dtype, device, shape, seed)
    scalars = {float: 2.0, int: 2, "float": 2.0, "int": 2, bool: False, "bool": False}
    return [scalars.get(p.annotation, base.clone()) for p in required]


def _schema_of(fn: Any) -> Any:
    """The schema of a `torch.ops` op (its overload packet's default overload), if it is one."""
    schema = getattr(fn, "_schema", None)
    if schema is None:
        default = getattr(fn, "default", None)
        schema = getattr(default, "_schema", None)
    return schema


# Schema argument types the probe can make up, and the value it uses (tensors: the probe's own).
_SCHEMA_SCALARS = {"float": 2.0, "int": 2, "SymInt": 2, "bool": False, "Scalar": 2.0}


def _inputs_from_schema(
    schema: Any, dtype: Any, device: str, shape: tuple[int, ...], seed: int
) -> list[Any]:
    """One value per positional argument without a default of an op's schema
    (`scale(Tensor x, float s) -> Tensor`): the probe's tensor for `Tensor`, 2.0 / 2 / False
    for scalars; any other type needs a factory, and the error says which."""
    base = probe_tensor(dtype, device, shape, seed)
    out: list[Any] = []
    for argument in schema.arguments:
        if argument.kwarg_only or argument.has_default_value():
            continue
        kind = str(argument.type).rstrip("?")
        if kind == "Tensor":
            out.append(base.clone())
        elif kind in _SCHEMA_SCALARS:
            out.append(_SCHEMA_SCALARS[kind])
        else:
            raise TypeError(
                f"the op's argument `{argument.name}: {argument.type}` cannot be synthesised: "
                "give a factory in [tool.autogradlint.confirm]"
            )
    return out


def _leaf(value: Any, copy: bool = False) -> Any:
    """A tensor input as a fresh leaf that requires grad; anything else as it is."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    value = value.detach().clone() if copy else value.detach()
    return value.requires_grad_(value.is_floating_point())


def inputs_for(
    fn: Any,
    factory: Callable[..., Any] | None,
    dtype: Any,
    device: str,
    shape: tuple[int, ...],
    seed: int,
) -> list[Any]:
    """The inputs of one draw: the factory's (called with every RNG at the draw's seed, so a
    factory that draws random values draws the same ones each time), or synthesised ones."""
    reseed(seed)
    if factory is not None:
        made = factory(dtype=dtype, device=device)
        return list(made) if isinstance(made, (tuple, list)) else [made]
    return default_inputs(fn, dtype, device, shape, seed)


def _not_repeatable(what: str) -> dict[str, Any]:
    return {
        "verdict": COULD_NOT_RUN,
        "evidence": [
            f"two identical runs ({what}, the same inputs, every RNG reseeded) gave different "
            "gradients: the code draws from a source no seed controls, so no comparison "
            "between runs shows anything"
        ],
    }


def _draws(
    probe: Callable[[int, str], list[str] | dict[str, Any]],
) -> tuple[dict[str, Any] | None, list[list[str]]]:
    """Run `probe(seed, label)` for every draw; a dict it returns (could_not_run) ends it."""
    found: list[list[str]] = []
    for number, seed in enumerate(SEEDS, start=1):
        result = probe(seed, f"draw {number}/{len(SEEDS)}")
        if isinstance(result, dict):
            return result, found
        found.append(result)
    return None, found


def probe_a(fn: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """Graph building in backward: first order via grad and .backward(), leaks, (grad)gradcheck;
    on every draw, each run of forward with every RNG reseeded to the draw's seed."""
    per_device: dict[str, Any] = {}
    for dev in devices:
        stopped, draws = _draws(partial(_probe_a_draw, fn, dev, factory))
        if stopped is not None:
            per_device[dev] = stopped
            continue
        verdict, ev = agree(draws)
        lines = [line for draw in draws for line in draw]
        if verdict == CONFIRMED and all("gradgradcheck" in line for line in lines):
            ev.append("scope: double-backward only (first-order gradients are correct)")
        per_device[dev] = {"verdict": verdict, "evidence": ev}
    return per_device


def _probe_a_draw(
    fn: Any, dev: str, factory: Callable[..., Any] | None, seed: int, label: str
) -> list[str] | dict[str, Any]:
    """One draw of probe A: its evidence, or could_not_run (as a dict) if nothing can show."""
    import torch

    def fresh(leaf: bool = True) -> tuple[Any, list[Any]]:
        args = inputs_for(fn, factory, torch.float64, dev, (3,), seed)
        w = args[0].detach().requires_grad_(True)
        args[0] = w if leaf else w * 1.0
        return w, args

    def forward(args: list[Any]) -> Any:
        reseed(seed)  # what forward draws, it draws the same on every run
        return caller(fn)(*args)

    try:
        fresh()
    except Exception as exc:  # noqa: BLE001
        return {
            "verdict": COULD_NOT_RUN,
            "evidence": [f"could not build inputs: {first_line(exc)}"],
        }
    mark(f"A control {dev}, {label}")
    try:
        runs = []
        for _ in range(2):
            w, args = fresh()
            runs.append(torch.autograd.grad(forward(args).sum(), w)[0].detach())
        if not torch.allclose(runs[0], runs[1], equal_nan=True):
            return _not_repeatable("torch.autograd.grad")
    except Exception:  # noqa: BLE001,S110 - the steps below report what raises
        pass
    ev: list[str] = []
    for cg in (False, True):
        mark(f"A grad {dev} create_graph={cg}, {label}")
        w, args = fresh()
        try:
            g_grad = torch.autograd.grad(forward(args).sum(), w, create_graph=cg)[0].detach()
            if w.grad is not None:
                ev.append(
                    f"create_graph={cg}: torch.autograd.grad populated the input's .grad "
                    "(a nested backward leaks into the caller's leaves)"
                )
        except Exception as exc:  # noqa: BLE001
            ev.append(f"create_graph={cg}: torch.autograd.grad raised {first_line(exc)}")
            continue
        mark(f"A backward {dev} create_graph={cg}, {label}")
        w, args = fresh()
        try:
            forward(args).sum().backward(create_graph=cg)
            got = None if w.grad is None else w.grad.detach()
            if got is None or not torch.allclose(got, g_grad):
                ev.append(
                    f"create_graph={cg}: .backward() gave "
                    f"{None if got is None else got.tolist()} but torch.autograd.grad "
                    f"gave {g_grad.tolist()} (the same inputs and seed)"
                )
        except Exception as exc:  # noqa: BLE001
            ev.append(f"create_graph={cg}: .backward() raised {first_line(exc)}")
    mark(f"A non-leaf {dev}, {label}")
    w, args = fresh(leaf=False)
    try:
        forward(args).sum().backward()
    except Exception as exc:  # noqa: BLE001
        ev.append(f"non-leaf input: .backward() raised {first_line(exc)}")
    mark(f"A gradcheck {dev}, {label}")
    w, args = fresh()

    def call(x: Any) -> Any:
        return forward([x, *args[1:]])

    for name, check in (
        ("gradcheck", torch.autograd.gradcheck),
        ("gradgradcheck", torch.autograd.gradgradcheck),
    ):
        try:
            if not check(call, (w,), raise_exception=False):
                ev.append(f"{name} failed (numerical and analytical gradients differ)")
        except Exception as exc:  # noqa: BLE001
            ev.append(f"{name} raised {first_line(exc)}")
    if ev and all("raised" in e for e in ev) and len({e.split(" raised ")[-1] for e in ev}) == 1:
        # Every run, create_graph=True and gradcheck included, failed the same way: the
        # probe could not call the code (its inputs do not fit), so nothing is shown.
        return {
            "verdict": COULD_NOT_RUN,
            "evidence": [
                f"every run raised {ev[0].split(' raised ')[-1]}: the probe's inputs do not "
                "fit this code; name an input factory in [tool.autogradlint.confirm] factories"
            ],
        }
    return ev


def probe_b(fn: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """Grads to compiled code: the same values in every layout autograd produces; the grad's
    and the inputs' bytes before/after; gradcheck on the control, reported beside: it feeds
    contiguous gradients only, so it passes where this fails. On
    every draw, with every RNG reseeded before each run of forward."""
    per_device: dict[str, Any] = {}
    for dev in devices:
        skipped: list[str] = []
        beside: list[str] = []
        stopped, draws = _draws(
            partial(_probe_b_draw, fn, dev, factory, skipped=skipped, beside=beside)
        )
        if stopped is not None:
            per_device[dev] = stopped
            continue
        verdict, ev = agree(draws)
        per_device[dev] = {
            "verdict": verdict,
            "evidence": ev + [f"(not compared) {s}" for s in dict.fromkeys(skipped)] + beside,
        }
    return per_device


def _probe_b_draw(
    fn: Any,
    dev: str,
    factory: Callable[..., Any] | None,
    seed: int,
    label: str,
    skipped: list[str],
    beside: list[str],
) -> list[str] | dict[str, Any]:
    """One draw of probe B: its evidence, or could_not_run (as a dict). The layouts' values are
    the draw's; `skipped` gets the layouts that could not be compared, `beside` (on the first
    draw) what gradcheck says."""
    import torch

    def forward(x: list[Any]) -> Any:
        reseed(seed)  # what forward draws, it draws the same on every run
        return caller(fn)(*x)

    try:
        args = inputs_for(fn, factory, torch.float32, dev, (4, 6), seed)
        shape = tuple(forward([_leaf(a) for a in args]).shape)
    except Exception as exc:  # noqa: BLE001
        return {"verdict": COULD_NOT_RUN, "evidence": [f"could not run forward: {first_line(exc)}"]}
    values = torch.Generator().manual_seed(seed)

    def random(*size: int) -> Any:
        return torch.randn(size, generator=values).to(dev)

    dense = random(*shape)
    scalar = general_values(1, seed)[0]
    layouts: dict[str, tuple[Any, Any]] = {
        "dense": (dense.clone(), dense),
        "expanded (stride 0, as from out.sum())": (
            torch.full((), scalar, device=dev).expand(shape),
            torch.full(shape, scalar, device=dev),
        ),
        "offset slice": (torch.cat([random(1, *shape[1:]), dense])[1:], dense),
    }
    if len(shape) == 2:
        layouts["transposed"] = (dense.t().contiguous().t(), dense)
    if shape:  # what torch.cat's backward hands each input (pytorch/pytorch#194719)
        wide = torch.cat([dense, random(*shape[:-1], 5)], dim=-1)
        layouts["narrow view (as from torch.cat's backward)"] = (wide[..., : shape[-1]], dense)
    if len(shape) == 4:  # a convolution's gradient
        layouts["channels_last"] = (dense.contiguous(memory_format=torch.channels_last), dense)

    ev: list[str] = []
    written: list[str] = []

    def backward_with(g: Any, name: str = "") -> Any:
        x = [_leaf(a, copy=True) for a in args]
        out = forward(x)
        # what forward saved of the caller's tensors: their bytes before the backward
        kept = [(i, t.detach().clone()) for i, t in enumerate(x) if isinstance(t, torch.Tensor)]
        result = torch.autograd.grad(out, x[0], grad_outputs=g)[0]
        for i, before in kept:
            if not torch.equal(before, x[i].detach()) and name not in written:
                written.append(name)
                ev.append(
                    f"grad_output {name or 'dense'}: backward changed forward's input {i} "
                    "(a tensor it saved, which the caller holds)"
                )
        return result

    # The control: contiguous, dense inputs and gradient, twice. If the code cannot run even
    # so, the probe called it wrongly (inputs it does not take); if the two runs differ, runs
    # cannot be compared. Either way nothing is shown.
    mark(f"B control {dev}, {label}")
    try:
        first = backward_with(dense.clone())
        second = backward_with(dense.clone())
    except Exception as exc:  # noqa: BLE001
        return {
            "verdict": COULD_NOT_RUN,
            "evidence": [
                f"the control run (dense, contiguous gradient) raised {first_line(exc)}: "
                "the probe's inputs do not fit this code; name an input factory in "
                "[tool.autogradlint.confirm] factories"
            ],
        }
    if not torch.allclose(first, second, equal_nan=True):
        return _not_repeatable("the dense control")
    if seed == SEEDS[0]:  # once: they do not take the draws
        beside += _standard_checks(fn, args, dev, seed)
    for name, (g, reference) in layouts.items():
        mark(f"B layout {name} {dev}, {label}")
        try:  # the same values, contiguous: what the layout's result must equal
            want = backward_with(reference.clone(memory_format=torch.contiguous_format))
        except Exception as exc:  # noqa: BLE001
            skipped.append(f"grad_output {name}: its contiguous run raised {first_line(exc)}")
            continue
        try:
            before = g.detach().contiguous().view(torch.uint8).clone()
            version = g._version
            got = backward_with(g, name=name)
            if not torch.allclose(got, want, equal_nan=True):
                ev.append(
                    f"grad_output {name} (stride {tuple(g.stride())}): the result "
                    "differs from the run on a contiguous copy of the same values"
                )
            if not torch.equal(before, g.detach().contiguous().view(torch.uint8)):
                ev.append(
                    f"grad_output {name}: backward wrote into its incoming gradient "
                    f"(version {version} -> {g._version}; an unchanged version means "
                    "a raw pointer write)"
                )
        except Exception as exc:  # noqa: BLE001
            # The control passed and the same values, contiguous, ran: the layout did it.
            ev.append(
                f"grad_output {name} (stride {tuple(g.stride())}): raised "
                f"{first_line(exc)} where the contiguous run did not"
            )
    return ev


def _standard_checks(fn: Any, args: list[Any], dev: str, seed: int) -> list[str]:
    """gradcheck on the control's inputs in float64: what it says, beside the layouts (it feeds
    contiguous gradients only)."""
    import torch

    def call(*x: Any) -> Any:
        reseed(seed)
        return caller(fn)(*x)

    out: list[str] = []
    mark(f"B gradcheck {dev}")
    # float64 as gradcheck wants; a float32-only kernel gets float32 with loose tolerances
    attempts: list[tuple[Any, dict[str, Any], str]] = [
        (torch.float64, {}, ""),
        (torch.float32, {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}, " (float32)"),
    ]
    for dtype, tolerances, label in attempts:
        inputs = [
            _leaf(a.detach().to(dtype), copy=True)
            if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a
            for a in args
        ]
        try:
            passed = torch.autograd.gradcheck(
                call, tuple(inputs), raise_exception=False, **tolerances
            )
        except Exception as exc:  # noqa: BLE001
            if dtype is torch.float64:
                continue
            out.append(f"(beside) gradcheck raised {first_line(exc)[:200]}")
            break
        out.append(f"(beside) gradcheck{label} {'passed' if passed else 'failed'}")
        break
    return out


def probe_c(cls: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """dtype/device changes in overrides: the same ops plain and wrapped, true dtype/device."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Copies(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.n += func is torch.ops.aten._to_copy.default
            return func(*args, **(kwargs or {}))

    is_mode = isinstance(cls, type) and issubclass(cls, (TorchFunctionMode, TorchDispatchMode))
    ops: dict[str, Callable[..., Any]] = {
        "F.linear": lambda a, w, b, t: F.linear(a, w, b),
        "F.linear+F.cross_entropy": lambda a, w, b, t: F.cross_entropy(F.linear(a, w, b), t),
        "torch.matmul": lambda a, w, b, t: torch.matmul(a, w.t()),
        "torch.add": lambda a, w, b, t: torch.add(a, 1.0),
        "F.layer_norm": lambda a, w, b, t: F.layer_norm(a, (a.shape[-1],)),
    }

    def true_meta(t: Any) -> tuple[str, str] | None:
        # never read dtype through the override: it misreports (semantics C1.3, C2.5)
        with torch._C.DisableTorchFunction():
            return (str(t.dtype), str(t.device)) if isinstance(t, torch.Tensor) else None

    per_device: dict[str, Any] = {}
    for dev in devices:
        ev: list[str] = []
        inconclusive: list[str] = []
        for dt in (torch.float16, torch.bfloat16, torch.float32):
            reseed(SEEDS[0])
            a = torch.randn(4, 8, dtype=dt, device=dev)
            w = torch.randn(3, 8, dtype=dt, device=dev)
            b = torch.randn(3, dtype=dt, device=dev)
            t = torch.tensor([0, 1, 2, 0], device=dev)
            for name, op in ops.items():
                mark(f"C {name} {dt} {dev}")
                try:
                    plain = op(a, w, b, t)
                except Exception:  # noqa: BLE001 - unsupported on this dtype/device: skip
                    continue
                copies = Copies()
                try:
                    if is_mode:
                        with cls(), copies:
                            wrapped = op(a, w, b, t)
                    else:
                        wrapped_a = factory(a) if factory is not None else a.as_subclass(cls)
                        with copies:
                            wrapped = op(wrapped_a, w, b, t)
                except Exception as exc:  # noqa: BLE001
                    message = first_line(exc)
                    keys = (
                        "same dtype",
                        "scalar type",
                        "mixed dtype",
                        "same device",
                        "expected device",
                    )
                    if any(k in message for k in keys):
                        ev.append(f"{dt} {name}: plain ok, wrapped raised {message}")
                    else:
                        inconclusive.append(f"{dt} {name}: wrapped raised {message}")
                    continue
                if true_meta(plain) != true_meta(wrapped):
                    ev.append(
                        f"{dt} {name}: plain {true_meta(plain)}, wrapped "
                        f"{true_meta(wrapped)}; extra _to_copy={copies.n}"
                    )
        if ev:
            per_device[dev] = {"verdict": CONFIRMED, "evidence": ev}
        elif inconclusive:
            per_device[dev] = {
                "verdict": COULD_NOT_RUN,
                "evidence": [
                    "wrapped inputs could not be exercised (name a factory in "
                    "[tool.autogradlint.confirm]):",
                    *inconclusive[:3],
                ],
            }
        else:
            per_device[dev] = {"verdict": NOT_REPRODUCED, "evidence": []}
    return per_device


def probe_arity(fn: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """The backward gradient count: run backward once and look for PyTorch's own error."""
    import torch

    per_device: dict[str, Any] = {}
    for dev in devices:
        mark(f"arity {dev}")
        try:
            args = [
                a.requires_grad_(True)
                if isinstance(a, torch.Tensor) and a.is_floating_point()
                else a
                for a in inputs_for(fn, factory, torch.float64, dev, (3,), SEEDS[0])
            ]
        except Exception as exc:  # noqa: BLE001
            per_device[dev] = {
                "verdict": COULD_NOT_RUN,
                "evidence": [f"could not build inputs: {first_line(exc)}"],
            }
            continue
        try:
            reseed(SEEDS[0])
            caller(fn)(*args).sum().backward()
            per_device[dev] = {"verdict": NOT_REPRODUCED, "evidence": []}
        except RuntimeError as exc:
            if "incorrect number of gradients" in str(exc):
                per_device[dev] = {"verdict": CONFIRMED, "evidence": [first_line(exc)]}
            else:
                per_device[dev] = {"verdict": COULD_NOT_RUN, "evidence": [first_line(exc)]}
    return per_device


def probe_needs(fn: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """A gradient backward sets only on some paths (AGL412): backward once with every tensor
    input requiring grad, then once per input left without: UnboundLocalError, or a gradient
    that was there and is now None for an input that still requires grad (semantics D12.1,
    D12.3)."""
    import torch

    per_device: dict[str, Any] = {}
    for dev in devices:
        mark(f"needs {dev}")
        try:
            base = inputs_for(fn, factory, torch.float64, dev, (3,), SEEDS[0])
        except Exception as exc:  # noqa: BLE001
            per_device[dev] = {
                "verdict": COULD_NOT_RUN,
                "evidence": [f"could not build inputs: {first_line(exc)}"],
            }
            continue
        floats = [
            i for i, a in enumerate(base) if isinstance(a, torch.Tensor) and a.is_floating_point()
        ]

        try:
            every = _grads_without(fn, base, floats, None)
        except NameError as exc:  # UnboundLocalError: a branch taken with every input too
            per_device[dev] = {
                "verdict": CONFIRMED,
                "evidence": [f"every input requiring grad: backward raised {first_line(exc)}"],
            }
            continue
        except Exception as exc:  # noqa: BLE001
            per_device[dev] = {"verdict": COULD_NOT_RUN, "evidence": [first_line(exc)]}
            continue
        evidence: list[str] = []
        for left in floats if len(floats) > 1 else []:  # one input left without: no graph
            mark(f"needs {dev}, input {left} without requires_grad")
            try:
                partial_grads = _grads_without(fn, base, floats, left)
            except NameError as exc:
                evidence.append(
                    f"input {left} without requires_grad: backward raised {first_line(exc)}"
                )
                continue
            except Exception:  # noqa: BLE001 - another failure is not this rule's evidence
                continue
            evidence += [
                f"input {left} without requires_grad: input {i}'s gradient is None (it is "
                "computed when every input requires grad)"
                for i in floats
                if i != left and every[i] is not None and partial_grads[i] is None
            ]
        per_device[dev] = {
            "verdict": CONFIRMED if evidence else NOT_REPRODUCED,
            "evidence": evidence,
        }
    return per_device


def _grads_without(fn: Any, base: list[Any], floats: list[int], left: int | None) -> dict[int, Any]:
    """The inputs' gradients after one backward, with input `left` not requiring grad."""
    args = [
        a.detach().clone().requires_grad_(i != left) if i in floats else a
        for i, a in enumerate(base)
    ]
    reseed(SEEDS[0])
    caller(fn)(*args).sum().backward()
    return {i: args[i].grad for i in floats}


def probe_fake(fn: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """A custom op's fake implementation (AGL413): opcheck's test_faketensor runs the op on
    fake tensors, as torch.compile and torch.export do (semantics D13.1, D13.3)."""
    import torch

    per_device: dict[str, Any] = {}
    for dev in devices:
        mark(f"fake {dev}")
        if not opcheck.is_custom_op(fn):
            per_device[dev] = {"verdict": COULD_NOT_RUN, "evidence": ["not a custom op"]}
            continue
        try:
            dtype, shape = OPCHECK_INPUTS["B"]  # kernels may take float32 only
            args = inputs_for(fn, factory, getattr(torch, dtype), dev, shape, SEEDS[0])
        except Exception as exc:  # noqa: BLE001
            per_device[dev] = {
                "verdict": COULD_NOT_RUN,
                "evidence": [f"could not build inputs: {first_line(exc)}"],
            }
            continue
        found = opcheck.report(fn, args, ("test_faketensor",))
        outcome = found.get("test_faketensor", next(iter(found.values()), "?"))
        if outcome == opcheck.PASSED:
            per_device[dev] = {
                "verdict": NOT_REPRODUCED,
                "evidence": ["opcheck test_faketensor passed"],
            }
        elif opcheck.lacks_fake(outcome):
            per_device[dev] = {
                "verdict": CONFIRMED,
                "evidence": [f"opcheck test_faketensor {outcome}"],
            }
        else:
            per_device[dev] = {"verdict": COULD_NOT_RUN, "evidence": [f"opcheck {outcome}"]}
    return per_device


def probe_shared(fn: Any, devices: list[str], factory: Callable[..., Any] | None) -> dict[str, Any]:
    """A gradient backward writes into (AGL406): autograd hands the same gradient to every
    consumer of an output, so a write shows in another consumer and in the caller's tensor
    (semantics B2.1, B2.4). Run on two gloo ranks holding different gradients, where a
    collective into the gradient shows too (one rank reduces nothing); without gloo, on one."""
    from . import ranks

    per_device: dict[str, Any] = {}
    for dev in devices:
        mark(f"shared gradient {dev}, two gloo ranks")
        try:
            if dev == "cpu":
                found = ranks.on_two_ranks(partial(_shared_run, fn, factory, dev))
            else:  # gloo's collectives are CPU ones: a CUDA run is a run of one
                found = [_shared_run(fn, factory, dev, 0)]
        except ranks.RanksFailed as exc:
            per_device[dev] = {"verdict": COULD_NOT_RUN, "evidence": [str(exc)]}
            continue
        evidence = [line for lines in found for line in lines]
        per_device[dev] = {
            "verdict": CONFIRMED if evidence else NOT_REPRODUCED,
            "evidence": evidence,
        }
    return per_device


def _shared_run(fn: Any, factory: Callable[..., Any] | None, dev: str, rank: int) -> list[str]:
    """One rank: `fn(x) + V(b)` with V an identity Function, made first so that fn's backward
    runs first (the node made last runs first), backward with a gradient that differs between
    ranks; what V received and the caller's gradient must still be that gradient."""
    import torch

    class Passes(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g.clone()

    args = [_leaf(a) for a in inputs_for(fn, factory, torch.float64, dev, (3,), SEEDS[0])]
    reseed(SEEDS[0])
    shape = caller(fn)(*[_leaf(a, copy=True) for a in args]).shape
    b = torch.zeros(shape, dtype=torch.float64, device=dev, requires_grad=True)
    other = Passes.apply(b)
    reseed(SEEDS[0])
    out = caller(fn)(*args)
    sent = probe_tensor(torch.float64, dev, tuple(shape), SEEDS[0]) * (rank + 1)
    kept = sent.clone()
    (out + other).backward(sent)
    lines = []
    if b.grad is None or not torch.equal(b.grad, kept):
        lines.append(
            f"rank {rank}: another consumer of the same output received a changed gradient "
            "(backward wrote into the gradient autograd shares between them)"
        )
    if not torch.equal(sent, kept):
        counted = (
            f"version {sent._version}"
            if sent._version
            else "its version unchanged: a write autograd's version counter never sees"
        )
        lines.append(
            f"rank {rank}: the caller's gradient (the tensor passed to .backward) changed "
            f"({counted})"
        )
    return lines


PROBES = {
    "A": probe_a,
    "B": probe_b,
    "C": probe_c,
    "arity": probe_arity,
    "fake": probe_fake,
    "needs": probe_needs,
    "shared": probe_shared,
}


def serve(module: str, jobs: list[dict[str, Any]]) -> None:
    """One module's probes in one process: torch and the module are imported once, then each
    probe runs in a forked copy of this process, so a crash, a hang or a leak costs that probe
    only. Protocol, in order: `@@LIMIT` and `@@MARK` for the import, then `@@IMPORTED` (or
    `@@IMPORTFAIL "why"`); per job `@@JOB i` (also on stderr, to split it), `@@LIMIT`, the
    probe's `@@MARK` lines, then `@@RESULT i {json}` if it has one, and `@@TIMEOUT i` or
    `@@EXIT i STATUS`; `@@FALLBACK i` asks the parent to run job i in a fresh interpreter
    instead (CUDA initialised here cannot be used after fork)."""
    import signal
    import time

    mark("import torch")
    import torch

    limit(max((float(job["timeout"]) for job in jobs), default=0.0))  # the timeout covers import
    mark(f"import {module}")
    try:
        import_target(module)
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import is a failure too
        say(f"@@IMPORTFAIL {json.dumps(first_line(exc))}")
        return
    say("@@IMPORTED")
    cuda_in_use = torch.cuda.is_initialized()
    for index, job in enumerate(jobs):
        say(f"@@JOB {index}")
        print(f"@@JOB {index}", file=sys.stderr, flush=True)
        if cuda_in_use and "cuda" in job["devices"]:
            say(f"@@FALLBACK {index}")
            continue
        limit(float(job["timeout"]) + 5)  # this loop stops the probe at its timeout itself
        pid = os.fork()
        if pid == 0:  # the probe: never returns into this loop
            code = 0
            try:
                result = run_job(job["kind"], job["target"], job["devices"], job["factory"])
                say(f"@@RESULT {index} {json.dumps(result)}")
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        deadline = time.monotonic() + float(job["timeout"])
        status = None
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = raw
            elif time.monotonic() > deadline:
                # What the probe started is killed with the run (its session, and what left
                # it, through the supervisor): none outlives it.
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
                os.waitpid(pid, 0)
                say(f"@@TIMEOUT {index}")
                break
            else:
                time.sleep(0.01)
        if status is not None:
            say(f"@@EXIT {index} {os.waitstatus_to_exitcode(status)}")


def run_job(
    kind: str,
    target: str,
    devices_arg: list[str],
    factory_spec: str,
    timeout: float | None = None,
) -> dict[str, Any]:
    """One probe, in this process: the JSON-able result the parent reads. With `timeout`, the
    probe announces its own phase once the target is imported (the import had one too)."""
    import torch

    devices = [d for d in devices_arg if d != "cuda" or torch.cuda.is_available()]
    mark(f"import {target}")
    try:
        obj = load(target)
        factory = load(factory_spec) if factory_spec else None
    except Exception as exc:  # noqa: BLE001
        return {
            "verdict": COULD_NOT_RUN,
            "evidence": [f"import failed: {first_line(exc)}"],
            "devices": {},
        }
    if timeout is not None:
        limit(timeout)
    per_device = PROBES[kind](obj, devices, factory)
    if kind in OPCHECK_INPUTS and opcheck.is_custom_op(obj):
        for dev, result in per_device.items():
            _add_opcheck(result, obj, factory, kind, dev)
    return {"devices": per_device, "torch": torch.__version__}


# The inputs opcheck gets: the probe's own, on its first draw (B's kernels may be float32 only).
OPCHECK_INPUTS = {"A": ("float64", (3,)), "arity": ("float64", (3,)), "B": ("float32", (4, 6))}


def _add_opcheck(
    result: dict[str, Any], fn: Any, factory: Callable[..., Any] | None, kind: str, dev: str
) -> None:
    """A custom op's opcheck results, as evidence of their own (they leave the verdict)."""
    import torch

    mark(f"opcheck {dev}")
    dtype, shape = OPCHECK_INPUTS[kind]
    try:
        args = [
            _leaf(a) for a in inputs_for(fn, factory, getattr(torch, dtype), dev, shape, SEEDS[0])
        ]
    except Exception as exc:  # noqa: BLE001
        found = {"opcheck": f"failed: could not build inputs: {first_line(exc)}"}
    else:
        found = opcheck.report(fn, args)
    result["opcheck"] = found
    result["evidence"] = [*result["evidence"], *opcheck.lines(found)]


def main(argv: list[str]) -> None:
    import warnings

    # Python 3.10 has no -P: the working directory (empty, private) leaves sys.path here.
    sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
    warnings.filterwarnings("ignore")
    if argv[0] == "serve":  # serve MODULE JOBS_JSON
        serve(argv[1], json.loads(argv[2]))
        _end()
    kind, target, devices_arg, factory_spec, timeout = argv[:5]  # one probe
    mark("import torch")
    import torch  # noqa: F401 - the tool's own allowance, before the module's timeout

    limit(float(timeout))
    devices = [d for d in devices_arg.split(",") if d]
    result = run_job(kind, target, devices, factory_spec, float(timeout))
    say(f"@@RESULT {json.dumps(result)}")
    _end()


def _end() -> None:
    """Exit now: a thread or an atexit hook of the code under test must not hold the run."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
