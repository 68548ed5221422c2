"""Run one function on several CPU processes joined in a `gloo` process group: how the tests
observe what `torch.distributed` collectives do to a gradient (tests/semantics, tests/differential).

The processes are spawned (a fork of a process that imported torch is unsafe), meet on a free
port of 127.0.0.1, and each returns what the function returned for its rank. A rank that fails
reports its exception's text, and a rank that hangs (a collective the other never joins) ends at
the group's timeout instead of blocking the suite.
"""

from __future__ import annotations

import datetime
import socket
import traceback
from collections.abc import Callable
from typing import Any

# A collective both ranks join ends in milliseconds; one only a rank joins ends here.
GROUP_TIMEOUT = datetime.timedelta(seconds=60)
# The whole run: two interpreters importing torch, on a loaded 2-core machine.
RUN_TIMEOUT_S = 300.0


class RankFailed(RuntimeError):
    """A rank raised: its traceback, as text."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _worker(rank: int, world: int, port: int, function: Callable[[int], Any], queue: Any) -> None:
    import torch.distributed as dist

    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=GROUP_TIMEOUT,
        )
        try:
            queue.put((rank, "ok", function(rank)))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        queue.put((rank, "failed", traceback.format_exc()))


def on_ranks(function: Callable[[int], Any], world: int = 2) -> list[Any]:
    """`function(rank)` on `world` gloo ranks; what each rank returned, by rank. `function`
    must be importable by name (a module-level function): the ranks are spawned."""
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=_worker, args=(rank, world, port, function, queue))
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    try:
        results = [queue.get(timeout=RUN_TIMEOUT_S) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    failed = [text for _, status, text in results if status != "ok"]
    if failed:
        raise RankFailed(failed[0])
    return [value for _, _, value in sorted(results, key=lambda r: r[0])]
