"""Generators for the Function contract rules that are about methods and ctx: non-static
methods (AGL402), tensors kept on ctx (AGL403), save_for_backward misuse (AGL404), forward
changing an input (AGL405), forward called without apply (AGL407), backward consuming ctx state
(AGL408), backward changing a saved tensor (AGL409)."""

from __future__ import annotations

from ..forms import MATHS, Parts, Sig, block, pick_sig, place, reference, render
from ..program import Chooser, Program

MUL = MATHS["mul"]


def _program(family: str, files: dict[str, str], ref: str, shapes: list[list[int]]) -> Program:
    return Program(family=family, files=files, reference=ref, inputs=shapes, function="Fn")


def gen_402(c: Chooser) -> Program:
    """forward / backward / setup_context without @staticmethod (D2.1-D2.3)."""
    sig = pick_sig(c, MUL.inputs, ["plain", "default-omitted", "setup", "star"])
    which = c.pick(
        "non-static",
        ["none", "forward", "backward", "both", "forward-classmethod", "setup_context"],
    )
    first = "self" if c.flag("first.self") else "ctx"
    grads = {"x": "g * w", "w": "g * x"}
    if sig.has_scale:
        grads = {k: f"({v}) * ctx.scale" for k, v in grads.items()}
    parts = Parts(
        sig=sig,
        forward=[f"out = {sig.scaled(MUL.out)}"],
        ctx_lines=["ctx.save_for_backward(x, w)"]
        + (["ctx.scale = scale"] if sig.has_scale else []),
        backward=[
            "x, w = ctx.saved_tensors",
            "return " + ", ".join(grads.get(s, "None") for s in sig.slots()),
        ],
    )
    if which in ("forward", "both"):
        parts.forward_decorators = []
    if which in ("backward", "both"):
        parts.backward_decorators = []
    if which == "forward-classmethod":
        parts.forward_decorators = ["@classmethod"]
        parts.forward_first = "cls, "
    files = render(c, parts)
    if first == "self":  # the legacy spelling of a non-static method's first parameter
        for path, text in files.items():
            files[path] = (
                text.replace("(ctx, ", "(self, ").replace("ctx.", "self.")
                if which in ("forward", "backward", "both")
                else text
            )
    if which == "setup_context":
        for path, text in files.items():
            files[path] = text.replace(
                "    @staticmethod\n    def setup_context", "    def setup_context"
            )
    return _program("AGL402", files, reference(sig, MUL.out), [[3], [3]])


STASHES = [
    "save-for-backward",  # the right way
    "tensor-read",  # ctx.w = w, backward reads its values
    "tensor-shape-only",  # ctx.w = w, backward reads only its shape
    "non-tensor",  # ctx.n = w.numel(), ctx.shape = w.shape
    "clone",  # ctx.w = w.clone(): a private copy
    "detach",  # ctx.w = w.detach(): the same storage
    "list",  # ctx.ws = [w]
    "helper",  # a helper of the module sets ctx.w
    "output",  # ctx.out = out, backward reads it
]


def gen_403(c: Chooser) -> Program:
    """Tensors kept as ctx attributes, changed in place between forward and backward (D3.1)."""
    stash = c.pick("stash", STASHES)
    sig = pick_sig(c, MUL.inputs, ["plain", "setup"])
    helpers: list[str] = []
    if stash == "output":
        sig = Sig("setup" if sig.setup else "plain", ("x",))
        parts = Parts(
            sig=sig,
            forward=["out = torch.exp(x)"],
            ctx_lines=["ctx.out = {OUT}"],
            backward=["return g * ctx.out"],
        )
        return _program(
            "AGL403", render(c, parts), "def reference(x):\n    return torch.exp(x)\n", [[3]]
        )
    ctx_lines = ["ctx.save_for_backward(x)"]
    read_w = "ctx.w"
    if stash == "save-for-backward":
        ctx_lines = ["ctx.save_for_backward(x, w)"]
        pre = ["x, w = ctx.saved_tensors"]
        read_w = "w"
    else:
        pre = ["(x,) = ctx.saved_tensors"]
        if stash in ("tensor-read", "tensor-shape-only"):
            ctx_lines.append("ctx.w = w")
        elif stash == "non-tensor":
            ctx_lines += ["ctx.n = w.numel()", "ctx.shape = w.shape"]
            ctx_lines.append("ctx.w = w.detach().clone()")  # the values, copied
        elif stash == "clone":
            ctx_lines.append("ctx.w = w.clone()")
        elif stash == "detach":
            ctx_lines.append("ctx.w = w.detach()")
        elif stash == "list":
            ctx_lines.append("ctx.ws = [w]")
            read_w = "ctx.ws[0]"
        else:  # helper
            helpers.append(
                "def _keep(ctx, name, value):\n    setattr(ctx, name, value)\n    ctx.kept = value"
            )
            ctx_lines.append("_keep(ctx, 'w', w)")
    if c.flag("read.alias"):
        pre.append(f"w_kept = {read_w}")
        read_w = "w_kept"
    backward = pre + [f"return g * {read_w}, g * x"]
    ref = "def reference(x, w):\n    return x * w\n"
    forward = ["out = x * w"]
    if stash == "tensor-shape-only":  # out = 2x + w: backward needs only w's shape
        forward = ["out = x * 2.0 + w"]
        backward = pre + [f"return g * 2.0, g * torch.ones({read_w}.shape, dtype=g.dtype)"]
        ref = "def reference(x, w):\n    return x * 2.0 + w\n"
    parts = Parts(sig=sig, forward=forward, ctx_lines=ctx_lines, backward=backward)
    parts.forward_helpers += helpers
    return _program("AGL403", render(c, parts), ref, [[3], [3]])


