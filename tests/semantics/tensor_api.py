"""What a tensor can be asked for: the names autogradlint/analysis/tensor_api.txt lists, read
from the installed torch. `python -m tests.semantics.tensor_api` rewrites the file."""

from __future__ import annotations

from pathlib import Path

LISTED = Path(__file__).resolve().parents[2] / "autogradlint" / "analysis" / "tensor_api.txt"


def live_names() -> list[str]:
    import torch

    names = set(dir(torch.Tensor)) | set(dir(torch.nn.Parameter))
    return sorted(name for name in names if not name.startswith("__"))


def listed_names() -> list[str]:
    lines = LISTED.read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def main() -> None:
    header = [line for line in LISTED.read_text().splitlines() if line.startswith("#")]
    LISTED.write_text("\n".join([*header, *live_names()]) + "\n")


if __name__ == "__main__":
    main()
