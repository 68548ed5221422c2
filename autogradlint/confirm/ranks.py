"""Runs one function on two CPU processes joined in a `gloo` group (the probe's fork and a fork of it).

Why: a collective writing into the gradient (AGL406) changes nothing on one rank: the sum of one
value is that value. Two ranks holding different gradients show it. The probe already runs in a
fork of a process that imported the module, so the second rank is one more fork of it: no second
import, nothing of the project started twice. The group meets through a file store in the
probe's private working directory; a rank that never joins a collective ends at the group's
timeout instead of blocking the probe (whose own timeout stops it anyway).
"""

from __future__ import annotations

import datetime
import json
import os
import traceback
from collections.abc import Callable
from typing import Any

GROUP_TIMEOUT = datetime.timedelta(seconds=30)
WORLD = 2


class RanksFailed(RuntimeError):
    """The group could not be formed, or a rank raised: why, as text."""


def on_two_ranks(function: Callable[[int], Any]) -> list[Any]:
    """`function(rank)` on ranks 0 and 1 of a fresh gloo group; what each returned (JSON-able),
    by rank. Raises RanksFailed with the first line of what went wrong."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        raise RanksFailed("torch.distributed with gloo is not available in this build")
    store = os.path.join(os.getcwd(), f"gloo-store-{os.getpid()}")
    read, write = os.pipe()
    pid = os.fork()
    rank = 0 if pid else 1
    result: dict[str, Any]
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{store}",
            rank=rank,
            world_size=WORLD,
            timeout=GROUP_TIMEOUT,
        )
        try:
            result = {"ok": function(rank)}
        finally:
            dist.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - reported to rank 0, which raises
        lines = traceback.format_exception_only(type(exc), exc)
        result = {"failed": f"rank {rank}: {lines[-1].strip() if lines else type(exc).__name__}"}
    if rank == 1:  # the second rank: hand the result over and leave, running nothing else
        os.close(read)
        data = json.dumps(result).encode()
        while data:
            data = data[os.write(write, data) :]
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    try:
        other = json.loads(b"".join(chunks)) if chunks else {"failed": "rank 1: no result"}
    except ValueError:
        other = {"failed": "rank 1: an unreadable result"}
    results = [result, other]
    for found in results:
        if "failed" in found:
            raise RanksFailed(found["failed"])
    return [found["ok"] for found in results]
