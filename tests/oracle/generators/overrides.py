"""Generator for family C (AGL301-AGL306): Tensor subclasses and modes whose
`__torch_function__` / `__torch_dispatch__` convert dtypes, move devices, re-enter
themselves, redispatch through an abstract super(), or answer factory ops without what the
caller asked for; and the same shapes without the hazard. The program exposes `wrap(t)` (a
subclass instance) or `make_mode()`; the override driver compares ops against plain tensors
(float32 inputs, so a conversion to float64 or float16 shows)."""

from __future__ import annotations

from ..forms import block
from ..program import Chooser, Program

CONVERSIONS = {
    "to-double": "{a}.to(torch.float64)",
    "double": "{a}.double()",
    "half": "{a}.half()",
    "to-kw": "{a}.to(dtype=torch.bfloat16)",
    "type": "{a}.type(torch.float64)",
    "float": "{a}.float()",  # a no-op on the float32 inputs the driver uses
    "same-dtype": "{a}.to({a}.dtype)",  # no change
    "device": "{a}.to(TARGET)",  # TARGET: the meta device, a stand-in for another device
    "device-literal": "{a}.to('meta')",
    "clone": "{a}.clone()",  # no conversion at all
}
KINDS = ["subclass", "mode", "base-mode", "dispatch-mode"]


def _convert(c: Chooser, conv: str, helpers: list[str]) -> str:
    """An expression converting every tensor in `args`, in one of the forms code uses."""
    expr = CONVERSIONS[conv]
    via = c.pick("via", ["comprehension", "tree_map", "helper", "helper-2-deep", "loop"])
    if via == "comprehension":
        return f"tuple({expr.format(a='a')} if isinstance(a, torch.Tensor) else a for a in args)"
    if via == "tree_map":
        helpers.append("from torch.utils._pytree import tree_map")
        return (
            f"tree_map(lambda a: {expr.format(a='a')} if isinstance(a, torch.Tensor) else a, args)"
        )
    if via in ("helper", "helper-2-deep"):
        helpers.append(
            f"def _cast(a):\n    return {expr.format(a='a')} if isinstance(a, torch.Tensor) else a"
        )
        if via == "helper-2-deep":
            helpers.append("def _cast_all(args):\n    return tuple(_cast(a) for a in args)")
            return "_cast_all(args)"
        return "tuple(_cast(a) for a in args)"
    helpers.append(
        "def _cast_each(args):\n    out = []\n    for a in args:\n"
        f"        out.append({expr.format(a='a')} if isinstance(a, torch.Tensor) else a)\n"
        "    return tuple(out)"
    )
    return "_cast_each(args)"


def _subclass(c: Chooser, helpers: list[str]) -> list[str]:
    hazard = c.pick(
        "hazard",
        ["none", "convert-args", "convert-result", "plain-method", "reenter", "reenter-bounded"],
    )
    redispatch = c.pick("redispatch", ["super", "disable-subclass", "disabled-impl"])
    call = {
        "super": "super().__torch_function__(func, types, args, kwargs)",
        "disable-subclass": "func(*args, **kwargs)",
        "disabled-impl": "torch._C._disabled_torch_function_impl(func, types, args, kwargs)",
    }[redispatch]
    body = ["kwargs = kwargs or {}"]
    if hazard == "convert-args":
        conv = c.pick("conversion", list(CONVERSIONS))
        body += [
            "with torch._C.DisableTorchFunctionSubclass():",
            f"    args = {_convert(c, conv, helpers)}",
        ]
    if hazard in ("reenter", "reenter-bounded"):
        read = c.pick("read", ["shape", "dtype", "dim()", "float()"])
        where = "if func is torch.add:\n    " if hazard == "reenter-bounded" else ""
        if c.flag("read.helper"):
            helpers.append(
                f"def _seen(args):\n    return [a.{read} for a in args if isinstance(a, torch.Tensor)]"
            )
            body += [f"{where}seen = _seen(args)"]
        else:
            body += [f"{where}seen = [a.{read} for a in args if isinstance(a, torch.Tensor)]"]
    if redispatch == "disable-subclass":
        body += ["with torch._C.DisableTorchFunctionSubclass():", f"    out = {call}"]
    else:
        body += [f"out = {call}"]
    if hazard == "convert-result":
        conv = c.pick("conversion", ["to-double", "half", "same-dtype"])
        expr = CONVERSIONS[conv].format(a="out")
        body += [
            "if isinstance(out, torch.Tensor):",
            "    with torch._C.DisableTorchFunctionSubclass():",
            f"        out = {expr}",
        ]
    body.append("return out")
    deco = [] if hazard == "plain-method" else ["@classmethod"]
    head = "".join(f"    {d}\n" for d in deco)
    cls = (
        "class Tagged(torch.Tensor):\n"
        + head
        + "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        + block(body, 2)
    )
    return [cls, "def wrap(t):\n    return t.as_subclass(Tagged)"]


