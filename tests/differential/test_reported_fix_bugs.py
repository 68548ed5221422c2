"""Each fix bug reported against the safe and unsafe tiers (issue 17), as code that used to be
broken by a fix, what the fix does now, and, where it is behavioural, a run that proves it."""

from __future__ import annotations

import pytest
from run import differences, function_scenarios

from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.request import LintRequest
from autogradlint.engine.verify import compile_error

HEADER = "import torch\n\nFLAG = False\nMODE = 0\n\n\n"
FORWARD = """\
class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.a, ctx.b, ctx.n, ctx.m = 2.0, 3.0, 4.0, 4.0
        return x * 2

    @staticmethod
    def backward(ctx, grad):
"""


def _fn(*body: str) -> str:
    return HEADER + FORWARD + "".join(f"        {line}\n" for line in body)


def _equivalent(original: str, rules: set[str]) -> str:
    outcome = fix_text(LintRequest(original, "m.py", enabled=frozenset(rules)))
    assert outcome.error is None and outcome.changed, outcome.error
    assert compile_error(outcome.source) is None
    assert differences(original, outcome.source, function_scenarios) == []
    return outcome.source


@pytest.mark.parametrize(
    "write",
    [
        "grad *= ctx.a + ctx.b",  # was `grad = grad * ctx.a + ctx.b`
        "grad /= ctx.n * ctx.m",  # was `grad = grad / ctx.n * ctx.m`: 16x off
        "grad *= ctx.a if ctx.a else 1.0",  # was a conditional expression returning a float
        "grad *= torch.full((3, 4), 1.5, dtype=torch.float64)",  # out of place promotes dtype
        "grad.zero_()",  # was `grad = grad.zero()`: AttributeError
        "grad.fill_(1.5)",
        "grad.copy_(torch.ones_like(grad))",
    ],
)
def test_agl406_keeps_precedence_dtype_and_methods_without_twin(write: str) -> None:
    fixed = _equivalent(_fn(write, "return grad"), {"AGL406"})
    assert "grad = grad.clone()\n        " + write in fixed


def test_agl406_write_through_a_view_still_reaches_the_returned_gradient() -> None:
    # was `flat = flat.mul(2)`: the returned gradient was no longer doubled
    fixed = _equivalent(_fn("flat = grad.view(-1)", "flat.mul_(2)", "return grad"), {"AGL406"})
    assert "grad = grad.clone()\n        flat = grad.view(-1)" in fixed


def test_agl406_copy_is_guarded_where_the_gradient_may_be_none() -> None:
    source = HEADER + FORWARD.replace("return x * 2", "return x * 2, 3").replace(
        "backward(ctx, grad)", "backward(ctx, grad, unused)"
    )
    source += "        alias = unused\n        if alias is not None:\n            alias.mul_(2)\n"
    source += "        return grad\n"
    fixed = _equivalent(source, {"AGL406"})
    assert "if unused is not None:\n            unused = unused.clone()" in fixed


BLOCK_UPDATE = """\
import torch

FLAG = False
MODE = 0
W = torch.ones(3, 4, requires_grad=True)


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            y = x * x
            W.sub_(0.0 * g)  # a fused parameter update
            if FLAG:  # debug only
                torch.autograd.grad(y, x, g)
        return g * 2 * x
"""


def test_agl102_is_not_safe_when_the_block_does_more_than_the_failing_call() -> None:
    # enable_grad() around the whole block made `W.sub_` raise on every call
    safe = fix_text(LintRequest(BLOCK_UPDATE, "m.py"))
    assert not safe.changed
    assert [f.rule_id for f in safe.remaining] == ["AGL102"]
    unsafe = fix_text(LintRequest(BLOCK_UPDATE, "m.py", plan="unsafe"))
    assert unsafe.changed  # offered, honestly, as the behaviour-changing tier


def test_agl101_conditional_call_is_not_safe() -> None:
    source = BLOCK_UPDATE.replace(
        "        with torch.no_grad():\n            y = x * x\n            W.sub_(0.0 * g)  # a fused parameter update\n            if FLAG:  # debug only\n                torch.autograd.grad(y, x, g)\n",
        "        y = x * x\n        W.mul_(1.0)\n        if FLAG:\n            torch.autograd.grad(y, x, g)\n",
    )
    assert not fix_text(LintRequest(source, "m.py")).changed


SHADOWED = """\
import torch as t
from torch.autograd import grad


class Fn(t.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        r = grad(y, x, g)[0]
        t = 2.0
        return r * t
"""