SAVES = [
    "tensors",
    "with-none",
    "int-literal",
    "shape",
    "size-call",
    "len",
    "float-param",
    "twice-replacing",
    "twice-superset",
    "twice-in-branches",
    "helper-twice",
]


def gen_404(c: Chooser) -> Program:
    """save_for_backward given non-tensors, or called twice (D4.1-D4.3)."""
    save = c.pick("save", SAVES)
    sig = pick_sig(c, MUL.inputs, ["plain", "setup", "default-omitted", "default-passed"])
    lines: list[str] = []
    helpers: list[str] = []
    unpack = "x, w = ctx.saved_tensors"
    if save == "tensors":
        lines = ["ctx.save_for_backward(x, w)"]
    elif save == "with-none":
        lines = ["ctx.save_for_backward(x, w, None)"]
        unpack = "x, w, _ = ctx.saved_tensors"
    elif save == "int-literal":
        lines = ["ctx.save_for_backward(x, w, 3)"]
        unpack = "x, w, _ = ctx.saved_tensors"
    elif save == "shape":
        lines = ["ctx.save_for_backward(x, w, x.shape)"]
        unpack = "x, w, _ = ctx.saved_tensors"
    elif save == "size-call":
        lines = ["ctx.save_for_backward(x, w, w.size(0))"]
        unpack = "x, w, _ = ctx.saved_tensors"
    elif save == "len":
        lines = ["ctx.save_for_backward(x, w, len(w))"]
        unpack = "x, w, _ = ctx.saved_tensors"
    elif save == "float-param":
        if sig.has_scale:
            lines = ["ctx.save_for_backward(x, w, scale)"]
            unpack = "x, w, _ = ctx.saved_tensors"
        else:
            lines = ["ctx.save_for_backward(x, w, 1.5)"]
            unpack = "x, w, _ = ctx.saved_tensors"
    elif save == "twice-replacing":
        lines = ["ctx.save_for_backward(x)", "ctx.save_for_backward(w)"]
    elif save == "twice-superset":
        lines = ["ctx.save_for_backward(x)", "ctx.save_for_backward(x, w)"]
    elif save == "twice-in-branches":
        lines = [
            "if x.dim() > 5:",
            "    ctx.save_for_backward(w, x)",
            "else:",
            "    ctx.save_for_backward(x, w)",
        ]
    else:
        helpers.append(
            "def _save_all(ctx, *tensors):\n    for t in tensors:\n        ctx.save_for_backward(t)"
        )
        lines = ["_save_all(ctx, x, w)"]
    if sig.has_scale:
        lines.append("ctx.scale = scale")
        grads = {"x": "g * w * ctx.scale", "w": "g * x * ctx.scale"}
    else:
        grads = {"x": "g * w", "w": "g * x"}
    backward = [unpack, "return " + ", ".join(grads.get(s, "None") for s in sig.slots())]
    parts = Parts(
        sig=sig, forward=[f"out = {sig.scaled(MUL.out)}"], ctx_lines=lines, backward=backward
    )
    parts.forward_helpers += helpers
    return _program("AGL404", render(c, parts), reference(sig, MUL.out), [[3], [3]])


MUTATIONS = [
    "none",
    "mul_",
    "imul",
    "setitem",
    "copy_",
    "add_",
    "view-mul_",
    "mark_dirty",
    "clone-first",
    "advanced-index",
    "double-noop",  # .double() of a float64 input: the same tensor
    "float-copy",  # .float() of a float64 input: a copy
]


