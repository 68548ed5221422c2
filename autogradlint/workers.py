"""Reader processes for large runs, forked while the engine loads (the analysers, forked once
it has loaded, are isolation.py's).

Loading libcst takes ~0.4 s. Each worker importing it would cost that much per core; loading
it in the CLI process while forked readers go through the files hides it, and analysis
workers forked afterwards inherit it. (A fork server preloading the engine was measured too:
starting a fresh interpreter for it costs more than it hides.)
"""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext


def reader_pool(workers: int) -> ProcessPoolExecutor:
    """Workers forked from this process where that is safe (Linux): they start at once."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=_fork_context())


def load_engine() -> None:
    """Import the engine (libcst) and read the rule files, once, in this process."""
    from .meta import all_rules

    # A run asks before reading and again before analysing: the cache file is read once.
    if "autogradlint.lint" not in sys.modules:
        from .speed.dataclass_code import cached_dataclass_code

        with cached_dataclass_code("engine"):  # libcst's node classes, compiled earlier
            from . import engine, lint  # noqa: F401 - lint: each worker would import it again
    all_rules()


def _fork_context() -> BaseContext | None:
    return multiprocessing.get_context("fork") if sys.platform == "linux" else None
