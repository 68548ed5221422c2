"""Where the public corpus lives: one place for the tests, the benchmarks and fetch.sh's default."""

from __future__ import annotations

import os
from pathlib import Path


def corpus_dir() -> Path:
    """$AUTOGRADLINT_CORPUS_DIR, else the older $AGL_CORPUS, else the user cache."""
    chosen = os.environ.get("AUTOGRADLINT_CORPUS_DIR") or os.environ.get("AGL_CORPUS")
    return Path(chosen) if chosen else Path.home() / ".cache" / "autogradlint-corpus"
