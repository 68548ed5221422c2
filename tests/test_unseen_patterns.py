"""Patterns found in published code nobody here had read (issue 14): each test is the bad code,
the finding it gets (rule, line, what the message says), and the code that is clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from autogradlint.engine.door import lint
from autogradlint.engine.request import LintRequest


def _found(code: str) -> list[tuple[str, int, str, str]]:
    result = lint(LintRequest(code, "example.py"))
    assert result.error is None
    return [(f.rule_id, f.line, f.message, f.help) for f in result.findings]


# --- Family A, one call deeper -------------------------------------------------------------

HELPER = """\
import torch


def _recompute_grad(fn, x, g):
    y = fn(x)
    return torch.autograd.grad(y, x, g)


class Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.fn = fn
        ctx.save_for_backward(x)
        return fn(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_()
        (gx,) = _recompute_grad(ctx.fn, x, g)
        return gx, None
"""


def test_a_helper_that_differentiates_with_grad_mode_off_is_reported_at_its_call() -> None:
    [(rule, line, message, _help)] = _found(HELPER)
    assert (rule, line) == ("AGL101", 20)
    assert "(in `_recompute_grad()`)" in message
    fixed = HELPER.replace(
        "    y = fn(x)\n    return",
        "    with torch.enable_grad():\n        y = fn(x)\n        return",
    )
    assert _found(fixed) == []


def test_a_helper_two_calls_deep_is_followed_and_the_path_named() -> None:
    code = HELPER.replace(
        "(gx,) = _recompute_grad(ctx.fn, x, g)", "(gx,) = _outer(ctx.fn, x, g)"
    ).replace(
        "class Recompute",
        "def _outer(fn, x, g):\n    return _recompute_grad(fn, x, g)\n\n\nclass Recompute",
    )
    [(rule, line, message, _help)] = _found(code)
    assert rule == "AGL101" and line == 24
    assert "(in `_outer() -> _recompute_grad()`)" in message


def test_a_shadowed_helper_name_is_not_followed() -> None:
    code = HELPER.replace(
        "(gx,) = _recompute_grad(ctx.fn, x, g)",
        "_recompute_grad = ctx.fn\n        (gx,) = _recompute_grad(x, x, g)",
    )
    assert [f[0] for f in _found(code)] == []


METHOD_HELPER = """\
import torch
from torch import nn


class Recomputer(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def grad_of(self, x, g):
        y = self.fn(x)
        return torch.autograd.grad(y, x, g)


class Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, recomputer):
        ctx.recomputer = recomputer
        ctx.save_for_backward(x)
        return recomputer.fn(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_()
        (gx,) = ctx.recomputer.grad_of(x, g)
        return gx, None
"""


def test_a_method_called_on_an_object_held_on_ctx_is_followed() -> None:
    """backward calls `ctx.recomputer.grad_of(...)`: the object's class is not written there,
    but the file defines the only `grad_of`, and it differentiates with grad mode off."""
    [(rule, line, message, _help)] = _found(METHOD_HELPER)
    assert (rule, line) == ("AGL101", 26)
    assert "(in `Recomputer.grad_of()`)" in message
    guarded = METHOD_HELPER.replace(
        "        y = self.fn(x)\n        return",
        "        with torch.enable_grad():\n            y = self.fn(x)\n            return",
    )
    assert _found(guarded) == []


def test_a_method_is_not_followed_through_a_module_a_kernel_or_ctx_itself() -> None:
    """`utils.grad_of(...)` is an imported module's function, and `ctx.grad_of` would be ctx's
    own attribute: neither runs the file's `Recomputer.grad_of`."""
    for call in ("utils.grad_of(x, g)", "ctx.grad_of(x, g)"):
        code = METHOD_HELPER.replace("ctx.recomputer.grad_of(x, g)", call).replace(
            "from torch import nn\n", "from torch import nn\nfrom . import utils\n"
        )
        # (family B warns that `utils`, which nothing here holds, cannot be read: not A's say)
        assert [f for f in _found(code) if f[0].startswith("AGL1")] == [], call


def test_a_staticmethod_called_on_an_object_binds_no_receiver() -> None:
    """A staticmethod called on an instance gets the call's arguments from its first
    parameter: `g` is the gradient, not the object."""
    code = METHOD_HELPER.replace(
        "    def grad_of(self, x, g):\n        y = self.fn(x)",
        "    @staticmethod\n    def grad_of(fn, x, g):\n        y = fn(x)",
    ).replace("ctx.recomputer.grad_of(x, g)", "ctx.recomputer.grad_of(ctx.recomputer.fn, x, g)")
    [(rule, _line, message, _help)] = _found(code)
    assert rule == "AGL101" and "(in `Recomputer.grad_of()`)" in message


def test_a_kernel_entry_point_named_backward_behind_a_loader_is_not_a_graph_walk() -> None:
    code = """\
import torch
from .build import get_ext


class Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return get_ext().forward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            return get_ext().backward(g.contiguous(), x)
"""
    assert _found(code) == []
    # ...while a tensor method chain ending in backward() still is one:
    walk = code.replace(
        "return get_ext().backward(g.contiguous(), x)",
        "y = x.detach().requires_grad_() * 2\n            y.sum().backward()\n            return g",
    )
    assert [f[0] for f in _found(walk)] == ["AGL104"]


# --- Contract noise -----------------------------------------------------------------------


def test_one_save_for_backward_call_is_one_finding_naming_every_non_tensor() -> None:
    code = """\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n: int, alpha: float):
        ctx.save_for_backward(x, n, alpha, 3)
        return x * alpha

    @staticmethod
    def backward(ctx, g):
        x, n, alpha, k = ctx.saved_tensors
        return g * alpha, None, None
"""
    [(rule, line, message, help_)] = _found(code)
    assert (rule, line) == ("AGL404", 7)
    assert message.endswith("gets 3 non-tensors: `n` and 2 more")
    assert "`n`, `alpha`, `3`" in help_


def test_gradient_count_says_which_gradient_lands_in_which_slot() -> None:
    code = """\
import torch


class Attn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, scale, causal):
        ctx.save_for_backward(q, k, v)
        return q @ k.t() @ v

    @staticmethod
    def backward(ctx, g):
        dq, dk, dv = g, g, g
        return dk, dq, dv, None, None
"""
    [(rule, line, message, help_)] = _found(code)
    assert (rule, line) == ("AGL401", 13)
    assert message == "`Attn.backward` returns 5 gradient(s) for 6 input(s)"
    assert "q <- dk, k <- dq, v <- dv, bias <- None, scale <- None, causal <- (nothing)" in help_
    assert "`dk` looks like the gradient of `k` but is in the slot of `q`" in help_
    fixed = code.replace("return dk, dq, dv, None, None", "return dq, dk, dv, None, None, None")
    assert _found(fixed) == []


def test_a_generic_of_tensor_is_not_a_tensor_on_ctx() -> None:
    code = """\
import torch
from torch import Tensor


class AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, req: "Request[Tensor]", w: "Optional[Tensor]"):
        ctx.req = req
        ctx.w = w
        return x

    @staticmethod
    def backward(ctx, g):
        ctx.req.wait()
        return g * ctx.w, None, None
"""
    assert [(f[0], f[1]) for f in _found(code)] == [("AGL403", 9)]


# --- Rules new with issue 14 --------------------------------------------------------------


def test_backward_writing_a_saved_input_is_reported_and_out_of_place_is_clean() -> None:
    code = """\
import torch


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        x.mul_(g)
        return w * g, x
"""
    [(rule, line, message, _help)] = _found(code)
    assert (rule, line) == ("AGL409", 13)
    assert message == "`Mul.backward` writes saved `x` in place: forward's input `x`"
    fixed = code.replace(
        "        x.mul_(g)\n        return w * g, x", "        return w * g, x * g"
    )
    assert _found(fixed) == []


def _severities(code: str) -> list[tuple[str, int, str]]:
    return [(f.rule_id, f.line, f.severity) for f in lint(LintRequest(code, "example.py")).findings]


KEPT = """\
import torch


class Loss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.grads = torch.full_like(x, 3.0)
        ctx.save_for_backward(x.detach() * 3)
        return (x * 3).sum()

    @staticmethod
    def backward(ctx, g):
        (scaled,) = ctx.saved_tensors
        scaled.mul_(g)
        return ctx.grads.mul_(g)
"""


def test_changing_a_saved_intermediate_or_a_kept_tensor_is_a_warning() -> None:
    """The caller never holds these (D9.1 is an error): only a second backward meets them
    again, raising for the saved intermediate (D9.3) and silently scaled for the one kept on
    ctx (D9.4)."""
    assert _severities(KEPT) == [("AGL409", 14, "warning"), ("AGL409", 15, "warning")]
    [_, (_rule, _line, message, help_)] = _found(KEPT)
    assert (
        message == "`Loss.backward` writes saved `ctx.grads` in place: forward's tensor kept on ctx"
    )
    assert "silently returns another gradient" in help_
    out_of_place = KEPT.replace("        scaled.mul_(g)\n", "").replace(".mul_(g)", " * g")
    assert _found(out_of_place) == []
    fresh = KEPT.replace(
        "(scaled,) = ctx.saved_tensors\n        scaled.mul_(g)\n", "ctx.grads = g.new_ones(3)\n"
    )
    assert _found(fresh) == []  # backward's own buffer, set again each run


RELEASED = """\
import torch


class Layer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, provider):
        ctx.provider = provider
        ctx.pinned = provider.pin(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        pinned = ctx.pinned
        w = pinned if pinned is not None else ctx.provider.fetch()
        ctx.pinned = None
        return g * w, None
"""


def test_releasing_ctx_state_after_reading_it_is_reported_unless_backward_tests_it() -> None:
    """`ctx.pinned = None` after reading it leaves None for a second backward (D8.3); this
    backward tests the value first and refetches, so the release is handled."""
    assert _found(RELEASED) == []
    unguarded = RELEASED.replace("pinned if pinned is not None else ctx.provider.fetch()", "pinned")
    [(rule, line, message, _help)] = _found(unguarded)
    assert (rule, line) == ("AGL408", 15)
    assert "`ctx.pinned = None`" in message
    written_only = unguarded.replace(
        "        pinned = ctx.pinned\n        w = pinned\n", "        w = 1\n"
    )
    assert _found(written_only) == []  # never read by backward: nothing consumed


def test_clearing_an_object_held_on_ctx_is_consuming_state() -> None:
    code = """\
import torch


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, handle):
        ctx.handle = handle
        return x * 2

    @staticmethod
    def backward(ctx, g):
        handle = ctx.handle
        buffer = handle.tensor
        handle.tensor = None
        ctx.free_me = None
        return g * buffer, None
"""
    assert [(f[0], f[1]) for f in _found(code)] == [("AGL408", 14)]


def test_forward_called_with_none_for_ctx_outside_a_function() -> None:
    code = """\
import torch


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x**3

    @staticmethod
    def backward(ctx, g):
        return g * 0


class Outer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return Cube.forward(None, x) * 2

    @staticmethod
    def backward(ctx, g):
        return g


def cube(x):
    return Cube.forward(None, x)
"""
    assert [(f[0], f[1]) for f in _found(code)] == [("AGL407", 25)]


def test_apply_arity_follows_the_class_in_scope_not_a_namesake() -> None:
    code = """\
import torch


def test_one():
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

    return Fn.apply(torch.ones(1), torch.ones(1))


def test_two():
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a

    return Fn.apply(torch.ones(1), torch.ones(1))
"""
    [(rule, line, message, help_)] = _found(code)
    assert (rule, line) == ("AGL410", 19)
    assert message == "`Fn.apply` gets 2 argument(s); its forward takes 1"
    assert "Fn.forward() takes 2 positional arguments but 3 were given" in help_


def test_apply_arity_is_checked_across_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(
        "import torch\n\n\nclass Mul(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, a, b, scale=1.0):\n        return a * b * scale\n"
    )
    (pkg / "model.py").write_text(
        "from .ops import Mul\n\n\ndef run(x):\n    return Mul.apply(x)\n\n\n"
        "def fine(x):\n    return Mul.apply(x, x)\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "autogradlint",
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "pkg/model.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    assert "pkg/model.py:5:12: AGL410 `Mul.apply` gets 1 argument(s); its forward takes 2 to 3" in (
        result.stdout
    )
    assert result.stdout.count("AGL410") == 1


def test_family_a_follows_a_helper_in_another_file(tmp_path: Path) -> None:
    """`recompute_grad` lives in pkg/utils.py: the nested `autograd.grad` it makes runs in
    backward's grad mode (off), and the finding names it, at the call in backward."""
    from autogradlint.config import Config
    from autogradlint.runner import discover, lint_paths

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(
        "import torch\n\n"
        "def recompute_grad(fn, x, g):\n"
        "    y = fn(x)\n"
        "    return torch.autograd.grad(y, x, g)[0]\n"
    )
    (pkg / "ops.py").write_text(
        "import torch\n"
        "from .utils import recompute_grad\n\n"
        "class Softplus(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        ctx.save_for_backward(x)\n"
        "        return torch.nn.functional.softplus(x)\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        (x,) = ctx.saved_tensors\n"
        "        x = x.detach().requires_grad_()\n"
        "        return recompute_grad(torch.nn.functional.softplus, x, g)\n"
    )
    config = Config(root=tmp_path)

    def found() -> list[tuple[str, int, str]]:
        files = discover([str(pkg / "ops.py")], config, respect_gitignore=False).files
        results = lint_paths(files, config, root=tmp_path)
        return [(f.rule_id, f.line, f.message) for r in results for f in r.findings]

    ((rule, line, message),) = found()
    assert (rule, line) == ("AGL101", 14) and "(in `recompute_grad()`)" in message
    # the helper, fixed, in its own file: the finding goes
    (pkg / "utils.py").write_text(
        "import torch\n\n"
        "def recompute_grad(fn, x, g):\n"
        "    with torch.enable_grad():\n"
        "        y = fn(x)\n"
        "    return torch.autograd.grad(y, x, g)[0]\n"
    )
    assert found() == []


# --- AGL306 reads which keys of the request a handler honours ------------------------------

HANDLERS = """\
import torch
from torch.utils._python_dispatch import return_and_correct_aliasing

aten = torch.ops.aten


@implements(aten._to_copy.default)
def device_only(func, types, args, kwargs):
    device = kwargs.get("device", None)
    return return_and_correct_aliasing(func, args, kwargs, Wrapper(args[0]._data.to(device)))


@implements(aten._to_copy.default)
def itself(func, types, args, kwargs):
    return return_and_correct_aliasing(func, args, kwargs, args[0])


@implements(aten._to_copy.default)
def passes(func, types, args, kwargs):
    return return_and_correct_aliasing(func, args, kwargs, args[0].to(*args[1:], **kwargs))


class UInt4(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func is aten.to.dtype:
            self, dtype = args
            return unpack(self.elem).view(dtype)
        if func is aten._to_copy.default:
            if kwargs == {"dtype": torch.uint8}:
                return unpack(args[0].elem)
            raise NotImplementedError(kwargs)


class Trained(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs):
        out = func(*unwrap(args), **unwrap(kwargs))
        if func in {aten._to_copy.default, aten.new_zeros.default}:
            return cls(out)
        return out
"""


def test_a_handler_must_honour_each_key_of_the_request() -> None:
    """Reading only the device drops the dtype (C5.5), and `return_and_correct_aliasing`
    applies nothing; handing kwargs on, `aten.to.dtype`'s positional dtype, comparing the
    whole request and answering with an earlier redispatch all honour it."""
    found = [(rule, line, message) for rule, line, message, _help in _found(HANDLERS)]
    assert found == [
        ("AGL306", 8, "`device_only` handles `_to_copy` but ignores the requested dtype"),
        ("AGL306", 14, "`itself` handles `_to_copy` but ignores the requested dtype and device"),
    ]


def test_the_request_is_followed_into_a_helper_of_the_file() -> None:
    """`return _to_copy_impl(args[0], kwargs)`: what the helper honours of its parameter is
    what the branch honours (one call deep); handed on with `**`, or copied first, it counts."""
    code = """\
import torch

aten = torch.ops.aten


def _to_copy_impl(tensor, request):
    device = request.get("device")
    return Wrapper(tensor._data.to(device))


def _honouring(tensor, **request):
    options = dict(request)
    return Wrapper(tensor._data.to(dtype=options.get("dtype"), device=options.get("device")))


class Wrapper(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        kwargs = kwargs or {}
        if func is aten._to_copy.default:
            return _to_copy_impl(args[0], kwargs)
        if func is aten.empty_like.default:
            return _honouring(args[0], **kwargs)
        raise NotImplementedError(func)
"""
    [(rule, line, message, _help)] = _found(code)
    assert (rule, line) == ("AGL306", 20)
    assert message.endswith("handles `_to_copy` but ignores the requested dtype")


def test_a_request_normalised_under_its_own_name_is_read_by_key() -> None:
    """torchao's default `_to_copy`: `kwargs = self._get_to_kwargs(*args[1:], **kwargs)` keeps
    the request under its name; the handler then takes only the device from it."""
    code = """\
import torch
from torch.utils._python_dispatch import return_and_correct_aliasing

aten = torch.ops.aten


@implements(aten._to_copy.default)
def _to_copy(func, types, args, kwargs):
    self = args[0]
    kwargs = self._get_to_kwargs(*args[1:], **kwargs)
    device = kwargs.pop("device")
    out = self.__class__(self.qdata.to(device), self.scale.to(device))
    return return_and_correct_aliasing(func, args, kwargs, out)
"""
    [(rule, line, message, _help)] = _found(code)
    assert (rule, line) == ("AGL306", 8)
    assert message.endswith("ignores the requested dtype")
    both = code.replace(
        '    device = kwargs.pop("device")\n',
        '    device = kwargs.pop("device")\n    dtype = kwargs.pop("dtype")\n',
    ).replace("self.scale.to(device)", "self.scale.to(device, dtype)")
    assert _found(both) == []


PACKED_HANDLERS = """\
import torch

aten = torch.ops.aten
OPS = {}


def implements(ops):
    def decorator(func):
        for op in ops:
            OPS[op] = func
        return func

    return decorator


@implements([aten._to_copy.default])
def dtype_only(func, *args, **kwargs):
    return args[0][0].dequantize().to(args[1]["dtype"])


@implements([aten._to_copy.default])
def both(func, *args, **kwargs):
    out = args[0][0].dequantize().to(args[1]["dtype"])
    if "device" in args[1]:
        out = out.to(args[1]["device"])
    return out


class NF4(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        if func in OPS:
            return OPS[func](func, args, kwargs)
        raise NotImplementedError(func)
"""


def test_a_handler_given_args_and_kwargs_packed_in_star_args() -> None:
    """torchao's NF4Tensor: `OPS[func](func, args, kwargs)` hands the handler `def
    _to_copy(func, *args, **kwargs)` the dispatch args as `args[0]` and the request as
    `args[1]`; reading only `args[1]["dtype"]`, `nf4.to("cuda", torch.bfloat16)` stays on the
    CPU (C5.1). Reading both keys is the fix."""
    found = [(rule, line, message) for rule, line, message, _help in _found(PACKED_HANDLERS)]
    assert found == [
        ("AGL306", 17, "`dtype_only` handles `_to_copy` but ignores the requested device"),
    ]


# --- Family A in a backward step written apart (diffusers' attention backward ops) -----------

CTX_STEP = """\
import torch


def _attention_backward_op(ctx: torch.autograd.function.FunctionCtx, grad_out, *args):
    query, key = ctx.saved_tensors
    query.requires_grad_(True)
    out = query @ key.T
    (grad_query,) = torch.autograd.grad(out, [query], grad_out)
    return grad_query, None


class Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, backward_op):
        ctx.save_for_backward(query, key)
        ctx.backward_op = backward_op
        return query @ key.T

    @staticmethod
    def backward(ctx, grad_out):
        grad_query, grad_key = ctx.backward_op(ctx, grad_out)
        return grad_query, grad_key, None


def attention(query, key):
    return Attention.apply(query, key, _attention_backward_op)
"""


def test_a_backward_step_typed_with_the_ctx_is_read_as_a_backward() -> None:
    """`ctx: FunctionCtx` and a read of `ctx.saved_tensors` say the function runs inside a
    backward (here through `ctx.backward_op(ctx, grad_out)`), with grad mode off in training:
    `out` has no graph and autograd.grad raises (A2.1). Under enable_grad it works, and
    without create_graph a double backward drops the term (A3.3): `requires_grad_` on the
    saved tensor itself makes no private leaf."""
    assert [(r, line) for r, line, _m, _h in _found(CTX_STEP)] == [("AGL101", 8)]
    enabled = CTX_STEP.replace(
        "    out = query @ key.T\n    (grad_query,) = torch.autograd.grad(out, [query], grad_out)\n",
        "    with torch.enable_grad():\n        out = query @ key.T\n"
        "        (grad_query,) = torch.autograd.grad(out, [query], grad_out)\n",
    )
    assert [(r, line) for r, line, _m, _h in _found(enabled)] == [("AGL105", 9)]
    fixed = enabled.replace("grad_out)\n", "grad_out, create_graph=create_graph)\n").replace(
        "    query, key = ctx.saved_tensors\n",
        "    create_graph = torch.is_grad_enabled()  # on entry: True under create_graph\n"
        "    query, key = ctx.saved_tensors\n",
    )
    assert _found(fixed) == []
    untyped = CTX_STEP.replace("ctx: torch.autograd.function.FunctionCtx", "ctx")
    assert _found(untyped) == []  # nothing says what calls it