def gen_405(c: Chooser) -> Program:
    """forward changing an input in place, with and without mark_dirty (D5.1, D5.2)."""
    mutation = c.pick("mutation", MUTATIONS)
    parts = Parts(sig=Sig("plain", ("x",)), forward=[], ctx_lines=[], backward=["return g * 2.0"])
    stmt = {
        "mul_": ["{t}.mul_(2.0)"],
        "imul": ["{t} *= 2.0"],
        "setitem": ["{t}[0] = 0.5"],
        "copy_": ["{t}.copy_(torch.full_like({t}, 0.5))"],
        "add_": ["{t}.add_(1.0)"],
        "view-mul_": ["{t}.view(-1).mul_(2.0)"],
        "advanced-index": ["{t}[[0, 1]].mul_(2.0)"],
        "double-noop": ["{t}.double().mul_(2.0)"],
        "float-copy": ["{t}.float().mul_(2.0)"],
    }
    if mutation == "none":
        parts.forward = ["out = x * 2.0"]
        ref_body = ["return x * 2.0"]
    elif mutation == "mark_dirty":
        parts.forward = ["x.mul_(2.0)", "ctx.mark_dirty(x)"]
        parts.returns = "x"
        parts.backward = ["return g * 2.0"]
        ref_body = ["x.mul_(2.0)", "return x"]
    elif mutation == "clone-first":
        parts.forward = ["x = x.clone()", "x.mul_(2.0)", "out = x * 1.0"]
        ref_body = ["return x * 2.0"]
    else:
        parts.forward = ["out = x * 2.0"] + place(
            c, "mutation", stmt[mutation], "x", parts, into="forward"
        )
        ref_body = ["out = x * 2.0", *(s.replace("{t}", "x") for s in stmt[mutation]), "return out"]
    files = render(c, parts, ["single", "base-other-module", "backward-in-base"])
    return _program("AGL405", files, "def reference(x):\n" + block(ref_body, 1), [[4]])


CALLS = [
    "apply",
    "forward-none",
    "forward-no-ctx",
    "instance-call",
    "helper-from-other-function",  # Base.forward(ctx, ...) inside another Function: fine
    "alias-forward",  # f = Fn.forward; f(None, x)
]


def gen_407(c: Chooser) -> Program:
    """forward called without apply (D7.1-D7.3), on a Function whose backward autograd could
    not derive (a straight-through estimator) or could."""
    call = c.pick("call", CALLS)
    math = c.pick("math", ["straight-through", "differentiable", "uses-ctx"])
    if math == "straight-through":
        forward = ["out = torch.round(x * 4.0) / 4.0"]
        ctx_lines: list[str] = []
        backward = ["return g"]
        ref = "def reference(x):\n    return x + (torch.round(x * 4.0) / 4.0 - x).detach()\n"
    elif math == "differentiable":  # autograd derives the same backward from forward
        forward = ["out = x * 2.0"]
        ctx_lines = []
        backward = ["return g * 2.0"]
        ref = "def reference(x):\n    return x * 2.0\n"
    else:
        forward = ["out = x * x"]
        ctx_lines = ["ctx.save_for_backward(x)"]
        backward = ["(x,) = ctx.saved_tensors", "return g * 2.0 * x"]
        ref = "def reference(x):\n    return x * x\n"
    model = {
        "apply": ["return Fn.apply(x)"],
        "forward-none": ["return Fn.forward(None, x)"],
        "forward-no-ctx": ["return Fn.forward(x)"],
        "instance-call": ["return Fn()(x)"],
        "helper-from-other-function": ["return Outer.apply(x)"],
        "alias-forward": ["f = Fn.forward", "return f(None, x)"],
    }[call]
    extra = []
    if call == "helper-from-other-function":
        extra.append(
            "class Outer(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
            "        return Fn.forward(ctx, x)\n\n    @staticmethod\n    def backward(ctx, g):\n"
            "        return Fn.backward(ctx, g)"
        )
    parts = Parts(
        sig=Sig("plain", ("x",)),
        forward=forward,
        ctx_lines=ctx_lines,
        backward=backward,
        model=model,
        extra_main=extra,
    )
    files = render(
        c, parts, ["single", "base-other-module"], ["main", "ops-relative", "ops-absolute"]
    )
    return _program("AGL407", files, ref, [[4]])


CONSUMES = [
    "read-only",
    "del-attr",
    "pop-key",
    "set-none-after-read",
    "clear-holder",
    "stack-pop",
    "alias-clear",
    "copy-then-pop",
    "del-local",
]


