"""How often the garbage collector runs in processes that live for one command.

CPython collects its youngest generation every 700 container allocations, and the oldest one
once enough objects survived. A command that imports libcst, reads thousands of files and
builds the project index allocates millions of objects that stay alive until it exits, and
almost none of them form cycles: each collection traverses them for nothing. Over torch's
tree that was ~50 ms of full collections in the main process (two of ~21-25 ms, one of them
while it took the readers' results, when nothing else runs), and processes forked from it
that collect touch every inherited object's header, copying pages the fork had shared.
The thresholds below still collect young cycles, every 100,000 allocations.
"""

from __future__ import annotations

import gc

COMMAND_THRESHOLDS = (100_000, 50, 100)


def for_a_command() -> None:
    """Collect rarely for the rest of this process's life (a command line run, a worker)."""
    gc.set_threshold(*COMMAND_THRESHOLDS)
