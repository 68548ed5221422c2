"""Time `autogradlint check` against `ruff check --select E,F,B` on the same trees, same run.

Usage: python benchmarks/bench.py [--rounds N] [--pause S] [TREE ...]
Default trees: the installed torch package's source, and the public corpus when it has been
fetched (~/.cache/autogradlint-corpus/src). For each tree: cold (--no-cache) and warm (a filled
cache, nothing changed) medians of autogradlint, ruff's cold median (ruff: line length 100, as
every earlier number here measured it; ruff*: without E501), the ratios, and peak RSS. Every
command runs in the tree's own directory, so no project's configuration changes what ruff does.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from corpus import corpus_dir  # benchmarks/corpus.py: this script runs from its folder


def _default_trees() -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: pass a tree to benchmark")
    trees = [Path(spec.origin).parent]
    corpus = corpus_dir() / "src"
    if corpus.is_dir():
        trees.append(corpus)
    return trees


def _count(tree: Path) -> tuple[int, int]:
    files = lines = 0
    for path in tree.rglob("*.py"):
        files += 1
        with path.open("rb") as handle:
            lines += sum(1 for _ in handle)
    return files, lines


def _run(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1) or b"Traceback" in proc.stderr:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed


def _interleaved(
    commands: list[list[str]], rounds: int, cwd: Path, pause: float = 0.0
) -> list[float]:
    """Median wall time of each command, running them in turn every round, so a slow spell of
    the machine hits all of them alike. Each run starts after the same `pause`: on this host a
    run that follows ruff's all-core burst is ~8% slower than one that follows a pause (1.58 s
    against 1.46 s for the same cold check of torch), so without it whichever command comes
    after ruff is charged for ruff's burst."""
    timings: list[list[float]] = [[] for _ in commands]
    for _ in range(rounds):
        for times, cmd in zip(timings, commands, strict=True):
            time.sleep(pause)
            times.append(_run(cmd, cwd))
    return [statistics.median(times) for times in timings]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--pause",
        type=float,
        default=1.5,
        help="seconds of rest before each timed run (0: back to back, as before 2026-12-02)",
    )
    args = parser.parse_args()
    ruff = shutil.which("ruff")
    if ruff is None:
        sys.exit("ruff is not installed (pip install ruff)")
    import compileall
    import tempfile

    import autogradlint

    # An installed package has its bytecode compiled (pip does it at install time); a source
    # checkout run with PYTHONDONTWRITEBYTECODE would recompile ours on every start.
    compileall.compile_dir(Path(autogradlint.__file__).parent, quiet=1)
    # The installed command, as users run it (`python -m` in the tree's directory would import
    # the tree's own modules first: torch's `types.py` shadows the standard library's).
    script = shutil.which("autogradlint", path=str(Path(sys.executable).parent))
    agl = [
        *([script] if script else [sys.executable, "-I", "-m", "autogradlint"]),
        "check",
        "--output-format",
        "concise",
        "--no-respect-gitignore",
    ]
    print(
        f"{'tree':<12} {'files':>6} {'lines':>9} {'ruff':>7} {'ruff*':>7} {'cold':>7} "
        f"{'warm':>7} {'cold/ruff':>9} {'cold/ruff*':>10} {'warm/ruff':>9}"
    )
    for tree in args.trees or _default_trees():
        files, lines = _count(tree)
        # Every command runs in the tree's own directory, ruff with its settings given here
        # (--isolated): from a project with a [tool.ruff] table, ruff applies that project's
        # settings to the tree, and the ratio would depend on where this was started. The
        # reference is what every earlier number measured (started from this repository, whose
        # line length is 100): on torch, ruff's time follows its count of E501 findings.
        ruff_cmd = [
            ruff,
            "check",
            "--isolated",
            "--line-length",
            "100",
            "--no-cache",
            "--select",
            "E,F,B",
            "-q",
            "--exit-zero",
            str(tree),
        ]
        # ruff*: the same without E501 (15,000 long lines on torch): the stricter reference.
        lighter = [*ruff_cmd[:-1], "--ignore", "E501", str(tree)]
        with tempfile.TemporaryDirectory() as cache_dir:
            warm_cmd = [*agl, "--cache-dir", cache_dir, str(tree)]
            _run(warm_cmd, tree)  # fill the cache
            ruff_s, lighter_s, cold_s, warm_s = _interleaved(
                [ruff_cmd, lighter, [*agl, "--no-cache", str(tree)], warm_cmd],
                args.rounds,
                tree,
                args.pause,
            )
        name = tree.name if tree.name != "src" else "corpus"
        print(
            f"{name[:12]:<12} {files:>6} {lines:>9} {ruff_s:>6.2f}s {lighter_s:>6.2f}s "
            f"{cold_s:>6.2f}s {warm_s:>6.2f}s {cold_s / ruff_s:>8.2f}x "
            f"{cold_s / lighter_s:>9.2f}x {warm_s / ruff_s:>8.2f}x"
        )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        f"peak RSS of any child process: {peak / 1024:.0f} MB (rounds: {args.rounds}, medians, "
        f"{args.pause:g} s rest before each run; ruff's peak counts too)"
    )
    # The language server with a real client over stdio (benchmarks/lsp_latency.py).
    latency = Path(__file__).with_name("lsp_latency.py")
    subprocess.run([sys.executable, str(latency)], check=False)


if __name__ == "__main__":
    main()
