"""One view of the project: every front end reports what `check ROOT` reports for a file, and a
class is a Function because of what its import names, never because of a bare class name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autogradlint.cli import main

BASE = """\
import torch


class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2
"""
OPS = """\
import scale_cuda

from .base import Base


class Recompute(Base):
    @staticmethod
    def backward(ctx, grad_output):
        return scale_cuda.scale_bwd(grad_output, 2.0)
"""
MODEL = """\
from .ops import Recompute


def run(x):
    return Recompute.forward(x)
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """The three-module package of issue 13, in a project with a configuration file."""
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    src = tmp_path / "src" / "mypkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "base.py").write_text(BASE)
    (src / "ops.py").write_text(OPS)
    (src / "model.py").write_text(MODEL)
    return tmp_path


def _codes(output: str) -> list[tuple[str, str, int]]:
    return sorted(
        (Path(f["filename"]).name, f["code"], f["location"]["row"]) for f in json.loads(output)
    )


EXPECTED = [("model.py", "AGL407", 5), ("ops.py", "AGL201", 9)]


def _check(cwd: Path, *args: str, stdin: str | None = None) -> list[tuple[str, str, int]]:
    caching = [] if "--cache-dir" in args else ["--no-cache"]
    result = subprocess.run(
        [sys.executable, "-m", "autogradlint", "check", *caching, "--output-format", "json", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
    )
    assert result.returncode in (0, 1), result.stderr
    return _codes(result.stdout)


def test_check_root_sees_both_cross_file_findings(package: Path) -> None:
    assert _check(package, ".") == EXPECTED


def test_check_of_one_file_sees_what_check_root_sees(package: Path) -> None:
    src = package / "src" / "mypkg"
    assert _check(package, str(src / "ops.py")) == [("ops.py", "AGL201", 9)]
    assert _check(package, str(src / "model.py")) == [("model.py", "AGL407", 5)]
    assert _check(src, "model.py") == [("model.py", "AGL407", 5)]  # from inside the package


def test_stdin_sees_what_check_root_sees(package: Path) -> None:
    src = package / "src" / "mypkg"
    found = _check(package, "-", "--stdin-filename", str(src / "ops.py"), stdin=OPS)
    assert found == [("ops.py", "AGL201", 9)]
    found = _check(package, "-", "--stdin-filename", str(src / "model.py"), stdin=MODEL)
    assert found == [("model.py", "AGL407", 5)]


def test_fix_of_one_file_sees_the_index(package: Path) -> None:
    ops = package / "src" / "mypkg" / "ops.py"
    # unsafe: without scale_cuda's C++, its writes are unknown (AGL201's preconditions)
    result = CliRunner().invoke(main, ["fix", "--apply", "--unsafe-fixes", str(ops)])
    assert "Fixed 1 finding in 1 file (AGL201 x1)" in result.output, result.output
    # forward is Base's, in another file: a None gradient is passed on as None
    assert "else grad_output.contiguous(), 2.0)" in ops.read_text()


def test_a_same_named_class_elsewhere_is_not_the_function(tmp_path: Path) -> None:
    """`ops.Base` is a Function and `layers.Base` an nn.Module: `Net(layers.Base)` is not a
    Function, so its forward must not be made static (that broke the module)."""
    (tmp_path / "pyproject.toml").write_text("[tool.autogradlint]\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(BASE)
    (pkg / "layers.py").write_text(
        "import torch.nn as nn\n\n\nclass Base(nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    model = pkg / "model.py"
    source = (
        "from . import layers\n\n\nclass Net(layers.Base):\n"
        "    def forward(self, x):\n        return x + 1\n"
    )
    model.write_text(source)
    assert _check(tmp_path, ".") == []
    CliRunner().invoke(main, ["fix", "--apply", str(tmp_path)])
    assert model.read_text() == source
    # The Function itself, imported under its module path, is still followed:
    (pkg / "child.py").write_text(
        "from pkg import ops\n\n\nclass Child(ops.Base):\n    def backward(ctx, g):\n        return g\n"
    )
    assert _check(tmp_path, ".") == [("child.py", "AGL402", 5)]


def test_re_exports_through_a_package_are_followed(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # a VCS root is a project root too
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .base import Base as PublicBase\n")
    (pkg / "base.py").write_text(BASE)
    (tmp_path / "user.py").write_text(
        "import pkg\n\n\nclass Child(pkg.PublicBase):\n    def backward(ctx, g):\n        return g\n"
    )
    assert _check(tmp_path, "user.py") == [("user.py", "AGL402", 5)]


def test_the_cache_key_of_a_view_does_not_depend_on_the_hash_seed() -> None:
    """A frozenset's repr follows string hashes, which differ per process: keyed on it, every
    warm run re-analysed the files with a cross-file view."""
    code = (
        "from autogradlint.view import FileView, view_key\n"
        "print(view_key(FileView('m', frozenset({'Function', 'torch.autograd.Function', 'b'}))))"
    )
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3, 4)
    }
    assert len(keys) == 1


def test_a_warm_run_of_one_file_reads_nothing_it_need_not(package: Path) -> None:
    ops = package / "src" / "mypkg" / "ops.py"
    cache = package / "cache"
    first = _check(package, "--cache-dir", str(cache), str(ops))
    (package / "src" / "mypkg" / "base.py").write_text(
        BASE.replace("torch.autograd.Function", "object")
    )
    assert _check(package, "--cache-dir", str(cache), str(ops)) == []  # base changed: seen
    (package / "src" / "mypkg" / "base.py").write_text(BASE)
    assert _check(package, "--cache-dir", str(cache), str(ops)) == first


_FORWARDS = {
    "plain": "class A(Function):\n    @staticmethod\n    def forward(ctx, x, y=1, *rest):\n"
    "        return x\n",
    "setup_context style": "class A(Function):\n    @staticmethod\n    def forward(x, y):\n"
    "        return x\n\n    @staticmethod\n    def setup_context(ctx, inputs, output):\n"
    "        pass\n",
    "one-line def": "class A(Function):\n    def forward(ctx, x): return x\n",
    "decorator over lines": "class A(Function):\n    @deco(\n    a=1)\n    def forward(ctx, x):\n"
    "        return x\n    def setup_context(ctx, i, o):\n        pass\n",
    "header over lines": "class A(Function):\n    @staticmethod\n    def forward(\n"
    "        ctx,  # the context\n        x: tuple[int, int] = (1, 2),\n    ):\n        return x\n",
    "last def wins": "class A(Function):\n    def forward(ctx, x):\n        return x\n"
    "    def forward(ctx, x, y):\n        return x\n",
    "forward under if": "class A(Function):\n    if True:\n        def forward(ctx, x):\n"
    "            return x\n",
    "string at column 0": 'class A(Function):\n    def forward(ctx, x):\n        s = """\ndef f(a):\n'
    '"""\n        return x\n',
    "decorated class": "@dataclass(\n    frozen=True)\nclass A(Function):\n    def forward(ctx, x):\n"
    "        return x\n",
    "crlf": "class A(Function):\r\n    def forward(ctx, x, y):\r\n        return x\r\n",
    "tabs": "class A(Function):\n\tdef forward(ctx, x, y):\n\t\treturn x\n",
    "non-ascii name": "class \ufb01le(Function):\n    def forward(ctx, x):\n        return x\n",
    "no forward method": "class A(Function):\n    forward = staticmethod(f)\n    # def forward\n",
    "async and nested": "class A(Function):\n    class B:\n        def forward(self, z):\n"
    "            pass\n    async def forward(ctx, x, *, k=1):\n        return x\n",
}


@pytest.mark.parametrize("case", list(_FORWARDS))
def test_forward_signatures_read_from_headers_are_those_of_the_whole_class(case: str) -> None:
    from autogradlint.view import signatures_from_classes, signatures_of

    found = signatures_of(_FORWARDS[case])
    assert found == signatures_from_classes(_FORWARDS[case])
    assert bool(found) is (case not in ("forward under if", "no forward method"))


def test_static_contract_methods_are_seen_through_comments_and_nesting() -> None:
    """Whether a Function may have a plain (non-static) contract method decides whether the
    whole project is searched for its instances (AGL402's fix): torch's own style, a comment
    between `@staticmethod` and the def, and a class nested in a function must read as static,
    or every check of a large tree searches it once per Function class."""
    from autogradlint.view import may_have_plain_methods

    commented = (
        "class Fn(Function):\n"
        "    @staticmethod\n"
        "    # pyrefly: ignore [bad-override]\n"
        "\n"
        "    def forward(ctx, x):\n"
        "        return x\n"
    )
    nested = "def make():\n    class Fn(Function):\n        @staticmethod\n        def backward(ctx, g):\n            return g\n    return Fn\n"
    plain = "def make():\n    class Fn(Function):\n        def backward(self, g):\n            return g\n\nclass Other:\n    @staticmethod\n    def backward(ctx, g):\n        return g\n"
    assert not may_have_plain_methods(commented, "Fn")
    assert not may_have_plain_methods(nested, "Fn")
    assert may_have_plain_methods(plain, "Fn")


def test_instances_of_a_class_named_like_a_common_word_are_unproven(tmp_path: Path) -> None:
    """AGL402's fix needs every instance of a legacy Function searched for; a class named like a
    word every file uses (`Type`) is not searched file by file (that cost more than the rest of
    a check of torch's tree): its instances are unproven, and the index says why."""
    from autogradlint.runner import project_index
    from autogradlint.view import MAX_MENTIONING

    legacy = "import torch\n\nclass Type(torch.autograd.Function):\n    def forward(self, x):\n        return x\n"
    (tmp_path / "legacy.py").write_text(legacy)
    for i in range(MAX_MENTIONING + 1):
        (tmp_path / f"user{i}.py").write_text("from typing import Type\n\nx: Type[int]\n")
    index = project_index([], sorted(tmp_path.glob("*.py")), tmp_path)
    ((name, _subclassed, instances),) = index.view(str(tmp_path / "legacy.py")).uses
    assert name == "Type"
    assert instances == f"`Type` is named in {MAX_MENTIONING + 2} files, too many to search"
    few = tmp_path / "few"
    few.mkdir()
    (few / "legacy.py").write_text(legacy)
    (few / "user.py").write_text(
        "from typing import Type\n\ndef f(x: Type) -> Type:\n    return x\n"
    )
    index = project_index([], sorted(few.glob("*.py")), few)
    ((_, _, instances),) = index.view(str(few / "legacy.py")).uses
    assert instances == ""  # searched: an annotation makes no instance
