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
