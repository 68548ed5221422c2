"""Write each real-bug case's two snapshots (parent = bug, fix commit = fixed) from git mirrors."""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BATCHES = HERE / "batches"


@dataclass(frozen=True)
class Case:
    """One fix commit and the files kept for it."""

    batch: str
    id: str
    repo: str
    fix_commit: str
    parent_commit: str
    paths: tuple[str, ...]
    families: str


def snapshot_root() -> Path:
    """Where snapshots live: never inside the repository (fetched code is not committed)."""
    default = Path.home() / ".cache" / "autogradlint-realbugs"
    return Path(os.environ.get("AUTOGRADLINT_REALBUGS_DIR", default))


def cases(batches: list[str] | None = None) -> Iterator[Case]:
    """Every case of the named batches (all when None), in batch and manifest order."""
    for folder in sorted(BATCHES.iterdir()) if BATCHES.is_dir() else []:
        if not (folder / "manifest.tsv").is_file() or (batches and folder.name not in batches):
            continue
        with open(folder / "manifest.tsv", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                yield Case(
                    folder.name,
                    row["id"],
                    row["repo"],
                    row["fix_commit"],
                    row["parent_commit"],
                    tuple(p.strip() for p in row["paths"].split(",") if p.strip()),
                    row["families"],
                )


def git_dir(mirrors: Path, repo: str) -> Path:
    """The git directory of `owner/name` under `mirrors` (`owner+name`, bare or with .git)."""
    base = mirrors / repo.replace("/", "+")
    for candidate in (base, base / ".git", base.with_suffix(".git")):
        if (candidate / "HEAD").is_file() or (candidate / "objects").is_dir():
            return candidate
    # the fetch tool nests the git directory one level down
    if base.is_dir():
        for child in sorted(base.iterdir()):
            if (child / "HEAD").is_file():
                return child
    raise FileNotFoundError(f"no git mirror of {repo} under {mirrors}")


def file_at(git: Path, commit: str, path: str) -> bytes | None:
    """The bytes of `path` at `commit`, or None where the file does not exist there."""
    proc = subprocess.run(
        ["git", "--git-dir", str(git), "show", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    return proc.stdout if proc.returncode == 0 else None


def materialize(case: Case, mirrors: Path, root: Path) -> list[str]:
    """Write both sides of `case` under root/<id>/{before,after}; the paths missing on a side."""
    git = git_dir(mirrors, case.repo)
    missing: list[str] = []
    for side, commit in (("before", case.parent_commit), ("after", case.fix_commit)):
        for path in case.paths:
            data = file_at(git, commit, path)
            if data is None:
                missing.append(f"{side}:{path}")
                continue
            target = root / case.id / side / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--batch", action="append", help="only these batches (repeatable)")
    args = parser.parse_args(argv)
    root = snapshot_root()
    status = 0
    for case in cases(args.batch):
        try:
            missing = materialize(case, args.mirrors, root)
        except FileNotFoundError as exc:
            print(f"{case.id}: {exc}", file=sys.stderr)
            status = 1
            continue
        note = f" (absent on one side: {', '.join(missing)})" if missing else ""
        print(f"{case.id}: {root / case.id}{note}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
