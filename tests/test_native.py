"""Family B across the language boundary: the C/C++/CUDA behind a binding decides the finding.

Each test is a small project on disk (setup.py, csrc/, a package), the way users have them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autogradlint.config import Config
from autogradlint.native.index import NativeIndex, forget, index_for
from autogradlint.native.scan import CHECKED, GUARDED, RAW, STRIDED, UNKNOWN, Access, Source
from autogradlint.runner import discover, lint_paths

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
setup(name="mypkg", ext_modules=[CUDAExtension("mypkg._kernels", sources=["csrc/ops.cpp"])])
"""
CPP = """\
#include <torch/extension.h>
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

torch::Tensor launch(torch::Tensor grad, float s);

torch::Tensor bwd_raw(torch::Tensor grad, float s) {
  auto out = torch::empty_like(grad);
  float* g = grad.data_ptr<float>();  /* dense indexing */
  for (int64_t i = 0; i < grad.numel(); ++i) out.data_ptr<float>()[i] = g[i] * s;
  return out;
}

torch::Tensor bwd_checked(torch::Tensor grad, float s) {
  CHECK_INPUT(grad);
  return launch(grad, s);
}

torch::Tensor bwd_guarded(const torch::Tensor& grad, float s) {
  auto g = grad.contiguous();
  return launch(g, s);
}

torch::Tensor bwd_accessor(torch::Tensor grad, float s) {
  auto a = grad.accessor<float, 2>();
  return grad * s;
}

torch::Tensor bwd_wrapped(torch::Tensor grad, float s) {
  return launch(grad, s);  // one C++ call deeper
}

torch::Tensor bwd_opaque(torch::Tensor grad, float s) {
  return somewhere_else(grad, s);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("bwd_raw", &bwd_raw, "raw");
  m.def("bwd_checked", &bwd_checked);
  m.def("bwd_guarded", &bwd_guarded);
  m.def("bwd_accessor", &bwd_accessor);
  m.def("bwd_wrapped",
        &bwd_wrapped);
  m.def("bwd_opaque", &bwd_opaque);
}
"""
KERNEL = """\
torch::Tensor launch(torch::Tensor grad, float s) {
  auto out = torch::empty_like(grad);
  scale_kernel<<<1, 256>>>(grad.data_ptr<float>(), out.data_ptr<float>(), s, grad.numel());
  return out;
}
"""


def _function(name: str, entry: str, module: str = "_kernels") -> str:
    return f"""
class {name}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return {module}.{entry}(grad, 2.0)
"""


def _project(tmp_path: Path, body: str, header: str = "from . import _kernels") -> Path:
    root = tmp_path / "proj"
    (root / "csrc").mkdir(parents=True)
    (root / "mypkg").mkdir()
    (root / "setup.py").write_text(SETUP)
    (root / "csrc" / "ops.cpp").write_text(CPP)
    (root / "csrc" / "kernel.cu").write_text(KERNEL)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "ops.py").write_text(f"import torch\n{header}\n{body}")
    return root


def _cached_runs(tmp_path: Path, root: Path):  # type: ignore[no-untyped-def]
    """A function that lints the project through one on-disk cache, as successive CLI runs
    do (each run a fresh process: the in-process native index is dropped between them)."""
    from autogradlint.cache import Cache
    from autogradlint.model import Finding

    config = Config(root=root)
    files = discover([str(root)], config, respect_gitignore=False).files
    cache = Cache(tmp_path / "cache", config.fingerprint())

    def run() -> list[Finding]:
        forget()
        results = lint_paths(files, config, root=root, cache=cache)
        cache.save()
        return [f for r in results for f in r.findings]

    return run


def _findings(root: Path) -> list[tuple[str, int, str, str, str]]:
    config = Config(root=root)
    found = discover([str(root)], config, respect_gitignore=False)
    results = lint_paths(found.files, config, root=root)
    return [(f.rule_id, f.line, f.severity, f.message, f.help) for r in results for f in r.findings]


# --- the scanner -----------------------------------------------------------------------------
def _reads(text: str, name: str) -> list[str]:
    return [how for f in Source("x.cpp", text).functions(name) for how, _ in f.reads]


def test_scanner_reads_each_kind_of_evidence() -> None:
    assert _reads(CPP, "bwd_raw") == [RAW]
    assert _reads(CPP, "bwd_guarded") == [GUARDED]
    assert _reads(CPP, "bwd_accessor") == [STRIDED]
    assert _reads(CPP, "bwd_opaque") == [UNKNOWN]
    # the macro's definition decides, through the index (macros often live in a header)
    index = NativeIndex([Source("ops.cpp", CPP), Source("kernel.cu", KERNEL)])
    assert index.evidence(None, "bwd_checked", 0).how == CHECKED  # type: ignore[union-attr]
    wrapped = index.evidence(None, "bwd_wrapped", 0)
    assert wrapped is not None and wrapped.how == RAW
    assert wrapped.chain == ("bwd_wrapped", "launch") and wrapped.where == "kernel.cu:3"
    assert index.evidence(None, "not_bound", 0) is None  # source not found
    assert index.evidence(None, "bwd_raw", 1) is not None  # a float: no tensor evidence
    assert index.evidence(None, "bwd_raw", 1).how == UNKNOWN  # type: ignore[union-attr]


