"""`python -m tests.oracle --n 2000`: a long search. Generates programs round-robin over every
generator, runs both verdicts, and prints every disagreement class: the known ones (known.md)
with their counts, and each new one as a minimal program (shrunk: choices forced to their
simplest, then statements dropped, while the disagreement holds), with the `match:` and
`replay:` lines known.md would need."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

from . import known
from .generators import GENERATE
from .oracle import Found, Summary, run, search
from .program import Program
from .shrink import shrink


def _essential(prog: Program) -> dict[str, str]:
    """The tags a choice-shrunk program could not simplify: what the class is about."""
    return {k: prog.tags[k] for k, i in prog.choices.items() if i != 0}


def _matches(prog: Program, tags: dict[str, str]) -> bool:
    return all(prog.tags.get(k) == v for k, v in tags.items())


def _describe(
    found: Found, chosen: Program, minimal: Program, result_harms: list[str], codes: list[str]
) -> str:
    d = found.disagreement
    tags = _essential(chosen)
    match = " ".join(
        [f"generator={d.generator}", f"direction={d.direction}", f"code={d.code}"]
        + [f"{k}={v}" for k, v in tags.items()]
    )
    harms = sorted({h[:140] for h in result_harms})
    # what the search saw, beside the minimal program's rerun: a harm only the search saw
    # (a torch-side flake) shows here and not on the line above
    seen = sorted({h[:140] for h in d.harms})
    return "\n".join(
        [
            f"--- NEW {d.key}  (tags {json.dumps(found.program.tags)})",
            f"torch: {harms[:6]}" + (" ..." if len(harms) > 6 else ""),
            f"in the search: {seen[:3]}" + (" ..." if len(seen) > 3 else ""),
            f"linter: {codes or 'no finding'}",
            f"match: {match}",
            f"replay: {chosen.family} {json.dumps(chosen.choices, separators=(',', ':'))}",
            "reference: " + chosen.reference.strip().replace("\n", " | "),
            minimal.text(),
        ]
    )


def _statistics(summary: Summary, new: list[Found]) -> str:
    """For each unexplained disagreement key: the tag values of its generator's programs, with
    how many of them show it. A value at n/n is what the class is about."""
    lines = []
    for key in sorted({f.disagreement.key for f in new}):
        family = key.split("/")[0]
        hits = {id(f.result) for f in new if f.disagreement.key == key}
        programs = [r for r in summary.results if r.program.family == family]
        lines.append(f"\n{key}: {len(hits)} of {len(programs)} programs")
        for tag in sorted({t for r in programs for t in r.program.tags}):
            values = Counter(r.program.tags.get(tag) for r in programs)
            shown = Counter(r.program.tags.get(tag) for r in programs if id(r) in hits)
            parts = [
                f"{v}={shown[v]}/{n}" for v, n in sorted(values.items(), key=lambda x: str(x[0]))
            ]
            lines.append(f"  {tag}: " + "  ".join(parts))
    return "\n".join(lines)


def _shrink_known(classes: list[known.KnownClass], args: argparse.Namespace) -> None:
    """Each known class's representative (its replay), shrunk unless --line-rounds 0, as
    known.md shows it."""
    from . import batch
    from .generators import build

    wanted = [k for k in classes if k.replay and (not args.only or k.name in args.only.split(","))]
    programs = [build(k.replay[0], 0, k.replay[1]) for k in wanted]  # type: ignore[index]
    for k, result in zip(
        wanted, batch.run(programs, jobs=args.jobs, world=args.world), strict=True
    ):
        mine = [d for d in result.disagreements() if k.explains(d, result.program)]
        if not mine:
            print(f"\n### {k.name}: no longer disagrees", flush=True)
            continue
        chosen = minimal = result.program
        final = result
        if args.line_rounds:
            chosen, minimal = shrink(
                result, mine[0], rounds=args.line_rounds, jobs=args.jobs, world=args.world
            )
            final = batch.run([minimal], jobs=1, world=args.world)[0]
        harms = sorted({h[:150] for h in final.harms})
        print(
            f"\n### {k.name} ({mine[0].key})\ntorch: {harms}\nlinter: {final.codes or 'no finding'}"
        )
        print(f"replay: {chosen.family} {json.dumps(chosen.choices, separators=(',', ':'))}")
        print(minimal.text(), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.oracle", description=__doc__)
    parser.add_argument("--n", type=int, default=200, help="programs to generate")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument(
        "--families", default=",".join(GENERATE), help="generators, comma-separated"
    )
    parser.add_argument("--jobs", type=int, default=2, help="torch subprocesses per batch")
    parser.add_argument(
        "--world", type=int, default=2, help="gloo ranks for the collective programs"
    )
    parser.add_argument(
        "--shrink", type=int, default=10, help="new disagreements to shrink at most"
    )
    parser.add_argument(
        "--shrink-known", action="store_true", help="shrink known.md's classes instead"
    )
    parser.add_argument("--only", default="", help="with --shrink-known: these classes (K1,K2)")
    parser.add_argument(
        "--line-rounds", type=int, default=12, help="shrinking rounds (0: the representative as is)"
    )
    args = parser.parse_args(argv)
    classes = known.load()
    if args.shrink_known:
        _shrink_known(classes, args)
        return 0
    families = args.families.split(",")
    print(f"seed {args.seed}, {args.n} programs over {len(families)} generators", flush=True)
    programs = list(search(args.n, args.seed, families))
    summary = Summary()
    start = time.monotonic()
    for i in range(0, len(programs), 200):
        part = run(programs[i : i + 200], classes, jobs=args.jobs, world=args.world)
        summary.results += part.results
        summary.found += part.found
        print(
            f"  {len(summary.results)}/{len(programs)} run, {time.monotonic() - start:.0f}s",
            flush=True,
        )
    print(summary.table())
    known_counts = Counter(f.known.name for f in summary.found if f.known)
    print(
        "\nknown classes seen: "
        + (", ".join(f"{k} x{n}" for k, n in sorted(known_counts.items())) or "none")
    )
    unseen = [k.name for k in classes if k.name not in known_counts]
    if unseen:
        print("known classes not seen in this search: " + ", ".join(unseen))
    new = [f for f in summary.found if f.known is None]
    print(f"\n{len(new)} disagreements outside known.md", flush=True)
    print(_statistics(summary, new), flush=True)
    shrunk = 0
    while new and shrunk < args.shrink:
        first = new[0]
        chosen, minimal = shrink(first.result, first.disagreement, jobs=args.jobs, world=args.world)
        from . import batch

        final = batch.run([minimal], jobs=1, world=args.world)[0]
        tags = _essential(chosen)
        members = [
            f
            for f in new
            if f.disagreement.key == first.disagreement.key and _matches(f.program, tags)
        ]
        members = members or [first]
        print(
            f"\n{_describe(first, chosen, minimal, final.harms, final.codes)}\n({len(members)} programs in this class)",
            flush=True,
        )
        new = [
            f for f in new if f not in members and f.disagreement.key != first.disagreement.key
        ] + [f for f in new if f not in members and f.disagreement.key == first.disagreement.key]
        shrunk += 1
    if new:
        print(f"\n{len(new)} more disagreements not shrunk (raise --shrink)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
