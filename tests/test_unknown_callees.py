"""AGL201 (issue 31 §4): a gradient handed to code the linter cannot read is never clean.

Every call that takes a gradient is resolved to where its code lives: torch's own API, Python
(the project's or an installed `.py`), compiled code (judged by its C++), or nothing readable
(a dynamic import, a call's result, a value stored on ctx, a name nothing defines, a module
neither the project nor the interpreter holds). The last gives a warning that says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BUT_FAKES

from autogradlint import lint_source
from autogradlint.config import Config
from autogradlint.model import Finding
from autogradlint.runner import discover, lint_paths


def _flagged(code: str) -> dict[str, str]:
    """{callee named in the finding's help: severity} for every AGL201 finding."""
    found = {}
    for finding in lint_source(code).findings:
        if finding.rule_id not in BUT_FAKES:
            continue
        assert finding.rule_id == "AGL201", finding
        callee = finding.help.split("`", 2)[1]
        found[callee] = finding.severity
    return found


BACKWARD = """\
import copy
import importlib
import torch
from torch.nn import functional as F


def helper(x):
    return x * 2


class Fn(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad):
        w, = ctx.saved_tensors
        out = []
{calls}
        return grad
"""


def _backward(*calls: str) -> str:
    # each result is kept: a call made only for its effect may write (AGL202's own case)
    kept = [c if " = " in c else f"r = {c}" for c in calls]
    return BACKWARD.format(calls="\n".join(f"        {c}" for c in kept))


def test_only_what_cannot_be_read_is_flagged() -> None:
    code = _backward(
        # torch's own API, tensor methods on any receiver, Python's containers: known
        "torch.mm(w, grad)",
        "F.relu(grad)",
        "w.t().matmul(grad)",
        "out.append(grad)",
        "ctx.save_for_backward(grad)",
        "len(grad)",
        "copy.copy(grad)",
        # the project's Python: followed (it reaches nothing compiled)
        "helper(grad)",
        # nothing the linter can read
        "ctx.kernel(grad)",
        "ctx.module.bwd(grad)",
        "make_op()(grad)",
        "undefined_name(grad)",
        "ext = importlib.import_module('pkg._ext')",
        "ext.bwd(grad)",
    )
    assert _flagged(code) == {
        "ctx.kernel": "warning",
        "ctx.module.bwd": "warning",
        "make_op()": "warning",
        "undefined_name": "warning",
        "ext.bwd": "warning",
    }


def test_the_warning_says_what_could_not_be_read_and_how_to_settle_it() -> None:
    (finding,) = lint_source(_backward("ctx.kernel(grad)")).findings
    assert finding.severity == "warning"
    assert finding.help.startswith("`ctx.kernel` is a value stored on ctx")
    for way in ("native-sources", "stride-safe-extensions", ".contiguous()"):
        assert way in finding.help


def test_a_contiguous_gradient_is_clean_wherever_it_goes() -> None:
    code = _backward("ctx.kernel(grad.contiguous())", "other = ctx.other(grad)")
    assert _flagged(code) == {"ctx.other": "warning"}


def test_stride_safe_extensions_settle_an_unknown_callee() -> None:
    from dataclasses import replace

    code = _backward("ctx.kernel(grad)")
    assert [f.rule_id for f in lint_source(code).findings] == ["AGL201"]
    settings = replace(Config().settings, stride_safe=("ctx.kernel",))
    assert lint_source(code, settings=settings).findings == []


def test_a_call_result_of_python_is_python_and_of_unknown_code_unknown() -> None:
    code = _backward(
        "tree = helper(w)",
        "tree.solve(grad)",  # a method of what the project's Python made
        "op = ctx.make()",
        "op.run(grad)",  # a method of what a value stored on ctx made
        "torch.fx.Interpreter(w).run(grad)",  # a method of what torch made
        "ctx.make().run(grad)",
    )
    assert _flagged(code) == {"op.run": "warning", "ctx.make().run": "warning"}


def _installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "pyfast").mkdir(parents=True)
    (site / "pyfast" / "__init__.py").write_text("def bwd(g):\n    return g\n")
    (site / "binfast").mkdir()
    (site / "binfast" / "__init__.py").write_text("")
    (site / "binfast" / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (site / "binfast" / "_C.abi3.so").write_bytes(b"\x7fELF")
    monkeypatch.syspath_prepend(str(site))


def test_installed_modules_are_found_on_sys_path_without_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed `.py` is Python; an installed extension module without its source is
    compiled code the linter cannot read: a warning that says so."""
    _installed(tmp_path, monkeypatch)
    code = _backward("pyfast.bwd(grad)", "_C.bwd(grad)").replace(
        "import copy\n", "import copy\nimport pyfast\nfrom binfast import _C\n"
    )
    found = lint_source(code).findings
    assert [(f.rule_id, f.severity) for f in found] == [("AGL201", "warning")]
    assert "binfast._C.bwd" in found[0].help and "C++ is not among" in found[0].help


CLASS_TABLE = """\
import torch

from ._ops import bwd_raw as bwd_raw_cpu
try:
    from ._ops_cuda import bwd_raw as bwd_raw_cuda
except ImportError:
    bwd_raw_cuda = None


class Table(torch.autograd.Function):
    backward_ops = {"cpu": bwd_raw_cpu, "cuda": bwd_raw_cuda}

    @staticmethod
    def backward(ctx, grad):
        return Table.backward_ops[grad.device.type](grad, 2.0)
"""

CPP = """\
#include <torch/extension.h>
torch::Tensor bwd_raw(torch::Tensor grad, double s) {
    float* g = grad.data_ptr<float>();
    auto out = torch::empty_like(grad);
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < grad.numel(); ++i) o[i] = g[i] * s;
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("bwd_raw", &bwd_raw); }
"""

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, CUDAExtension
setup(ext_modules=[
    CppExtension("mypkg._ops", ["csrc/ops.cpp"]),
    CUDAExtension("mypkg._ops_cuda", ["csrc/ops.cpp"]),
])
"""


