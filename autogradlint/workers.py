"""Reader processes for large runs, forked while the engine loads (the analysers, forked once
it has loaded, are isolation.py's).

Loading libcst takes ~0.2 s. Each worker importing it would cost that much per core; loading
it in the CLI process while forked readers go through the files hides it, and analysis
workers forked afterwards inherit it. (A fork server preloading the engine was measured too:
starting a fresh interpreter for it costs more than it hides; so did a host process forked
at start-up to load it beside the CLI's imports: no gain in 20 runs taken in turns.)

The readers are plain forks that take chunks of the file list from a pipe written before
they start, and send their results back once: a process pool's threads, which move every
batch and its result, wait for the GIL while this process imports the engine, and left the
readers idle ~80 ms at the start and between batches of a run over torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
_TOKEN = 4  # bytes per chunk number in the work pipe


def map_in_forks(
    fn: Callable[[Sequence[T]], list[R]],
    items: Sequence[T],
    readers: int,
    while_waiting: Callable[[], None] = lambda: None,
) -> list[R]:
    """`fn` over `items` in chunks, in `readers` forked processes (Linux), while this one runs
    `while_waiting`; results in item order. `fn` gives one result per item. Chunks a reader
    did not send back (it died) are run here, so every item gets its result."""
    if sys.platform != "linux" or readers < 1 or not items:
        while_waiting()
        return fn(items)
    # Chunks small enough that readers finish together, few enough that the work pipe holds
    # them all before any reader starts (a pipe buffers 64 KB).
    chunk = max(16, -(-len(items) // 8192))
    count = -(-len(items) // chunk)
    work_read, work_write = os.pipe()
    os.write(work_write, b"".join(i.to_bytes(_TOKEN, "little") for i in range(count)))
    os.close(work_write)  # readers see EOF once the pipe is empty
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # a fork must not write this process's buffered output again
    children: list[tuple[int, Any]] = []
    from multiprocessing.connection import Pipe

    try:
        for _ in range(readers):
            receive, send = Pipe(duplex=False)
            try:
                pid = os.fork()
            except OSError:  # no more processes: what no reader takes is read here
                receive.close()
                send.close()
                break
            if pid == 0:  # a reader: never returns
                receive.close()
                _read_chunks(fn, items, chunk, work_read, send)
            send.close()
            children.append((pid, receive))
    finally:
        os.close(work_read)
    while_waiting()
    done: dict[int, list[R]] = {}
    for pid, receive in children:
        try:
            done.update(receive.recv())
        except (EOFError, OSError):
            pass  # it died: its chunks are read below
        finally:
            receive.close()
            os.waitpid(pid, 0)
    out: list[R] = []
    for index in range(count):
        part = done.get(index)
        out.extend(part if part is not None else fn(items[index * chunk : (index + 1) * chunk]))
    return out


def _read_chunks(
    fn: Callable[[Sequence[Any]], list[Any]], items: Sequence[Any], chunk: int, work: int, send: Any
) -> None:
    """A reader's life: take chunk numbers until the pipe is empty, send the results once,
    then exit without the interpreter's teardown (nothing of it is this process's)."""
    from .isolation import clean_path

    code = 1
    try:
        clean_path()
        results: dict[int, list[Any]] = {}
        while token := os.read(work, _TOKEN):
            index = int.from_bytes(token, "little")
            results[index] = fn(items[index * chunk : (index + 1) * chunk])
        send.send(results)
        code = 0
    finally:
        os._exit(code)


def load_engine() -> None:
    """Import the engine (libcst) and read the rule files, once, in this process."""
    from .meta import all_rules

    # A run asks before reading and again before analysing: the cache file is read once.
    if "autogradlint.engine.door" not in sys.modules:
        from .runtime.dataclass_code import cached_dataclass_code

        with cached_dataclass_code("engine"):  # libcst's node classes, compiled earlier
            from .engine import door, pipeline  # noqa: F401 - door: each worker would import it again
    all_rules()
