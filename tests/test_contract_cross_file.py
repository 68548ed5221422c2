"""The contract rules read forward and backward through the project index, whichever file
defines them (issue 32): a Function that inherits forward from a base class in another module
is held to it exactly as when both classes sit in one file."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import BUT_FAKES

from autogradlint.cache import Cache
from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths

BASE = """\
import torch


class BaseFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        ctx.shape = a.shape
        ctx.w = c
        return a * b + c
"""

CHILD = """\
from .base import BaseFn


class ChildFn(BaseFn):
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a


class Fixed(BaseFn):
    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a, g


def run(a, b):
    return ChildFn.apply(a, b)
"""


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    pkg = tmp_path / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


def _found(tmp_path: Path, *names: str, cache: bool = False) -> list[tuple[str, str, int]]:
    config = Config(root=tmp_path)
    pkg = tmp_path / "pkg"
    files = discover([str(pkg / n) for n in names], config, respect_gitignore=False).files
    project = discover([str(pkg)], config, respect_gitignore=False).files  # what the index reads
    stored = Cache(tmp_path / ".autogradlint_cache", config.fingerprint()) if cache else None
    results = lint_paths(files, config, root=tmp_path, cache=stored, project=project)
    return sorted(
        (Path(r.path).name, f.rule_id, f.line)
        for r in results
        for f in r.findings
        if f.rule_id.startswith("AGL4") and f.rule_id in BUT_FAKES
    )


def test_a_backward_is_held_to_the_forward_it_inherits_from_another_module(
    tmp_path: Path,
) -> None:
    _project(tmp_path, {"base.py": BASE, "child.py": CHILD})
    # checked alone, the child file is read with its project: 2 gradients for 3 inputs, and
    # `apply` given 2 arguments for 3 inputs
    assert _found(tmp_path, "child.py") == [("child.py", "AGL401", 8), ("child.py", "AGL410", 19)]


def test_the_finding_follows_the_base_when_it_changes(tmp_path: Path) -> None:
    pkg = _project(tmp_path, {"base.py": BASE, "child.py": CHILD})
    assert ("child.py", "AGL401", 8) in _found(tmp_path, "child.py", cache=True)
    # the third input becomes optional: every backward and the apply call fit
    (pkg / "base.py").write_text(BASE.replace("a, b, c):", "a, b, c=None):"))
    assert _found(tmp_path, "child.py", cache=True) == []
    # one input: both backwards return too many, and apply passes too many
    (pkg / "base.py").write_text(BASE.replace("def forward(ctx, a, b, c):", "def forward(ctx, a):"))
    assert _found(tmp_path, "child.py", cache=True) == [
        ("child.py", "AGL401", 8),
        ("child.py", "AGL401", 15),
        ("child.py", "AGL410", 19),
    ]


SAVES = """\
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        return x * w

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2, None
"""

OVERRIDES = """\
import torch

from .ops import Scale


class InPlace(Scale):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x.mul_(g)  # forward, in ops.py, saved the caller's input x
        return x, None


class KeepsWeight(Scale):
    @staticmethod
    def forward(ctx, x, w):
        ctx.w = w  # the backward inherited from ops.py never reads it
        ctx.x = x.contiguous()
        ctx.save_for_backward(x)
        return x * w

    @staticmethod
    def jvp(ctx, gx, gw):
        return gx * ctx.x
"""


def test_saved_and_kept_tensors_are_read_through_the_other_module(tmp_path: Path) -> None:
    _project(tmp_path, {"ops.py": SAVES, "layers.py": OVERRIDES})
    assert _found(tmp_path, "layers.py") == [
        ("layers.py", "AGL403", 18),
        ("layers.py", "AGL409", 10),
    ]


FORWARD_ONLY = """\
from .ops import Scale


class Wider(Scale):
    @staticmethod
    def forward(ctx, x, w, bias):
        ctx.save_for_backward(x)
        return x * w + bias
"""


def test_a_forward_that_no_longer_fits_the_backward_it_inherits(tmp_path: Path) -> None:
    _project(tmp_path, {"ops.py": SAVES, "wide.py": FORWARD_ONLY})
    # Scale.backward (ops.py) returns 2 gradients; Wider.forward takes 3 inputs
    assert _found(tmp_path, "wide.py") == [("wide.py", "AGL401", 6)]


SETUP_BASE = """\
import torch


