"""Precision and recall of autogradlint on the labelled corpus, per family and manifest group.

    python benchmarks/quality.py [--names-off] [--family B]

The corpus is fetched by tests/corpus/fetch.sh (pinned by sha256 in tests/corpus/manifest.tsv)
into $AUTOGRADLINT_CORPUS_DIR or ~/.cache/autogradlint-corpus; the labels are tests/corpus/labels.tsv. A
labelled bug/risk site counts as found when a finding of its family sits inside the labelled
statement; an ok site is a false positive when one does. `--names-off` empties every name list
(`extension-modules`, `stride-safe-extensions`, `writing-extensions`): what is found then is found
from evidence, not from a name.

Beside the per-site table it prints precision over EVERY finding the tool makes on the whole
corpus (every manifest package, torch's own tree included): a finding on a bug/risk site is
right, one on an ok site is wrong, and one no label covers is *untriaged*, counted as wrong and
listed by file and line. That is the number a user meets; the per-site table only scores what
was labelled.
"""

from __future__ import annotations

import argparse
import ast
import csv
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

try:  # imported by tests/test_corpus.py from the repository root
    from benchmarks.corpus import corpus_dir
except ImportError:  # run as a script: its own folder is on sys.path (there, `corpus` would
    from corpus import corpus_dir  # be tests/corpus under pytest, a namespace package)

HERE = Path(__file__).resolve().parent.parent / "tests" / "corpus"
FAMILY = {"AGL1": "A", "AGL2": "B", "AGL3": "C", "AGL4": "D"}
CELLS = ("tp", "fn", "fp", "tn")


@cache
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


def covers(row: dict[str, str], family: str, line: int, src: Path) -> bool:
    """Whether a finding of `family` (A, B, C or D) on `line` of the row's file is inside the
    labelled site: its statement (an ok row on a `def`: the whole function) and its family (for
    OTHER, the Function contract, family D; a bug/risk OTHER row takes a finding of any family,
    since an extension writing into a grad is reported by family B)."""
    bad = row["verdict"] in ("bug", "risk")
    first, last = statement_span(
        src / row["package"] / row["relpath"], int(row["line"]), whole_def=not bad
    )
    wanted = "D" if row["pattern"] == "OTHER" else row["pattern"]
    return first <= line <= last and (family == wanted or (row["pattern"] == "OTHER" and bad))


def classify(row: dict[str, str], found: list[tuple[str, int]], src: Path) -> str:
    """tp / fn / fp / tn for one labelled site, given the file's (family, line) findings.

    A bug/risk site is found by a finding that `covers` places inside it; an ok site is a false
    positive when one is there."""
    hit = any(covers(row, family, line, src) for family, line in found)
    if row["verdict"] in ("bug", "risk"):
        return "tp" if hit else "fn"
    return "fp" if hit else "tn"


@dataclass
class Triage:
    """Every finding, by rule: on a bug/risk site (right), on an ok site (wrong), or on a line
    no label covers (untriaged: also wrong, and listed as `rule path:line`)."""

    right: Counter[str] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)
    untriaged: list[str] = field(default_factory=list)

    def untriaged_by_rule(self) -> Counter[str]:
        return Counter(entry.split(" ", 1)[0] for entry in self.untriaged)

    def findings(self, rule: str) -> int:
        return self.right[rule] + self.wrong[rule] + self.untriaged_by_rule()[rule]

    def precision(self, rule: str) -> float:
        total = self.findings(rule)
        return self.right[rule] / total if total else 1.0


def triage(
    findings: dict[str, list[tuple[str, int]]], rows: list[dict[str, str]], src: Path
) -> Triage:
    """Sort every finding (file -> [(rule id, line)]) by the labels that cover it. A finding
    inside a bug/risk site is right even when an ok row (a whole `def`) covers it too."""
    by_file: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_file[f"{row['package']}/{row['relpath']}"].append(row)
    result = Triage()
    for rel, found in sorted(findings.items()):
        for rule, line in sorted(found, key=lambda item: (item[1], item[0])):
            covering = [r for r in by_file[rel] if covers(r, FAMILY[rule[:4]], line, src)]
            if any(r["verdict"] in ("bug", "risk") for r in covering):
                result.right[rule] += 1
            elif covering:
                result.wrong[rule] += 1
            else:
                result.untriaged.append(f"{rule} {rel}:{line}")
    return result


def print_triage(result: Triage) -> None:
    """The precision-over-every-finding table, per rule and per family, then the untriaged."""
    rules = sorted(set(result.right) | set(result.wrong) | set(result.untriaged_by_rule()))
    print("\nprecision over every finding (untriaged counts as wrong)")
    print(f"{'rule':<8}{'findings':>9}{'bug/risk':>9}{'ok':>5}{'untriaged':>10}  precision")
    untriaged = result.untriaged_by_rule()
    family_cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for rule in rules:
        total = result.findings(rule)
        family_cells[FAMILY[rule[:4]]][0] += result.right[rule]
        family_cells[FAMILY[rule[:4]]][1] += total
        print(
            f"{rule:<8}{total:>9}{result.right[rule]:>9}{result.wrong[rule]:>5}"
            f"{untriaged[rule]:>10}  {result.precision(rule):9.2f}"
        )
    for family, (right, total) in sorted(family_cells.items()):
        print(f"family {family}: {right}/{total} = {right / total if total else 1.0:.2f}")
    for entry in result.untriaged:
        print(f"untriaged: {entry}")


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
    group_of = groups()
    missing = [p for p in group_of if not (src / p).is_dir()]
    if missing:
        print(f"not fetched (run tests/corpus/fetch.sh): {', '.join(missing)}", file=sys.stderr)
        return 2
    settings = Settings()
    if options.names_off:
        settings = replace(settings, extension_modules=(), stride_safe=(), writing_extensions=())
    config = Config(root=src, settings=settings)
    files = [f for p in sorted(group_of) for f in discover([str(src / p)], config, False).files]
    by_rule: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for result in lint_paths(files, config):
        rel = Path(result.path).resolve().relative_to(src.resolve()).as_posix()
        by_rule[rel] += [(f.rule_id, f.line) for f in result.findings if f.rule_id[:4] in FAMILY]
    found = {
        rel: [(FAMILY[rule[:4]], line) for rule, line in hits] for rel, hits in by_rule.items()
    }
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
    # With --family, the findings of that family (OTHER: the contract, D) against every label.
    wanted = None if options.family is None else options.family.replace("OTHER", "D")
    every = {
        rel: [(rule, line) for rule, line in hits if wanted in (None, FAMILY[rule[:4]])]
        for rel, hits in by_rule.items()
    }
    print_triage(triage(every, labels(), src))
    return 0


if __name__ == "__main__":
    sys.exit(main())