MODULE_TABLE = (
    CLASS_TABLE.replace('    backward_ops = {"cpu": bwd_raw_cpu, "cuda": bwd_raw_cuda}\n', "")
    .replace(
        "class Table(",
        'backward_ops = {"cpu": bwd_raw_cpu, "cuda": bwd_raw_cuda}\n\n\nclass Table(',
    )
    .replace("Table.backward_ops[", "backward_ops[")
)


def _built_project(tmp_path: Path, source: str) -> list[Finding]:
    """The findings on a project whose setup.py declares `mypkg._ops` (csrc/ops.cpp) and whose
    `mypkg/fn.py` is `source`."""
    root = tmp_path / "proj"
    (root / "csrc").mkdir(parents=True)
    (root / "mypkg").mkdir()
    (root / "setup.py").write_text(SETUP)
    (root / "csrc" / "ops.cpp").write_text(CPP)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "fn.py").write_text(source)
    config = Config(root=root)
    files = discover([str(root)], config, respect_gitignore=False).files
    return [f for r in lint_paths(files, config, root=root) for f in r.findings]


@pytest.mark.parametrize("source", [CLASS_TABLE, MODULE_TABLE], ids=["class", "module"])
def test_a_table_of_compiled_functions_is_judged_by_their_cpp(tmp_path: Path, source: str) -> None:
    """`Cls.ops[device](grad)`, `OPS[device](grad)`: each function the dict holds is resolved;
    the C++ proves a raw read, which stays an error."""
    found = _built_project(tmp_path, source)
    line = source.splitlines().index("        return " + source.split("return ")[-1].strip()) + 1
    assert [(f.rule_id, f.severity, f.line) for f in found] == [("AGL201", "error", line)]
    assert "reads it through `data_ptr()`" in found[0].help


GUARDED_HELPER = """\
import torch

from . import _ops

try:
    import triton  # noqa: F401

    def _bwd(g):
        return _ops.bwd_raw(g, 2.0)
except ImportError:
    def _bwd(g):
        return _ops.bwd_raw(g, 2.0)


class Fn(torch.autograd.Function):
    @staticmethod
    def backward(ctx, grad):
        return _bwd(grad)
"""


def test_a_helper_defined_under_try_is_followed(tmp_path: Path) -> None:
    """Module-level definitions under `if`/`try`/`except` are definitions: the helper is
    followed to the compiled call, whose C++ proves a raw read."""
    found = _built_project(tmp_path, GUARDED_HELPER)
    assert [(f.rule_id, f.severity, f.line) for f in found] == [("AGL201", "error", 18)]
    assert found[0].help.startswith("Through `_bwd()`")


