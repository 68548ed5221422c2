"""Generators about a container input of forward kept on ctx (AGL403, semantics D3.1): an input
annotated as a list, tuple or sequence of tensors holds the caller's very tensors, so keeping it
as `ctx.ws = ws` and reading its values in backward sees a later in-place change (no version
check); the same container saved through `save_for_backward`, copied, or read only for its
length, and inputs annotated as lists of ints or a `torch.Size`, do not."""

from __future__ import annotations

from ..forms import Parts, Sig, render
from ..program import Chooser, Program

# The annotation of forward's container parameter, the imports it needs, and how `model(x, w)`
# passes `w` in it.
ANNOTATIONS = {
    "list[torch.Tensor]": ("", "[w]"),
    "List[Tensor]": ("from typing import List\n\nfrom torch import Tensor\n", "[w]"),
    "List[torch.Tensor]": ("from typing import List\n", "[w]"),
    "tuple[torch.Tensor, ...]": ("", "(w,)"),
    "Sequence[torch.Tensor]": ("from collections.abc import Sequence\n", "[w]"),
    "Optional[List[Tensor]]": (
        "from typing import List, Optional\n\nfrom torch import Tensor\n",
        "[w]",
    ),
}
KEEPS = [
    "saved",  # ctx.save_for_backward(x, *ws): checked against in-place changes
    "kept",  # ctx.ws = ws, backward reads the values
    "kept-tuple",  # ctx.ws = tuple(ws): a new tuple of the very same tensors
    "kept-item",  # ctx.w0 = ws[0]: the caller's tensor itself
    "kept-copy",  # ctx.ws = [t.clone() for t in ws]: a private copy
    "kept-len",  # ctx.ws = ws, backward reads only its length
    "ints",  # ns: list[int], kept and read
    "size",  # shape: torch.Size, kept and read
]
# The quiet forms: (forward's parameter, forward's line, what it keeps, backward's return, the
# call in `model`, the reference's math).
QUIET: dict[str, tuple[str, list[str], str, list[str], str, str]] = {
    "kept-len": (
        "ws: {annotation}",
        ["out = x * float(len(ws))"],
        "ctx.ws = ws",
        ["return g * float(len(ctx.ws)), None"],
        "Fn.apply(x, {passed})",
        "x * 1.0",
    ),
    "ints": (
        "ns: list[int]",
        ["out = x * float(ns[1])"],
        "ctx.ns = ns",
        ["return g * float(ctx.ns[1]), None"],
        "Fn.apply(x, [w.numel(), 2])",
        "x * 2.0",
    ),
    "size": (
        "shape: torch.Size",
        ["out = x * torch.ones(shape, dtype=x.dtype)"],
        "ctx.shape = shape",
        ["return g * torch.ones(ctx.shape, dtype=g.dtype), None"],
        "Fn.apply(x, w.shape)",
        "x * 1.0",
    ),
}
# How backward reads the first tensor of the kept container.
READS = {
    "index": ["w0 = ctx.ws[0]"],
    "unpack": ["(w0,) = ctx.ws"],
    "alias": ["ws = ctx.ws", "w0 = ws[0]"],
    "loop": ["w0 = 0.0", "for t in ctx.ws:", "    w0 = w0 + t"],
    "stack": ["w0 = torch.stack(list(ctx.ws)).sum(0)"],
}


def gen_ctx_lists(c: Chooser) -> Program:
    """forward(ctx, x, ws: <container of tensors>) keeping ws on ctx, or an int list / Size
    kept the same way (D3.1: only a kept tensor whose values backward reads can go stale)."""
    keep = c.pick("keep", KEEPS)
    annotation = c.pick("annotation", list(ANNOTATIONS))
    read = c.pick("read", list(READS))
    style = c.pick("sig", ["plain", "setup"])
    imports, passed = ANNOTATIONS[annotation]
    reference = "def reference(x, w):\n    return x * w\n"
    if keep in ("saved", "kept", "kept-tuple", "kept-item", "kept-copy"):
        param = f"ws: {annotation}"
        forward = ["out = x * ws[0]"]
        stash = {
            "saved": "ctx.save_for_backward(x, *ws)",
            "kept": "ctx.ws = ws",
            "kept-tuple": "ctx.ws = tuple(ws)",
            "kept-item": "ctx.w0 = ws[0]",
            "kept-copy": "ctx.ws = [t.clone() for t in ws]",
        }[keep]
        if keep == "saved":
            backward = ["x, w0 = ctx.saved_tensors"]
        elif keep == "kept-item":
            backward = ["w0 = ctx.w0"]
        else:
            backward = [*READS[read]]
        backward.append("return g * w0, None")
        call = f"Fn.apply(x, {passed})"
    else:  # a form D3.1 does not reach: the values are never read, or are not tensors
        param, forward, stash, backward, call, math = QUIET[keep]
        param = param.format(annotation=annotation)
        imports = imports if keep == "kept-len" else ""
        call = call.format(passed=passed)
        reference = f"def reference(x, w):\n    return {math}\n"
    parts = Parts(
        sig=Sig(style, ("x", "w")),
        forward=forward,
        ctx_lines=[stash],
        backward=backward,
        model=[f"return {call}"],
    )
    files = render(c, parts, ["single", "base-same-file", "base-other-module"])
    # forward's second parameter is the container, annotated (render writes the Sig's names)
    for path, text in files.items():
        text = text.replace("def forward(ctx, x, w):", f"def forward(ctx, x, {param}):")
        text = text.replace("def forward(x, w):", f"def forward(x, {param}):")
        text = text.replace("x, w, *_ = inputs", f"x, {param.split(':')[0]}, *_ = inputs")
        if "def forward(" in text and imports:
            text = text.replace("import torch\n", "import torch\n" + imports, 1)
        files[path] = text
    return Program(
        family="ctx-lists",
        files=files,
        reference=reference,
        inputs=[[3], [3]],
        nograd=[1],  # the container hides `w` from autograd: only x's gradient is compared
        function="Fn",
    )
