"""Large runs read and analyse in worker pools; they must find exactly what one process finds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import SQUARE_BUG

from autogradlint import cache as cache_mod
from autogradlint import isolation, runner, workers
from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths

BASE = """\
import torch

class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2
"""
# A subclass of a Function defined in another file: admitted only through the cross-file index.
SUB = """\
from .base import Base

class Sub(Base):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.autograd.grad(x * x, x, g)[0]  # AGL101
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for i in range(12):
        (pkg / f"bug_{i}.py").write_text(SQUARE_BUG)
        (pkg / f"plain_{i}.py").write_text(f"value = {i}\n")
    (pkg / "base.py").write_text(BASE)
    (pkg / "sub.py").write_text("import torch\n" + SUB)
    (pkg / "broken.py").write_text("class F(torch.autograd.Function):\n    def backward(:\n")
    (pkg / "latin.py").write_bytes(b"# s\xe9\nx = 1\n")
    return tmp_path


def _summary(results: list) -> list:  # type: ignore[type-arg]
    return [
        (
            Path(r.path).name,
            [(f.rule_id, f.line, f.col) for f in r.findings],
            r.error.message if r.error else None,
        )
        for r in results
    ]


@pytest.mark.parametrize("cached", [False, True], ids=["no-cache", "cache"])
def test_pools_find_what_one_process_finds(
    tree: Path, monkeypatch: pytest.MonkeyPatch, cached: bool
) -> None:
    config = Config(root=tree)
    files = discover([str(tree)], config).files

    def lint(jobs: int, name: str) -> list:  # type: ignore[type-arg]
        cache = cache_mod.Cache(tree / name, config.fingerprint()) if cached else None
        return _summary(lint_paths(files, config, jobs=jobs, cache=cache))

    serial = lint(1, "serial-cache")
    monkeypatch.setattr(runner, "READ_POOL_THRESHOLD", 2)
    monkeypatch.setattr(runner, "POOL_THRESHOLD", 2)
    used: list[str] = []
    real_reader, real_analysis = workers.map_in_forks, isolation.run_isolated

    def reader(fn, items, readers, while_waiting):  # type: ignore[no-untyped-def]
        used.append("read")
        return real_reader(fn, items, readers, while_waiting)

    def analysis(fn, jobs, **options):  # type: ignore[no-untyped-def]
        used.append(f"analyse in {options['workers']}")
        return real_analysis(fn, jobs, **options)

    monkeypatch.setattr(workers, "map_in_forks", reader)
    monkeypatch.setattr(isolation, "run_isolated", analysis)
    parallel = lint(2, "parallel-cache")
    assert used == ["read", "analyse in 2"]
    assert parallel == serial
    by_name = {name: (findings, error) for name, findings, error in serial}
    assert by_name["sub.py"][0] == [("AGL101", 8, 15)]  # found through the index
    assert by_name["bug_0.py"][0] == [("AGL101", 13, 15)]  # 0-based column
    assert by_name["broken.py"][1] is not None and "syntax" in by_name["broken.py"][1]
    if cached:  # and a warm parallel run reuses every entry
        assert lint(2, "parallel-cache") == serial


def _squares(items):  # type: ignore[no-untyped-def]
    return [item * item for item in items]


def _dies_on_seven(items):  # type: ignore[no-untyped-def]
    if 7 in items and os.getpid() != PARENT:
        os._exit(3)  # a reader that dies in the middle of its work
    return [item * item for item in items]


PARENT = os.getpid()


@pytest.mark.skipif(sys.platform != "linux", reason="the readers are forks (Linux)")
def test_forked_readers_give_every_result_in_order_even_when_one_dies() -> None:
    waited: list[int] = []
    items = list(range(1000))
    assert workers.map_in_forks(_squares, items, 2, lambda: waited.append(os.getpid())) == [
        i * i for i in items
    ]
    assert waited == [os.getpid()]  # this process loaded the engine meanwhile
    # The reader that takes the chunk holding 7 dies: its chunks are read here instead.
    assert workers.map_in_forks(_dies_on_seven, items, 2) == [i * i for i in items]
    assert workers.map_in_forks(_squares, [], 2) == []


@pytest.mark.parametrize("named", [".", "./", "pkg", "./pkg/", "pkg//", "pkg/.", "pkg/../pkg"])
def test_found_paths_are_spelled_as_pathlib_spells_them(
    tree: Path, monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    """Discovery hands over strings (a Path per file costs more than the walk), spelled as
    the Path objects it used to hand over: reports and caches keep their paths."""
    monkeypatch.chdir(tree)
    config = Config(root=tree)
    found = discover([named], config).files
    walked = sorted(
        str(Path(directory, name))
        for directory, _dirs, names in os.walk(named)
        for name in names
        if name.endswith(".py")
    )
    assert all(isinstance(path, str) for path in found)
    assert sorted(found) == walked
    assert len(found) == 28
