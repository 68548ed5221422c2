"""Generated programs with the shapes that made "safe" fixes change results (issue 34): each
draws from the dimensions a precondition of some fix is about.

- decorators on backward: torch's own, a project one that passes through, one that catches the
  error and falls back (in this file, in another, as a factory, through a helper, through a
  suppressing context manager), one whose source cannot be read, and a subclass that calls
  `Fn.backward` and falls back (`nothing-catches`);
- gradients that can be None: `set_materialize_grads(False)`, a second output that is unused
  or not a tensor, `*grads`, a kernel that takes an optional gradient, a None check around the
  call (`gradient-not-none`), and compiled kernels built with `load_inline` whose C++ the linter
  reads: a dense reader, a writer through an `auto` pointer that honours strides, and one whose
  source is not in the project (`callee-does-not-write`);
- instances of a Function with a plain forward: in another file, of a subclass, through a
  module import, passed on as a value, imported inside a function (`no-instance`);
- torch imported only inside a function (a factory), only through `from torch... import`, or
  inside backward itself (`torch-in-scope`; the run also imports the module without torch);
- backward reading its variables through `locals()`, `vars()` or its frame
  (`locals-not-introspected`).

Each strategy returns a program: one module, or a project as `{file name: text}`.
"""

from __future__ import annotations

from textwrap import indent

from hypothesis import strategies as st

HEADER = "import torch\n\nFLAG = False\nMODE = 0\n"


def _lines(lines: list[str], depth: int = 2) -> str:
    return indent("\n".join(lines), "    " * depth) + "\n"


# --- decorators on backward (AGL101 / AGL102) ---------------------------------------------------
PASSTHROUGH = """\
import functools


def passthrough(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        return fn(ctx, *args)

    return wrapper
"""
FALLBACK = """\
def fallback(fn):
    def wrapper(ctx, *args):
        try:
            return fn(ctx, *args)
        except RuntimeError:
            return args[0] * 3

    return wrapper
"""
FACTORY = """\
def falling_back(*errors):
    def decorate(fn):
        def wrapper(ctx, *args):
            try:
                return fn(ctx, *args)
            except errors:
                return args[0] * 3

        return wrapper

    return decorate
"""
SUPPRESSING = """\
import contextlib


def quiet(fn):
    def wrapper(ctx, *args):
        with contextlib.suppress(RuntimeError):
            return fn(ctx, *args)
        return args[0] * 4

    return wrapper
"""
DELEGATING = """\
def _run(fn, ctx, args):
    try:
        return fn(ctx, *args)
    except RuntimeError:
        return args[0] * 5


def delegating(fn):
    def wrapper(ctx, *args):
        return _run(fn, ctx, args)

    return wrapper
"""
UNREADABLE = FALLBACK + "\n\ndef _make():\n    return fallback\n\n\nrescue = _make()\n"
# name -> (code the module gets, code `decos.py` gets, the decorator line)
DECORATORS: dict[str, tuple[str, str, str]] = {
    "none": ("", "", ""),
    "once_differentiable": (
        "from torch.autograd.function import once_differentiable\n",
        "",
        "@once_differentiable",
    ),
    "passthrough": (PASSTHROUGH, "", "@passthrough"),
    "fallback": (FALLBACK, "", "@fallback"),
    "factory": (FACTORY, "", "@falling_back(RuntimeError)"),
    "suppressing": (SUPPRESSING, "", "@quiet"),
    "delegating": (DELEGATING, "", "@delegating"),
    "unreadable": (UNREADABLE, "", "@rescue"),
    "passthrough in another file": ("from decos import passthrough\n", PASSTHROUGH, "@passthrough"),
    "fallback in another file": ("from decos import fallback\n", FALLBACK, "@fallback"),
}
CALLER = """

class Sub(Fn):
    @staticmethod
    def backward(ctx, g):
        try:
            return Fn.backward(ctx, g)
        except RuntimeError:
            return g * 3
"""


RECOMPUTE = """\
from torch.autograd import grad as agrad

FLAG = False
MODE = 0
{decorator_code}

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
{decorator_line}    def backward(ctx, g):
{body}"""


