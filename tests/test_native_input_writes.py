"""AGL405 across the language boundary: forward hands its input to C++ that writes it.

Each test is a small project on disk (setup.py, csrc/, a package), the way users have them."""

from __future__ import annotations

from pathlib import Path

from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
setup(name="mypkg", ext_modules=[CUDAExtension("mypkg._kernels", sources=["csrc/ops.cpp"])])
"""
# `addmm_` accumulates into `c` through its raw pointer (gpytorch's mixed-precision addmm,
# causal_conv1d's final_states_out); `fwd` only reads `x` and writes the buffer `out`.
CPP = """\
#include <torch/extension.h>

torch::Tensor addmm_(torch::Tensor a, torch::Tensor c) {
  float* p = c.data_ptr<float>();
  const float* q = a.data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i) p[i] += q[i];
  return c;
}

void fwd(const torch::Tensor& x, torch::Tensor out) {
  const float* p = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = 2 * p[i];
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("addmm_", &addmm_);
  m.def("fwd", &fwd);
}
"""


def _findings(tmp_path: Path, forward: str, helpers: str = "") -> list[tuple[str, int, str, str]]:
    root = tmp_path / "proj"
    (root / "csrc").mkdir(parents=True)
    (root / "mypkg").mkdir()
    (root / "setup.py").write_text(SETUP)
    (root / "csrc" / "ops.cpp").write_text(CPP)
    (root / "mypkg" / "__init__.py").write_text("")
    body = f"""\
import torch
from . import _kernels, _opaque


class AddMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c):
{forward}

    @staticmethod
    def backward(ctx, g):
        return g, g
"""
    (root / "mypkg" / "ops.py").write_text(body + helpers)
    config = Config(root=root)
    found = discover([str(root)], config, respect_gitignore=False)
    results = lint_paths(found.files, config, root=root)
    return [
        (f.rule_id, f.line, f.message, f.help)
        for r in results
        for f in r.findings
        if f.rule_id == "AGL405"
    ]


def test_an_input_the_cpp_writes_is_flagged_and_a_copy_is_not(tmp_path: Path) -> None:
    found = _findings(tmp_path / "bad", "        return _kernels.addmm_(a, c.contiguous())")
    assert [(f[0], f[1]) for f in found] == [("AGL405", 8)], found
    assert found[0][2] == "`AddMatmul.forward` changes input `c` in place without `ctx.mark_dirty`"
    assert found[0][3].startswith("`addmm_` writes its result into it (")
    assert "csrc/ops.cpp:6)." in found[0][3]  # `p[i] += q[i]` through `c.data_ptr<float>()`
    assert "A raw write never moves the version counter" in found[0][3]
    # fixed: the kernel writes a private copy, or autograd is told
    assert _findings(tmp_path / "copy", "        return _kernels.addmm_(a, c.clone())") == []
    marked = "        ctx.mark_dirty(c)\n        return _kernels.addmm_(a, c)"
    assert _findings(tmp_path / "marked", marked) == []


def test_only_a_proven_write_of_an_input_is_flagged(tmp_path: Path) -> None:
    # `a` handed to `addmm_` is only read; `c` is
    assert [f[1] for f in _findings(tmp_path / "bad", "        return _kernels.addmm_(a, c)")] == [
        8
    ]
    # an output buffer forward allocates, written by the kernel; the input only read
    buffer = "        out = torch.empty_like(a)\n        _kernels.fwd(a, out)\n        return out"
    assert _findings(tmp_path / "buffer", buffer) == []
    # compiled code whose source the project does not hold proves no write: AGL405 is an error
    assert _findings(tmp_path / "opaque", "        return _opaque.addmm_(a, c)") == []


# causal_conv1d's `causal_conv1d_fwd_function`: a Python wrapper hands the buffer on
WRAPPERS = """

def accumulate(a, c):
    return _kernels.addmm_(a, c)


def accumulate_copy(a, c):
    return _kernels.addmm_(a, c.clone())
"""


def test_an_input_a_helper_hands_to_the_writing_cpp_is_flagged(tmp_path: Path) -> None:
    found = _findings(tmp_path / "bad", "        return accumulate(a, c)", WRAPPERS)
    assert [(f[1], f[2]) for f in found] == [
        (8, "`AddMatmul.forward` changes input `c` in place without `ctx.mark_dirty`")
    ], found
    assert found[0][3].startswith("Through `accumulate()`: `addmm_` writes its result into it (")
    # fixed: the helper writes a copy
    assert _findings(tmp_path / "copy", "        return accumulate_copy(a, c)", WRAPPERS) == []
