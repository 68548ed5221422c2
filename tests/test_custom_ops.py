"""`torch.library` custom ops are custom autograd code too: their backward (registered with
`register_autograd`) gets every gradient layout a `Function.backward` gets (semantics B1.6),
runs with grad mode off (A1.4), and must return a gradient per op input (D11.1)."""

from __future__ import annotations

import textwrap

from conftest import BUT_FAKES

from autogradlint.engine.door import lint
from autogradlint.engine.request import LintRequest


def _found(source: str) -> list[tuple[str, int]]:
    result = lint(LintRequest(textwrap.dedent(source), "ops.py", enabled=BUT_FAKES))
    assert result.error is None, result.error
    return [(f.rule_id, f.line) for f in result.findings]


def test_graph_building_in_a_custom_op_backward() -> None:
    assert _found(
        """
        import torch

        @torch.library.custom_op("mylib::square", mutates_args=())
        def square(x: torch.Tensor) -> torch.Tensor:
            return x * x

        def _backward(ctx, grad):
            x, = ctx.saved_tensors
            y = x * x
            return torch.autograd.grad(y, x, grad)[0]

        def _setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        torch.library.register_autograd("mylib::square", _backward, setup_context=_setup)
        """
    ) == [("AGL101", 11)]


TRITON_OP = """
import torch
import triton
from torch.library import triton_op, wrap_triton

@triton.jit
def _kernel(src, dst, row_stride, n):
    pass

@triton_op("mylib::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2

def _setup(ctx, inputs, output):
    (ctx.x,) = inputs

def _backward(ctx, grad_y):
    x = ctx.x
    grad_x = torch.empty_like(x)
    wrap_triton(_kernel)[(x.shape[0],)](grad_y, grad_x, {stride}, x.shape[1])
    return grad_x

double.register_autograd(_backward, setup_context=_setup)
"""


def test_a_triton_op_backward_indexing_the_gradient_with_the_input_strides() -> None:
    """pytorch/pytorch#194719: the launch is given `x.stride(0)` for `grad_y`."""
    result = lint(LintRequest(TRITON_OP.format(stride="x.stride(0)"), "ops.py"))
    assert [(f.rule_id, f.line) for f in result.findings] == [("AGL201", 20)]
    finding = result.findings[0]
    assert finding.fixable is None  # `.contiguous()` could break a launch that was right
    assert "`x.stride(...)`, not `grad_y`'s own" in finding.help
    assert "Pass `grad_y.stride(...)`" in finding.help


def test_a_triton_op_backward_given_the_gradient_strides_is_fine() -> None:
    assert lint(LintRequest(TRITON_OP.format(stride="grad_y.stride(0)"), "ops.py")).findings == []


def test_the_gradient_count_against_the_op_signature() -> None:
    source = """
        import torch

        @torch.library.custom_op("mylib::mul", mutates_args=())
        def mul(x: torch.Tensor, s: float) -> torch.Tensor:
            return x * s

        def _setup(ctx, inputs, output):
            ctx.s = inputs[1]

        def _backward(ctx, grad):
            if ctx.s == 0:
                return None, None
            return grad * ctx.s

        mul.register_autograd(_backward, setup_context=_setup)
        """
    result = lint(LintRequest(textwrap.dedent(source), "ops.py", enabled=BUT_FAKES))
    assert [(f.rule_id, f.line) for f in result.findings] == [("AGL401", 14)]
    assert "GeneratedBackwardFor_mylib_mul_defaultBackward" in result.findings[0].help
    assert "(expected 3, got 2)" in result.findings[0].help


def test_extra_trailing_nones_and_unknown_signatures_are_accepted() -> None:
    assert (
        _found(
            """
        import torch

        @torch.library.custom_op("mylib::mul", mutates_args=())
        def mul(x: torch.Tensor, s: float) -> torch.Tensor:
            return x * s

        def _backward(ctx, grad):
            return grad * 2, None, None

        mul.register_autograd(_backward)

        def _other_backward(ctx, grad):
            return grad

        torch.library.register_autograd("elsewhere::op", _other_backward)
        """
        )
        == []
    )


def test_the_fix_applies_to_a_custom_op_backward() -> None:
    source = textwrap.dedent(
        """
        import torch
        import my_ext_cuda

        @torch.library.custom_op("mylib::double", mutates_args=())
        def double(x: torch.Tensor) -> torch.Tensor:
            return my_ext_cuda.fwd(x)

        def _backward(ctx, grad):
            return my_ext_cuda.bwd(grad)

        double.register_autograd(_backward)
        """
    )
    result = lint(LintRequest(source, "ops.py", fixes=True, enabled=BUT_FAKES))
    assert [(f.rule_id, f.line) for f in result.findings] == [("AGL201", 10)]
    assert result.fixes and "grad.contiguous()" in "".join(
        line for fix in result.fixes for edit in fix.edits for line in edit.lines
    )


