"""One bad file never takes the run down: crashes, runaway parses and memory blow-ups cost that
file only, in `check`, `fix` and the pools alike; what libcst cannot take is refused up front."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main
from autogradlint.config import Config
from autogradlint.engine.pipeline import lint_source
from autogradlint.isolation import Failure, Persistent, run_isolated, safe_path
from autogradlint.runner import discover, lint_paths
from autogradlint.speed import complexity

HOOK = "import torch\n\n\nclass G(torch.autograd.Function):\n    @staticmethod\n    def backward(ctx, g):\n        return "


@pytest.mark.parametrize(
    "expression",
    [
        "g * " + "-" * 30_000 + "1",  # segfaulted libcst's native parser
        "not " * 12_000 + "g",
        "lambda: " * 12_000 + "g",
        "g" + ".t()" * 6_000,
        "+".join(["g"] * 10_000),  # took over two minutes
        "g if g else " * 7_000 + "g",  # 4 GB and 38 s at 76 KB
    ],
    ids=["unary", "not", "lambda", "attribute-calls", "binary", "conditional"],
)
def test_what_the_native_parser_cannot_take_is_refused_before_it_sees_it(expression: str) -> None:
    started = time.monotonic()
    result = lint_source(HOOK + expression + "\n", "deep.py")
    assert result.error is not None
    assert "too complex to analyse" in result.error.message
    assert result.error.line == 7
    assert time.monotonic() - started < 5


def test_the_prescreen_passes_real_code(root: Path) -> None:
    for path in sorted((root / "autogradlint").rglob("*.py")):
        assert complexity.too_complex(path.read_text()) is None, path


def _tree(tmp_path: Path, bad: str, count: int = 20) -> Path:
    for i in range(count):
        (tmp_path / f"m{i:02}.py").write_text(SQUARE_BUG)
    (tmp_path / "bad.py").write_text(SQUARE_BUG + "\n\n" + HOOK.split("\n", 1)[1] + bad + "\n")
    return tmp_path


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_parser_crash_costs_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    # Switch the prescreen off to reach the native parser, as input it does not know would.
    monkeypatch.setattr(complexity, "MAX_EXPRESSION_DEPTH", 10**9)
    tree = _tree(tmp_path, "g * " + "-" * 30_000 + "1")
    config = Config(root=tree)
    results = lint_paths(discover([str(tree)], config).files, config, jobs=jobs)
    errors = {Path(r.path).name: r.error.message for r in results if r.error}
    assert list(errors) == ["bad.py"]
    assert "the parser crashed (SIGSEGV)" in errors["bad.py"]
    assert sum(len(r.findings) for r in results) == 20  # every other result survived


def test_check_and_fix_report_the_crash_and_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(complexity, "MAX_EXPRESSION_DEPTH", 10**9)
    tree = _tree(tmp_path, "g * " + "-" * 30_000 + "1", count=3)
    checked = CliRunner().invoke(main, ["check", "--no-cache", str(tree)])
    assert checked.exit_code == 2
    assert "bad.py: too complex to analyse: the parser crashed" in checked.output
    assert checked.output.count("AGL101") >= 3
    fixed = CliRunner().invoke(main, ["fix", "--apply", str(tree)])
    assert fixed.exit_code == 2
    assert "Fixed 3 findings in 3 files" in fixed.output
    assert "with torch.enable_grad():" in (tree / "m00.py").read_text()


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _allocate(megabytes: int) -> int:
    return len(bytearray(megabytes << 20)) >> 20


def _die(code: int) -> None:
    signal.raise_signal(code)


def test_time_budget_kills_the_job_not_the_run() -> None:
    results = run_isolated(_sleep, [0.0, 30.0, 0.0], workers=2, time_budget=1.0)
    assert results[0] == 0.0 and results[2] == 0.0
    assert isinstance(results[1], Failure) and "took longer than 1 s" in results[1].reason


def test_memory_budget_is_a_failure_of_that_job() -> None:
    results = run_isolated(_allocate, [1, 2048, 1], memory_budget=512 << 20)
    assert results[0] == 1 and results[2] == 1
    assert isinstance(results[1], Failure) and "memory budget" in results[1].reason


def test_a_killed_worker_is_replaced() -> None:
    results = run_isolated(_die, [signal.SIGKILL, signal.SIGABRT], workers=1)
    assert [r.reason for r in results] == [
        "the parser crashed (SIGKILL)",
        "the parser crashed (SIGABRT)",
    ]


def test_sigterm_stops_a_run_whose_parser_is_busy(tmp_path: Path) -> None:
    """The parser runs in a worker: the CLI process itself always sees SIGTERM and SIGINT
    (they were ignored while libcst's native code ran in it)."""
    import subprocess

    (tmp_path / "slow.py").write_text(HOOK + "+".join(["g"] * 8_000) + "\n")
    env = {**os.environ, "AUTOGRADLINT_MAX_EXPRESSION_DEPTH": "1000000000"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autogradlint", "check", "--no-cache", str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(2.0)  # well inside libcst's minutes-long parse of that chain
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) != 0


def test_fix_parses_the_slice_not_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fix` on a large file costs what `check` costs: libcst sees the Function, not the
    megabytes around it (it took 164 s and 2.9 GB on a 2 MB file)."""
    from autogradlint.engine import pipeline as engine
    from autogradlint.engine.fix_loop import fix_text

    filler = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(40_000))
    source = filler + SQUARE_BUG.replace("import torch\n", "import torch\n\n\n", 1)
    assert len(source) > 1_500_000
    sizes: list[int] = []
    real = engine.parse_module

    def recording(text: str):  # type: ignore[no-untyped-def]
        sizes.append(len(text))
        return real(text)

    monkeypatch.setattr(engine, "parse_module", recording)
    outcome = fix_text(source, "big.py")
    assert outcome.error is None and outcome.applied == ["AGL101"]
    assert "with torch.enable_grad():" in outcome.source
    assert outcome.source.startswith(filler)
    assert sizes and max(sizes) < 5_000  # every parse was of the slice


def test_a_long_chain_of_subclasses_is_resolved_in_one_walk() -> None:
    """The Function closure goes over the classes once (10,000 chained subclasses took 216 s
    when every layer iterated over all classes until nothing changed: once per level)."""
    from autogradlint.text.hierarchy import descendants, inherited

    passes = 0

    class Counting(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def]
            nonlocal passes
            passes += 1
            return super().items()

    n = 20_000
    bases = Counting({f"C{i}": [f"C{i - 1}"] for i in range(n, 0, -1)})  # bases defined last
    assert descendants({"C0"}, bases) == {f"C{i}" for i in range(n + 1)}
    assert passes == 1
    kinds = inherited({"C0": {"function"}}, bases)
    assert kinds[f"C{n}"] == {"function"} and passes == 2


def _echo(data: bytes) -> bytes:
    return data * 2


def test_large_jobs_and_results_never_deadlock_the_pool() -> None:
    """A large job is never queued behind a running one: its send would wait for the worker,
    which may be waiting to send a large result (the corpus fix round trip hung on it)."""
    jobs = [bytes([i]) * (3 << 20) for i in range(6)] + [b"x" * 100] * 20
    results = run_isolated(_echo, jobs, workers=2, size=len, time_budget=120)
    assert [len(r) for r in results] == [len(j) * 2 for j in jobs]


def test_a_path_made_safe_has_no_working_directory_and_means_the_same_anywhere(
    tmp_path: Path,
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "link").symlink_to(tmp_path)
    path = ["", ".", str(tmp_path), str(tmp_path / "link"), "src", "/usr/lib/python3.11"]
    assert safe_path(path, str(tmp_path)) == [str(tmp_path / "src"), "/usr/lib/python3.11"]


def _finds(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _find_all(modules: list[str]) -> list[bool]:
    return [_finds(module) for module in modules]


def _where(module: str) -> tuple[str, bool]:
    return os.getcwd(), _finds(module)


@pytest.fixture
def started_in_a_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """As `python -m autogradlint` leaves it: the working directory, holding a module, first
    on the path. The module's name."""
    (tmp_path / "agl_shadow_probe.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _finds("agl_shadow_probe")  # here, in this process, it would be imported
    return "agl_shadow_probe"


def test_forked_workers_never_import_from_the_working_directory(
    started_in_a_project: str,
) -> None:
    from autogradlint.workers import map_in_forks

    module = started_in_a_project
    assert run_isolated(_finds, [module]) == [False]
    assert map_in_forks(_find_all, [module], readers=1) == [False]


def test_the_language_servers_worker_starts_elsewhere_with_a_safe_path(
    started_in_a_project: str,
) -> None:
    worker = Persistent(_where, preload=("json",))
    try:
        assert worker.run(started_in_a_project) == (os.path.abspath(os.sep), False)
    finally:
        worker.close()


def test_elsewhere_than_linux_check_and_fix_workers_start_with_a_safe_path(
    started_in_a_project: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS does not fork them: multiprocessing's spawn started them with `python -c` here."""
    monkeypatch.setattr(sys, "platform", "darwin")
    assert run_isolated(_where, [started_in_a_project]) == [(os.path.abspath(os.sep), False)]
