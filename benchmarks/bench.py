"""Time `autogradlint check` against `ruff check --select E,F,B` on the same trees, same run.

Usage: python benchmarks/bench.py [--rounds N] [TREE ...]
Default tree: the installed torch package's source. Prints medians, the ratio and peak RSS.
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


def _default_trees() -> list[Path]:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed: pass a tree to benchmark")
    return [Path(spec.origin).parent]


def _count(tree: Path) -> tuple[int, int]:
    files = lines = 0
    for path in tree.rglob("*.py"):
        files += 1
        with path.open("rb") as handle:
            lines += sum(1 for _ in handle)
    return files, lines


def _time(cmd: list[str], rounds: int) -> tuple[float, int]:
    timings = []
    for _ in range(rounds):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        timings.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return statistics.median(timings), peak_kb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ruff = shutil.which("ruff")
    if ruff is None:
        sys.exit("ruff is not installed (pip install ruff)")
    agl = [sys.executable, "-m", "autogradlint", "check", "--output-format", "concise"]
    print(f"{'tree':<28} {'files':>6} {'lines':>9} {'ruff s':>7} {'agl s':>7} {'ratio':>6}")
    for tree in args.trees or _default_trees():
        files, lines = _count(tree)
        ruff_s, _ = _time(
            [ruff, "check", "--no-cache", "--select", "E,F,B", "-q", "--exit-zero", str(tree)],
            args.rounds,
        )
        agl_s, peak = _time([*agl, str(tree)], args.rounds)
        print(
            f"{tree.name[:28]:<28} {files:>6} {lines:>9} {ruff_s:>7.2f} {agl_s:>7.2f} "
            f"{agl_s / ruff_s:>5.2f}x"
        )
    print(f"peak RSS of any child process: {peak / 1024:.0f} MB (rounds: {args.rounds}, medians)")


if __name__ == "__main__":
    main()
