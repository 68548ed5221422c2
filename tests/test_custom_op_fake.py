"""AGL413: a custom op with no fake implementation anywhere in the project runs eagerly, but
torch.compile, torch.export and opcheck cannot trace it (semantics D13.1); a fake registered on
the op or by its name (D13.2), a Meta or composite kernel for a schema op (D13.3), triton_op's
own function (D13.4) and the fake torch generates for an op that only mutates (D13.6) are
fakes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autogradlint import lint_source
from autogradlint.config import Config
from autogradlint.model import Finding
from autogradlint.runner import discover, lint_paths

AGL413 = frozenset({"AGL413"})

SCALED = """\
import torch

@torch.library.custom_op("mylib::scaled", mutates_args=())
def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor
"""


@pytest.fixture(autouse=True)
def _alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sources are linted as files of an empty project: the fakes of other modules of the
    project (here: this checkout's own tests) are read too."""
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)


def _lint(source: str) -> list[Finding]:
    result = lint_source(textwrap.dedent(source), str(Path.cwd() / "ops.py"), enabled=AGL413)
    assert result.error is None, result.error
    return result.findings


def _found(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.message) for f in _lint(source)]


def test_a_custom_op_without_a_fake_is_flagged_at_its_name() -> None:
    (finding,) = _lint(SCALED)
    assert (finding.line, finding.col, finding.severity) == (4, 4, "warning")
    assert finding.message == (
        "custom op `mylib::scaled` has no fake implementation: torch.compile and export cannot "
        "trace it"
    )
    assert "Register one with `@scaled.register_fake`" in finding.help
    assert finding.subject == "scaled"


def test_each_way_of_registering_a_fake_counts() -> None:
    fakes = [
        "@scaled.register_fake\ndef _(x, factor):\n    return torch.empty_like(x)\n",
        '@torch.library.register_fake("mylib::scaled")\ndef _(x, factor):\n    return x\n',
        '@torch.library.impl_abstract("mylib::scaled")\ndef _(x, factor):\n    return x\n',
        "torch.library.register_fake(torch.ops.mylib.scaled.default)(lambda x, f: x)\n",
        'torch.library.impl("mylib::scaled", "Meta")(lambda x, f: x)\n',
    ]
    assert len(_found(SCALED)) == 1
    for fake in fakes:
        assert _found(SCALED + "\n\n" + fake) == [], fake


def test_the_call_forms_and_an_optional_dependency_guard() -> None:
    source = """\
    import torch
    from torch.library import custom_op

    NS = "mylib"
    if hasattr(torch.library, "custom_op"):
        @custom_op(f"{NS}::guarded", mutates_args=())
        def guarded(x: torch.Tensor) -> torch.Tensor:
            return x * 2

    called = torch.library.custom_op("mylib::called", lambda x: x * 2, mutates_args=())
    wrapped = custom_op("mylib::wrapped", mutates_args=())(lambda x: x * 2)
    wrapped.register_fake(lambda x: torch.empty_like(x))
    """
    assert [line for line, _ in _found(source)] == [7, 10]


def test_an_op_that_only_mutates_its_arguments_and_a_triton_op_are_quiet() -> None:
    source = """\
    import torch
    from torch.library import triton_op

    @torch.library.custom_op("mylib::fill_", mutates_args=("out",))
    def fill_(out: torch.Tensor, value: float) -> None:
        out.fill_(value)

    @triton_op("mylib::double", mutates_args=())
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2
    """
    assert _found(source) == []
    returns = source.replace("value: float) -> None:", "value: float) -> torch.Tensor:")
    assert [line for line, _ in _found(returns)] == [5]


def test_a_schema_op_with_backend_kernels_only() -> None:
    source = """\
    import torch

    LIB = torch.library.Library("mylib", "DEF")
    LIB.define("cpu_only(Tensor x) -> Tensor")
    LIB.impl("cpu_only", lambda x: x * 2, "CPU")
    LIB.define("with_meta(Tensor x) -> Tensor")
    LIB.impl("with_meta", lambda x: x * 2, "CPU")
    LIB.impl("with_meta", lambda x: torch.empty_like(x), "Meta")
    LIB.define("composite(Tensor x) -> Tensor")
    LIB.impl("composite", lambda x: x * 2, "CompositeExplicitAutograd")
    LIB.define("in_cpp(Tensor x) -> Tensor")

    torch.library.define("mylib::cuda_only", "(Tensor x) -> Tensor")

    @torch.library.impl("mylib::cuda_only", "cuda")
    def _(x):
        return x * 2
    """
    found = _found(source)
    assert [line for line, _ in found] == [4, 13]
    assert "`cpu_only`" in found[0][1] and "`mylib::cuda_only`" in found[1][1]


def test_a_fake_registered_in_another_module_of_the_project(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text(SCALED)
    (package / "other.py").write_text(SCALED.replace("mylib::scaled", "other::scaled"))
    config = Config(root=tmp_path, select=("AGL413",))

    def flagged() -> list[str]:
        found = discover([str(tmp_path)], config)
        return sorted(Path(r.path).name for r in lint_paths(found.files, config) if r.findings)

    assert flagged() == ["ops.py", "other.py"]
    (package / "fakes.py").write_text(
        "import torch\n\nfrom .ops import scaled\n\n\n"
        "@scaled.register_fake\ndef _(x, factor):\n    return torch.empty_like(x)\n"
    )
    # by its Python name where the ops module is imported; `other::scaled` is another op
    assert flagged() == ["other.py"]
    (package / "fakes.py").write_text(
        'import torch\n\ntorch.library.register_fake("other::scaled")(lambda x, f: x)\n'
    )
    assert flagged() == ["ops.py"]
    (package / "meta.cpp").write_text("TORCH_LIBRARY_IMPL(mylib, Meta, m) {}\n")
    assert flagged() == []


def test_a_meta_kernel_named_without_its_namespace_is_its_librarys(tmp_path: Path) -> None:
    """`lib.impl("scaled", fn, "Meta")` registers for the namespace of the Library `lib` is
    built with: a Meta kernel for `other::scaled` fakes neither `mylib::scaled` nor a schema
    op `scaled` defined in a `mylib` Library."""
    for package in ("mine", "theirs"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "theirs" / "meta.py").write_text(
        'import torch\n\nLIB = torch.library.Library("other", "IMPL")\n'
        'LIB.impl("scaled", lambda x, f: torch.empty_like(x), "Meta")\n'
    )
    (tmp_path / "mine" / "ops.py").write_text(SCALED)
    (tmp_path / "mine" / "schema.py").write_text(
        'import torch\n\nLIB = torch.library.Library("mylib", "FRAGMENT")\n'
        'LIB.define("scaled2(Tensor x, float f) -> Tensor")\n'
        'LIB.impl("scaled2", lambda x, f: x * f, "CPU")\n'
    )
    (tmp_path / "theirs" / "meta2.py").write_text(
        'import torch\n\nLIB = torch.library.Library("other", "IMPL")\n'
        'LIB.impl("scaled2", lambda x, f: torch.empty_like(x), "Meta")\n'
    )
    config = Config(root=tmp_path, select=("AGL413",))

    def flagged() -> list[str]:
        results = lint_paths(discover([str(tmp_path)], config).files, config)
        return sorted(Path(r.path).name for r in results if r.findings)

    assert flagged() == ["ops.py", "schema.py"]
    (tmp_path / "theirs" / "meta2.py").write_text(
        (tmp_path / "theirs" / "meta2.py").read_text().replace('"other"', '"mylib"')
    )
    assert flagged() == ["ops.py"]