@st.composite
def decorated_backwards(draw: st.DrawFn) -> str | dict[str, str]:
    """A backward whose recomputation raises in training (AGL101, or AGL102 under no_grad),
    with a decorator on backward, or a subclass whose backward calls this one and falls back
    when it raises."""
    value = draw(st.sampled_from(["x * x", "x.sigmoid() * x"]))
    grad = draw(st.sampled_from(["torch.autograd.grad", "agrad"]))
    lines = ["(x,) = ctx.saved_tensors"]
    if draw(st.booleans()):
        lines.append(f"with torch.no_grad():\n    y = {value}")
    else:
        lines.append(f"y = {value}")
    lines.append(f"r = {grad}(y, x, g)[0]")
    lines.append("return " + draw(st.sampled_from(["r", "r + g", "g * 2 if MODE else r"])))
    name = draw(st.sampled_from(sorted(DECORATORS)))
    module_code, other_file, line = DECORATORS[name]
    program = (
        HEADER.split("\n", 1)[0]
        + "\n"
        + RECOMPUTE.format(
            decorator_code="\n" + module_code + "\n" if module_code else "\n",
            decorator_line=f"    {line}\n" if line else "",
            body=_lines(lines),
        )
    )
    if draw(st.booleans()):
        program += CALLER
    return {"generated.py": program, "decos.py": other_file} if other_file else program


# --- gradients that can be None, kernels whose C++ is read (AGL201 / AGL202) --------------------
CPP = """
#include <torch/extension.h>

torch::Tensor scale_bwd(torch::Tensor g, double s) {
  auto out = torch::empty_like(g);
  const float* in = g.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < g.numel(); ++i) o[i] = in[i] * s;
  return out;
}

torch::Tensor scale_opt(c10::optional<torch::Tensor> g, double s) {
  if (!g.has_value()) return torch::zeros({3, 4});
  auto out = torch::empty_like(*g);
  const float* in = g->data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < g->numel(); ++i) o[i] = in[i] * s;
  return out;
}

double scale_strided(torch::Tensor g, double s) {
  auto p = g.data_ptr<float>();
  for (int64_t i = 0; i < g.size(0); ++i)
    for (int64_t j = 0; j < g.size(1); ++j)
      p[i * g.stride(0) + j * g.stride(1)] *= s;
  return 0.0;
}
"""
INLINE = (
    "from torch.utils.cpp_extension import load_inline\n\n"
    f'SOURCE = """{CPP}"""\n'
    'ext = load_inline(name="agl_ext", cpp_sources=[SOURCE], '
    'functions=["scale_bwd", "scale_opt", "scale_strided"])\n'
)
OUTPUTS = {"one": "x * 2", "two": "x * 2, x * 3", "non-tensor": "x * 2, 3"}
KERNELS = ["ext.scale_bwd", "ext.scale_opt", "ext.scale_strided", "fake_ext.opaque_bwd"]


@st.composite
def nullable_gradients(draw: st.DrawFn) -> str:
    """A backward handing a gradient that may be None to a compiled kernel."""
    outputs = draw(st.sampled_from(sorted(OUTPUTS)))
    forward = []
    if draw(st.booleans()):
        forward.append("ctx.set_materialize_grads(False)")
    forward.append(f"return {OUTPUTS[outputs]}")
    style = draw(st.sampled_from(["named", "star"]))
    lines: list[str] = []
    if style == "named":
        params = "ctx, g" if outputs == "one" else "ctx, g, g2"
        first = "g"
        arg = draw(st.sampled_from(["g"] if outputs == "one" else ["g", "g2"]))
    else:
        params = "ctx, *grads"
        first = "grads[0]"
        arg = draw(st.sampled_from(["grads[0]"] if outputs == "one" else ["grads[0]", "grads[1]"]))
        if draw(st.booleans()):
            lines.append(f"h = {arg}")
            arg = "h"
    kernel = draw(st.sampled_from(KERNELS))
    call = f"{kernel}({arg}, 2.0)"
    if kernel.endswith("scale_strided"):
        lines.append(f"done = {call}")  # kept: a call for its effect alone reads as a writer
        result = first
    else:
        lines.append(f"r = {call}")
        result = "r"
    if draw(st.booleans()):  # a None check dominates the call
        guarded = "\n".join(lines)
        lines = [
            f"r = {first} * 1.0",
            f"if {arg} is not None:\n" + indent(guarded, "    "),
        ]
        result = "r" if result == "r" else first
    lines.append(f"return {result}")
    body = (
        "\n\nclass Fn(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n" + _lines(forward) + "\n"
        f"    @staticmethod\n    def backward({params}):\n" + _lines(lines)
    )
    return HEADER + "import fake_ext\n" + INLINE + body


# --- instances of a Function with a plain method (AGL402) ---------------------------------------
ONES = "torch.ones(3, 4)"
USERS = {
    "class uses only": (
        f"from generated import Fn\n\n\ndef use():\n"
        f"    return Fn.apply({ONES}.requires_grad_()).sum(), Fn.forward(None, {ONES})\n"
    ),
    "instance": f"from generated import Fn\n\n\ndef use():\n    helper = Fn()\n"
    f"    return helper.forward({ONES})\n",
    "subclass instance": "from generated import Fn\n\n\nclass Sub2(Fn):\n    pass\n\n\n"
    f"def use():\n    return Sub2().forward({ONES})\n",
    "module import": f"import generated\n\n\ndef use():\n    return generated.Fn().forward({ONES})\n",
    "passed as a value": "from generated import Fn\n\n\ndef make(cls):\n"
    f"    return cls().forward({ONES})\n\n\ndef use():\n    return make(Fn)\n",
    "imported in a function": "def use():\n    from generated import Fn as F\n\n"
    f"    return F().forward({ONES})\n",
}