class Base(torch.autograd.Function):
    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w = inputs
        ctx.x = x  # kept as an attribute: in this file Base has no forward to say it is a tensor
        ctx.w = w

    @staticmethod
    def backward(ctx, g):
        return g * ctx.w, g * ctx.x
"""

SETUP_CHILD = """\
import torch

from .base import Base


class Fn(Base):
    @staticmethod
    def forward(x: torch.Tensor, w: torch.Tensor):
        return x * w


def model(x, w):
    return Fn.apply(x, w)
"""


def test_nothing_is_reported_on_the_lines_of_another_module(tmp_path: Path) -> None:
    # Fn's tensors reach ctx in base.py's setup_context: those lines have no place in main.py
    # (and once had no position: the file was not checked at all)
    _project(tmp_path, {"base.py": SETUP_BASE, "main.py": SETUP_CHILD})
    config = Config(root=tmp_path)
    files = discover([str(tmp_path / "pkg" / "main.py")], config, respect_gitignore=False).files
    project = discover([str(tmp_path / "pkg")], config, respect_gitignore=False).files
    results = lint_paths(files, config, root=tmp_path, project=project)
    assert [(r.error, r.findings) for r in results] == [(None, [])]


KEYWORD_BASE = """\
import torch


class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, *, scale=2.0):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x * w * scale
"""

KEYWORD_CHILD = """\
from .base import Base


class Fn(Base):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w * ctx.scale, g * x * ctx.scale


def model(x, w):
    return Fn.apply(x)  # TypeError: missing a required argument: 'w'


def fixed(x, w):
    return Fn.apply(x, w)
"""


def test_apply_is_counted_against_an_inherited_forward_with_keyword_only_defaults(
    tmp_path: Path,
) -> None:
    _project(tmp_path, {"base.py": KEYWORD_BASE, "child.py": KEYWORD_CHILD})
    assert _found(tmp_path, "child.py") == [("child.py", "AGL410", 12)]


MIXIN = """\
import torch


class GradMixin:
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x, g
"""

MIXED = """\
import torch

from .mixins import GradMixin


class Fn(GradMixin, torch.autograd.Function):
    @staticmethod
    def forward(x, w):  # 2 inputs; the mixin's backward returns 3 gradients
        return x * w

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
"""


def test_a_forward_is_held_to_the_backward_of_a_mixin_in_another_module(tmp_path: Path) -> None:
    _project(tmp_path, {"mixins.py": MIXIN, "main.py": MIXED})
    assert _found(tmp_path, "main.py") == [("main.py", "AGL401", 8)]
    # the mixin returns one gradient per input: nothing to report
    (tmp_path / "pkg" / "mixins.py").write_text(MIXIN.replace(", g\n", "\n"))
    assert _found(tmp_path, "main.py") == []


SETUP_MODULE = """\
def setup_context(context, inputs, output):  # torch passes ctx=...: TypeError
    context.s = inputs[1]


def fixed_setup(ctx, inputs, output):
    ctx.s = inputs[1]
"""

OP = """\
import torch

from pkg.setup import fixed_setup, setup_context


