"""Generated programs that exercise each safe fix, with the hazards that break naive rewrites:
operator precedence, conditional expressions, dtype promotion, views and aliases taken before
the write, in-place methods without an out-of-place twin, None gradients, control flow around
the call, try/except, early returns, in-place parameter updates, helpers that enable grad
themselves, shadowed and conditional torch imports, and instances of Function classes.

Every program is a module; switches read at run time (`FLAG`, `MODE`) let one program take
several paths, and `W` is a leaf parameter some programs update in place.
"""

from __future__ import annotations

from textwrap import indent

from hypothesis import strategies as st

# How the module gets torch, and the name its code then uses for it.
HEADERS = {
    "plain": ("import torch\n", "torch"),
    "alias": ("import torch as t\n", "t"),
    "guarded": ("try:\n    import torch\nexcept ImportError:\n    torch = None\n", "torch"),
    "future": (
        '"""Doc."""\nfrom __future__ import annotations; import math\nimport torch\n',
        "torch",
    ),
}
PRELUDE = """\
from torch.autograd import grad as agrad

FLAG = False
MODE = 0
W = {T}.ones(3, 4, requires_grad=True)


def helper(v):
    with {T}.enable_grad():
        return v * v
"""


def _module(header: str, body: str) -> str:
    text, name = HEADERS[header]
    return text + PRELUDE.replace("{T}", name) + "\n\n" + body.replace("{T}", name)


def _block(lines: list[str], depth: int = 2) -> str:
    return indent("\n".join(lines), "    " * depth) + "\n"


# --- AGL406: backward writes into its gradient -----------------------------------------------
RHS = [
    "ctx.a + ctx.b",
    "ctx.a * ctx.b",
    "ctx.a - ctx.b",
    "ctx.a / ctx.b",
    "ctx.a if FLAG else 1.0",
    "-ctx.a",
    "ctx.a ** 2",
    "ctx.s64",
    "ctx.n",
    "2",
    "ctx.a or ctx.b",
    "(ctx.a + 1)",
]
INPLACE = [
    "{v} *= {rhs}",
    "{v} /= {rhs}",
    "{v} += {rhs}",
    "{v} -= {rhs}",
    "{v}.mul_({rhs})",
    "{v}.div_({rhs})",
    "{v}.add_({rhs}, alpha=2)",
    "{v}.zero_()",
    "{v}.fill_(1.5)",
    "{v}.copy_({T}.ones_like({v}))",
    "{v}[0] = 0.5",
    "{v}.clamp_(min=0)",
]
ALIASES = [
    "h = g.view(-1)",
    "h = g",
    "h = g.t()",
    "h = g[0]",
    "h = g.reshape(3, 4)",
    "h = g.data",
    # copies only when the gradient is not contiguous: the stride-0 one of `out.sum()` is not,
    # its private copy is (the copy-first fix is unsafe there)
    "h = g.contiguous()",
    "h = g.reshape(-1)",
]
RETURNS = ["g", "g * 1.0", "g.clone()", "h.reshape(3, 4)", "g + h.reshape(3, 4)"]


@st.composite
def grad_writes(draw: st.DrawFn) -> str:
    """A Function whose backward changes its gradient in place (AGL406)."""
    header = draw(st.sampled_from(sorted(HEADERS)))
    two_outputs = draw(st.booleans())
    materialize = draw(st.booleans())
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(
            draw(
                st.sampled_from(
                    [
                        "n = g.numel()",
                        "if g is None:\n    return None",
                        # a branch on the layout: a dense copy takes the other one
                        "if g.stride(0) == 0:\n    return g * 3",
                    ]
                )
            )
        )
    alias = draw(st.booleans())
    if alias:
        lines.append(draw(st.sampled_from(ALIASES)))
    target = "h" if alias and draw(st.booleans()) else "g"
    write = draw(st.sampled_from(INPLACE)).format(v=target, rhs=draw(st.sampled_from(RHS)), T="{T}")
    flow = draw(st.sampled_from(["plain", "if", "if-else", "for", "second-grad"]))
    if flow == "plain":
        lines.append(write)
    elif flow == "if":
        lines.append("if FLAG:\n" + indent(write, "    "))
    elif flow == "if-else":
        other = draw(st.sampled_from(INPLACE)).format(v="g", rhs="2", T="{T}")
        lines.append(
            "if MODE == 1:\n" + indent(write, "    ") + "\nelse:\n" + indent(other, "    ")
        )
    elif flow == "for":
        lines.append("for _ in range(2):\n" + indent(write, "    "))
    else:  # the gradient of the non-tensor output: None at run time
        lines.append("k = g2\nif k is not None:\n    k.mul_(2)")
        lines.append(write)
    returns = [r for r in RETURNS if alias or "h" not in r]
    lines.append("return " + draw(st.sampled_from(returns)))
    params = "ctx, g, g2" if two_outputs or flow == "second-grad" else "ctx, g"
    output = "x * 2, 3" if params.endswith("g2") else "x * 2"
    forward = [
        "ctx.a = 2.0",
        "ctx.b = 3.0",
        "ctx.n = 4",
        "ctx.s64 = {T}.full((3, 4), 1.5, dtype={T}.float64)",
    ]
    if not materialize:
        forward.append("ctx.set_materialize_grads(False)")
    forward.append(f"return {output}")
    body = (
        "class Fn({T}.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n" + _block(forward) + "\n"
        f"    @staticmethod\n    def backward({params}):\n" + _block(lines)
    )
    return _module(header, body)


