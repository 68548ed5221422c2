"""The linter side of the oracle: run `autogradlint check` on a batch of written programs the way
a user does (the CLI in a subprocess, JSON output, no cache) and give each program its
findings. Only the CLI's documented JSON is read, so refactors of the package do not matter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    code: str
    path: str  # inside the program's package
    row: int
    message: str


def lint_command(root: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autogradlint",
        "check",
        "--output-format",
        "json",
        "--no-cache",
        "--exit-zero",
        str(root),
    ]


def findings_by_package(stdout: str, root: Path) -> dict[str, list[Finding]]:
    """The CLI's JSON report, grouped by the package (first path component) of each file."""
    out: dict[str, list[Finding]] = {}
    for item in json.loads(stdout or "[]"):
        path = Path(item["filename"]).resolve().relative_to(root.resolve())
        package, inner = path.parts[0], "/".join(path.parts[1:])
        out.setdefault(package, []).append(
            Finding(item["code"], inner, int(item["location"]["row"]), item["message"])
        )
    return out


def start(root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        lint_command(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root
    )


def finish(
    proc: subprocess.Popen[str], root: Path, timeout: float = 600
) -> dict[str, list[Finding]]:
    stdout, stderr = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"autogradlint check failed ({proc.returncode}): {stderr[-2000:]}")
    return findings_by_package(stdout, root)