def test_bindings_of_pybind11_and_torch_library() -> None:
    text = """
    TORCH_LIBRARY(myops, m) { m.def("scale(Tensor g, float s) -> Tensor"); }
    TORCH_LIBRARY_IMPL(myops, CUDA, m) { m.impl("scale", TORCH_FN(scale_cuda)); }
    at::Tensor scale_cuda(const at::Tensor& g, double s) { return g.contiguous() * s; }
    PYBIND11_MODULE(pkg_ops, m) { m.def("lam", [](torch::Tensor g) { return g; }); }
    """
    index = NativeIndex([Source("a.cpp", text)])
    assert index.namespaces == {"myops"} and index.modules == {"pkg_ops"}
    found = index.op_evidence("myops", "scale", 0)
    assert found is not None and found.how == GUARDED
    lam = index.evidence("pkg_ops", "lam", 0)
    assert lam is not None and lam.how == UNKNOWN  # a lambda: the text is not followed


@pytest.mark.parametrize(
    "junk",
    [
        b"\x00\x01\x02\xff" * 50_000,  # binary junk and NUL bytes
        b"/* never closed " + b"x(" * 100_000,  # an unterminated comment
        b'"never closed string (' * 20_000,
        b"void f(torch::Tensor g) {\n#if A\n{\n#else\n" * 5_000,  # unbalanced `#if` branches
        b"template <typename T> " * 40_000 + b"f(",  # templates without end
        b"int f(" + b"(" * 50_000 + b") {}",
    ],
)
def test_bad_native_input_says_unknown_and_never_hangs(tmp_path: Path, junk: bytes) -> None:
    path = tmp_path / "junk.cu"
    path.write_bytes(junk + b'\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }')
    start = time.perf_counter()
    index = index_for(str(tmp_path))
    found = index.evidence(None, "f", 0)
    assert found is None or found.how in (UNKNOWN, RAW, GUARDED, STRIDED, CHECKED)
    assert time.perf_counter() - start < 20  # a hang would never get here


def test_a_huge_header_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "huge.h").write_bytes(b"// x\n" * 4_000_000)  # 20 MB
    (tmp_path / "ops.cpp").write_text(CPP)
    index = index_for(str(tmp_path))
    assert index.evidence(None, "bwd_raw", 0).how == RAW  # type: ignore[union-attr]


# --- the findings ----------------------------------------------------------------------------
def test_raw_read_proven_in_cpp_is_an_error_with_the_cpp_location(tmp_path: Path) -> None:
    found = _findings(_project(tmp_path, _function("Raw", "bwd_raw")))
    assert len(found) == 1
    rule, _line, severity, message, help_ = found[0]
    assert (rule, severity) == ("AGL201", "error")
    assert "`_kernels.bwd_raw`" in message
    assert help_.startswith("`bwd_raw` reads it through `data_ptr()`") and "csrc/ops.cpp:9" in help_


def test_one_cpp_call_deeper_names_the_path(tmp_path: Path) -> None:
    found = _findings(_project(tmp_path, _function("Wrapped", "bwd_wrapped")))
    assert [(f[0], f[2]) for f in found] == [("AGL201", "error")]
    assert "`bwd_wrapped` -> `launch` reads it" in found[0][4] and "csrc/kernel.cu:3" in found[0][4]


def test_a_contiguity_check_in_cpp_is_a_warning(tmp_path: Path) -> None:
    found = _findings(_project(tmp_path, _function("Checked", "bwd_checked")))
    assert [(f[0], f[2]) for f in found] == [("AGL201", "warning")]
    assert "training raises on a non-contiguous gradient" in found[0][4]


@pytest.mark.parametrize("entry", ["bwd_guarded", "bwd_accessor"])
def test_guarded_or_stride_aware_cpp_is_no_finding(tmp_path: Path, entry: str) -> None:
    assert _findings(_project(tmp_path, _function("Safe", entry))) == []


def test_unknown_and_missing_sources_keep_the_finding_and_say_so(tmp_path: Path) -> None:
    found = _findings(_project(tmp_path, _function("Opaque", "bwd_opaque")))
    assert [(f[0], f[2]) for f in found] == [("AGL201", "error")]
    assert "does not show how the gradient is read" in found[0][4]
    root = _project(tmp_path / "b", _function("Gone", "not_in_sources"))
    found = _findings(root)
    assert [f[0] for f in found] == ["AGL201"]
    assert "not among the project's sources" in found[0][4] and "native-sources" in found[0][4]