# --- AGL101 / AGL102: autograd.grad on a value without a graph --------------------------------
VALUES = ["x * x", "x.sigmoid() * x", "helper(x)", "x", "(x * 2).sum()"]
GRADS = ["{T}.autograd.grad", "agrad"]
BETWEEN = [
    "z = x * 3",
    "W.mul_(1.0)",
    "if MODE == 1:\n    return g * 5",
    "with {T}.no_grad():\n    W.mul_(1.0)",
    "t = 0.5",  # shadows `import torch as t` in this function
]


def _call(draw: st.DrawFn) -> str:
    grad = draw(st.sampled_from(GRADS))
    return f"{grad}(y, x, g)[0]"


def _use(draw: st.DrawFn, call: str) -> list[str]:
    form = draw(st.sampled_from(["plain", "if", "ifexp", "try", "bare"]))
    if form == "plain":
        return [f"r = {call}"]
    if form == "if":
        return [f"if FLAG:\n    r = {call}\nelse:\n    r = g * 2"]
    if form == "ifexp":
        return [f"r = {call} if FLAG else g * 2"]
    if form == "try":
        return [f"try:\n    r = {call}\nexcept RuntimeError:\n    r = g * 3"]
    return [f"r = g * 1.0\n{call}"]


@st.composite
def graphless_grads(draw: st.DrawFn) -> str:
    """A Function whose backward differentiates a value built with grad mode off (AGL101), or
    under `no_grad` (AGL102), in the shapes real code gives it."""
    header = draw(st.sampled_from(sorted(HEADERS)))
    lines = ["(x,) = ctx.saved_tensors"]
    value = draw(st.sampled_from(VALUES))
    call = _call(draw)
    between = draw(st.lists(st.sampled_from(BETWEEN), max_size=2))
    where = draw(st.sampled_from(["default", "inside", "after"]))
    if where == "default":
        lines.append(f"y = {value}")
        lines += between
        lines += _use(draw, call)
    elif where == "inside":  # everything under no_grad, the fused update included
        inner = [f"y = {value}", *between, *_use(draw, call)]
        lines.append("with {T}.no_grad():\n" + indent("\n".join(inner), "    "))
    else:  # the value under no_grad, the call after it
        inner = [f"y = {value}", *between]
        lines.append("with {T}.no_grad():\n" + indent("\n".join(inner), "    "))
        lines += _use(draw, call)
    lines.append("return " + draw(st.sampled_from(["r", "r + g", "g * 2 if MODE else r"])))
    body = (
        "class Fn({T}.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n        return x * x\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n" + _block(lines)
    )
    return _module(header, body)


# --- AGL201 / AGL202: gradients handed to compiled code ---------------------------------------
KERNEL_ARGS = ["g", "h", "g.t()", "g[0:2]", "g.view(-1)"]


@st.composite
def kernel_calls(draw: st.DrawFn) -> str:
    """A Function whose backward passes its gradient to a (stand-in) compiled extension that
    reads it or writes into it."""
    header = draw(st.sampled_from(sorted(HEADERS)))
    lines: list[str] = []
    alias = draw(st.sampled_from(["", "h = g.t()", "h = g.view(-1)", "h = g"]))
    if alias:
        lines.append(alias)
    args = [a for a in KERNEL_ARGS if alias or a != "h"]
    arg = draw(st.sampled_from(args))
    kind = draw(st.sampled_from(["read", "write", "write-discarded", "into"]))
    if kind == "read":
        lines.append(f"r = fake_ext.scale_bwd({arg}, 2.0)")
        lines.append(
            "return " + draw(st.sampled_from(["r.reshape(3, 4)", "r.t().reshape(3, 4)", "r"]))
        )
    elif kind == "write":
        lines.append(f"r = fake_ext.scale_({arg}, 2.0)")
        lines.append("return " + draw(st.sampled_from(["g", "r.reshape(3, 4)", "g * 1.0"])))
    elif kind == "write-discarded":
        lines.append(f"fake_ext.scale_({arg}, 2.0)")
        lines.append(
            "return "
            + draw(st.sampled_from(["g", "g + 0.0"] + (["h.reshape(3, 4)"] if alias else [])))
        )
    else:
        lines.append("out = {T}.zeros(3, 4)")
        lines.append(f"fake_ext.add_into_(out, {arg})")
        lines.append("return out")
    if draw(st.booleans()):
        lines.insert(0, "if FLAG:\n    g = g * 1.0")
    body = (
        "import fake_ext\n\n\n"
        "class Fn({T}.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n" + _block(lines)
    )
    return _module(header, body)


