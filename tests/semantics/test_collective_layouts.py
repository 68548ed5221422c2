"""Rows B2.10-B2.11: which `torch.distributed` collectives refuse a non-contiguous gradient
(AGL201), observed on two `gloo` ranks on CPU, and on one `nccl` rank where a GPU is present.

Each rank hands the collective the layouts a backward receives (B1.1, B1.6): transposed,
stride-0 expanded, and the narrow view `torch.cat`'s backward hands, each beside a dense copy of
the same values. The two gloo ranks are spawned once for the whole module.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
import torch.distributed as dist
from gloo_ranks import free_port, on_ranks

from .rows import first_line, rows

LAYOUTS = ("transposed", "expanded", "narrow")


def _layouts(rank: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    t = torch.arange(12.0, device=device).reshape(4, 3) + 100 * rank
    # the storage under the stride-0 view holds 12 floats: a raw read of numel stays in bounds
    base = torch.arange(12.0, device=device) + 100 * rank
    return {
        "transposed": t.t().contiguous().t(),
        "expanded": base[:3].reshape(1, 3).expand(4, 3),
        "narrow": torch.cat([t, torch.zeros(4, 5, device=device)], dim=1)[:, :3],
    }


def _read(op: str, x: torch.Tensor, world: int) -> object:
    """The collective with `x` as its input (only read); what the output holds."""
    rows_out = 4 * world
    if op == "_all_gather_base":
        out = x.new_empty(rows_out, 3)
        dist._all_gather_base(out, x)
    elif op == "all_gather_into_tensor":
        out = x.new_empty(rows_out, 3)
        dist.all_gather_into_tensor(out, x)
    elif op == "all_gather":
        parts = [x.new_empty(4, 3) for _ in range(world)]
        dist.all_gather(parts, x)
        out = torch.cat(parts)
    elif op == "_reduce_scatter_base":
        out = x.new_empty(4 // world, 3)
        dist._reduce_scatter_base(out, x)
    elif op == "reduce_scatter_tensor":
        out = x.new_empty(4 // world, 3)
        dist.reduce_scatter_tensor(out, x)
    elif op == "all_to_all_single":
        out = x.new_empty(4, 3)
        dist.all_to_all_single(out, x)
    elif op == "all_reduce":
        dist.all_reduce(x)
        out = x
    elif op == "send/recv":
        if dist.get_rank() == 0:
            dist.send(x, 1)
        else:
            dist.recv(x, 0)
        out = x
    else:
        raise ValueError(op)
    return out.tolist()


def _outcome(op: str, x: torch.Tensor, world: int) -> object:
    try:
        return _read(op, x, world)
    except (RuntimeError, ValueError) as exc:
        return f"{type(exc).__name__}: {first_line(exc)}"


READ_OPS = (
    "_all_gather_base",
    "all_gather_into_tensor",
    "all_gather",
    "_reduce_scatter_base",
    "reduce_scatter_tensor",
)
REFUSING_OPS = ("all_to_all_single", "send/recv")


def observe(rank: int) -> dict[tuple[str, str], tuple[object, object]]:
    """(op, layout) -> (the collective on the layout, the same on its dense copy)."""
    out: dict[tuple[str, str], tuple[object, object]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the `_base` names are deprecated
        for op in READ_OPS + REFUSING_OPS:
            for layout in LAYOUTS:
                original = _outcome(op, _layouts(rank)[layout], 2)
                dist.barrier()
                dense = _outcome(op, _layouts(rank)[layout].contiguous(), 2)
                dist.barrier()
                out[op, layout] = (original, dense)
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict[tuple[str, str], tuple[object, object]]]:
    return on_ranks(observe)


@rows("B2.10")
def test_gloo_reads_a_non_contiguous_input_right_and_refuses_it_only_in_exchanges(
    ranks: list[dict[tuple[str, str], tuple[object, object]]],
) -> None:
    for rank in ranks:
        for layout in LAYOUTS:
            for op in READ_OPS:
                original, dense = rank[op, layout]
                # no error, and the same values as the dense copy: gloo copies the input
                assert isinstance(original, list) and original == dense, (op, layout)
            original, dense = rank["all_to_all_single", layout]
            assert original == "ValueError: Tensors must be contiguous" and isinstance(dense, list)
            original, dense = rank["send/recv", layout]
            assert original == "RuntimeError: input tensor has to be contiguous", layout
            assert isinstance(dense, list)


def _nccl_alone(op: str) -> dict[str, Any]:
    """One NCCL rank on the first GPU: `check_gpu_single_tensor` runs before any peer is
    needed, so a group of one shows what every rank of a larger group would raise."""
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        return {layout: _outcome(op, x, 1) for layout, x in _layouts(0, "cuda").items()}
    finally:
        dist.destroy_process_group()


@rows("B2.11")
@pytest.mark.skipif(
    not (torch.cuda.is_available() and dist.is_nccl_available()),
    reason="B2.11 is NCCL's check: needs a CUDA build of torch and a GPU",
)
@pytest.mark.parametrize("op", ("_all_gather_base", "_reduce_scatter_base", "all_reduce"))
def test_nccl_refuses_a_non_contiguous_tensor(op: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        seen = _nccl_alone(op)
    assert seen == dict.fromkeys(LAYOUTS, "ValueError: Tensors must be contiguous")