def test_agl101_does_not_use_an_alias_the_function_rebinds() -> None:
    # was `with t.enable_grad():`: UnboundLocalError on every call
    fixed = fix_text(LintRequest(SHADOWED, "m.py")).source
    # after the module's first import of torch: torch is loaded by then, so it only binds a name
    assert fixed.startswith("import torch as t\nimport torch\n")
    assert "with torch.enable_grad():" in fixed
    assert differences(SHADOWED, fixed, function_scenarios) == []


def test_agl202_does_not_use_an_alias_the_function_rebinds() -> None:
    source = """\
import torch as t
import fake_ext


class Fn(t.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        fake_ext.scale_(g, 2.0)
        t = 1.0
        return g * t
"""
    fixed = fix_text(LintRequest(source, "m.py")).source
    assert "g = g.clone(memory_format=torch.contiguous_format)" in fixed
    assert differences(source, fixed, function_scenarios) == []


def test_new_import_goes_after_a_future_import_that_shares_its_line() -> None:
    source = "from __future__ import annotations; import math\n" + SHADOWED.replace(
        "import torch as t\n", "import torch as t\n", 1
    ).replace("        t = 2.0\n", "        t = math.e\n")
    fixed = fix_text(LintRequest(source, "m.py")).source
    assert compile_error(fixed) is None  # was above the __future__ import: a SyntaxError
    assert fixed.startswith(
        "from __future__ import annotations; import math\nimport torch as t\nimport torch\n"
    )


def test_an_existing_guarded_import_is_used_not_duplicated() -> None:
    source = SHADOWED.replace(
        "import torch as t\n",
        "try:\n    import torch\nexcept ImportError:  # optional\n    torch = None\nimport torch as t\n",
    )
    fixed = fix_text(LintRequest(source, "m.py")).source
    assert fixed.count("import torch\n") == 1
    assert "with torch.enable_grad():" in fixed


def test_agl103_in_an_if_or_a_loop_is_not_rewritten() -> None:
    base = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            y = x * x
{call}
        return x.grad
"""
    in_if = base.format(
        call="            if ctx.needs_input_grad[0]:\n                y.backward(g)"
    )
    in_loop = base.format(call="            for _ in range(2):\n                y.backward(g)")
    for source in (in_if, in_loop):
        outcome = fix_text(LintRequest(source, "m.py", plan="unsafe"))
        assert "AGL103" not in outcome.applied, outcome.source


def test_agl105_keeps_a_type_ignore_comment() -> None:
    source = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            y = x * x
            (gx,) = torch.autograd.grad(
                y, x, g,  # type: ignore[arg-type]
            )
        return gx
"""
    fixed = fix_text(LintRequest(source, "m.py", plan="unsafe"))
    assert "AGL105" in fixed.applied
    assert "# type: ignore[arg-type]" in fixed.source
    assert compile_error(fixed.source) is None


def test_new_blocks_use_the_indentation_of_their_function_not_of_the_file() -> None:
    source = (
        "import torch\n\nif True:\n\tLIMIT = 1\n\n\n"
        "class Fn(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n"
        "        return x * x\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
        "        y = x * x\n        return torch.autograd.grad(y, x, g)[0]\n"
    )
    fixed = fix_text(LintRequest(source, "m.py")).source
    assert "        with torch.enable_grad():\n            y = x * x\n" in fixed
    assert compile_error(fixed) is None  # a tab there would be a TabError


SWEPT = """\
import torch
from torch.autograd import grad as agrad

FLAG = False
MODE = 0
W = torch.ones(3, 4, requires_grad=True)


def helper(v):
    with torch.enable_grad():
        return v * v


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.a = 2.0
        ctx.b = 3.0
        ctx.n = 4
        ctx.s64 = torch.full((3, 4), 1.5, dtype=torch.float64)
        ctx.set_materialize_grads(False)
        return x * 2, 3

    @staticmethod
    def backward(ctx, g, g2):
        h = g.contiguous()
        if MODE == 1:
            g.add_(ctx.n, alpha=2)
        else:
            g.zero_()
        return g + h.reshape(3, 4)
"""


def test_a_copy_first_fix_is_not_safe_after_contiguous_reads_the_gradient() -> None:
    """Found by sweep.py (1,000 programs): `h = g.contiguous()` copies a stride-0 gradient but
    aliases the dense clone the fix makes, so `g.zero_()` then zeroes `h` too."""
    safe = fix_text(LintRequest(SWEPT, "m.py", enabled=frozenset({"AGL406"})))
    assert safe.error is None and not safe.changed
    unsafe = fix_text(LintRequest(SWEPT, "m.py", enabled=frozenset({"AGL406"}), plan="unsafe"))
    assert unsafe.changed and "g = g.clone()" in unsafe.source
