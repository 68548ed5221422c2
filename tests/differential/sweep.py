"""A long run of the differential harness that does not stop at the first failure: N programs
drawn at random over every family of test_safe_fixes_are_equivalent.py, each fixed (safe tier)
as a project and run before and after, and a summary of what was fixed and what changed.

    .venv/bin/python tests/differential/sweep.py --programs 1000 [--seed 0]

Exit status 1 when a safe fix changed a result (the first program of each such family is
printed), else 0.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hazards import program_text  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from project import fix_project  # noqa: E402
from run import differences  # noqa: E402
from test_safe_fixes_are_equivalent import FAMILIES  # noqa: E402


def sweep(programs: int, seed_value: int) -> int:
    families = [(p.id, *p.values) for p in FAMILIES]
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    first_bad: dict[str, str] = {}

    @seed(seed_value)
    @settings(
        max_examples=programs,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        name, strategy, rules, scenarios = data.draw(st.sampled_from(families), label="family")
        program = data.draw(strategy, label="program")
        counts[name]["programs"] += 1
        fixed = fix_project(program, rules)
        if fixed.errors:
            counts[name]["fix errors"] += 1
            return
        if not fixed.changed:
            counts[name]["no safe fix"] += 1
            return
        counts[name]["safe fix"] += 1
        found = differences(program, fixed.files, scenarios)
        if found:
            counts[name]["changed a result"] += 1
            first_bad.setdefault(
                name,
                program_text(program)
                + "--- fixed\n"
                + program_text(fixed.files)
                + "\n".join(found[:3]),
            )

    one()
    total = sum(c["programs"] for c in counts.values())
    bad = sum(c["changed a result"] for c in counts.values())
    print(f"{total} programs, {bad} safe fixes that changed a result")
    for name, count in sorted(counts.items()):
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(count.items())))
    for name, text in first_bad.items():
        print(f"\n=== {name}: the first safe fix that changed a result\n{text}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    return sweep(options.programs, options.seed)


if __name__ == "__main__":
    raise SystemExit(main())
