"""Generators for the rules that count: gradients returned against inputs (AGL401), apply's
arguments against forward's parameters (AGL410), and a custom op's setup_context parameter
names (AGL411)."""

from __future__ import annotations

from ..forms import MATHS, Parts, Sig, pick_sig, reference, render
from ..program import PKG, Chooser, Program


def _saving(sig: Sig, names: tuple[str, ...]) -> list[str]:
    lines = [f"ctx.save_for_backward({', '.join(names)})"]
    if sig.has_scale:
        lines.append("ctx.scale = scale")
    return lines


def _unpacking(sig: Sig, names: tuple[str, ...]) -> list[str]:
    lines = [f"{', '.join(names)}{',' if len(names) == 1 else ''} = ctx.saved_tensors"]
    if sig.has_scale:
        lines.append("scale = ctx.scale")
    return lines


RETURNS_401 = [
    "per-slot",  # one gradient per input torch counts
    "per-parameter",  # one per parameter forward declares (None for scale)
    "tensors-only",  # one per tensor input
    "missing-last",
    "extra-gradient",
    "extra-none",
    "early-return",  # a shorter tuple returned on a path training takes
    "helper-tuple",  # the tuple built by a helper
    "tuple-concat",  # (gx,) + (None,) * k
]


def gen_401(c: Chooser) -> Program:
    """backward's gradients against what torch counts (D1.1-D1.3, D11.1)."""
    math = MATHS[c.pick("math", ["mul", "cube", "sinmul", "affine"])]
    sig = pick_sig(c, math.inputs)
    exprs = {n: sig.scaled(g) for n, g in zip(math.inputs, math.grads, strict=True)}
    names = [f"grad_{n}" for n in math.inputs]
    body = _unpacking(sig, math.inputs)
    body += [f"{v} = {exprs[n]}" for v, n in zip(names, math.inputs, strict=True)]
    named = dict(zip(math.inputs, names, strict=True))
    slots = sig.slots()
    params = [*math.inputs, *(["scale"] if sig.has_scale else [])]
    form = c.pick("returns", RETURNS_401)
    helpers: list[str] = []
    if form == "per-slot":
        items = [named.get(s, "None") for s in slots]
    elif form == "per-parameter":
        items = [named.get(s, "None") for s in params]
    elif form == "tensors-only":
        items = list(names)
    elif form == "missing-last":
        items = [named.get(s, "None") for s in slots][:-1] or [names[0], "g"]
    elif form == "extra-gradient":
        items = [named.get(s, "None") for s in slots] + ["g"]
    elif form == "extra-none":
        items = [named.get(s, "None") for s in slots] + ["None"]
    elif form == "tuple-concat":
        items = [named.get(s, "None") for s in slots]
        k = int(c.pick("concat.extra", ["0", "1", "-1"]))
        tensors = [i for i in items if i != "None"]
        nones = len(items) - len(tensors) + k
        body.append(f"return ({', '.join(tensors)},) + (None,) * {max(nones, 0)}")
        items = []
    elif form == "early-return":
        short = [named.get(s, "None") for s in slots][:-1] or ["None", "None"]
        body += ["if not torch.is_grad_enabled():", "    return " + ", ".join(short)]
        items = [named.get(s, "None") for s in slots]
    else:  # helper-tuple
        k = int(c.pick("helper.extra", ["0", "-1", "1"]))
        items_h = [named.get(s, "None") for s in slots]
        helpers.append("def _pack(*grads):\n    return tuple(grads)")
        if k < 0:
            items_h = items_h[:-1] or ["None", "None"]
        elif k > 0:
            items_h = items_h + ["g"]
        body.append(f"return _pack({', '.join(items_h)})")
        items = []
    if items:
        body.append("return " + ", ".join(items))
    parts = Parts(
        sig=sig,
        forward=[f"out = {sig.scaled(math.out)}"],
        ctx_lines=_saving(sig, math.inputs),
        backward=body,
        backward_helpers=helpers,
    )
    files = render(c, parts)
    return Program(
        family="AGL401",
        files=files,
        reference=reference(sig, math.out),
        inputs=[list(s) for s in math.shapes],
        function="Fn",
    )


APPLY_CALLS = [
    "exact",  # every input forward needs
    "missing-one",
    "one-extra",
    "default-omitted",
    "keyword",  # scale=... by keyword: apply takes no keywords
    "through-alias",  # fn = Fn.apply at module level
    "through-wrapper",  # a module-level wrapper function with its own defaults
    "star-call",  # Fn.apply(*args)
]


