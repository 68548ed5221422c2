"""Parsed rule files kept across runs: the rules read from them are the rules read from the
YAML, a second process never imports yaml, an edited rule file is parsed again, and a cache
file others can write is ignored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autogradlint.meta import parsed_yaml
from autogradlint.runtime.kept_files import cache_file, load_owned

_SCRIPT = (
    "import pickle, sys\n"
    "from autogradlint.meta import all_rules\n"
    "rules = all_rules()\n"
    "sys.stdout.buffer.write(pickle.dumps((rules, 'yaml' in sys.modules)))\n"
)


def _rules_in_a_fresh_process(env: dict[str, str]) -> tuple[object, bool]:
    import pickle

    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    return pickle.loads(run.stdout)  # type: ignore[no-any-return]


def test_a_second_run_reads_the_same_rules_without_yaml(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("AUTOGRADLINT_NO_CODE_CACHE", None)
    plain, _ = _rules_in_a_fresh_process({**env, "AUTOGRADLINT_NO_CODE_CACHE": "1"})
    first, first_yaml = _rules_in_a_fresh_process(env)
    second, second_yaml = _rules_in_a_fresh_process(env)
    assert plain == first == second
    assert first_yaml and not second_yaml


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("AUTOGRADLINT_NO_CODE_CACHE", raising=False)
    return tmp_path


def test_an_edited_text_is_parsed_again(cache_home: Path) -> None:
    with parsed_yaml() as parse:
        assert parse("id: AGL101\nseverity: error\n") == {"id": "AGL101", "severity": "error"}
    with parsed_yaml() as parse:
        assert parse("id: AGL101\nseverity: warning\n") == {"id": "AGL101", "severity": "warning"}
    path = cache_file("rule-documents")
    assert path is not None
    assert load_owned(path) == {
        "id: AGL101\nseverity: warning\n": {"id": "AGL101", "severity": "warning"}
    }


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_file_others_can_write_is_not_read(cache_home: Path) -> None:
    import marshal

    path = cache_file("rule-documents")
    assert path is not None
    path.parent.mkdir(parents=True)
    text = "id: AGL101\n"
    path.write_bytes(marshal.dumps({text: {"id": "FORGED"}}))
    path.chmod(0o666)
    with parsed_yaml() as parse:
        assert parse(text) == {"id": "AGL101"}
    path.chmod(0o600)
    path.write_bytes(b"not marshal data")
    with parsed_yaml() as parse:
        assert parse(text) == {"id": "AGL101"}


def _kept(directory: Path, name: str, prefix: str, executable: str, age_s: float = 0) -> Path:
    """A kept file as some interpreter wrote it: its header, then its value."""
    import marshal
    import time

    path = directory / name
    path.write_bytes(
        marshal.dumps(("autogradlint-kept-file", prefix, executable)) + marshal.dumps({})
    )
    path.chmod(0o600)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_writing_prunes_the_sets_no_interpreter_will_read(cache_home: Path, tmp_path: Path) -> None:
    """One set of files per interpreter and environment: writing one removes those of
    environments that are gone and of an interpreter this environment replaced, and the oldest
    beyond a few per kind; nothing else in the directory is touched."""
    from autogradlint.runtime import kept_files

    directory = cache_home / "autogradlint"
    directory.mkdir()
    alive = tmp_path / "venv"
    (alive / "bin").mkdir(parents=True)
    (alive / "bin" / "python").write_text("")
    python = str(alive / "bin" / "python")
    gone = _kept(directory, "rule-documents-aaaaaaaa-00000001.marshal", "/no/such/venv", python)
    here = _kept(directory, "rule-documents-aaaaaaaa-00000002.marshal", sys.prefix, sys.executable)
    earlier = directory / "rule-documents-aaaaaaaa-00000003.marshal"
    import marshal

    earlier.write_bytes(marshal.dumps({"id: AGL101\n": {}}))  # before files had a header
    others = [
        _kept(directory, f"rule-documents-aaaaaaaa-1000000{i}.marshal", str(alive), python, i)
        for i in range(1, 10)
    ]
    # another kind of this very interpreter, a file of someone else's naming, the secret key
    sibling = cache_file("dataclass-code-cli")
    assert sibling is not None
    _kept(directory, sibling.name, sys.prefix, sys.executable)
    foreign = directory / "notes-aaaaaaaa-00000004.txt"
    foreign.write_text("mine")
    key = directory / "cache-key"
    key.write_text("secret")
    stray = directory / "rule-documents-aaaaaaaa-00000005.marshal"
    stray.write_text("not marshal data")

    with parsed_yaml() as parse:  # writes this interpreter's rule-documents file
        parse("id: AGL999\n")
    current = cache_file("rule-documents")
    assert current is not None and current.exists()
    assert not gone.exists() and not here.exists() and not earlier.exists()
    kept = [p for p in others if p.exists()]
    # the newest of the others, the current file counting towards the limit
    assert kept == others[: kept_files.MOST_PER_KIND - 1]
    assert sibling.exists() and foreign.exists() and key.exists() and stray.exists()
    with parsed_yaml() as parse:
        assert parse("id: AGL999\n") == {"id": "AGL999"}