def gen_408(c: Chooser) -> Program:
    """backward consuming ctx state, then a second backward through a retained graph (D8.1-D8.3)."""
    consume = c.pick("consume", CONSUMES)
    ctx_lines = [
        "ctx.save_for_backward(x, w)",
        "ctx.scale = 2.0",
        "ctx.cache = {'k': 2.0}",
        "ctx.stack = [2.0]",
    ]
    helpers = ["class Holder:\n    def __init__(self, value):\n        self.value = value"]
    ctx_lines.append("ctx.holder = Holder(2.0)")
    read, stmt = {
        "read-only": ("s = ctx.scale", []),
        "del-attr": ("s = ctx.scale", ["del ctx.scale"]),
        "pop-key": ("s = ctx.cache.pop('k')", []),
        "set-none-after-read": ("s = ctx.scale", ["ctx.scale = None"]),
        "clear-holder": ("s = ctx.holder.value", ["ctx.holder.value = None"]),
        "stack-pop": ("s = ctx.stack.pop()", []),
        "alias-clear": ("cache = ctx.cache\ns = cache['k']", ["cache.clear()"]),
        "copy-then-pop": ("cache = dict(ctx.cache)\ns = cache.pop('k')", []),
        "del-local": ("s = ctx.scale\nx_seen = x", ["del x_seen"]),
    }[consume]
    where = c.pick("where", ["inline", "helper", "helper-2-deep"])
    body = ["x, w = ctx.saved_tensors"]
    grads = "g * w * s, g * x * s"
    logic = read.split("\n") + stmt
    if where == "inline":
        body += logic
    else:
        helper = "def _take(ctx, x):\n" + block(logic + ["return s"], 1)
        if where == "helper-2-deep":
            helper = (
                helper.replace("def _take(", "def _take_inner(")
                + "\n\ndef _take(ctx, x):\n    return _take_inner(ctx, x)"
            )
        helpers.append(helper)
        body.append("s = _take(ctx, x)")
    body.append("return " + grads)
    parts = Parts(
        sig=Sig("plain", MUL.inputs),
        forward=["out = x * w * 2.0"],
        ctx_lines=ctx_lines,
        backward=body,
        backward_helpers=helpers,
    )
    parts.forward_helpers.append(helpers[0])
    files = render(c, parts, ["single", "base-other-module", "backward-in-base"])
    return _program("AGL408", files, "def reference(x, w):\n    return x * w * 2.0\n", [[3], [3]])


WRITES = [
    "none",
    "saved-input",
    "saved-input-view",
    "saved-output",
    "saved-intermediate",
    "ctx-attribute",
    "clone-first",
    "detached-input",
]


def gen_409(c: Chooser) -> Program:
    """backward changing in place, after using it, a tensor it saved or keeps on ctx
    (D9.1-D9.4): scratch space reused."""
    write = c.pick("write", WRITES)
    parts = Parts(
        sig=Sig("plain", MUL.inputs),
        forward=["out = x * w"],
        ctx_lines=["ctx.save_for_backward(x, w)"],
        backward=[],
    )
    body = ["x, w = ctx.saved_tensors", "grad_x, grad_w = g * w, g * x"]
    ref = "def reference(x, w):\n    return x * w\n"
    stmt = ["{t}.mul_(2.0)"]
    if write == "none":
        pass
    elif write in ("saved-input", "saved-input-view", "clone-first", "detached-input"):
        target = {
            "saved-input": "x",
            "saved-input-view": "x.view(-1)",
            "clone-first": "xc",
            "detached-input": "xd",
        }[write]
        if write == "clone-first":
            body.append("xc = x.clone()")
        if write == "detached-input":
            body.append("xd = x.detach()")
        body += place(c, "write", stmt, target, parts)
    elif write == "saved-output":
        parts.sig = Sig("plain", ("x",))
        parts.forward = ["out = torch.exp(x)"]
        parts.ctx_lines = ["ctx.save_for_backward({OUT})"]
        parts.backward = ["(out,) = ctx.saved_tensors", "grad_x = g * out"]
        parts.backward += place(c, "write", stmt, "out", parts) + ["return grad_x"]
        files = render(c, parts, ["single", "base-other-module", "backward-in-base"])
        return _program("AGL409", files, "def reference(x):\n    return torch.exp(x)\n", [[3]])
    elif write == "saved-intermediate":
        parts.ctx_lines = ["ctx.save_for_backward(x, w, w * 1.0)"]
        body = ["x, w, w2 = ctx.saved_tensors", "grad_x, grad_w = g * w2, g * x"]
        body += place(c, "write", stmt, "w2", parts)
    else:  # ctx-attribute: a buffer forward made, used then scaled in place by backward
        parts.ctx_lines = ["ctx.save_for_backward(x, w)", "ctx.buf = w.detach().clone()"]
        body = ["x, w = ctx.saved_tensors", "grad_x, grad_w = g * ctx.buf, g * x"]
        body += place(c, "write", stmt, "ctx.buf", parts)
    parts.backward = body + ["return grad_x, grad_w"]
    return _program(
        "AGL409",
        render(c, parts, ["single", "base-other-module", "backward-in-base"]),
        ref,
        [[3], [3]],
    )