def gen_410(c: Chooser) -> Program:
    """`Fn.apply(...)` against forward's parameters (D10.1, D10.2), with the Function defined
    in this module or imported from another one."""
    math = MATHS[c.pick("math", ["mul", "cube", "affine"])]
    sig = pick_sig(
        c,
        math.inputs,
        ["plain", "default-omitted", "default-passed", "kwonly", "setup", "setup-default"],
    )
    call = c.pick("call", APPLY_CALLS)
    args = sig.call_args()
    extra_main: list[str] = []
    target = "Fn.apply"
    if call == "missing-one":
        args = args[:-1]
    elif call == "one-extra":
        args = args + ["1.0"]
    elif call == "default-omitted":
        args = list(sig.tensors)
    elif call == "keyword":
        args = list(sig.tensors) + ["scale=3.0"]
    elif call == "through-alias":
        extra_main.append("scaled_op = Fn.apply")
        target = "scaled_op"
        if c.flag("alias.extra"):
            args = args + ["1.0"]
    elif call == "through-wrapper":
        n = len(args) + int(c.pick("wrapper.count", ["0", "-1", "1"]))
        passed = [f"tensors[{i}]" for i in range(min(n, len(sig.tensors)))]
        passed += ["3.0"] * max(0, n - len(sig.tensors))
        extra_main.append(f"def scaled_op(*tensors):\n    return Fn.apply({', '.join(passed)})")
        target = "scaled_op"
        args = list(sig.tensors)
    elif call == "star-call":
        extra = c.pick("star.extra", ["right", "one-more"])
        values = (["3.0"] if sig.style == "default-passed" else []) + (
            ["1.0"] if extra == "one-more" else []
        )
        extra_main.append(f"ARGS_EXTRA = ({''.join(v + ', ' for v in values)})")
        args = [f"*({', '.join(sig.tensors)},)", "*ARGS_EXTRA"]
    passed = " ".join(args + extra_main)
    scale = "3.0" if "3.0" in passed else "2.0"
    ref = f"({math.out}) * {scale}" if sig.has_scale else math.out
    grads = {n: sig.scaled(g) for n, g in zip(math.inputs, math.grads, strict=True)}
    # Extra trailing Nones are accepted (D1.3): the count backward returns is never the issue.
    ret = [grads.get(s, "None") for s in sig.slots()] + ["None", "None"]
    parts = Parts(
        sig=sig,
        forward=[f"out = {sig.scaled(math.out)}"],
        ctx_lines=_saving(sig, math.inputs),
        backward=_unpacking(sig, math.inputs) + ["return " + ", ".join(ret)],
        model=[f"return {target}({', '.join(args)})"],
        extra_main=extra_main,
    )
    files = render(
        c,
        parts,
        ["single", "base-other-module", "backward-in-base"],
        ["main", "ops-relative", "ops-absolute"],
    )
    return Program(
        family="AGL410",
        files=files,
        reference=f"def reference({', '.join(sig.tensors)}):\n    return {ref}\n",
        inputs=[list(s) for s in math.shapes],
        function="Fn",
    )


SETUP_NAMES = [
    "ctx, inputs, output",
    "ctx, inputs, out",
    "ctx, inp, output",
    "context, inputs, output",
    "ctx, *args",
    "ctx, **kwargs",
    "ctx, inputs, output, extra=None",
]


def gen_411(c: Chooser) -> Program:
    """A custom op's setup_context, called by keyword (D11.2), as a def or a lambda."""
    params = c.pick("params", SETUP_NAMES)
    style = c.pick("style", ["def", "lambda", "module-function", "other-module"])
    register = c.pick("register", ["method", "library-function"])
    first = params.split(",")[0].strip().lstrip("*")
    if params == "ctx, **kwargs":
        save = "ctx.s = kwargs['inputs'][1]"
    elif params == "ctx, *args":
        save = "ctx.s = args[0][1]"
    else:
        second = params.split(",")[1].strip()
        save = f"{first}.s = {second}[1]"
    op = (
        f'@torch.library.custom_op("{PKG}::scaled", mutates_args=())\n'
        "def scaled(x: torch.Tensor, s: float) -> torch.Tensor:\n    return x * s\n\n\n"
        "@scaled.register_fake\ndef _(x, s):\n    return torch.empty_like(x)\n\n\n"
        "def backward(ctx, g):\n    return g * ctx.s, None\n"
    )
    files: dict[str, str] = {"__init__.py": ""}
    if style == "lambda":
        lam_args = params.replace("=None", "=None")
        setup_def = ""
        setup_ref = f"lambda {lam_args}: setattr({first}, 's', {save.split(' = ')[1]})"
        if params in ("ctx, **kwargs", "ctx, *args"):
            setup_ref = f"lambda {params}: setattr(ctx, 's', {save.split(' = ')[1]})"
    else:
        setup_def = f"\n\ndef setup_context({params}):\n    {save}\n"
        setup_ref = "setup_context"
    if register == "method":
        reg = f"scaled.register_autograd(backward, setup_context={setup_ref})"
    else:
        reg = (
            f'torch.library.register_autograd("{PKG}::scaled", backward, setup_context={setup_ref})'
        )
    if style == "other-module":
        files["setup.py"] = "import torch\n" + setup_def
        main = (
            f"import torch\n\nfrom {PKG}.setup import setup_context\n\n\n"
            + op
            + "\n\n"
            + reg
            + "\n"
        )
    else:
        main = "import torch\n\n\n" + op + setup_def + "\n\n" + reg + "\n"
    main += "\n\ndef model(x):\n    return scaled(x, 2.0)\n"
    files["main.py"] = main
    return Program(
        family="AGL411",
        files=files,
        reference="def reference(x):\n    return x * 2.0\n",
        inputs=[[3]],
        driver="function",
    )
