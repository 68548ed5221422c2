"""The result cache: warm runs re-analyse nothing; edits, config and version invalidate."""

from __future__ import annotations

import json
import os
import re
import stat
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
    from autogradlint.cache_key import user_key

    run(tree)
    (cache_file,) = (tree / ".autogradlint_cache").glob("v*.json")
    key = user_key()  # written by this user's runs: sealed, so only its entries are bad
    body = cache_mod.unsealed(key, cache_file.read_bytes())
    assert body is not None
    data = json.loads(body)
    for name in data["files"]:
        data["files"][name] = entry
    cache_file.write_bytes(cache_mod.sealed(key, json.dumps(data).encode()))
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


# --- the cache directory is the tool's own (issue 34, item 2) --------------------------------
@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root with its own files, beside which a cache might be put."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(BUG)
    (tmp_path / "src" / "util.py").write_text("x = 1\n")
    (tmp_path / ".gitignore").write_text("build/\n")
    return tmp_path


def _listing(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_check_refuses_a_cache_dir_that_holds_the_projects_files(project: Path, how: str) -> None:
    before = _listing(project)
    if how == "flag":
        args, env = ["check", "--cache-dir", str(project), str(project / "src")], {}
    else:
        args, env = ["check", str(project / "src")], {"AUTOGRADLINT_CACHE_DIR": str(project)}
    result = CliRunner().invoke(main, args, env=env)
    # It used to write its `.gitignore` of `*` over the project's, and exit 1.
    assert result.exit_code == 2, result.output
    assert "not an autogradlint cache directory" in result.output
    assert _listing(project) == before  # nothing written, nothing overwritten


def test_clean_removes_nothing_from_a_directory_that_is_not_the_cache(project: Path) -> None:
    before = _listing(project)
    result = CliRunner().invoke(main, ["clean", "--cache-dir", str(project / "src")])
    # It used to delete the whole of src/ and report "Removed 2 cache files".
    assert result.exit_code == 2, result.output
    assert "nothing removed" in result.output
    assert _listing(project) == before


def test_the_cache_directory_is_marked_and_clean_removes_only_what_it_wrote(
    project: Path,
) -> None:
    directory = project / "cache"
    directory.mkdir()  # an empty directory may become the cache (a temporary directory, say)
    cli = CliRunner()
    assert cli.invoke(main, ["check", "--cache-dir", str(directory), str(project)]).exit_code == 1
    tag = (directory / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert (directory / "autogradlint.signature").read_text().startswith("autogradlint")
    (directory / "notes.txt").write_text("mine")  # put there by someone else since
    result = cli.invoke(main, ["clean", "--cache-dir", str(directory)])
    assert result.exit_code == 0, result.output
    assert "Kept what autogradlint did not write" in result.output
    assert [p.name for p in directory.iterdir()] == ["notes.txt"]
    assert (directory / "notes.txt").read_text() == "mine"


# --- only this user's own runs are trusted (issue 34, item 3) --------------------------------
def _forge(directory: Path, attack: str) -> None:
    """What an attacker commits: every cached result edited to report nothing ("hide"), or
    every cached fix edit turned into code of theirs ("inject"); the bytes edited in place,
    whatever the format."""
    for path in directory.glob("v*.json"):
        text = path.read_text()
        if attack == "hide":
            text = re.sub(r'"findings":\[.*?\],"error"', '"findings":[],"error"', text)
        else:
            text = text.replace("with torch.enable_grad():", "import os; os.system('evil')  #")
        path.write_text(text)


@pytest.mark.parametrize("attack", ["hide", "inject"])
def test_a_cache_edited_on_disk_hides_no_finding_and_injects_no_fix(
    tree: Path, monkeypatch: pytest.MonkeyPatch, attack: str
) -> None:
    monkeypatch.chdir(tree)
    cli = CliRunner()
    first = cli.invoke(main, ["check", "--output-format", "json", str(tree)])
    assert first.exit_code == 1 and len(json.loads(first.stdout)) == 3
    _forge(tree / ".autogradlint_cache", attack)
    again = cli.invoke(main, ["check", "--output-format", "json", str(tree)])
    # The edited cache used to be believed: exit 0 with no findings, or "safe" fixes of its own.
    assert again.exit_code == 1, again.output
    assert "evil" not in again.stdout
    assert json.loads(again.stdout) == json.loads(first.stdout)


def test_a_cache_from_another_machine_is_not_read(
    tree: Path, analysed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tree / "home-a"))
    run(tree)  # the attacker's machine (or a developer's), then committed to the repo
    monkeypatch.setenv("XDG_CACHE_HOME", str(tree / "home-b"))
    analysed.clear()
    results = run(tree)
    assert sorted(analysed) == ["m0.py", "m1.py", "m2.py"]  # used to be [], trusting it
    assert sum(len(r.findings) for r in results) == 3


def test_fix_edits_are_not_cached(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    cli = CliRunner()
    first = cli.invoke(main, ["check", "--output-format", "json", str(tree)])
    (cache_file,) = (tree / ".autogradlint_cache").glob("v*.json")
    assert '"edits"' not in cache_file.read_text()  # recomputed from source every time
    again = cli.invoke(main, ["check", "--output-format", "json", str(tree)])
    assert json.loads(again.stdout) == json.loads(first.stdout)


def test_the_per_user_secret_is_private_and_a_shared_one_is_not_used(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tree / "home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.chdir(tree)
    cli = CliRunner()
    assert cli.invoke(main, ["check", str(tree)]).exit_code == 1
    secret = home / "autogradlint" / "cache-key"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    secret.chmod(0o644)  # anyone could have read it, and so could forge a cache
    result = cli.invoke(main, ["check", str(tree)])
    assert result.exit_code == 1
    assert "the result cache is off" in result.stderr


# --- a damaged cache costs a rebuild, never a crash (issue 34, item 14) ----------------------
def test_a_cache_nested_thousands_deep_is_ignored_and_rebuilt(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    cli = CliRunner()
    assert cli.invoke(main, ["check", str(tree)]).exit_code == 1
    for path in (tree / ".autogradlint_cache").glob("v*.json"):
        path.write_text("[" * 3000 + "]" * 3000)
    result = cli.invoke(main, ["check", str(tree)])
    # It used to end in RecursionError on every run, with exit 1: read as "findings".
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1 and "AGL101" in result.stdout
    assert "ignored and rebuilt" in result.stderr
    rebuilt = cli.invoke(main, ["check", str(tree)])
    assert rebuilt.exit_code == 1 and "warning" not in rebuilt.stderr


def test_a_cache_an_earlier_version_wrote_is_adopted_signed_and_cleaned(tree: Path) -> None:
    directory = tree / ".autogradlint_cache"
    directory.mkdir()
    (directory / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (directory / ".gitignore").write_text("*\n")
    (directory / "v7-0123456789abcdef01234567.json").write_text("{}")
    cli = CliRunner()
    cache_dir = ["--cache-dir", str(directory)]
    assert cli.invoke(main, ["check", *cache_dir, str(tree)]).exit_code == 1
    assert (directory / "autogradlint.signature").is_file()  # now marked as the tool's own
    result = cli.invoke(main, ["clean", *cache_dir])
    assert result.exit_code == 0 and not directory.exists(), result.output