def test_an_in_place_change_of_the_incoming_gradient() -> None:
    """The buffer is shared with other consumers and the caller, as for Function.backward."""
    assert _found(
        """
        import torch

        @torch.library.custom_op("mylib::half", mutates_args=())
        def half(x: torch.Tensor) -> torch.Tensor:
            return x / 2

        def _backward(ctx, grad):
            grad.mul_(0.5)
            return grad

        half.register_autograd(_backward)
        """
    ) == [("AGL406", 9)]


def test_setup_context_parameter_names() -> None:
    """torch calls setup_context(ctx=, inputs=, output=) by keyword (D11.2)."""
    assert _found(
        """
        import torch

        @torch.library.custom_op("mylib::scale", mutates_args=())
        def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
            return x * factor

        def _setup(ctx, inputs, out):
            ctx.factor = inputs[1]

        def _backward(ctx, grad):
            return grad * ctx.factor, None

        scale.register_autograd(_backward, setup_context=_setup)
        scale.register_autograd(lambda ctx, g: (g, None), setup_context=lambda c, inputs, output: 0)
        scale.register_autograd(_backward, setup_context=lambda ctx, **kwargs: None)
        """
    ) == [("AGL411", 8), ("AGL411", 15)]


def test_tensors_kept_on_ctx_in_setup_context() -> None:
    """setup_context is the ctx side of a custom op (and of a setup_context-style Function):
    a tensor input or the output kept as a ctx attribute and read for its values escapes
    autograd's checks (AGL403); a scalar, or a tensor backward reads only for its shape, does
    not."""
    assert _found(
        """
        import torch

        @torch.library.custom_op("m::f", mutates_args=())
        def f(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
            return x * w * n

        def _setup(ctx, inputs, output):
            x, w, n = inputs
            ctx.x = x
            ctx.n = n
            ctx.shape_src = w
            ctx.out = output

        def _backward(ctx, grad):
            return grad * ctx.x * ctx.out.sign(), torch.zeros(ctx.shape_src.shape), None

        f.register_autograd(_backward, setup_context=_setup)

        class G(torch.autograd.Function):
            @staticmethod
            def forward(x: torch.Tensor, scale: float):
                return x * scale

            @staticmethod
            def setup_context(ctx, inputs, output):
                *_, ctx.scale = inputs
                ctx.x = inputs[0]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.x, None
        """
    ) == [("AGL403", 10), ("AGL403", 13), ("AGL403", 28)]


def test_inputs_declared_by_a_schema_string_are_read_from_the_text() -> None:
    """`Library.define` and `torch.library.define` schemas give the op's inputs; alias
    annotations and keyword-only inputs make the count unreadable here, so none is given."""
    from autogradlint.analysis.facts import declared_inputs

    text = (
        'lib.define("scale(Tensor x, float s=1.0) -> Tensor")\n'
        'torch.library.define("ns::shift", "(Tensor x, int n) -> Tensor")\n'
        'lib.define("fill(Tensor(a!) x, float v) -> ()")\n'
        'lib.define("kw(Tensor x, *, float v) -> Tensor")\n'
    )
    assert declared_inputs(text) == {"scale": ("x", "s"), "shift": ("x", "n")}


_HOOK_CLASSES = """
    import torch

    def _register_autograd(register: type) -> None:
        torch.library.register_autograd(
            f"gsplat::{register.base}", register.backward, setup_context=register.setup_context
        )

    def _ensure_autograd_registrations() -> None:
        _register_autograd(RegisterScale)
        _register_autograd(RegisterScaleL1)

    class RegisterScale:
        base = "scale"

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @classmethod
        def backward(cls, ctx, v_out):
            (x,) = ctx.saved_tensors
            return torch.ops.gsplat.scale_bwd(x, v_out{fix})

    class RegisterScaleL1(RegisterScale):
        base = "scale_l1"
    """


def test_backward_of_a_hook_class_handed_to_a_registering_helper() -> None:
    """gsplat registers each op's autograd through a helper handed a plain class: the class's
    `@classmethod` backward is the op's backward (ctx after `cls`, gradients after ctx), so
    a gradient it hands raw to a compiled op is found; the subclass inheriting that backward
    is read once. Made contiguous, nothing is found."""
    bad = _HOOK_CLASSES.replace("{fix}", "")
    assert _found(bad) == [("AGL201", 23)]
    fixed = _HOOK_CLASSES.replace("{fix}", ".contiguous()")
    assert _found(fixed) == []