STORED_ON_CTX = """\
import importlib
import torch


class Impl:
    def run(self, g):
        return g * 2


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.impl = Impl()
        ctx.fn = fn
        ctx.ext = importlib.import_module("pkg._ext")
        return x

    @staticmethod
    def backward(ctx, grad):
        a = ctx.impl.run(grad)
        b = ctx.fn(grad)
        c = ctx.ext.bwd(grad)
        return a + b + c, None
"""


def test_what_forward_stored_on_ctx_is_judged_where_forward_made_it() -> None:
    """`ctx.impl` is a project class's instance (Python); `ctx.fn` is what the caller handed to
    `apply` (not followed, not flagged); `ctx.ext` came from a dynamic import: unknown."""
    assert _flagged(STORED_ON_CTX) == {"ctx.ext.bwd": "warning"}


SETUP_CONTEXT = """\
import importlib
import torch


@torch.library.custom_op(
    "ns::helper",
    mutates_args=(),
)
def _helper(g: torch.Tensor) -> torch.Tensor:
    return g * 2


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(state, parts, x):
        return x

    @staticmethod
    def setup_context(ctx, inputs, output):
        state, parts, _ = inputs
        ctx.state = state
        ctx.parts = parts
        ctx.ext = importlib.import_module("pkg._ext")
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        w, = ctx.saved_tensors
        a = ctx.state.pre_backward(grad)
        b = ctx.parts[0](grad)
        c = w.attached_hook(grad)
        d = _helper(grad)
        e = ctx.ext.bwd(grad)
        return None, None, a + b + c + d + e
"""


def test_setup_context_saved_tensors_and_multiline_decorators_are_read() -> None:
    """What setup_context unpacked from `inputs` is what `apply` was handed; a saved tensor's
    attribute is Python; a function under a decorator written over several lines is defined."""
    assert _flagged(SETUP_CONTEXT) == {"ctx.ext.bwd": "warning"}


def test_module_level_definitions_under_if_try_and_long_decorators_are_indexed() -> None:
    from autogradlint.analysis.summaries import PythonFiles

    own = PythonFiles("<x>", GUARDED_HELPER + "\n" + SETUP_CONTEXT).own
    assert own.defines("_bwd") and own.defines("_helper")
    assert [type(s).__name__ for s in own.top("_bwd")] == ["FunctionDef", "FunctionDef"]


def test_names_are_never_evidence() -> None:
    """The defaults hold only torch's own API: a module named like an extension (`*_cuda`,
    `_C`) that nothing describes is unknown (a warning), not compiled code (an error); a
    decorator named `input_guard` guards nothing unless its source shows it does."""
    from autogradlint.settings import (
        DEFAULT_EXTENSION_MODULES,
        DEFAULT_GUARD_DECORATORS,
        DEFAULT_LOADERS,
        DEFAULT_STRIDE_SAFE,
        DEFAULT_WRITING,
    )

    assert DEFAULT_EXTENSION_MODULES == DEFAULT_GUARD_DECORATORS == ()
    assert DEFAULT_STRIDE_SAFE == DEFAULT_WRITING == ()
    assert all(loader.startswith("torch.") for loader in DEFAULT_LOADERS)
    code = _backward("fused_cuda.bwd(grad)").replace(
        "import copy\n", "import copy\nimport fused_cuda\n"
    )
    assert _flagged(code) == {"fused_cuda.bwd": "warning"}
    guarded = code.replace(
        "    @staticmethod\n    def backward",
        "    @staticmethod\n    @input_guard\n    def backward",
    ).replace("import copy\n", "import copy\nfrom somewhere import input_guard\n")
    assert _flagged(guarded) == {"fused_cuda.bwd": "warning"}


DECORATORS = """\
import functools

import torch


def _contiguous_if_needed(arg):
    return arg.contiguous() if isinstance(arg, torch.Tensor) else arg


def input_guard(fn=None):
    def decorator(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*(_contiguous_if_needed(a) for a in args), **kwargs)

        return wrapper

    return decorator(fn) if fn is not None else decorator


def contiguous(fn):
    return input_guard(fn)
"""

