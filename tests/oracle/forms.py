"""The forms real autograd code takes, shared by every generator: forward signatures (`*args`,
keyword-only, defaults passed and not, the setup_context style), class shapes (forward or
backward inherited from a base in another module, mixins), use sites, and where a statement
sits (inline, in helpers one and two calls deep, in a static method, a loop, a branch, under
a decorator).

A generator writes the bodies; `render` turns them into the modules of one package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from textwrap import indent

from .program import PKG, Chooser


def block(lines: list[str], depth: int) -> str:
    text = "\n".join(lines).rstrip("\n")
    return indent(text, "    " * depth) + "\n"


# --- the math a Function computes ------------------------------------------------------------


@dataclass(frozen=True)
class Math:
    name: str
    inputs: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    out: str  # forward's result, from the inputs
    grads: tuple[str, ...]  # the gradient of each input, from `g` and the inputs
    second_order: bool  # its second derivative is not zero (double backward can tell)


MATHS = {
    "cube": Math("cube", ("x",), ((3,),), "x ** 3", ("g * 3 * x ** 2",), True),
    "mul": Math("mul", ("x", "w"), ((3,), (3,)), "x * w", ("g * w", "g * x"), True),
    "sinmul": Math(
        "sinmul",
        ("x", "w"),
        ((2, 3), (2, 3)),
        "torch.sin(x) * w",
        ("g * torch.cos(x) * w", "g * torch.sin(x)"),
        True,
    ),
    "affine": Math(
        "affine",
        ("x", "w", "b"),
        ((2, 3), (3,), (3,)),
        "x * w + b",
        ("g * w", "(g * x).sum(0)", "g.sum(0)"),
        True,
    ),
}


# --- forward signatures ----------------------------------------------------------------------

SIG_STYLES = [
    "plain",  # forward(ctx, x, w)
    "default-omitted",  # forward(ctx, x, w, scale=2.0); apply(x, w)
    "default-passed",  # ... apply(x, w, 3.0)
    "kwonly",  # forward(ctx, x, w, *, scale=2.0); apply(x, w)
    "star",  # forward(ctx, *args)
    "setup",  # forward(x, w) + setup_context(ctx, inputs, output)
    "setup-default",  # forward(x, w, scale=2.0) + setup_context; apply(x, w)
]


@dataclass(frozen=True)
class Sig:
    """How forward receives its inputs, what the call site passes, what torch expects back."""

    style: str
    tensors: tuple[str, ...]

    @property
    def has_scale(self) -> bool:
        return self.style not in ("plain", "setup", "star")

    @property
    def setup(self) -> bool:
        return self.style.startswith("setup")

    @property
    def scale(self) -> str:
        """The value `scale` has at run time."""
        return "3.0" if self.style == "default-passed" else "2.0"

    def params(self) -> str:
        names = list(self.tensors)
        if self.style == "star":
            names = ["*args"]
        elif self.style == "kwonly":
            names += ["*", "scale=2.0"]
        elif self.has_scale:
            names += ["scale=2.0"]
        return ", ".join(names if self.setup else ["ctx", *names])

    def unpack(self) -> list[str]:
        """Lines at the top of forward that name the inputs (for `*args`)."""
        if self.style != "star":
            return []
        n = len(self.tensors)
        return [f"{', '.join(self.tensors)}{',' if n == 1 else ''} = args[:{n}]"]

    def call_args(self) -> list[str]:
        return [*self.tensors, *(["3.0"] if self.style == "default-passed" else [])]

    def slots(self) -> list[str]:
        """The gradients torch expects, by input: `apply`'s arguments (old style), forward's
        parameters with defaults bound (setup_context style)."""
        if self.style in ("default-passed", "setup-default"):
            return [*self.tensors, "scale"]
        return list(self.tensors)

    def scaled(self, expr: str) -> str:
        return f"({expr}) * scale" if self.has_scale else expr


def pick_sig(c: Chooser, tensors: tuple[str, ...], allow: list[str] | None = None) -> Sig:
    return Sig(c.pick("sig", allow or SIG_STYLES), tensors)


# --- the Function, its class shape and its use site ------------------------------------------


@dataclass
class Parts:
    """The bodies a generator writes. Lines are written for the old style; `render` moves
    `ctx_lines` into setup_context for that style (there `{OUT}` is `output`)."""

    sig: Sig
    forward: list[str]  # forward's computing lines; must bind `out`
    ctx_lines: list[str]  # what forward keeps for backward (ctx.save_for_backward(...), ...)
    backward: list[str]  # backward's body (after `def backward(ctx, g)`), with its return
    grad_params: str = "ctx, g"
    returns: str = "out"  # forward's return expression
    forward_helpers: list[str] = field(default_factory=list)  # module-level defs forward uses
    backward_helpers: list[str] = field(default_factory=list)  # ... and backward
    forward_decorators: list[str] = field(default_factory=lambda: ["@staticmethod"])
    backward_decorators: list[str] = field(default_factory=lambda: ["@staticmethod"])
    forward_first: str = ""  # `cls, ` for a classmethod forward
    backward_first: str = ""
    imports: list[str] = field(default_factory=list)  # extra imports of the backward's module
    model: list[str] | None = None  # the body of `model(...)`; default: return Fn.apply(...)
    extra_main: list[str] = field(default_factory=list)  # more module-level code in main
    class_attrs: list[str] = field(default_factory=list)  # more class body (helper methods)


SHAPES = [
    "single",
    "base-same-file",  # forward in a base class of the same module, backward in the child
    "base-other-module",  # forward in a base class in base.py
    "backward-in-base",  # backward in a base class in base.py, forward in the child
    "mixin-other-module",  # backward from a mixin (not a Function) in mixins.py
    "two-levels",  # forward two bases up, across two modules
]
BASES = ["torch.autograd.Function", "Function", "autograd.Function"]


def _base_import(base: str) -> str:
    if base == "Function":
        return "from torch.autograd import Function\n"
    if base == "autograd.Function":
        return "from torch import autograd\n"
    return ""


def _method(name: str, decorators: list[str], params: str, body: list[str]) -> str:
    head = "".join(f"    {d}\n" for d in decorators)
    return head + f"    def {name}({params}):\n" + block(body, 2)


def render(
    c: Chooser, parts: Parts, shapes: list[str] | None = None, homes: list[str] | None = None
) -> dict[str, str]:
    """The package's modules: the Function `Fn` in main.py or ops.py (or built from bases in
    other modules), and `model(...)` in main.py, the use site the oracle calls."""
    sig = parts.sig
    shape = c.pick("shape", shapes or SHAPES)
    base = c.pick("base", BASES)
    out_name = "output" if sig.setup else "out"
    ctx_lines = [line.replace("{OUT}", out_name) for line in parts.ctx_lines]
    fwd_body = sig.unpack() + parts.forward
    setup_method = ""
    if sig.setup:
        unpack_inputs = [f"{', '.join(sig.tensors)}, *_ = inputs"]
        if sig.has_scale:
            unpack_inputs.append(f"scale = inputs[{len(sig.tensors)}]")
        setup_method = "\n" + _method(
            "setup_context",
            ["@staticmethod"],
            "ctx, inputs, output",
            unpack_inputs + (ctx_lines or ["pass"]),
        )
    else:
        fwd_body += ctx_lines
    fwd_body.append(f"return {parts.returns}")
    forward = (
        _method("forward", parts.forward_decorators, parts.forward_first + sig.params(), fwd_body)
        + setup_method
    )
    backward = _method(
        "backward",
        parts.backward_decorators,
        parts.backward_first + parts.grad_params,
        parts.backward,
    )
    extra = "".join("\n" + a for a in parts.class_attrs)

    header = "import torch\n" + _base_import(base)
    fwd_help = "".join("\n\n" + h.rstrip() + "\n" for h in parts.forward_helpers)
    bwd_help = "".join("\n\n" + h.rstrip() + "\n" for h in parts.backward_helpers)
    bwd_imports = "".join(i + "\n" for i in parts.imports)
    files: dict[str, str] = {}
    # main.py when backward is in `Fn(Base)` and forward comes from base.py
    child_of_base = (
        header
        + bwd_imports
        + "from .base import Base\n"
        + bwd_help
        + "\n\nclass Fn(Base):\n"
        + backward
        + extra
    )
    if shape == "single":
        cls = f"class Fn({base}):\n" + forward + "\n" + backward + extra
        main = header + bwd_imports + fwd_help + bwd_help + "\n\n" + cls
    elif shape == "base-same-file":
        cls = f"class _Base({base}):\n" + forward + "\n\nclass Fn(_Base):\n" + backward + extra
        main = header + bwd_imports + fwd_help + bwd_help + "\n\n" + cls
    elif shape == "base-other-module":
        files["base.py"] = header + fwd_help + f"\n\nclass Base({base}):\n" + forward
        main = child_of_base
    elif shape == "backward-in-base":
        files["base.py"] = header + bwd_imports + bwd_help + f"\n\nclass Base({base}):\n" + backward
        main = (
            header
            + "from .base import Base\n"
            + fwd_help
            + "\n\nclass Fn(Base):\n"
            + forward
            + extra
        )
    elif shape == "mixin-other-module":
        files["mixins.py"] = (
            "import torch\n" + bwd_imports + bwd_help + "\n\nclass GradMixin:\n" + backward
        )
        main = (
            header
            + "from .mixins import GradMixin\n"
            + fwd_help
            + f"\n\nclass Fn(GradMixin, {base}):\n"
            + forward
            + extra
        )
    else:  # two-levels
        files["core.py"] = header + fwd_help + f"\n\nclass Core({base}):\n" + forward
        files["base.py"] = f"from {PKG}.core import Core\n\n\nclass Base(Core):\n    pass\n"
        main = child_of_base
    model = parts.model or [f"return Fn.apply({', '.join(sig.call_args())})"]
    use = "".join("\n\n" + e.rstrip() + "\n" for e in parts.extra_main)
    use += f"\n\ndef model({', '.join(sig.tensors)}):\n" + block(model, 1)
    home = c.pick("home", homes or ["main"])
    if home == "main":
        files["main.py"] = main + use
    else:  # the Function in ops.py, used from main.py
        files["ops.py"] = main
        how = "from .ops import Fn" if home == "ops-relative" else f"from {PKG}.ops import Fn"
        files["main.py"] = "import torch\n\n" + how + "\n" + use
    files["__init__.py"] = ""
    return files


# --- where a statement sits ------------------------------------------------------------------

DECORATOR = (
    "import functools\n\n\ndef _traced(f):\n    @functools.wraps(f)\n"
    "    def inner(*a, **k):\n        return f(*a, **k)\n\n    return inner"
)
SITES = ["inline", "helper", "helper-2-deep", "static-method", "loop", "branch", "decorated"]


def place(
    c: Chooser, name: str, stmt: list[str], arg: str, parts: Parts, into: str = "backward"
) -> list[str]:
    """`stmt` acts on `t`; run it on `arg` from backward (or forward), placed per a choice.
    Returns the lines for the body; helpers are added to `parts`."""
    site = c.pick(f"{name}.site", SITES)
    on_arg = [line.replace("{t}", arg) for line in stmt]
    on_t = [line.replace("{t}", "t") for line in stmt]
    helpers = parts.backward_helpers if into == "backward" else parts.forward_helpers
    fname = f"_{name.replace('.', '_')}"
    if site == "inline":
        return on_arg
    if site == "loop":
        return ["for _ in range(1):"] + ["    " + line for line in on_arg]
    if site == "branch":
        return [f"if {arg}.dim() > 0:"] + ["    " + line for line in on_arg]
    if site == "helper":
        helpers.append(f"def {fname}(t):\n" + block(on_t + ["return t"], 1))
        return [f"{fname}({arg})"]
    if site == "helper-2-deep":
        helpers.append(f"def {fname}_inner(t):\n" + block(on_t + ["return t"], 1))
        helpers.append(f"def {fname}(t):\n" + block([f"return {fname}_inner(t)"], 1))
        return [f"{fname}({arg})"]
    if site == "static-method":
        helpers.append(
            f"class _Ops{fname}:\n    @staticmethod\n    def apply_to(t):\n"
            + block(on_t + ["return t"], 2)
        )
        return [f"_Ops{fname}.apply_to({arg})"]
    # decorated: a helper under a functools.wraps decorator
    if DECORATOR not in helpers:
        helpers.append(DECORATOR)
    helpers.append(f"@_traced\ndef {fname}(t):\n" + block(on_t + ["return t"], 1))
    return [f"{fname}({arg})"]


def grads_return(sig: Sig, exprs: dict[str, str]) -> str:
    """`return ...` with one gradient per slot torch expects (None for non-tensors)."""
    items = [exprs.get(slot, "None") for slot in sig.slots()]
    if len(items) == 1:
        return f"return {items[0]}"
    return "return " + ", ".join(items)


def reference(sig: Sig, expr: str) -> str:
    """`reference(*xs)`: plain autograd on forward's math, with the scale the call site gets."""
    body = sig.scaled(expr).replace("scale", sig.scale) if sig.has_scale else expr
    return f"def reference({', '.join(sig.tensors)}):\n    return {body}\n"
