"""Completing a real-bug manifest: the project modules and native sources a kept file reaches."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.realbugs.complete import append_paths, propose_side
from benchmarks.realbugs.materialize import Case

# A repository whose Function calls a helper through a package re-export and an extension built
# two ways: by setup.py and by a load() wrapper that names its sources in a variable.
REPO = {
    "pkg/ops.py": (
        "import torch\n"
        "from .utils import helper\n"
        "from pkg.kernels import launch\n"
        "from pkg.solvers import cg\n"
        "import pkg._C as _C\n"
        "import softmax_cuda\n"
        "class Fn(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return _C.backward(helper(g))\n"
    ),
    "pkg/utils/__init__.py": "from .grads import helper\n",
    "pkg/utils/grads.py": "def helper(g):\n    return g\n",
    "pkg/utils/unused.py": "X = 1\n",
    "pkg/kernels.py": "def launch(): ...\n",
    "pkg/solvers/__init__.py": "from .cg import cg\n",
    "pkg/solvers/cg.py": "def cg(closure, rhs):\n    return rhs\n",
    "pkg/fused/__init__.py": (
        "from torch.utils import cpp_extension\n"
        "def build(srcpath):\n"
        "    sources = [srcpath / 'softmax.cpp', srcpath / 'softmax_cuda.cu']\n"
        "    cpp_extension.load(name='softmax_cuda', sources=sources)\n"
        "    sources = [srcpath / 'norm.cpp']\n"
        "    cpp_extension.load(name='norm_cuda', sources=sources)\n"
    ),
    "pkg/fused/softmax.cpp": "// bound\n",
    "pkg/fused/softmax_cuda.cu": "// kernel\n",
    "pkg/fused/norm.cpp": "// another extension\n",
    "setup.py": (
        "from torch.utils.cpp_extension import CUDAExtension\n"
        "SRC = ['csrc/bind.cpp', 'csrc/kernel.cu']\n"
        "ext = [CUDAExtension(name='pkg._C', sources=SRC),\n"
        "       CUDAExtension(name='other._C', sources=['csrc/other.cu'])]\n"
    ),
    "csrc/bind.cpp": "// binding\n",
    "csrc/kernel.cu": "// kernel\n",
    "csrc/other.cu": "// not reached\n",
}


def _mirror(tmp_path: Path) -> tuple[Path, str]:
    work = tmp_path / "work"
    for path, text in REPO.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return work / ".git", head.stdout.strip()


def test_completion_follows_imports_reexports_and_extension_sources(tmp_path: Path) -> None:
    """A manifest keeping only ops.py, the load() wrapper and setup.py gains the helper a
    re-export resolves to, the imported module (and, for `from pkg import name` where name is
    also a submodule, the package's __init__ that Python reads first), and the sources of exactly the extensions the
    kept file imports; unrelated modules and extensions stay out."""
    git, commit = _mirror(tmp_path)
    kept = ("pkg/ops.py", "pkg/fused/__init__.py", "setup.py")
    case = Case("x01", "x01-pkg-1", "o/pkg", commit, commit, kept, "B")
    proposed = propose_side(case, kept, git, commit)
    assert set(proposed) == {
        "pkg/utils/__init__.py",
        "pkg/utils/grads.py",
        "pkg/kernels.py",
        "pkg/solvers/__init__.py",
        "pkg/solvers/cg.py",
        "pkg/fused/softmax.cpp",
        "pkg/fused/softmax_cuda.cu",
        "csrc/bind.cpp",
        "csrc/kernel.cu",
    }


def test_append_keeps_every_path_and_cell(tmp_path: Path) -> None:
    """Completion only appends to `paths`; the other cells and the earlier paths are untouched."""
    manifest = tmp_path / "manifest.tsv"
    manifest.write_text("id\trepo\tpaths\tsummary\nc1\to/r\ta.py,setup.py\tsome fix\n")
    append_paths(manifest, {"c1": ["b.py", "a.py"]})
    assert (
        manifest.read_text() == "id\trepo\tpaths\tsummary\nc1\to/r\ta.py,setup.py,b.py\tsome fix\n"
    )