@st.composite
def instantiated_functions(draw: st.DrawFn) -> dict[str, str]:
    """A Function with a plain forward or backward, and code in another file (or this one)
    that uses it through the class, or makes an instance of it or of a subclass."""
    static_forward = draw(st.booleans())
    forward = "    def forward(ctx, x):\n        return x * 2\n"
    if static_forward:
        forward = "    @staticmethod\n" + forward
    main = (
        HEADER + "\n\nclass Fn(torch.autograd.Function):\n" + forward + "\n"
        "    def backward(ctx, g):\n        return g * 2\n"
    )
    here = draw(st.sampled_from(["nothing", "subclass instance here"]))
    if here != "nothing":
        main += f"\n\nclass Sub(Fn):\n    pass\n\n\ndef use():\n    return Sub().forward({ONES})\n"
    user = draw(st.sampled_from(sorted(USERS)))
    return {"generated.py": main, "user.py": "import torch\n" + USERS[user]}


# --- torch imported lazily (AGL101 / AGL202) ----------------------------------------------------
LAZY_BODY = """\
class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
{body}
"""
GRAPHLESS = ["(x,) = ctx.saved_tensors", "y = x * x", "return torch.autograd.grad(y, x, g)[0] * 2"]
WRITER = ["fake_ext.scale_(g, 2.0)", "return g"]


@st.composite
def lazy_torch(draw: st.DrawFn) -> str:
    """A module that gets torch inside a function (a factory building the Function, or
    backward itself), or only through `from torch... import`."""
    lines = list(draw(st.sampled_from([GRAPHLESS, WRITER])))
    where = draw(
        st.sampled_from(
            [
                "factory",
                "factory, import after the class",
                "factory, import under an if",
                "in backward",
                "from-import only",
            ]
        )
    )
    if where == "in backward":
        lines = ["import torch", *lines]  # a local of backward: the factory's is shadowed
    body = LAZY_BODY.format(body=_lines(lines))
    if where == "from-import only":
        return (
            '"""Only a from-import of torch."""\nfrom torch.autograd import Function, grad\n'
            "import fake_ext\n\nFLAG = False\nMODE = 0\n\n\n"
            + body.replace("torch.autograd.Function", "Function").replace(
                "torch.autograd.grad", "grad"
            )
        )
    inner = indent(body, "    ")
    if where == "factory, import after the class":
        head, tail = "    torch = __import__('torch')\n", "\n    import torch\n"
    elif where == "factory, import under an if":
        head, tail = "    if True:\n        import torch\n", ""
    else:
        head, tail = "    import torch\n", ""
    factory = "def build():\n" + head + "\n" + inner + tail + "\n    return Fn\n"
    return (
        '"""Torch only inside a function."""\nimport fake_ext\n\nFLAG = False\nMODE = 0\n\n\n'
        + factory
    )


# --- backward reading its own variables (AGL406 / AGL202) ---------------------------------------
INTROSPECTION = {
    "locals": "frame = locals()",
    "vars": "frame = vars()",
    "frame": "frame = sys._getframe().f_locals",
    "a dict by name": "frame = {'g': g}",
}


@st.composite
def introspecting_backwards(draw: st.DrawFn) -> str:
    """A backward that writes into its gradient (or hands it to a writing kernel) and reads
    its variables through `locals()`, `vars()` or its frame, before or after the write."""
    write = draw(st.sampled_from(["g.mul_(2)", "g *= 2", "fake_ext.scale_(g, 2.0)"]))
    look = INTROSPECTION[draw(st.sampled_from(sorted(INTROSPECTION)))]
    lines = [look, write] if draw(st.booleans()) else [write, look]
    lines.append(draw(st.sampled_from(["return frame['g']", "return frame['g'] + g", "return g"])))
    body = (
        "\n\nclass Fn(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n" + _lines(lines)
    )
    return HEADER + "import sys\n\nimport fake_ext\n" + body


def program_text(program: str | dict[str, str]) -> str:
    """A program as one text, for a failure message."""
    if isinstance(program, str):
        return program
    return "".join(f"# --- {name}\n{text}" for name, text in program.items())


__all__ = [
    "decorated_backwards",
    "instantiated_functions",
    "introspecting_backwards",
    "lazy_torch",
    "nullable_gradients",
    "program_text",
]
