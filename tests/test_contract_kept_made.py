"""AGL403 on tensors the blind real-bug batches kept on ctx and the rule missed (issue 31): a
list of the caller's tensors, and the output of a compiled kernel picked by name. Each: the bad
code, the finding, the fixed code."""

from __future__ import annotations

from pathlib import Path

from autogradlint import lint_source
from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths
from autogradlint.settings import Settings


def _found(code: str) -> list[int]:
    result = lint_source(code, "example.py", settings=Settings())
    assert result.error is None
    return [f.line for f in result.findings if f.rule_id == "AGL403"]


# --- a builtin container of tensors, as an annotation ----------------------------------------

LIST_INPUT = """\
from typing import List

import torch
from torch import Tensor


class Gemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, splits: List[Tensor], n: int):
        ctx.save_for_backward(x)
        ctx.splits = splits
        ctx.n = n
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.splits[0] * ctx.n, None, None
"""

LIST_INPUT_FIXED = """\
from typing import List

import torch
from torch import Tensor


class Gemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, splits: List[Tensor], n: int):
        ctx.save_for_backward(x, *splits)
        ctx.n = n
        return x * 2

    @staticmethod
    def backward(ctx, g):
        x, *splits = ctx.saved_tensors
        return g * splits[0] * ctx.n, None, None
"""


def test_a_list_of_the_callers_tensors_is_kept_as_the_tensors_are() -> None:
    """spconv's `ctx.pair_mask_fwd_splits = pair_mask_fwd_splits` (`List[torch.Tensor]`): the
    list holds the very tensors, as a list literal of them does."""
    assert _found(LIST_INPUT) == [11]
    assert _found(LIST_INPUT_FIXED) == []
    # `tuple[Tensor, ...]` and an Optional of one hold them too
    for spelled in ("tuple[Tensor, ...]", "Optional[Tuple[Tensor, Tensor]]"):
        code = LIST_INPUT.replace("List[Tensor]", spelled).replace(
            "from typing import List", "from typing import Optional, Tuple"
        )
        assert _found(code) == [11]


# --- the output of a compiled kernel picked by name -------------------------------------------

SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
setup(name="mypkg", ext_modules=[CUDAExtension("mypkg._kernels", sources=["csrc/ops.cpp"])])
"""

PICKED = """\
import torch
from torch import Tensor

from . import _kernels


def get_fn(name, x):
    return getattr(_kernels, name + ("GPU" if x.is_cuda else "CPU"))


class Pool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor):
        x = x.contiguous()
        ctx.x = x
        fw = get_fn("PoolForward", x)
        out, counts = fw(ctx.x, 2)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        bw = get_fn("PoolBackward", g)
        return bw(ctx.x, g.contiguous(), ctx.out, 2)
"""

PICKED_FIXED = """\
import torch
from torch import Tensor

from . import _kernels


def get_fn(name, x):
    return getattr(_kernels, name + ("GPU" if x.is_cuda else "CPU"))


class Pool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor):
        x = x.contiguous()
        fw = get_fn("PoolForward", x)
        out, counts = fw(x, 2)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        bw = get_fn("PoolBackward", g)
        return bw(x, g.contiguous(), out, 2)
"""


def _project_findings(tmp_path: Path, code: str) -> list[tuple[str, int]]:
    root = tmp_path / "proj"
    (root / "csrc").mkdir(parents=True)
    (root / "mypkg").mkdir()
    (root / "setup.py").write_text(SETUP)
    (root / "csrc" / "ops.cpp").write_text("#include <torch/extension.h>\n")
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "pool.py").write_text(code)
    config = Config(root=root)
    found = discover([str(root)], config, respect_gitignore=False)
    results = lint_paths(found.files, config, root=root)
    return [(f.rule_id, f.line) for r in results for f in r.findings if f.rule_id == "AGL403"]


def test_the_output_of_a_compiled_kernel_picked_by_name(tmp_path: Path) -> None:
    """MinkowskiEngine's `fw_fn = get_minkowski_function("LocalPoolingForward", x)`, then
    `out_feat, num_nonzero = fw_fn(ctx.input_features, ...)`: the kernel is given a tensor
    (kept on ctx just before), so what it returns is one; `ctx.out` is forward's output, handed
    to the backward kernel (a read of its values)."""
    assert _project_findings(tmp_path / "bad", PICKED) == [("AGL403", 15), ("AGL403", 18)]
    assert _project_findings(tmp_path / "fixed", PICKED_FIXED) == []
