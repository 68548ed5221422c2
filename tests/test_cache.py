"""The result cache: warm runs re-analyse nothing; edits, config and version invalidate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autogradlint import cache as cache_mod
from autogradlint import runner
from autogradlint.cli import main
from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths

BUG = """\
import torch

class Square(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        return torch.autograd.grad(y, x, g)[0]
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text(BUG)
    (tmp_path / "plain.py").write_text("x = 1\n")
    return tmp_path


@pytest.fixture
def analysed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the engine is actually asked to analyse."""
    calls: list[str] = []
    real = runner._analyse

    def counting(pending, workers, progress):  # type: ignore[no-untyped-def]
        calls.extend(Path(job[0]).name for job in pending)
        return real(pending, workers, progress)

    monkeypatch.setattr(runner, "_analyse", counting)
    return calls


def run(tree: Path, config: Config | None = None) -> list:  # type: ignore[type-arg]
    config = config or Config(root=tree)
    files = discover([str(tree)], config).files
    cache = cache_mod.Cache(tree / ".autogradlint_cache", config.fingerprint())
    return lint_paths(files, config, jobs=1, cache=cache)


def test_warm_run_analyses_nothing_and_gives_the_same_findings(tree: Path, analysed) -> None:
    cold = run(tree)
    assert sorted(analysed) == ["m0.py", "m1.py", "m2.py"]
    analysed.clear()
    warm = run(tree)
    assert analysed == []
    assert [f for r in warm for f in r.findings] == [f for r in cold for f in r.findings]


def test_editing_one_file_reanalyses_only_that_file(tree: Path, analysed) -> None:
    run(tree)
    analysed.clear()
    (tree / "m1.py").write_text(BUG + "\n# edited\n")
    results = run(tree)
    assert analysed == ["m1.py"]
    assert sum(len(r.findings) for r in results) == 3


def test_touching_without_change_is_a_hash_hit(tree: Path, analysed) -> None:
    run(tree)
    analysed.clear()
    os.utime(tree / "m0.py", ns=(1, 1))
    run(tree)
    assert analysed == []


def test_config_change_invalidates(tree: Path, analysed) -> None:
    run(tree)
    analysed.clear()
    results = run(tree, Config(root=tree, ignore=("AGL105",)))
    assert sorted(analysed) == ["m0.py", "m1.py", "m2.py"]
    assert all(f.rule_id == "AGL101" for r in results for f in r.findings)


def test_version_change_invalidates(tree: Path, analysed, monkeypatch) -> None:
    run(tree)
    analysed.clear()
    monkeypatch.setattr(cache_mod, "engine_fingerprint", lambda: "another-version")
    run(tree)
    assert sorted(analysed) == ["m0.py", "m1.py", "m2.py"]


def test_corrupt_cache_is_ignored_and_rebuilt(tree: Path, analysed) -> None:
    run(tree)
    (cache_file,) = (tree / ".autogradlint_cache").glob("v*.json")
    cache_file.write_text('{"format": 1, "files": {"trunc')
    analysed.clear()
    results = run(tree)
    assert sorted(analysed) == ["m0.py", "m1.py", "m2.py"]
    assert sum(len(r.findings) for r in results) == 3
    json.loads(cache_file.read_text())  # rewritten whole


def test_concurrent_runs_leave_a_valid_cache(tree: Path) -> None:
    command = [sys.executable, "-m", "autogradlint", "check", "--output-format", "json", str(tree)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, cwd=tree) for _ in range(4)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(len(json.loads(out)) == 3 for out in outputs)
    for cache_file in (tree / ".autogradlint_cache").glob("v*.json"):
        json.loads(cache_file.read_text())
    assert not list((tree / ".autogradlint_cache").glob(".tmp-*"))


def test_no_cache_and_clean(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    cli = CliRunner()
    assert cli.invoke(main, ["check", "--no-cache", str(tree)]).exit_code == 1
    assert not (tree / ".autogradlint_cache").exists()
    directory = tree / "cachedir"
    assert cli.invoke(main, ["check", "--cache-dir", str(directory), str(tree)]).exit_code == 1
    assert list(directory.glob("v*.json"))
    result = cli.invoke(main, ["clean", "--cache-dir", str(directory)])
    assert "Removed" in result.output and not directory.exists()


@pytest.mark.parametrize(
    "entry",
    [
        [],
        [1, 2, 3],
        ["mtime", 1, 2, 3, "d", [], {}, "k"],
        [1, 2, 3, 4, "d", [["A", "not-a-list", True]], {"findings": 7}, "k"],
        [1, 2, 3, 4, "d", [], {"findings": [{"bogus": 1}], "error": None, "parsed": 1}, "k"],
        {"a": "dict"},
        None,
    ],
)
def test_a_cache_with_valid_json_but_wrong_entries_is_a_miss_not_a_crash(
    tree: Path, analysed, entry
) -> None:
    run(tree)
    (cache_file,) = (tree / ".autogradlint_cache").glob("v*.json")
    data = json.loads(cache_file.read_text())
    for key in data["files"]:
        data["files"][key] = entry
    cache_file.write_text(json.dumps(data))
    analysed.clear()
    results = run(tree)  # used to end in IndexError or TypeError on every run until `clean`
    assert sorted(analysed) == ["m0.py", "m1.py", "m2.py"]
    assert sum(len(r.findings) for r in results) == 3
    analysed.clear()
    run(tree)
    assert analysed == []  # the bad entries were replaced


def test_a_same_size_edit_with_its_mtime_restored_is_seen(tree: Path, analysed) -> None:
    run(tree)
    path = tree / "m0.py"
    before = path.stat()
    path.write_text(BUG.replace("y = x * x", "y = x + x"))  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    analysed.clear()
    run(tree)
    assert analysed == ["m0.py"]  # the ctime moved: the stat key no longer matches
