"""Precision and recall of autogradlint on the labelled corpus, per family and manifest group.

    python benchmarks/quality.py [--names-off] [--family B]

The corpus is fetched by tests/corpus/fetch.sh (pinned by sha256 in tests/corpus/manifest.tsv)
into $AUTOGRADLINT_CORPUS_DIR or ~/.cache/autogradlint-corpus; the labels are tests/corpus/labels.tsv. A
labelled bug/risk site counts as found when a finding of its family sits inside the labelled
statement; an ok site is a false positive when one does. `--names-off` empties every name list
(`extension-modules`, `stride-safe-extensions`, `writing-extensions`): what is found then is found
from evidence, not from a name.
"""

from __future__ import annotations

import argparse
import ast
import csv
import sys
import warnings
from collections import defaultdict
from pathlib import Path

from corpus import corpus_dir  # benchmarks/corpus.py: this script runs from its folder

HERE = Path(__file__).resolve().parent.parent / "tests" / "corpus"
FAMILY = {"AGL1": "A", "AGL2": "B", "AGL3": "C", "AGL4": "D"}
CELLS = ("tp", "fn", "fp", "tn")


def statement_span(path: Path, line: int, whole_def: bool = False) -> tuple[int, int]:
    """The lines of the innermost statement that starts on `line` (the labelled call); with
    `whole_def`, a def starting there spans its whole body."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # old escape sequences in published code
            tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return line, line + 3
    best = (line, line + 3)
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno == line:
            end = node.end_lineno or line
            if whole_def and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return line, max(end, line)
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.With)):
                best = (line, max(end, line))  # a compound statement's body is not the site
    return best


def classify(row: dict[str, str], found: list[tuple[str, int]], src: Path) -> str:
    """tp / fn / fp / tn for one labelled site, given the file's (family, line) findings.

    A bug/risk site is found by a finding of its family inside the labelled statement (for
    OTHER, the Function contract, a finding of any family there counts: an extension writing
    into a grad is reported by family B); an ok site is a false positive when a finding of its
    family (OTHER: the contract, D) is there. An ok row on a `def` (a C hook that converts
    nothing) covers the whole function: a finding of its family anywhere in it is false."""
    bad = row["verdict"] in ("bug", "risk")
    first, last = statement_span(
        src / row["package"] / row["relpath"], int(row["line"]), whole_def=not bad
    )
    family = row["pattern"]
    wanted = "D" if family == "OTHER" else family
    hit = any(
        first <= line <= last and (fam == wanted or (family == "OTHER" and bad))
        for fam, line in found
    )
    return ("tp" if hit else "fn") if bad else ("fp" if hit else "tn")


def known_gaps() -> dict[tuple[str, str], str]:
    """(package/relpath, line) -> why: labelled sites no rule finds yet (known_gaps.tsv)."""
    with (HERE / "known_gaps.tsv").open(encoding="utf-8") as handle:
        return {
            (f"{r['package']}/{r['relpath']}", r["line"]): r["why"]
            for r in csv.DictReader(handle, delimiter="\t")
        }


def labels() -> list[dict[str, str]]:
    with (HERE / "labels.tsv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def groups() -> dict[str, str]:
    with (HERE / "manifest.tsv").open(encoding="utf-8") as handle:
        return {
            f"{r['name']}-{r['version']}": r["group"]
            for r in csv.DictReader(handle, delimiter="\t")
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names-off", action="store_true")
    parser.add_argument("--family", choices=["A", "B", "C", "OTHER"])
    options = parser.parse_args()
    from dataclasses import replace

    from autogradlint.config import Config
    from autogradlint.runner import discover, lint_paths
    from autogradlint.settings import Settings

    corpus = corpus_dir()
    src = corpus / "src"
    rows = [r for r in labels() if options.family in (None, r["pattern"])]
    packages = sorted({r["package"] for r in rows})
    missing = [p for p in packages if not (src / p).is_dir()]
    if missing:
        print(f"not fetched (run tests/corpus/fetch.sh): {', '.join(missing)}", file=sys.stderr)
        return 2
    settings = Settings()
    if options.names_off:
        settings = replace(settings, extension_modules=(), stride_safe=(), writing_extensions=())
    config = Config(root=src, settings=settings)
    files = [
        f for p in packages for f in discover([str(src / p)], config, respect_gitignore=False).files
    ]
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for result in lint_paths(files, config):
        rel = Path(result.path).resolve().relative_to(src.resolve()).as_posix()
        found[rel] += [(FAMILY[f.rule_id[:4]], f.line) for f in result.findings]
    group_of = groups()
    gaps = known_gaps()
    score: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tp fn fp tn
    for row in rows:
        rel = f"{row['package']}/{row['relpath']}"
        cell = classify(row, found.get(rel, []), src)
        score[(row["pattern"], group_of.get(row["package"], "?"))][CELLS.index(cell)] += 1
        if cell in ("fn", "fp"):
            kind = "missed" if cell == "fn" else "false positive"
            if (rel, row["line"]) in gaps:
                kind += " (known gap)"
            print(f"{kind}: {row['pattern']} {rel}:{row['line']}: {row['reason'][:100]}")
    print(f"\n{'family':<7}{'group':<9}{'tp':>4}{'fn':>4}{'fp':>4}{'tn':>4}  precision  recall")
    for (family, group), (tp, fn, fp, tn) in sorted(score.items()):
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        print(f"{family:<7}{group:<9}{tp:>4}{fn:>4}{fp:>4}{tn:>4}  {precision:9.2f}  {recall:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