GUARDED_BACKWARD = """\
import torch

from mypkg.utils import {decorator}


class Fn(torch.autograd.Function):
    @staticmethod
    @{decorator}
    def backward(ctx, grad):
        return ctx.kernel(grad)
"""


@pytest.mark.parametrize("decorator", ["input_guard", "contiguous"])
def test_a_decorator_guards_when_its_source_shows_it(tmp_path: Path, decorator: str) -> None:
    """fla's `input_guard` makes each argument contiguous through a helper of its file, and
    `contiguous` hands the function to it; both are re-exported by the package's
    `utils/__init__.py`. Read from that source, they guard; the same backward undecorated is
    flagged."""
    root = tmp_path / "proj"
    (root / "mypkg" / "utils").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "utils" / "__init__.py").write_text(
        "from mypkg.utils.decorators import contiguous, input_guard\n"
    )
    (root / "mypkg" / "utils" / "decorators.py").write_text(DECORATORS)
    source = GUARDED_BACKWARD.format(decorator=decorator)
    (root / "mypkg" / "fn.py").write_text(source)
    (root / "mypkg" / "bare.py").write_text(source.replace(f"    @{decorator}\n", ""))
    config = Config(root=root)
    files = discover([str(root)], config, respect_gitignore=False).files
    found = [
        (Path(r.path).name, f.rule_id)
        for r in lint_paths(files, config, root=root)
        for f in r.findings
    ]
    assert found == [("bare.py", "AGL201")]


def test_an_unread_callee_named_in_place_writes_and_a_launcher_does_not() -> None:
    """`fused.scale_(g)` names an in-place write (AGL202: only a copy guards it); a launcher
    called for its effect (`launch(stream, (g, out))`) proves no write, and stays AGL201."""
    code = _backward("out2 = unknown_ext.scale_(grad, 2.0)")
    assert [(f.rule_id, f.severity) for f in lint_source(code).findings] == [("AGL202", "error")]
    launched = _backward("launch_kernel(None, (grad, out))").replace("r = launch", "launch")
    assert [(f.rule_id, f.severity) for f in lint_source(launched).findings] == [
        ("AGL201", "warning")
    ]


HELPERS = {
    "mypkg/__init__.py": "",
    "mypkg/cppcore.py": (
        "from cumm import tensorview as tv\n\n\n"
        "def to_tv(ten):\n"
        "    assert ten.is_contiguous()\n"
        "    ptr = ten.data_ptr()\n"
        "    return tv.from_blob(ptr, list(ten.shape))\n"
    ),
    "mypkg/ops.py": (
        "from mypkg.cppcore import to_tv\n\n\n"
        "def conv_backward(features, out_bp):\n"
        "    {guard}out_tv = to_tv(out_bp)\n"
        "    return features\n"
    ),
    "mypkg/functional.py": (
        "import torch\n\nimport mypkg.ops as ops\n\n\n"
        "class Conv(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_output):\n"
        "        (features,) = ctx.saved_tensors\n"
        "        return ops.conv_backward(features, grad_output)\n"
    ),
}


def _helper_findings(root: Path, guard: str) -> list[tuple[str, str, int, str]]:
    for name, text in HELPERS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text.replace("{guard}", guard))
    config = Config(root=root)
    files = discover([str(root)], config, respect_gitignore=False).files
    results = lint_paths(files, config, root=root)
    return [(f.rule_id, f.severity, f.line, f.help) for r in results for f in r.findings]


def test_a_raw_pointer_handed_to_unread_code_through_helpers(tmp_path: Path) -> None:
    """spconv's fix: backward -> `ops.conv_backward` -> `to_tv`, which hands
    `ten.data_ptr()` to `cumm`'s `from_blob`, a package nothing here holds. A raw pointer into
    the gradient reaching code the linter cannot read is a warning; made contiguous on the way,
    it is clean."""
    [(rule, severity, line, help_)] = _helper_findings(tmp_path / "raw", "")
    assert (rule, severity, line) == ("AGL201", "warning", 10)
    assert help_.startswith("Through `conv_backward()` -> `to_tv()`: `cumm.")
    fixed = _helper_findings(tmp_path / "fixed", "out_bp = out_bp.contiguous()\n    ")
    assert fixed == []