def _mode(c: Chooser, helpers: list[str], base: str) -> list[str]:
    hazard = c.pick("hazard", ["none", "convert-args", "super-call"])
    body = ["kwargs = kwargs or {}"]
    if hazard == "convert-args":
        conv = c.pick("conversion", list(CONVERSIONS))
        body.append(f"args = {_convert(c, conv, helpers)}")
    if hazard == "super-call":
        body.append("return super().__torch_function__(func, types, args, kwargs)")
    else:
        body.append("return func(*args, **kwargs)")
    helpers.insert(0, f"from torch.overrides import {base}")
    cls = (
        f"class Watch({base}):\n    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        + block(body, 2)
    )
    return [cls, "def make_mode():\n    return Watch()"]


HANDLED = {
    "zeros_like": (
        "aten.zeros_like.default",
        "torch.zeros(args[0].shape, dtype=args[0].dtype)",
        "func(args[0], **kwargs)",
    ),
    "new_zeros": (
        "aten.new_zeros.default",
        "torch.zeros_like(args[0])",
        "func(args[0], args[1], **kwargs)",
    ),
    "to": ("aten._to_copy.default", "args[0].clone()", "func(args[0], **kwargs)"),
}


def _dispatch_mode(c: Chooser, helpers: list[str]) -> list[str]:
    op = c.pick("op", list(HANDLED))
    target, ignoring, honouring = HANDLED[op]
    honours = c.flag("honours")
    answer = honouring if honours else ignoring
    select = c.pick("select", ["is", "in", "overloadpacket", "registry"])
    helpers.insert(
        0, "from torch.utils._python_dispatch import TorchDispatchMode\n\naten = torch.ops.aten"
    )
    if select == "registry":
        helpers.append(
            "HANDLERS = {}\n\n\ndef implements(op):\n    def register(f):\n        HANDLERS[op] = f\n"
            "        return f\n\n    return register"
        )
        helpers.append(
            f"@implements({target})\ndef _handle(func, types, args, kwargs):\n    return {answer}"
        )
        body = [
            "kwargs = kwargs or {}",
            "if func in HANDLERS:",
            "    return HANDLERS[func](func, types, args, kwargs)",
            "return func(*args, **kwargs)",
        ]
    else:
        cond = {
            "is": f"func is {target}",
            "in": f"func in ({target},)",
            "overloadpacket": f"func.overloadpacket == {target.rsplit('.', 1)[0]}",
        }[select]
        body = [
            "kwargs = kwargs or {}",
            f"if {cond}:",
            f"    return {answer}",
            "return func(*args, **kwargs)",
        ]
    cls = (
        "class Fill(TorchDispatchMode):\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n" + block(body, 2)
    )
    return [cls, "def make_mode():\n    return Fill()"]


def gen_c(c: Chooser) -> Program:
    kind = c.pick("kind", KINDS)
    helpers: list[str] = []
    if kind == "subclass":
        defs = _subclass(c, helpers)
    elif kind == "mode":
        defs = _mode(c, helpers, "TorchFunctionMode")
    elif kind == "base-mode":
        defs = _mode(c, helpers, "BaseTorchFunctionMode")
    else:
        defs = _dispatch_mode(c, helpers)
    head = "import torch\n\nTARGET = torch.device('meta')\n"
    text = (
        head
        + "".join("\n\n" + h + "\n" for h in helpers)
        + "".join("\n\n" + d + "\n" for d in defs)
    )
    return Program(
        family="C",
        files={"__init__.py": "", "main.py": text},
        driver="override",
        mode=kind != "subclass",
    )
