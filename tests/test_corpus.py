"""The public corpus (tests/corpus): no internal error, every labelled site right.

The corpus is downloaded once by tests/corpus/fetch.sh into $AUTOGRADLINT_CORPUS_DIR or
~/.cache/autogradlint-corpus (outside the repo: the code is never committed). These tests run
only when asked for: `python -m pytest -m corpus` or AUTOGRADLINT_CORPUS=1.
"""

from __future__ import annotations

import csv
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import announce

from autogradlint.config import Config
from autogradlint.runner import discover, lint_paths
from benchmarks.corpus import corpus_dir

HERE = Path(__file__).resolve().parent / "corpus"
CACHE = corpus_dir()
FAMILY = {"AGL1": "A", "AGL2": "B", "AGL3": "C", "AGL4": "D"}

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def corpus(pytestconfig: pytest.Config) -> Path:
    src = CACHE / "src"
    wanted = _packages()
    if not all((src / name).is_dir() for name in wanted):
        pytest.importorskip("torch", reason="fetch.sh copies the torch row from installed torch")
        announce(
            pytestconfig,
            f"fetching the public corpus from PyPI into {CACHE} "
            f"({len(wanted)} packages, about 450 MB; set AUTOGRADLINT_CORPUS_DIR to move it)",
        )
        fetched = subprocess.run(
            ["bash", str(HERE / "fetch.sh"), "--keep-going"],
            check=False,
            capture_output=True,
            text=True,
            env={**os.environ, "AUTOGRADLINT_CORPUS_DIR": str(CACHE)},
            timeout=1800,
        )
        missing = [name for name in wanted if not (src / name).is_dir()]
        if missing:
            last = (fetched.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(
                f"corpus: {len(missing)} of {len(wanted)} packages could not be fetched from "
                f"PyPI into {src} (network?): {last}"
            )
    return src


def _packages() -> list[str]:
    """`name-version` of every package the manifest pins."""
    with (HERE / "manifest.tsv").open(encoding="utf-8") as handle:
        return [f"{row['name']}-{row['version']}" for row in csv.DictReader(handle, delimiter="\t")]


@pytest.fixture(scope="module")
def rule_findings(corpus: Path) -> dict[str, list[tuple[str, int]]]:
    """Every finding on the corpus: file (relative to it) -> [(rule id, line)]."""
    config = Config(root=corpus)
    found = discover([str(corpus)], config, respect_gitignore=False)
    results = lint_paths(found.files, config)
    internal = [r.error.describe() for r in results if r.error and "internal" in r.error.message]
    assert internal == [], internal
    by_file: dict[str, list[tuple[str, int]]] = {}
    for result in results:
        rel = Path(result.path).resolve().relative_to(corpus.resolve()).as_posix()
        by_file[rel] = [(f.rule_id, f.line) for f in result.findings]
    counts = Counter(f.rule_id for r in results for f in r.findings)
    # Printed so that a noisy rule is visible in every CI log (run pytest with -s to see it).
    print(f"\ncorpus: {len(results)} files; findings per rule:")
    for rule_id, count in sorted(counts.items()):
        print(f"  {rule_id}  {count}")
    return by_file


@pytest.fixture(scope="module")
def findings(rule_findings: dict[str, list[tuple[str, int]]]) -> dict[str, list[tuple[str, int]]]:
    """The same findings as file -> [(family, line)], what a labelled site is scored on."""
    return {
        rel: [(FAMILY[rule[:4]], line) for rule, line in hits if rule[:4] in FAMILY]
        for rel, hits in rule_findings.items()
    }


def _labels(corpus: Path) -> list[dict[str, str]]:
    with (HERE / "labels.tsv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return rows


def _quality():  # type: ignore[no-untyped-def]
    """benchmarks/quality.py: the one definition of how a labelled site and a finding are scored."""
    from benchmarks import quality

    return quality


def test_every_labelled_site(corpus: Path, findings: dict[str, list[tuple[str, int]]]) -> None:
    """Every bug/risk site found inside its labelled statement, no finding on an ok one; the
    sites listed in known_gaps.tsv (each with why no rule finds it yet) are missed, and one
    that starts being found must leave that list."""
    quality = _quality()
    gaps = quality.known_gaps()
    problems = []
    for row in _labels(corpus):
        rel = f"{row['package']}/{row['relpath']}"
        cell = quality.classify(row, findings.get(rel, []), corpus)
        known = (rel, row["line"]) in gaps
        if cell in ("fn", "fp") and not (known and cell == "fn"):
            kind = "missed" if cell == "fn" else "false positive on ok"
            problems.append(f"{kind} {row['pattern']} {rel}:{row['line']}: {row['reason']}")
        elif known and cell == "tp":
            problems.append(f"found now, remove from known_gaps.tsv: {rel}:{row['line']}")
    assert problems == []


def test_every_finding_is_triaged(
    corpus: Path, rule_findings: dict[str, list[tuple[str, int]]]
) -> None:
    """Every finding the tool makes on the corpus (torch's own tree included) sits on a labelled
    site: precision is counted over all of them, and a finding nobody read would count as a
    false alarm without anyone knowing. A new finding needs a label (bug, risk or ok, with the
    reason read from the code) before this passes."""
    quality = _quality()
    result = quality.triage(rule_findings, _labels(corpus), corpus)
    quality.print_triage(result)  # precision per rule over every finding, in the -s log
    assert result.untriaged == []


def test_family_b_is_found_from_evidence_not_names(corpus: Path) -> None:
    """With every name list empty (extension modules, stride-safe and writing extensions, guard
    decorators, loaders), family B still scores what the issue asks on the labelled packages that
    ship their kernels' source: precision >= 0.95 and recall >= 0.90."""
    from dataclasses import replace

    classify = _quality().classify
    rows = [r for r in _labels(corpus) if r["pattern"] == "B"]
    packages = sorted({r["package"] for r in rows})
    settings = replace(
        Config().settings,
        extension_modules=(),
        stride_safe=(),
        writing_extensions=(),
        guard_decorators=(),
        loaders=(),
    )
    config = Config(root=corpus, settings=settings)
    files = [f for p in packages for f in discover([str(corpus / p)], config, False).files]
    found: dict[str, list[tuple[str, int]]] = {}
    for result in lint_paths(files, config):
        rel = Path(result.path).resolve().relative_to(corpus.resolve()).as_posix()
        found[rel] = [(FAMILY[f.rule_id[:4]], f.line) for f in result.findings]
    cells = Counter(
        classify(r, found.get(f"{r['package']}/{r['relpath']}", []), corpus) for r in rows
    )
    precision = cells["tp"] / ((cells["tp"] + cells["fp"]) or 1)
    recall = cells["tp"] / ((cells["tp"] + cells["fn"]) or 1)
    print(f"\nfamily B from evidence only: {dict(cells)}")
    assert precision >= 0.95 and recall >= 0.90, cells


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*.py")}


def test_fix_round_trip_on_a_copy_of_the_corpus(corpus: Path, tmp_path: Path) -> None:
    import shutil

    import libcst as cst
    from click.testing import CliRunner

    from autogradlint.cli import main
    from autogradlint.engine.verify import compile_error

    copy = tmp_path / "corpus"
    shutil.copytree(corpus, copy, symlinks=True)
    before = _snapshot(copy)
    runner = CliRunner()
    first = runner.invoke(
        main, ["fix", "--apply", "--unsafe-fixes", "--no-respect-gitignore", str(copy)]
    )
    assert "internal" not in first.output and "bug in autogradlint" not in first.output
    after = _snapshot(copy)
    changed = sorted(name for name in before if before[name] != after[name])
    print(f"\nfix --apply --unsafe-fixes changed {len(changed)} corpus files")
    assert changed, "the corpus has fixable findings: something should have changed"
    # every other file is byte-identical: only files the summary names as fixed changed
    import re

    reported = re.search(r"Fixed \d+ findings? in (\d+) files?", first.output)
    assert reported is not None and int(reported.group(1)) == len(changed), first.output
    for name in changed:
        cst.parse_module(after[name])  # every written file parses
    for name in changed:  # and compiles as CPython reads it (the others are byte-identical)
        if compile_error(before[name], name) is None:  # type: ignore[arg-type]
            assert compile_error(after[name], name) is None, name  # type: ignore[arg-type]
    second = runner.invoke(
        main, ["fix", "--apply", "--unsafe-fixes", "--no-respect-gitignore", str(copy)]
    )
    assert "Fixed" not in second.output
    assert _snapshot(copy) == after  # idempotent: a second run changes nothing


def test_pre_slicing_selects_what_the_whole_file_selects(corpus: Path) -> None:
    """On real code, the text scan never changes what reaches libcst (see test_slicing.py)."""
    from autogradlint.checks.admission import can_hold_findings
    from autogradlint.meta import all_rules
    from autogradlint.speed.slicing import slice_source
    from autogradlint.text.outline import class_declarations
    from autogradlint.view import build_index

    enabled = frozenset(all_rules())
    data = {path: path.read_bytes() for path in corpus.rglob("*.py")}
    project = build_index(corpus, list(data))
    compared = 0
    for path, raw in data.items():
        index = project.view(str(path)).seeds  # what the engine slices with
        if not can_hold_findings(raw, enabled, index, class_declarations(raw)):
            continue
        text = raw.decode("utf-8", "replace")
        try:
            whole = slice_source(text, index, whole=True)
        except (SyntaxError, ValueError):
            continue  # newer syntax than this Python's ast: libcst reads the whole file
        sliced = slice_source(text, index)
        assert (sliced is None) == (whole is None), path
        if sliced is not None and whole is not None:
            assert sliced.source == whole.source, path
            assert sliced.line_map == whole.line_map, path
            assert sliced.imports == whole.imports, path
            compared += 1
    assert compared > 300


def test_finding_positions_match_a_whole_module_pass(corpus: Path) -> None:
    from autogradlint.engine.pipeline import analyse
    from autogradlint.speed.positions import _whole_module, node_positions

    checked = 0
    for path in sorted(corpus.rglob("*.py")):
        raw = path.read_bytes()
        if b"autograd" not in raw and b"__torch_" not in raw:
            continue
        result = analyse(raw, str(path))
        if not result.violations or result.module is None or result.text is None:
            continue
        nodes = [v.anchor or v.node for v in result.violations]
        fast = node_positions(result.module, nodes, result.layout, result.text)
        whole = _whole_module(result.module, {id(n): n for n in nodes}, result.layout.line_map)
        assert fast == whole, path
        checked += 1
    assert checked > 40


def test_forward_signatures_from_headers_match_whole_classes(corpus: Path) -> None:
    """The index reads a Function's forward from its header alone; on real code that gives
    what `ast` of the whole class statement gives (project.signatures_of)."""
    from autogradlint.view import signatures_from_classes, signatures_of

    compared = 0
    for path in corpus.rglob("*.py"):
        raw = path.read_bytes()
        if b"def forward" not in raw:
            continue
        text = raw.decode("utf-8", "replace")
        assert signatures_of(text) == signatures_from_classes(text), path
        compared += 1
    assert compared > 500
