"""Generator for custom ops without a fake (meta) implementation (a rule issue 32 asks for):
`torch.library.custom_op` and `Library.define` ops, with `register_fake`, `impl_abstract`, a
Meta kernel, a fake registered from another module, or none. torch's verdict is opcheck's."""

from __future__ import annotations

from ..program import PKG, Chooser, Program

OP = (
    f'@torch.library.custom_op("{PKG}::scaled", mutates_args=())\n'
    "def scaled(x: torch.Tensor, s: float) -> torch.Tensor:\n    return x * s\n"
)
LIB = (
    f'LIB = torch.library.Library("{PKG}", "DEF")\n'
    'LIB.define("scaled(Tensor x, float s) -> Tensor")\n\n\n'
    "def _scaled_cpu(x, s):\n    return x * s\n\n\n"
    'LIB.impl("scaled", _scaled_cpu, "CPU")\n'
    f"scaled = torch.ops.{PKG}.scaled.default\n"
)
DEFINE = (
    f'torch.library.define("{PKG}::scaled", "(Tensor x, float s) -> Tensor")\n\n\n'
    f'@torch.library.impl("{PKG}::scaled", "cpu")\n'
    "def _scaled_cpu(x, s):\n    return x * s\n\n\n"
    f"scaled = torch.ops.{PKG}.scaled.default\n"
)
AUTOGRAD = (
    "def _backward(ctx, g):\n    return g * ctx.s, None\n\n\n"
    "def _setup(ctx, inputs, output):\n    ctx.s = inputs[1]\n\n\n"
    f'torch.library.register_autograd("{PKG}::scaled", _backward, setup_context=_setup)\n'
)
FAKES = {
    "none": "",
    "register_fake-method": "@scaled.register_fake\ndef _(x, s):\n    return torch.empty_like(x)\n",
    "register_fake-string": f'@torch.library.register_fake("{PKG}::scaled")\ndef _(x, s):\n    return torch.empty_like(x)\n',
    "impl_abstract": f'@torch.library.impl_abstract("{PKG}::scaled")\ndef _(x, s):\n    return torch.empty_like(x)\n',
    "meta-kernel": 'def _scaled_meta(x, s):\n    return torch.empty_like(x)\n\n\nLIB_META = torch.library.Library("{PKG}", "IMPL")\nLIB_META.impl("scaled", _scaled_meta, "Meta")\n'.replace(
        "{PKG}", PKG
    ),
}


def gen_fake_impl(c: Chooser) -> Program:
    """A custom op with or without a fake implementation, in this module or another one."""
    how = c.pick("defined", ["custom_op", "Library.define", "torch.library.define"])
    fakes = list(FAKES) if how != "custom_op" else [f for f in FAKES if f != "meta-kernel"]
    if how != "custom_op":
        fakes = [f for f in fakes if f != "register_fake-method"]
    fake = c.pick("fake", fakes)
    where = c.pick("fake.where", ["same-module", "other-module"])
    op = {"custom_op": OP, "Library.define": LIB, "torch.library.define": DEFINE}[how]
    files = {"__init__.py": ""}
    fake_text = FAKES[fake]
    if where == "other-module" and fake_text:
        files["ops.py"] = "import torch\n\n\n" + op + "\n\n" + AUTOGRAD
        files["fakes.py"] = "import torch\n\nfrom .ops import scaled\n\n\n" + fake_text
        main = "import torch\n\nfrom . import fakes  # noqa: F401 - registers the fake\nfrom .ops import scaled\n"
    else:
        main = (
            "import torch\n\n\n"
            + op
            + "\n\n"
            + fake_text
            + ("\n\n" if fake_text else "")
            + AUTOGRAD
        )
    main += "\n\ndef model(x):\n    return scaled(x, 2.0)\n"
    files["main.py"] = main
    reference = (
        "def reference(x):\n    return x * 2.0\n\n\n"
        "def opcheck_cases(main, value):\n"
        f"    return [(torch.ops.{PKG}.scaled.default, (value(0, [3]).requires_grad_(), 2.0))]\n"
    )
    return Program(
        family="fake-impl", files=files, reference=reference, inputs=[[3]], driver="customop"
    )
