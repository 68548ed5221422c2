"""Generator for family A (AGL101-AGL105): a backward that builds a graph and differentiates it,
with grad mode on or off, create_graph forwarded or not, nested `.backward()` on saved tensors
or on detached copies, placed inline, in helpers (one and two calls deep, in another module, a
static method), in a loop or a branch, under `@once_differentiable`."""

from __future__ import annotations

from ..forms import Parts, Sig, block, render
from ..program import Chooser, Program

BODIES = [
    "analytic",
    "grad-no-enable",  # AGL101: raises in training, works under create_graph
    "grad-enable",  # AGL105: first order right, second order dropped
    "grad-enable-cg",  # create_graph=torch.is_grad_enabled() captured on entry: right
    "grad-no-grad",  # AGL102: always raises
    "grad-detached",  # private detached copy: first order right, second order dropped
    "backward-saved",  # AGL103: y.backward(g) on the saved input, return x.grad
    "backward-no-enable",  # AGL103 without enable_grad
    "backward-checkpoint",  # AGL104: detached copy, reaches the module parameter W
    "backward-checkpoint-guarded",  # the same behind _is_checkpoint_valid()
]
PARAM = "W = torch.linspace(0.5, 1.5, 3, dtype=torch.float64).requires_grad_()"
RECOMPUTES = {
    "cube": ("x ** 3", "g * 3 * x ** 2"),
    "sinx": ("torch.sin(x) * x", "g * (torch.cos(x) * x + torch.sin(x))"),
}


def _core(body: str, rec: str, analytic: str) -> list[str]:
    """Lines computing `gx` from saved `x` and gradient `g`."""
    on = lambda v: rec.replace("x", v)  # noqa: E731 - a rename of the recompute's input
    if body == "analytic":
        return [f"gx = {analytic}"]
    if body == "grad-no-enable":
        return [f"y = {on('x')}", "(gx,) = torch.autograd.grad(y, x, g)"]
    if body == "grad-enable":
        return [
            "with torch.enable_grad():",
            f"    y = {on('x')}",
            "    (gx,) = torch.autograd.grad(y, x, g)",
        ]
    if body == "grad-enable-cg":
        return [
            "create_graph = torch.is_grad_enabled()",
            "with torch.enable_grad():",
            f"    y = {on('x')}",
            "    (gx,) = torch.autograd.grad(y, x, g, create_graph=create_graph)",
        ]
    if body == "grad-no-grad":
        return [
            "with torch.no_grad():",
            f"    y = {on('x')}",
            "    (gx,) = torch.autograd.grad(y, x, g)",
        ]
    if body == "grad-detached":
        return [
            "xd = x.detach().requires_grad_()",
            "with torch.enable_grad():",
            f"    y = {on('xd')}",
            "    (gx,) = torch.autograd.grad(y, xd, g)",
        ]
    if body == "backward-saved":
        return [
            "with torch.enable_grad():",
            f"    y = {on('x')}",
            "    y.backward(g)",
            "gx = x.grad",
        ]
    if body == "backward-no-enable":
        return [f"y = {on('x')}", "y.backward(g)", "gx = x.grad"]
    lines = []
    if body == "backward-checkpoint-guarded":
        lines += [
            "if not torch.autograd._is_checkpoint_valid():",
            "    raise RuntimeError('checkpointing is not compatible with .grad()')",
        ]
    return lines + [
        "xd = x.detach().requires_grad_()",
        "with torch.enable_grad():",
        f"    y = {on('xd')} * W",
        "    torch.autograd.backward(y, g)",
        "gx = xd.grad",
    ]


def gen_a(c: Chooser) -> Program:
    body = c.pick("body", BODIES)
    rec, analytic = RECOMPUTES[c.pick("math", ["cube", "sinx"])]
    checkpoint = body.startswith("backward-checkpoint")
    core = _core(body, rec, analytic)
    where = c.pick(
        "where", ["inline", "helper", "helper-2-deep", "other-module", "method", "loop", "branch"]
    )
    once = c.flag("once_differentiable")
    alias = c.flag("alias")  # the saved tensor under another name first
    unpack = ["(x,) = ctx.saved_tensors"] + (["inp = x", "x = inp"] if alias else [])
    helpers: list[str] = []
    imports: list[str] = []
    class_attrs: list[str] = []
    extra_files: dict[str, str] = {}
    if where == "inline":
        lines = core
    elif where == "loop":
        lines = ["for _ in range(1):"] + ["    " + line for line in core]
    elif where == "branch":
        lines = (
            ["if g is not None:"] + ["    " + line for line in core] + ["else:", "    gx = None"]
        )
    elif where == "helper":
        helpers.append("def _vjp(x, g):\n" + block(core + ["return gx"], 1))
        lines = ["gx = _vjp(x, g)"]
    elif where == "helper-2-deep":
        helpers.append("def _vjp_inner(x, g):\n" + block(core + ["return gx"], 1))
        helpers.append("def _vjp(x, g):\n    return _vjp_inner(x, g)")
        lines = ["gx = _vjp(x, g)"]
    elif where == "other-module":
        util = "import torch\n" + ("from .params import W\n" if checkpoint else "")
        extra_files["util.py"] = util + "\n\ndef vjp(x, g):\n" + block(core + ["return gx"], 1)
        imports.append("from .util import vjp")
        lines = ["gx = vjp(x, g)"]
    else:  # method: a static method of the Function
        class_attrs.append(
            "    @staticmethod\n    def _vjp(x, g):\n" + block(core + ["return gx"], 2)
        )
        lines = ["gx = Fn._vjp(x, g)"]
    decorators = ["@staticmethod"]
    if once:
        decorators.append("@once_differentiable")
        imports.append("from torch.autograd.function import once_differentiable")
    out = rec if not checkpoint else f"({rec}) * W"
    forward = [f"out = {out}"] if not checkpoint else ["with torch.no_grad():", f"    out = {out}"]
    parts = Parts(
        sig=Sig("plain", ("x",)),
        forward=forward,
        ctx_lines=["ctx.save_for_backward(x)"],
        backward=unpack + lines + ["return gx"],
        backward_helpers=helpers,
        backward_decorators=decorators,
        imports=imports,
        class_attrs=class_attrs,
    )
    if checkpoint:  # the module parameter the recompute reaches, imported where it is used
        extra_files["params.py"] = "import torch\n\n" + PARAM + "\n"
        parts.forward_helpers.append("from .params import W")
        parts.imports.append("from .params import W")
    shapes = (
        ["single"] if where == "method" else ["single", "base-other-module", "mixin-other-module"]
    )
    files = render(c, parts, shapes)
    files.update(extra_files)
    ref = rec if not checkpoint else f"({rec}) * W"
    reference = "def reference(x):\n    return " + ref + "\n"
    if checkpoint:
        reference = PARAM + "\n\n\n" + reference
    return Program(family="A", files=files, reference=reference, inputs=[[3]], function="Fn")
