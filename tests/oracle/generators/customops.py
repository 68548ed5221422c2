"""Generator for custom ops without a fake (meta) implementation (AGL413): `torch.library.custom_op`,
`Library.define` and `torch.library.define` ops taking a float, an int and a float, or a second
tensor, with `register_fake`, `impl_abstract`, a Meta kernel, a fake registered from another
module, or none. torch's verdict is opcheck's."""

from __future__ import annotations

from dataclasses import dataclass

from ..program import PKG, Chooser, Program


@dataclass(frozen=True)
class OpSig:
    """One signature of the op: annotated parameters, plain names, schema, body, autograd."""

    annotated: str
    names: str
    schema: str
    body: str
    backward: str
    setup: str
    model: str  # model's parameters -> the op's call
    reference: str
    inputs: list[list[int]]
    opcheck: str  # the op's arguments for opcheck


SIGS = {
    "float": OpSig(
        "x: torch.Tensor, s: float",
        "x, s",
        "Tensor x, float s",
        "x * s",
        "return g * ctx.s, None",
        "ctx.s = inputs[1]",
        "def model(x):\n    return scaled(x, 2.0)\n",
        "def reference(x):\n    return x * 2.0\n",
        [[3]],
        "value(0, [3]).requires_grad_(), 2.0",
    ),
    "int-float": OpSig(
        "x: torch.Tensor, n: int, s: float",
        "x, n, s",
        "Tensor x, int n, float s",
        "x * (s * n)",
        "return g * (ctx.s * ctx.n), None, None",
        "ctx.n, ctx.s = inputs[1], inputs[2]",
        "def model(x):\n    return scaled(x, 2, 1.5)\n",
        "def reference(x):\n    return x * 3.0\n",
        [[3]],
        "value(0, [3]).requires_grad_(), 2, 1.5",
    ),
    "tensor": OpSig(
        "x: torch.Tensor, w: torch.Tensor",
        "x, w",
        "Tensor x, Tensor w",
        "x * w",
        "x, w = ctx.saved_tensors\n    return g * w, g * x",
        "ctx.save_for_backward(*inputs)",
        "def model(x, w):\n    return scaled(x, w)\n",
        "def reference(x, w):\n    return x * w\n",
        [[3], [3]],
        "value(0, [3]).requires_grad_(), value(1, [3]).requires_grad_()",
    ),
}


def _op(how: str, sig: OpSig) -> str:
    if how == "custom_op":
        return (
            f'@torch.library.custom_op("{PKG}::scaled", mutates_args=())\n'
            f"def scaled({sig.annotated}) -> torch.Tensor:\n    return {sig.body}\n"
        )
    if how == "Library.define":
        return (
            f'LIB = torch.library.Library("{PKG}", "DEF")\n'
            f'LIB.define("scaled({sig.schema}) -> Tensor")\n\n\n'
            f"def _scaled_cpu({sig.names}):\n    return {sig.body}\n\n\n"
            'LIB.impl("scaled", _scaled_cpu, "CPU")\n'
            f"scaled = torch.ops.{PKG}.scaled.default\n"
        )
    return (
        f'torch.library.define("{PKG}::scaled", "({sig.schema}) -> Tensor")\n\n\n'
        f'@torch.library.impl("{PKG}::scaled", "cpu")\n'
        f"def _scaled_cpu({sig.names}):\n    return {sig.body}\n\n\n"
        f"scaled = torch.ops.{PKG}.scaled.default\n"
    )


def _autograd(sig: OpSig) -> str:
    return (
        f"def _backward(ctx, g):\n    {sig.backward}\n\n\n"
        f"def _setup(ctx, inputs, output):\n    {sig.setup}\n\n\n"
        f'torch.library.register_autograd("{PKG}::scaled", _backward, setup_context=_setup)\n'
    )


def _fakes(sig: OpSig) -> dict[str, str]:
    fake = f"def _({sig.names}):\n    return torch.empty_like(x)\n"
    return {
        "none": "",
        "register_fake-method": "@scaled.register_fake\n" + fake,
        "register_fake-string": f'@torch.library.register_fake("{PKG}::scaled")\n' + fake,
        "impl_abstract": f'@torch.library.impl_abstract("{PKG}::scaled")\n' + fake,
        "meta-kernel": fake.replace("def _(", "def _scaled_meta(")
        + f'\n\nLIB_META = torch.library.Library("{PKG}", "IMPL")\n'
        'LIB_META.impl("scaled", _scaled_meta, "Meta")\n',
    }


def gen_fake_impl(c: Chooser) -> Program:
    """A custom op with or without a fake implementation, in this module or another one."""
    how = c.pick("defined", ["custom_op", "Library.define", "torch.library.define"])
    sig = SIGS[c.pick("args", list(SIGS))]
    fakes = _fakes(sig)
    names = list(fakes) if how != "custom_op" else [f for f in fakes if f != "meta-kernel"]
    if how != "custom_op":
        names = [f for f in names if f != "register_fake-method"]
    fake = c.pick("fake", names)
    where = c.pick("fake.where", ["same-module", "other-module"])
    op = _op(how, sig)
    files = {"__init__.py": ""}
    fake_text = fakes[fake]
    if where == "other-module" and fake_text:
        files["ops.py"] = "import torch\n\n\n" + op + "\n\n" + _autograd(sig)
        files["fakes.py"] = "import torch\n\nfrom .ops import scaled\n\n\n" + fake_text
        main = "import torch\n\nfrom . import fakes  # noqa: F401 - registers the fake\nfrom .ops import scaled\n"
    else:
        main = (
            "import torch\n\n\n"
            + op
            + "\n\n"
            + fake_text
            + ("\n\n" if fake_text else "")
            + _autograd(sig)
        )
    files["main.py"] = main + "\n\n" + sig.model
    reference = (
        sig.reference + "\n\n"
        "def opcheck_cases(main, value):\n"
        f"    return [(torch.ops.{PKG}.scaled.default, ({sig.opcheck}))]\n"
    )
    return Program(
        family="fake-impl", files=files, reference=reference, inputs=sig.inputs, driver="customop"
    )
