"""The dataclass code cache: classes made with it behave as without it, a second load compiles
nothing, and a cache file that is not trustworthy or not readable is ignored."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autogradlint.runtime import dataclass_code
from autogradlint.runtime.dataclass_code import cache_file, cached_dataclass_code


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("AUTOGRADLINT_NO_CODE_CACHE", raising=False)
    return tmp_path


def _make() -> type:
    @dataclasses.dataclass(frozen=True, order=True)
    class Point:
        x: int
        y: int = 2
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    return Point


def _behaviour(kind: type) -> tuple[object, ...]:
    a, b = kind(1), kind(1, 3, ("t",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.x = 5
    return (repr(a), repr(b), a == kind(1), a < b, hash(a) == hash(kind(1)), a.tags, b.y)


def test_classes_made_with_the_cache_behave_as_without(cache_home: Path) -> None:
    plain = _behaviour(_make())
    with cached_dataclass_code("test") as first:
        compiled = _behaviour(_make())
    with cached_dataclass_code("test") as second:
        reused = _behaviour(_make())
    assert plain == compiled == reused
    assert first.compiled > 0 and first.reused == 0
    assert second.compiled == 0 and second.reused == first.compiled
    assert "exec" not in vars(dataclasses)  # the shadow is gone afterwards


def test_the_engine_loads_from_the_cache_in_a_fresh_process(cache_home: Path) -> None:
    script = (
        "from autogradlint.runtime.dataclass_code import cached_dataclass_code\n"
        "with cached_dataclass_code('engine') as counts:\n"
        "    import libcst\n"
        "print(counts.compiled, counts.reused)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    (compiled, reused), (again, now_reused) = (map(int, r.stdout.split()) for r in runs)
    assert compiled > 100 and reused == 0  # libcst's node classes
    assert again == 0 and now_reused == compiled


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_file_others_can_write_is_not_read(cache_home: Path) -> None:
    with cached_dataclass_code("test"):
        _make()
    path = cache_file("test")
    assert path is not None and path.exists()
    path.chmod(0o666)
    with cached_dataclass_code("test") as counts:
        _make()
    assert counts.reused == 0 and counts.compiled > 0


@pytest.mark.parametrize(
    "content", [b"", b"not marshal", marshal.dumps([1, 2]), marshal.dumps({"def f(): pass": 3})]
)
def test_a_broken_file_means_compiling_as_usual(cache_home: Path, content: bytes) -> None:
    path = cache_file("test")
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    path.chmod(0o600)
    with cached_dataclass_code("test") as counts:
        made = _behaviour(_make())
    assert made == _behaviour(_make())
    assert counts.reused == 0 and counts.compiled > 0


def test_an_unwritable_cache_directory_costs_nothing_but_time(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = cache_home / "file"
    blocked.write_text("a file where the directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    with cached_dataclass_code("test") as counts:
        assert _behaviour(_make())
    assert counts.compiled > 0


def test_turned_off_by_the_environment(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGRADLINT_NO_CODE_CACHE", "1")
    with cached_dataclass_code("test") as counts:
        _make()
    assert counts.compiled == counts.reused == 0
    assert not any(cache_home.iterdir())


def test_a_nested_load_leaves_the_outer_one_in_place(cache_home: Path) -> None:
    with cached_dataclass_code("test") as outer:
        with cached_dataclass_code("test") as inner:
            _make()
        assert "exec" in vars(dataclasses)
        _make()
    assert inner.compiled == inner.reused == 0
    assert outer.compiled + outer.reused >= 2
    assert dataclass_code.cache_file("test") is not None