@torch.library.custom_op("pkg::scaled", mutates_args=())
def scaled(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s


@torch.library.custom_op("pkg::fixed", mutates_args=())
def fixed(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s


def backward(ctx, g):
    return g * ctx.s, None


scaled.register_autograd(backward, setup_context=setup_context)
fixed.register_autograd(backward, setup_context=fixed_setup)
"""


def test_a_setup_context_imported_from_another_module_is_read_there(tmp_path: Path) -> None:
    pkg = _project(tmp_path, {"setup.py": SETUP_MODULE, "ops.py": OP})
    assert _found(tmp_path, "ops.py", cache=True) == [("ops.py", "AGL411", 20)]
    # fixed in setup.py: the cached result of ops.py depended on it
    (pkg / "setup.py").write_text(SETUP_MODULE.replace("context, inputs", "ctx, inputs"))
    assert _found(tmp_path, "ops.py", cache=True) == []


LEGACY = """\
import torch


class InvMatmul(torch.autograd.Function):
    def __init__(self, tree):
        self.tree = tree

    def forward(self, rhs, *args):
        return rhs

    def backward(self, g):
        return g
"""

LEGACY_CALLER = """\
from .legacy import InvMatmul


def inv_matmul(tree, rhs):
    return InvMatmul(tree)(rhs)


def held(tree, rhs):
    func = InvMatmul(tree)
    return func(rhs)
"""


def test_a_legacy_function_of_another_module_instantiated_and_called(tmp_path: Path) -> None:
    _project(tmp_path, {"legacy.py": LEGACY, "caller.py": LEGACY_CALLER})
    assert _found(tmp_path, "caller.py") == [
        ("caller.py", "AGL407", 5),
        ("caller.py", "AGL407", 10),
    ]


def test_relative_imports_resolve_in_a_namespace_package(tmp_path: Path) -> None:
    # gpytorch/lazy/lazy_tensor.py imports `from ..functions._inv_matmul import InvMatmul`; a
    # tree without `__init__.py` (a namespace package) names its modules from the root only
    (tmp_path / "pyproject.toml").write_text("")
    caller = (
        "from ..functions.legacy import InvMatmul\n\n\ndef f(rhs):\n    return InvMatmul()(rhs)\n"
    )
    for folder, name, text in (("functions", "legacy.py", LEGACY), ("lazy", "caller.py", caller)):
        (tmp_path / "pkg" / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / folder / name).write_text(text)
    config = Config(root=tmp_path)
    path = tmp_path / "pkg" / "lazy" / "caller.py"
    files = discover([str(path)], config, respect_gitignore=False).files
    project = discover([str(tmp_path / "pkg")], config, respect_gitignore=False).files
    results = lint_paths(files, config, root=tmp_path, project=project)
    assert sorted((f.rule_id, f.line) for r in results for f in r.findings) == [("AGL407", 5)]


MIXIN_BACKWARD = """\
import torch
import torch.distributed as dist


class GradMixin:
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
{body}
        return grad_x, grad_w
"""

MIXED_FORWARD = """\
import torch

from .mixins import GradMixin


class Fn(GradMixin, torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w


def model(x, w):
    return Fn.apply(x, w)
"""

# Each hazard in the backward a mixin of another module gives a Function, and the same backward
# fixed: torch runs the mixin's backward (oracle K16, K32, K46, K47).
MIXIN_HAZARDS = [
    (  # AGL406: writes into the incoming gradient, which autograd shares with other consumers
        "AGL406",
        "h = g.view(-1)\nh[0] = 0.0\ngrad_x, grad_w = g * w, g * x",
        "h = g.clone().view(-1)\nh[0] = 0.0\ngrad_x, grad_w = h.view_as(g) * w, g * x",
    ),
    (  # AGL406: a collective writes its result into the gradient it is given
        "AGL406",
        "dist.all_reduce(g)\ngrad_x, grad_w = g * w, g * x",
        "g = g.clone()\ndist.all_reduce(g)\ngrad_x, grad_w = g * w, g * x",
    ),
    (  # AGL412: UnboundLocalError once x does not require grad
        "AGL412",
        "if ctx.needs_input_grad[0]:\n    grad_x = g * w\ngrad_w = g * x",
        "grad_x = None\nif ctx.needs_input_grad[0]:\n    grad_x = g * w\ngrad_w = g * x",
    ),
]


def test_a_backward_from_a_mixin_of_another_module_is_checked(tmp_path: Path) -> None:
    for rule, bad, fixed in MIXIN_HAZARDS:
        for body, expected in ((bad, [("mixins.py", rule)]), (fixed, [])):
            text = MIXIN_BACKWARD.format(body=textwrap.indent(body, " " * 8))
            _project(tmp_path, {"mixins.py": text, "main.py": MIXED_FORWARD})
            found = [(name, code) for name, code, _line in _found(tmp_path, "mixins.py")]
            assert found == expected, (rule, body)


NON_STATIC_MIXIN = """\
class GradMixin:
    def backward(self, g):  # through an instance, `self` is the instance, not ctx: TypeError
        x, w = self.saved_tensors
        return g * w, g * x
"""


def test_a_non_static_backward_in_a_mixin_of_another_module(tmp_path: Path) -> None:
    _project(tmp_path, {"mixins.py": NON_STATIC_MIXIN, "main.py": MIXED_FORWARD})
    assert _found(tmp_path, "mixins.py") == [("mixins.py", "AGL402", 2)]
    fixed = NON_STATIC_MIXIN.replace("    def backward", "    @staticmethod\n    def backward")
    (tmp_path / "pkg" / "mixins.py").write_text(fixed)
    assert _found(tmp_path, "mixins.py") == []


PACKING_BASE = """\
import torch


def _pack(*grads):
    return tuple(grads)


class Base(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return _pack(g * w * ctx.scale, g * x * ctx.scale, None, g)
"""

PACKED_CHILD = """\
from .base import Base


class Fn(Base):
    @staticmethod
    def forward(ctx, x, w, scale=2.0):  # apply passes 3: the 4th gradient `g` is one too many
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return x * w * scale


def model(x, w):
    return Fn.apply(x, w, 3.0)
"""


def test_a_helper_packing_an_inherited_backward_is_read_in_its_own_module(
    tmp_path: Path,
) -> None:
    # `_pack` is base.py's: the inherited backward's count is asked there (oracle K13, K62)
    _project(tmp_path, {"base.py": PACKING_BASE, "main.py": PACKED_CHILD})
    assert _found(tmp_path, "main.py") == [("main.py", "AGL401", 6)]
    (tmp_path / "pkg" / "base.py").write_text(PACKING_BASE.replace("None, g)", "None)"))
    assert _found(tmp_path, "main.py") == []


OPS = """\
import torch


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2
"""

CALLER = """\
from pkg.ops import Fn

scaled_op = Fn.apply


def model(x):
    return scaled_op(x, 1.0)  # TypeError: forward takes 1 input


def keyword(x):
    return Fn.apply(x, scale=3.0)  # TypeError: unexpected keyword argument 'scale'


def fixed(x):
    return scaled_op(x) + Fn.apply(x=x)
"""


def test_apply_through_an_alias_or_with_a_keyword_for_a_function_of_another_module(
    tmp_path: Path,
) -> None:
    # oracle K41 (the alias) and K43 (the keyword): the index hands over forward's names
    _project(tmp_path, {"ops.py": OPS, "main.py": CALLER})
    assert _found(tmp_path, "main.py") == [("main.py", "AGL410", 7), ("main.py", "AGL410", 11)]


UNPACKING = """\
from pkg.ops import Fn

ARGS_EXTRA = (1.0,)
NOTHING = []


def model(x):
    return Fn.apply(*(x,), *ARGS_EXTRA)  # TypeError: forward takes 1 input


def fixed(x, extra):
    return Fn.apply(*(x,), *NOTHING) + Fn.apply(x, *extra)
"""


def test_apply_unpacking_a_module_constant_for_a_function_of_another_module(
    tmp_path: Path,
) -> None:
    # oracle K42: `*ARGS_EXTRA` is a constant of the file, so its one element is counted
    _project(tmp_path, {"ops.py": OPS, "main.py": UNPACKING})
    assert _found(tmp_path, "main.py") == [("main.py", "AGL410", 8)]


KEEPING_BASE = """\
import torch


def _keep(ctx, name, value):
    setattr(ctx, name, value)


class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x)
        ctx.w = w  # nothing here says w is a tensor: no backward in this file
        _keep(ctx, "b", b)
        return x * w + b
"""

READING_CHILD = """\
from .base import Base


class Fn(Base):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.w, g * x, g * ctx.b  # gradients for w and b: both are tensors
"""


def test_a_tensor_kept_by_a_forward_of_another_module_is_reported_where_it_is_read(
    tmp_path: Path,
) -> None:
    # oracle K17: a change to w or b in place between forward and backward silently changes
    # the gradient; only the child's file has the gradients proving them tensors
    _project(tmp_path, {"base.py": KEEPING_BASE, "main.py": READING_CHILD})
    assert _found(tmp_path, "main.py", "base.py") == [
        ("main.py", "AGL403", 8),
        ("main.py", "AGL403", 8),
    ]
    # fixed: saved with save_for_backward, read back from ctx.saved_tensors
    base = KEEPING_BASE.replace("ctx.save_for_backward(x)", "ctx.save_for_backward(x, w, b)")
    base = base.replace(
        "        ctx.w = w  # nothing here says w is a tensor: no backward in this file\n", ""
    )
    base = base.replace('        _keep(ctx, "b", b)\n', "")
    child = READING_CHILD.replace("(x,) = ctx.saved_tensors", "x, w, b = ctx.saved_tensors")
    child = child.replace("g * ctx.w, g * x, g * ctx.b", "g * w, g * x, g * b")
    _project(tmp_path, {"base.py": base, "main.py": child})
    assert _found(tmp_path, "main.py", "base.py") == []


WRITING_BASE = """\
import torch


class Base(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_x, grad_w = g * w, g * x
        x.view(-1).mul_(2.0)  # x is the caller's input when the forward saved it
        return grad_x, grad_w
"""

SAVING_CHILD = """\
from .base import Base


class Fn(Base):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w
"""


def test_a_backward_of_another_module_writing_what_this_forward_saved(tmp_path: Path) -> None:
    # oracle K39: base.py alone has no forward to say what was saved; reported at the forward
    _project(tmp_path, {"base.py": WRITING_BASE, "main.py": SAVING_CHILD})
    assert _found(tmp_path, "main.py", "base.py") == [("main.py", "AGL409", 6)]
    fixed = WRITING_BASE.replace("x.view(-1).mul_(2.0)", "x = x * 2.0")
    (tmp_path / "pkg" / "base.py").write_text(fixed)
    assert _found(tmp_path, "main.py", "base.py") == []


ITEM_WRITING_BASE = """\
import torch


class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x[0] = 0.5  # a list or an int would be harmless: nothing here says x is a tensor
        return x * 2.0
"""

GRADIENT_CHILD = """\
from .base import Base


class Fn(Base):
    @staticmethod
    def backward(ctx, g):
        return g * 2.0  # a gradient for x: autograd takes one only for a tensor input
"""


def test_an_item_write_in_a_forward_of_another_module_proven_a_tensor_here(
    tmp_path: Path,
) -> None:
    # oracle K27: the caller's x changes in place; the evidence is this file's backward
    _project(tmp_path, {"base.py": ITEM_WRITING_BASE, "main.py": GRADIENT_CHILD})
    assert _found(tmp_path, "main.py", "base.py") == [("main.py", "AGL405", 6)]
    fixed = ITEM_WRITING_BASE.replace("x[0] = 0.5", "x = x.clone()\n        x[0] = 0.5")
    (tmp_path / "pkg" / "base.py").write_text(fixed)
    assert _found(tmp_path, "main.py", "base.py") == []


ANNOTATED_BASE = """\
import torch


class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w: torch.Tensor, ws: list[torch.Tensor]):
        ctx.w = w
        ctx.ws = ws
        return x * float(len(ws))
"""

SHAPE_ONLY_CHILD = """\
from .base import Base


class Fn(Base):
    @staticmethod
    def backward(ctx, g):
        return g * float(len(ctx.ws)) * ctx.w.shape[0], None, None
"""


def test_an_annotated_tensor_kept_by_a_forward_of_another_module_is_judged_by_its_reads(
    tmp_path: Path,
) -> None:
    # oracle K67: forward's annotation proves w and ws tensors, but the only backward, in
    # another module, reads their length and shape: D3.1 does not reach them, no finding
    _project(tmp_path, {"base.py": ANNOTATED_BASE, "main.py": SHAPE_ONLY_CHILD})
    assert _found(tmp_path, "main.py", "base.py") == []
    # a backward reading their values is reported where it reads them, once each
    reading = SHAPE_ONLY_CHILD.replace(
        "g * float(len(ctx.ws)) * ctx.w.shape[0]", "g * ctx.ws[0] * ctx.w"
    )
    _project(tmp_path, {"base.py": ANNOTATED_BASE, "main.py": reading})
    assert _found(tmp_path, "main.py", "base.py") == [
        ("main.py", "AGL403", 7),
        ("main.py", "AGL403", 7),
    ]
