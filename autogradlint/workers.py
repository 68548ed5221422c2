"""Worker processes for large runs: readers forked while the engine loads, then analysers
forked once it has loaded.

Loading libcst takes ~0.4 s. Each worker importing it would cost that much per core; loading
it in the CLI process while forked readers go through the files hides it, and analysis
workers forked afterwards inherit it. (A fork server preloading the engine was measured too:
starting a fresh interpreter for it costs more than it hides.)
"""

from __future__ import annotations

import gc
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext


def reader_pool(workers: int) -> ProcessPoolExecutor:
    """Workers forked from this process where that is safe (Linux): they start at once."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=_fork_context())


def load_engine() -> None:
    """Import the engine (libcst) and read the rule files, once, in this process."""
    from . import engine  # noqa: F401
    from .meta import all_rules

    all_rules()


def analysis_pool(workers: int) -> ProcessPoolExecutor:
    """Workers forked after the engine is loaded here, so none of them imports it again."""
    load_engine()
    gc.freeze()  # what is loaded so far is never garbage: keep it out of every collection
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=_fork_context(), initializer=_worker_gc
    )


def _fork_context() -> BaseContext | None:
    return multiprocessing.get_context("fork") if sys.platform == "linux" else None


def _worker_gc() -> None:
    """libcst allocates ~100,000 nodes per file and frees them all at once: collecting every
    700 allocations only costs time (5-7% of a parse). Workers are short-lived."""
    gc.set_threshold(100_000, 50, 100)