def test_an_extension_is_known_by_its_declaration_not_its_name(tmp_path: Path) -> None:
    """`ext` matches no name pattern: setup.py declaring `mypkg.ext` is the evidence."""
    root = _project(tmp_path, _function("Raw", "bwd_raw", module="ext"), "from mypkg import ext")
    (root / "setup.py").write_text(SETUP.replace("mypkg._kernels", "mypkg.ext"))
    assert [f[0] for f in _findings(root)] == ["AGL201"]
    # a Python module of that name wins: it is not compiled code
    (root / "mypkg" / "ext.py").write_text("def bwd_raw(g, s):\n    return g * s\n")
    assert _findings(root) == []


def test_a_binary_beside_the_package_is_evidence(tmp_path: Path) -> None:
    root = _project(
        tmp_path, _function("Raw", "bwd_raw", module="fastops"), "from . import fastops"
    )
    (root / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    # Nothing says what `fastops` is: unknown, which is never clean, and only a warning.
    found = _findings(root)
    assert [(f[0], f[2]) for f in found] == [("AGL201", "warning")]
    assert "neither the project nor this interpreter holds" in found[0][4]
    (root / "mypkg" / "fastops.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    assert [(f[0], f[2]) for f in _findings(root)] == [("AGL201", "error")]


def test_an_edit_of_the_cpp_invalidates_the_cached_result(tmp_path: Path) -> None:
    root = _project(tmp_path, _function("Raw", "bwd_raw"))
    run = _cached_runs(tmp_path, root)
    assert [f.severity for f in run()] == ["error"]
    cpp = root / "csrc" / "ops.cpp"
    cpp.write_text(
        CPP.replace(
            "float* g = grad.data_ptr<float>();", "float* g = grad.contiguous().data_ptr<float>();"
        )
    )
    assert run() == []


# --- one call deeper -------------------------------------------------------------------------
BACKWARD_VIA = """
class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return {call}
"""


def test_a_helper_of_the_same_file_is_followed(tmp_path: Path) -> None:
    helper = "\ndef _launch(g, s):\n    return _kernels.bwd_raw(g, s)\n"
    root = _project(tmp_path, helper + BACKWARD_VIA.format(call="_launch(grad, 2.0)"))
    found = _findings(root)
    assert [(f[0], f[2]) for f in found] == [("AGL201", "error")]
    assert found[0][4].startswith("Through `_launch()`: `bwd_raw` reads it through `data_ptr()`")


def test_a_helper_that_guards_is_no_finding(tmp_path: Path) -> None:
    helper = "\ndef _launch(g, s):\n    g = g.contiguous()\n    return _kernels.bwd_raw(g, s)\n"
    root = _project(tmp_path, helper + BACKWARD_VIA.format(call="_launch(grad, 2.0)"))
    assert _findings(root) == []


def test_a_helper_in_another_file_is_followed_and_its_edit_invalidates_the_cache(
    tmp_path: Path,
) -> None:
    root = _project(
        tmp_path,
        BACKWARD_VIA.format(call="run_backward(grad, 2.0)"),
        "from .launch import run_backward",
    )
    launch = root / "mypkg" / "launch.py"
    launch.write_text(
        "from . import _kernels\n\ndef run_backward(g, s):\n    return _kernels.bwd_raw(g, s)\n"
    )
    run = _cached_runs(tmp_path, root)

    first = run()
    assert len(first) == 1 and first[0].help.startswith("Through `run_backward()`")
    launch.write_text(
        "from . import _kernels\n\ndef run_backward(g, s):\n"
        "    return _kernels.bwd_raw(g.contiguous(), s)\n"
    )
    assert run() == []


def test_a_module_returned_by_a_loader_function_is_compiled(tmp_path: Path) -> None:
    """`ext = get_ext()`: the function's body loads an extension, whatever it is called."""
    header = (
        "from torch.utils.cpp_extension import load\n\n"
        "def get_ext():\n"
        '    return load(name="whatever", sources=["csrc/ops.cpp"])\n\n'
        "ext = get_ext()\n"
    )
    root = _project(tmp_path, BACKWARD_VIA.format(call="ext.bwd_raw(grad, 2.0)"), header)
    (root / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    found = _findings(root)
    assert [f[0] for f in found] == ["AGL201"] and "`bwd_raw` reads it" in found[0][4]


def test_a_function_picked_from_a_compiled_module_by_name(tmp_path: Path) -> None:
    """MinkowskiEngine's `get_minkowski_function("GlobalPoolingForward", x)`: a helper that
    returns `getattr(<compiled module>, name + postfix)`; the bindings with that prefix decide."""
    header = (
        "def get_fn(name, x):\n"
        '    return getattr(_kernels, name + ("GPU" if x.is_cuda else "CPU"))\n'
    )
    body = (
        BACKWARD_VIA.format(call='get_fn("bwd_checked", grad)(grad, 2.0)')
        .replace(
            "        return get_fn", '        fn = get_fn("bwd_checked", grad)\n        return fn'
        )
        .replace('fn("bwd_checked", grad)(grad, 2.0)', "fn(grad, 2.0)")
    )
    root = _project(tmp_path, body, "from . import _kernels\n" + header)
    found = _findings(root)
    assert [(f[0], f[2]) for f in found] == [("AGL201", "warning")]
    assert (
        "a function of compiled `._kernels`" in found[0][4] or "compiled `_kernels`" in found[0][4]
    )


def test_native_sources_outside_the_tree_come_from_the_configuration(tmp_path: Path) -> None:
    """The C++ lives beside the checked package, not under it: `native-sources` points there."""
    from autogradlint.config import load_file

    root = _project(tmp_path, _function("Raw", "bwd_raw"))
    outside = tmp_path / "kernels"
    (root / "csrc").rename(outside)
    (root / "pyproject.toml").write_text('[tool.autogradlint]\nnative-sources = ["../kernels"]\n')
    config = load_file(root / "pyproject.toml")
    assert config is not None and config.settings.native_sources == (str(outside),)
    found = discover([str(root)], config, respect_gitignore=False)
    results = lint_paths(found.files, config, root=root)
    helps = [f.help for r in results for f in r.findings]
    assert len(helps) == 1 and "reads it through `data_ptr()`" in helps[0]
    assert "kernels/ops.cpp:9" in helps[0]


def test_write_evidence_in_cpp() -> None:
    text = """
    void through_pointer(torch::Tensor g, double s) {
      float* p = g.data_ptr<float>();
      for (int64_t i = 0; i < g.numel(); ++i) p[i] *= s;
    }
    torch::Tensor returned_in_place(torch::Tensor const& g_) {
      auto g = g_.contiguous();
      launch(static_cast<float*>(g.data_ptr()));
      return g;  // "backward pass is completely in-place"
    }
    void inplace_method(torch::Tensor g) { g.mul_(2); }
    torch::Tensor reads_only(torch::Tensor g) {
      const float* p = g.data_ptr<float>();
      float* out = nullptr;
      out[0] = p[0];
      return g.new_empty({1});
    }
    """
    source = Source("x.cpp", text)

    def writes(name: str) -> bool:
        (function,) = source.functions(name)
        return bool(function.writes[0])

    assert writes("through_pointer") and writes("returned_in_place") and writes("inplace_method")
    assert not writes("reads_only")


def test_a_helper_that_launches_a_triton_kernel(tmp_path: Path) -> None:
    """The launch is the compiled code: given the input's strides for the gradient, it reads
    the wrong places; given the gradient's own, it is stride-aware."""
    source = """import torch
import triton


@triton.jit
def _kernel(g, out, stride_row, n):
    pass


def _launch(g, x):
    out = torch.empty_like(x)
    _kernel[(x.shape[0],)](g, out, {stride}, x.shape[1])
    return out


class Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _launch(grad, x)
"""
    from autogradlint.engine.door import lint
    from autogradlint.engine.request import LintRequest

    found = lint(
        LintRequest(source.format(stride="x.stride(0)"), str(tmp_path / "ops.py"))
    ).findings
    assert [(f.rule_id, f.line) for f in found] == [("AGL201", 25)]
    assert "is given `x.stride(...)`, not the gradient's own" in found[0].help
    assert found[0].fixable is None
    assert (
        lint(LintRequest(source.format(stride="g.stride(0)"), str(tmp_path / "ops.py"))).findings
        == []
    )


def test_a_helper_handing_the_gradient_to_a_writing_kernel(tmp_path: Path) -> None:
    """AGL202 one call deeper: the C++ writes into what the helper hands it; a dense private
    copy in the helper makes it harmless."""
    cpp = CPP.replace(
        '  m.def("bwd_opaque", &bwd_opaque);',
        '  m.def("bwd_opaque", &bwd_opaque);\n  m.def("scale_", &scale_);',
    ).replace(
        "PYBIND11_MODULE",
        "void scale_(torch::Tensor g, double s) {\n"
        "  float* p = g.data_ptr<float>();\n"
        "  for (int64_t i = 0; i < g.numel(); ++i) p[i] *= s;\n"
        "}\n\nPYBIND11_MODULE",
    )
    cases = (
        ("g", ["AGL202"]),
        ("g.clone()", ["AGL201"]),  # a copy, but `.clone()` keeps a transposed layout (B1.4b)
        ("g.clone(memory_format=torch.contiguous_format)", []),
    )
    for index, (copy, expected) in enumerate(cases):
        root = tmp_path / str(index)
        root.mkdir()
        project = _project(
            root,
            f"\ndef _scale(g):\n    _kernels.scale_({copy}, 2.0)\n    return g\n"
            + BACKWARD_VIA.format(call="_scale(grad)"),
        )
        (project / "csrc" / "ops.cpp").write_text(cpp)
        found = _findings(project)
        assert [f[0] for f in found] == expected, found
        if expected == ["AGL202"]:
            assert "Through `_scale()`: `scale_` writes its result into it" in found[0][4]


def test_an_installed_wheel_resolves_its_own_absolute_imports(tmp_path: Path) -> None:
    """A wheel has no project marker: its root is its top package, and `from pkg.ops.utils
    import kernel` inside it must still find pkg/ops/utils.py (liger-kernel's shared Triton
    kernels), or nothing behind the import is read."""
    from autogradlint.native.modules import module_file

    package = tmp_path / "site" / "pkg"
    (package / "ops").mkdir(parents=True)
    for init in (package / "__init__.py", package / "ops" / "__init__.py"):
        init.write_text("")
    (package / "ops" / "utils.py").write_text("def kernel(): ...\n")
    importer = str(package / "ops" / "loss.py")
    assert module_file(importer, "pkg.ops.utils", str(package)) == str(package / "ops" / "utils.py")
    # Whatever the root, a package's own absolute imports start where the package lives (a
    # vendored copy, a root above it); a wheel does not reach the other packages beside it.
    assert module_file(importer, "pkg.ops.utils", str(tmp_path)) == str(
        package / "ops" / "utils.py"
    )
    other = tmp_path / "site" / "other"
    other.mkdir()
    (other / "__init__.py").write_text("")
    (other / "mod.py").write_text("")
    assert module_file(importer, "other.mod", str(package)) is None


# --- following the pointer ---------------------------------------------------------------------
# The kernel of issue 34: it writes into its argument through an `auto` pointer and indexes it
# with the tensor's own strides. It scales whatever it is handed, so a `.contiguous()` in
# Python makes it scale a temporary.
STRIDED_WRITER = """\
double scale(torch::Tensor g, double s) {
  auto p = g.data_ptr<float>();
  for (int64_t i = 0; i < g.size(0); ++i)
    for (int64_t j = 0; j < g.size(1); ++j)
      p[i * g.stride(0) + j * g.stride(1)] *= s;
  return s;
}
"""


def _access(body: str, params: str = "torch::Tensor g") -> Access:
    (function,) = Source("x.cu", f"void f({params}) {{\n{body}\n}}").functions("f")
    return function.accesses[0]


def test_a_stride_aware_write_through_an_auto_pointer_is_both() -> None:
    (function,) = Source("x.cpp", STRIDED_WRITER).functions("scale")
    (access,) = function.accesses
    assert access.how == STRIDED and access.strided == 2  # `auto p = g.data_ptr<float>()`
    assert access.writes == 5 and function.writes == (5,)  # `p[...] *= s`
    assert access.raw is None and access.contiguous is None and access.checked is None


@pytest.mark.parametrize(
    ("body", "how", "writes"),
    [
        # dense indexing through every kind of alias
        ("float* p = g.data_ptr<float>(); for (;;) p[i] = 0;", RAW, True),
        ("auto* p = g.template data_ptr<scalar_t>(); p[i] += 1;", RAW, True),
        ("auto p = static_cast<float*>(g.data_ptr()); *(p + i) -= 1;", RAW, True),
        ("float* p = (float*) g.data_ptr(); p[i]++;", RAW, True),
        ("g.data_ptr<float>()[i] = 1;", RAW, True),
        ("const float* p = g.data_ptr<float>(); out[i] = p[i];", RAW, False),
        ("const float* p = g.data_ptr<float>(); float t = 0; while (n--) t += *p++;", RAW, False),
        # the order in the text does not matter: strides read first, then dense indexing
        ("auto s0 = g.stride(0); const float* p = g.data_ptr<float>(); out[i] = p[i];", RAW, False),
        # stride-aware: in the index, through a name computed from them, or an accessor
        ("const float* p = g.data_ptr<float>(); out[i] = p[i * g.stride(0)];", STRIDED, False),
        (
            "auto p = g.data_ptr<float>(); const auto s0 = g.stride(0); p[i * s0] *= 2;",
            STRIDED,
            True,
        ),
        (
            "float* row = g.data_ptr<float>() + i * g.stride(0); row[j * g.stride(1)] = 0;",
            STRIDED,
            True,
        ),
        ("auto a = g.accessor<float, 2>(); a[i][j] *= s;", STRIDED, True),
        ("auto a = g.packed_accessor32<float, 2>(); out[i] = a[i][0];", STRIDED, False),
        # one element only: right whatever the layout
        ("return *g.data_ptr<float>();", UNKNOWN, False),
        # writes a library call makes
        ("float* p = g.data_ptr<float>(); std::memcpy(p, src, n);", RAW, True),
        ("float* p = g.data_ptr<float>(); std::memcpy(dst, p, n);", RAW, False),
        ("float* p = g.data_ptr<float>(); atomicAdd(&p[i], v);", RAW, True),
        ("at::mul_out(g, x, x);", UNKNOWN, True),
        ("g.mul_(2);", UNKNOWN, True),
        ("g *= 2;", UNKNOWN, True),
        # made contiguous, or checked, before the pointer is taken
        (
            "auto c = g.contiguous(); const float* p = c.data_ptr<float>(); out[i] = p[i];",
            GUARDED,
            False,
        ),
        (
            "g = g.contiguous(); const float* p = g.data_ptr<float>(); out[i] = p[i];",
            GUARDED,
            False,
        ),
        (
            "auto c = g.contiguous(); const float* p = g.data_ptr<float>(); out[i] = p[i];",
            RAW,
            False,
        ),
        (
            'TORCH_CHECK(g.is_contiguous(), "g"); float* p = g.data_ptr<float>(); p[i] = 0;',
            CHECKED,
            True,
        ),
        # kept in a kernel's parameter struct: the strides kept beside it say how it is read
        (
            "params.g_ptr = g.data_ptr(); params.g_stride = g.stride(0); run(params);",
            STRIDED,
            False,
        ),
        ("params.g_ptr = g.data_ptr(); run(params);", RAW, False),
        # used only inside a macro (`DISPATCH(...)` expands to the launch): the strides decide
        ("float* p = g.data_ptr<float>(); DISPATCH_FLOAT_KERNEL();", RAW, False),
        (
            "auto s = g.stride(0); float* p = g.data_ptr<float>(); DISPATCH_FLOAT_KERNEL();",
            STRIDED,
            False,
        ),
        # through a conditional, and a macro's continued lines
        ("launch(n, has_g ? (float*) g.data_ptr() : nullptr);", RAW, False),
        ("k<<<1, 2>>>(n, \\\n g.data_ptr<float>());", RAW, False),
        # a branch taken only when it is contiguous, a check of its strides
        (
            "if (g.is_contiguous()) { std::memcpy(out, g.data_ptr(), n); } else { slow(g); }",
            GUARDED,
            False,
        ),
        (
            "if (!g.is_contiguous()) { slow(g); } else std::memcpy(out, g.data_ptr(), n);",
            GUARDED,
            False,
        ),
        ("assert(g.stride(0) == 1); launch(g.data_ptr<float>(), n);", CHECKED, False),
        # `grad` is a whole word: other names that hold it are not the parameter
        (
            "const float* p = xg.data_ptr<float>(); out[i] = p[i] + ctx.g.data_ptr<float>()[i];",
            UNKNOWN,
            False,
        ),
    ],
)
def test_the_read_follows_the_pointer(body: str, how: str, writes: bool) -> None:
    access = _access(body)
    assert (access.how, access.writes is not None) == (how, writes)


def test_a_pointer_handed_to_a_kernel_is_followed_into_the_kernel() -> None:
    """The kernel's parameter decides: written through, `const`, or not read at all."""
    kernels = """\
template <typename scalar_t>
__global__ void scale_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2;
}
__device__ void add(float* where, float v) { atomicAdd(where, v); }
__global__ void accumulate(float* grad, int n) { add(grad + threadIdx.x, 1.0f); }
"""
    wrappers = """\
void twice(torch::Tensor out, torch::Tensor in) {
  AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "twice", ([&] {
    scale_kernel<scalar_t><<<1, 256>>>(out.data_ptr<scalar_t>(), in.data_ptr<scalar_t>(), 4);
  }));
}
void bump(torch::Tensor g) { accumulate<<<1, 2>>>(g.data_ptr<float>(), 2); }
void opaque(torch::Tensor g) { elsewhere<<<1, 2>>>(g.data_ptr<float>(), 2); }
void opaque_const(torch::Tensor g) { elsewhere<<<1, 2>>>(g.const_data_ptr<float>(), 2); }
void stored(torch::Tensor g) { Params p; p.g = g.data_ptr(); p.s = g.stride(0); run(p); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("twice", &twice); m.def("bump", &bump);
  m.def("opaque", &opaque); m.def("opaque_const", &opaque_const); m.def("stored", &stored);
}
"""
    index = NativeIndex([Source("k.cu", kernels), Source("ops.cpp", wrappers)])

    def writes(name: str, position: int = 0) -> tuple[str, str]:
        found = index.evidence(None, name, position)
        assert found is not None
        return found.writes, found.may_write

    assert writes("twice", 0) == ("k.cu:4", "")  # `out[i] = ...` in the kernel
    assert writes("twice", 1) == ("", "")  # `const scalar_t* in`: never written
    assert writes("bump") == ("k.cu:6", "")  # two calls deeper, through `atomicAdd`
    assert writes("opaque") == ("", "ops.cpp:7")  # no source for the kernel: not ruled out
    assert writes("opaque_const") == ("", "")  # a pointer to const cannot write
    assert writes("stored") == ("", "ops.cpp:9")  # in a struct for a kernel not read


def test_a_strided_writer_is_a_write_not_a_raw_read(tmp_path: Path) -> None:
    """AGL202, whose fix is a private dense copy; not AGL201, whose `.contiguous()` would
    hand the kernel a temporary and lose the scaling."""
    root = _project(
        tmp_path,
        BACKWARD_VIA.format(call="grad").replace(
            "        return grad", "        norm = _kernels.scale(grad, 2.0)\n        return grad"
        ),
    )
    (root / "csrc" / "ops.cpp").write_text(
        STRIDED_WRITER + '\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }\n'
    )
    found = _findings(root)
    assert [f[0] for f in found] == ["AGL202"], found
    assert "`scale` writes its result into it (" in found[0][4]
    assert "csrc/ops.cpp:5)" in found[0][4]


def _walked(root: str) -> list[str]:
    """What native_files promises: os.walk's files with hidden and excluded directories pruned,
    the rest visited in sorted order, symlinked directories listed but not entered."""
    from autogradlint.native.index import _SKIP_DIRS, SUFFIXES

    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        found.extend(os.path.join(directory, f) for f in files if f.endswith(SUFFIXES))
    return found


def test_native_files_are_what_a_pruned_walk_finds_in_its_order(tmp_path: Path) -> None:
    from autogradlint.native.index import native_files

    for directory in ("csrc/b", "csrc/a/deep", ".hidden", "build", "site-packages/x", "zz"):
        (tmp_path / directory).mkdir(parents=True)
    for name in (
        "csrc/b/k.cu",
        "csrc/a/deep/h.cuh",
        "csrc/a/ops.cpp",
        "csrc/notes.txt",
        ".hidden/secret.cpp",
        "build/gen.cpp",
        "site-packages/x/dep.cc",
        "zz/last.h",
        "top.c",
    ):
        (tmp_path / name).write_text("int x;\n")
    (tmp_path / "csrc/loop").symlink_to(tmp_path / "csrc")  # a directory link: not entered
    (tmp_path / "linked.cpp").symlink_to(tmp_path / "top.c")  # a file link: a file
    (tmp_path / "dangling.cpp").symlink_to(tmp_path / "missing.cpp")
    found = native_files(str(tmp_path))
    assert found == _walked(str(tmp_path))
    relative = sorted(os.path.relpath(p, tmp_path) for p in found)
    assert relative == [
        "csrc/a/deep/h.cuh",
        "csrc/a/ops.cpp",
        "csrc/b/k.cu",
        "dangling.cpp",
        "linked.cpp",
        "top.c",
        "zz/last.h",
    ]


@pytest.mark.parametrize(
    ("kernel", "safety"),
    [
        ("", "unsafe"),  # the kernel's source is not there: it may write into the gradient
        ("__global__ void scale_kernel(const float* g, float s, int64_t n) {}\n", "safe"),
        ("__global__ void scale_kernel(float* g, float s, int64_t n) { g[0] *= s; }\n", None),
    ],
)
def test_the_contiguous_fix_is_safe_only_when_the_kernel_cannot_write(
    tmp_path: Path, kernel: str, safety: str | None
) -> None:
    """A writable pointer into the gradient handed to a kernel: `.contiguous()` changes what
    the kernel writes into unless its parameter is `const` (the last case writes: AGL202)."""
    cpp = kernel + (
        "double scale(torch::Tensor g, double s) {\n"
        "  scale_kernel<<<1, 256>>>(g.data_ptr<float>(), s, g.numel());\n"
        "  return s;\n"
        "}\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }\n'
    )
    root = _project(tmp_path, _function("Scale", "scale"))
    (root / "csrc" / "ops.cpp").write_text(cpp)
    config = Config(root=root)
    found = discover([str(root)], config, respect_gitignore=False)
    (result,) = [r for r in lint_paths(found.files, config, root=root) if r.findings]
    (finding,) = result.findings
    if safety is None:
        assert finding.rule_id == "AGL202"
        return
    assert (finding.rule_id, finding.fixable) == ("AGL201", safety)
    if safety == "unsafe":
        assert "hands it to code whose source is not read" in finding.help


LAUNCH_WITH_TEMPLATES = """\
#include <torch/extension.h>
template <typename scalar_t>
__global__ void bwd_kernel(
    torch::PackedTensorAccessor32<scalar_t, 2, torch::RestrictPtrTraits> a,
    torch::PackedTensorAccessor32<scalar_t, 2, torch::RestrictPtrTraits> grad,
    int n,
    torch::PackedTensorAccessor32<scalar_t, 2, torch::RestrictPtrTraits> out) {
    out[0][0] = a[0][0] * grad[0][0] * n;
}
torch::Tensor bwd(torch::Tensor a, torch::Tensor grad) {
    auto out = torch::zeros_like(a);
    bwd_kernel<float><<<1, 1>>>(
        a.packed_accessor32<float, 2, torch::RestrictPtrTraits>(),
        grad.packed_accessor32<float, 2, torch::RestrictPtrTraits>(),
        a.size(0),
        out.packed_accessor32<float, 2, torch::RestrictPtrTraits>());
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("bwd", &bwd); }
"""


def test_the_commas_of_template_arguments_separate_no_call_arguments(tmp_path: Path) -> None:
    """`g.packed_accessor32<float, 2, torch::RestrictPtrTraits>()` is one argument of the launch:
    counted as three, the kernel's write into `out` was pinned on `grad` (torchsort's
    isotonic_l2_backward, fast-transformers' local_dot_backward: AGL202 false alarms)."""
    (tmp_path / "ops.cu").write_text(LAUNCH_WITH_TEMPLATES)
    found = index_for(str(tmp_path)).evidence(None, "bwd", 1)
    assert found is not None and found.how in (STRIDED, GUARDED)
    assert found.writes == ""


CPU_BINDING = """\
#include <torch/extension.h>
torch::Tensor bwd(torch::Tensor a, torch::Tensor grad) {
    auto g = grad.accessor<float, 1>();
    auto out = torch::empty_like(a);
    out[0] = g[0];
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("bwd", &bwd); }
"""

CUDA_BINDING = """\
#include <torch/extension.h>
torch::Tensor bwd(torch::Tensor a, torch::Tensor out, torch::Tensor grad, int64_t n) {
    float* o = out.data_ptr<float>();
    o[0] = 1.0f;
    return out;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("bwd", &bwd); }
"""


def test_each_extension_binds_its_own_function_of_a_shared_name(tmp_path: Path) -> None:
    """`_ops.cpp` and `_ops_cuda.cu` each bind their own `bwd` (fast-transformers' CPU and CUDA
    extensions): the CPU binding is read from its own file, not the CUDA one's write into its
    second parameter; and how many arguments each takes is known, so a call that passes two
    is not judged by the four-parameter CUDA one."""
    (tmp_path / "_ops.cpp").write_text(CPU_BINDING)
    (tmp_path / "_ops_cuda.cu").write_text(CUDA_BINDING)
    index = index_for(str(tmp_path))
    found = index.evidence("mypkg._ops", "bwd", 1)
    assert found is not None and found.writes == "" and found.how == STRIDED
    assert index.arities("mypkg._ops", "bwd") == {2}
    assert index.arities("mypkg._ops_cuda", "bwd") == {4}


def test_an_extension_declared_through_an_alias_is_declared(tmp_path: Path) -> None:
    """detectron2's setup.py picks the class first (`extension = CppExtension`, then
    `CUDAExtension` when CUDA is there) and declares `extension("detectron2._C", ...)`."""
    from autogradlint.native.index import declared_extensions

    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CppExtension, CUDAExtension\n"
        "extension = CppExtension\n"
        "if cuda:\n"
        "    extension = CUDAExtension\n"
        'ext_modules = [extension("detectron2._C", sources)]\n'
    )
    assert declared_extensions(str(tmp_path)) == {"detectron2._C"}


def test_a_file_that_imports_its_own_package_sees_the_project_above_it(tmp_path: Path) -> None:
    """Megatron's megatron/model/fused_softmax.py (a02-megatron-3, a snapshot with no marker
    and no `__init__.py`) imports `megatron.model.enums`: Python finds `megatron` in the
    directory above it, so its native sources (megatron/fused_kernels/) are the project's."""
    from autogradlint.native.index import native_root

    model = tmp_path / "megatron" / "model"
    model.mkdir(parents=True)
    (model / "softmax.py").write_text("import torch\nfrom megatron.model.enums import Kind\n")
    (model / "alone.py").write_text("import torch\nimport enums\n")
    assert native_root(str(model / "softmax.py")) == str(tmp_path)
    assert native_root(str(model / "alone.py")) == str(model)