# --- AGL204: `.view(...)` of the incoming gradient --------------------------------------------
VIEW_SOURCES = ["g", "h"]
VIEW_ALIASES = ["h = g", "h = g * 2.0", "h = g.t()", "h = g[0:3]", "h = g.clone()", "h = g.data"]
VIEWS = [
    "v = {src}.view(-1)",
    "v = {src}.view(12)",
    "v = {src}.view(2, -1)",
    "v = {src}.view(-1, 2).view(12)",
    "v = {src}.view_as(W.reshape(-1))",
    "v = {src}.view(*{src}.shape[:-1], 2, -1)",
    "v = {src}.view(1, *{src}.shape)",
]
VIEW_USES = [
    "r = v * 3",
    "r = v.flip(0)",
    "r = v.sum() * v",
    # writes into the result: through a view of the gradient where `view` works, into
    # reshape's copy where it raised (B1.10): the fix is unsafe
    "v.mul_(2)\nr = v",
    "v[0] = 0.5\nr = v * 1.0",
    "w = v[1:]\nw.zero_()\nr = v",
    "{T}.mul(v, 2, out=v)\nr = v",
]
VIEW_RETURNS = ["r.reshape(3, 4)", "g * 1.0 + r.reshape(3, 4)", "g"]


@st.composite
def gradient_views(draw: st.DrawFn) -> str:
    """A Function whose backward views its gradient, or an alias of it, into another shape
    (AGL204), and uses the view: read, written in place, or returned."""
    header = draw(st.sampled_from(sorted(HEADERS)))
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["if FLAG:\n    g = g * 1.0", "n = g.numel()"])))
    alias = draw(st.booleans())
    if alias:
        lines.append(draw(st.sampled_from(VIEW_ALIASES)))
    src = draw(st.sampled_from(VIEW_SOURCES if alias else ["g"]))
    lines.append(draw(st.sampled_from(VIEWS)).format(src=src))
    use = draw(st.sampled_from(VIEW_USES))
    if draw(st.booleans()):
        use = "if MODE == 1:\n" + indent(use, "    ") + "\nelse:\n    r = v * 2"
    lines.append(use)
    lines.append("return " + draw(st.sampled_from(VIEW_RETURNS)))
    body = (
        "class Fn({T}.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n" + _block(lines)
    )
    return _module(header, body)


# --- AGL402: Function methods that are not static ---------------------------------------------
USES = [
    "return Fn.apply({T}.ones(3, 4, requires_grad=True)).sum()",
    "return Fn.forward(None, {T}.ones(3, 4))",
    "return Fn().forward({T}.ones(3, 4))",
    "f = Fn\n    return f.forward(None, {T}.ones(3, 4))",
]


@st.composite
def plain_methods(draw: st.DrawFn) -> str:
    header = draw(st.sampled_from(sorted(HEADERS)))
    first = draw(st.sampled_from(["ctx", "self"]))
    static_forward = draw(st.booleans())
    forward = f"    def forward({first}, x):\n        return x * 2\n"
    backward = f"    def backward({first}, g):\n        return g * 2\n"
    if static_forward:
        forward = "    @staticmethod\n" + forward
    body = (
        "class Fn({T}.autograd.Function):\n" + forward + "\n" + backward + "\n\n"
        "def use():\n    " + draw(st.sampled_from(USES)) + "\n"
    )
    return _module(header, body)


# --- AGL303: a Tensor subclass's __torch_function__ as a plain method --------------------------
HOOK_BODIES = [
    "if kwargs is None:\n    kwargs = {}\nreturn super().__torch_function__(func, types, args, kwargs)",
    "with {T}._C.DisableTorchFunctionSubclass():\n    return func(*args, **(kwargs or {}))",
    "tag = getattr(cls, 'tag', 'none')\nreturn super().__torch_function__(func, types, args, kwargs or {})",
    "if type(cls) is T:\n    return func(*args, **(kwargs or {}))\n"
    "return super().__torch_function__(func, types, args, kwargs or {})",
    "if FLAG:\n    return super().__torch_function__(func, types, args, kwargs or {})\n"
    "return {T}._C._disabled_torch_function_impl(func, types, args, kwargs or {})",
]


@st.composite
def plain_hooks(draw: st.DrawFn) -> str:
    header = draw(st.sampled_from(sorted(HEADERS)))
    hook = draw(st.sampled_from(HOOK_BODIES))
    body = (
        "class T({T}.Tensor):\n    tag = 'class'\n\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        + _block(hook.split("\n"))
    )
    return _module(header, body)
