"""Rows B2.4-B2.8: `torch.distributed` collectives that write into the gradient backward was
handed, observed on two `gloo` ranks on CPU (AGL406).

Every rank runs `loss = W(a) + V(b)` and `loss.backward(gy)` with `gy = rank + 1`: W's backward
runs first (on CPU the node created last runs first) and hands its gradient to a collective; V
only passes its gradient on. The two ranks are spawned once for the whole module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist
from gloo_ranks import on_ranks
from torch.autograd import Function

from .rows import rows

OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def _consumers(rank: int, write: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, Any]:
    class W(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return write(g)

    class V(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.clone()

    a = torch.ones(4, requires_grad=True)
    b = torch.ones(4, requires_grad=True)
    v = V.apply(b)
    w = W.apply(a)
    gy = torch.full((4,), float(rank + 1))
    (w + v).backward(gy)
    return {"a": a.grad.tolist(), "b": b.grad.tolist(), "gy": gy.tolist(), "version": gy._version}


def _all_reduce(g: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(g)
    return g


def _all_reduce_async(g: torch.Tensor) -> torch.Tensor:
    work = dist.all_reduce(g, async_op=True)
    work.wait()
    return g


def _broadcast(g: torch.Tensor) -> torch.Tensor:
    dist.broadcast(g, src=0)
    return g


def _reduce(g: torch.Tensor) -> torch.Tensor:
    dist.reduce(g, dst=0)
    return g


def _reduce_scatter(g: torch.Tensor) -> torch.Tensor:
    part = torch.full((2,), float(dist.get_rank() + 1))
    dist.reduce_scatter(g[:2], [part, part.clone()])
    return g


def _reduce_scatter_tensor(g: torch.Tensor) -> torch.Tensor:
    dist.reduce_scatter_tensor(g[:2], torch.full((4,), float(dist.get_rank() + 1)))
    return g


def _all_gather(g: torch.Tensor) -> torch.Tensor:
    dist.all_gather(list(g.chunk(2)), torch.full((2,), float(dist.get_rank() + 7)))
    return g


def _all_gather_into_tensor(g: torch.Tensor) -> torch.Tensor:
    dist.all_gather_into_tensor(g, torch.full((2,), float(dist.get_rank() + 7)))
    return g


def _all_to_all_single(g: torch.Tensor) -> torch.Tensor:
    dist.all_to_all_single(g, torch.full((4,), float(dist.get_rank() + 5)))
    return g


def _gather_from(g: torch.Tensor) -> torch.Tensor:
    out = torch.empty(8)
    dist.all_gather_into_tensor(out, g)
    return out[:4] if dist.get_rank() == 0 else out[4:]


def _scatter_from(g: torch.Tensor) -> torch.Tensor:
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, g)
    return torch.cat([out, out])


def _exchange_from(g: torch.Tensor) -> torch.Tensor:
    out = torch.empty(4)
    dist.all_to_all_single(out, g)
    return out


def _all_reduce_a_copy(g: torch.Tensor) -> torch.Tensor:
    g = g.clone()
    dist.all_reduce(g)
    return g


WRITERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "all_reduce": _all_reduce,
    "all_reduce async": _all_reduce_async,
    "broadcast": _broadcast,
    "reduce": _reduce,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "all_gather": _all_gather,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "all_to_all_single": _all_to_all_single,
    "gather from g": _gather_from,
    "scatter from g": _scatter_from,
    "exchange from g": _exchange_from,
    "all_reduce a copy": _all_reduce_a_copy,
}


# --- B2.8: the collective on the gradient itself and on `g.clone()`, per layout ---------------
def _layouts(rank: int) -> dict[str, torch.Tensor]:
    t = torch.linspace(-1.0, 1.0, 12).reshape(4, 3) * (rank + 1)
    big = torch.zeros(15)
    big[3:] = t.flatten()
    return {
        "dense": t.clone(),
        "transposed": t.t().contiguous().t(),
        "offset": big[3:].view(4, 3),
        "expanded": t.flatten()[:1].reshape(1, 1).expand(4, 3),
        "narrow": torch.cat([t, torch.zeros(4, 5)], dim=1)[:, :3],  # what cat's backward hands
    }


def _strides_ignored(rank: int) -> dict[str, list[float]]:
    """all_reduce into views whose elements are not `numel` consecutive floats: what the view
    shows after it, the storage around the view, and the true reduced values."""
    wide = torch.cat([torch.ones(4, 3) * (rank + 1), torch.full((4, 5), 10.0 * (rank + 1))], 1)
    narrow = wide[:, :3]
    dist.all_reduce(narrow)
    base = torch.arange(6.0) + 10 * rank
    expanded = base[:1].expand(6)
    dist.all_reduce(expanded)
    return {
        "narrow": narrow.flatten().tolist(),
        "beside narrow": wide[:, 3:].flatten().tolist(),
        "expanded": expanded.tolist(),
        "under expanded": base.tolist(),
    }


def _collective(op: str, x: torch.Tensor, rank: int) -> None:
    if op == "all_reduce":
        dist.all_reduce(x)
    elif op == "broadcast":
        dist.broadcast(x, src=0)
    elif op == "reduce":
        dist.reduce(x, dst=0)
    elif op == "all_to_all_single":
        dist.all_to_all_single(x, torch.full((4, 3), float(rank + 3)))
    elif op == "reduce_scatter_tensor":
        dist.reduce_scatter_tensor(x, torch.ones(8, 3) * (rank + 1))
    elif op == "all_gather_into_tensor":
        dist.all_gather_into_tensor(x, torch.full((2, 3), float(rank)))


def _result(op: str, x: torch.Tensor, rank: int) -> object:
    try:
        _collective(op, x, rank)
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return x.tolist()


LAYOUT_OPS = (
    "all_reduce",
    "broadcast",
    "reduce",
    "all_to_all_single",
    "reduce_scatter_tensor",
    "all_gather_into_tensor",
)


def _copy_first(rank: int) -> dict[tuple[str, str], tuple[object, object]]:
    """(op, layout) -> (the collective on the tensor, the same on its `clone()`)."""
    out = {}
    for op in LAYOUT_OPS:
        for layout in _layouts(rank):
            original = _result(op, _layouts(rank)[layout], rank)
            copied = _result(op, _layouts(rank)[layout].clone(), rank)
            out[op, layout] = (original, copied)
    return out


def observe(rank: int) -> dict[str, Any]:
    return {
        "writers": {name: _consumers(rank, write) for name, write in WRITERS.items()},
        "copy first": _copy_first(rank),
        "strides ignored": _strides_ignored(rank),
    }


@pytest.fixture(scope="module")
def ranks() -> list[dict[str, Any]]:
    return on_ranks(observe)


def _seen(ranks: list[dict[str, Any]], writer: str) -> list[dict[str, Any]]:
    return [rank["writers"][writer] for rank in ranks]


@rows("B2.4")
def test_all_reduce_into_the_gradient_changes_the_other_consumer_and_the_caller(ranks) -> None:
    for writer in ("all_reduce", "all_reduce async"):
        zero, one = _seen(ranks, writer)
        # the true gradients are 1 (rank 0) and 2 (rank 1); the sum 3 leaks into both
        assert zero["b"] == one["b"] == [3.0] * 4
        assert zero["gy"] == one["gy"] == [3.0] * 4
        assert zero["version"] == one["version"] == 0  # nothing records the write


@rows("B2.5")
def test_broadcast_and_reduce_write_the_gradient_on_every_rank(ranks) -> None:
    zero, one = _seen(ranks, "broadcast")
    assert zero["b"] == [1.0] * 4 and one["b"] == [1.0] * 4  # rank 1's true gradient is 2
    assert one["gy"] == [1.0] * 4 and one["version"] == 0
    zero, one = _seen(ranks, "reduce")
    assert zero["b"] == zero["gy"] == [3.0] * 4
    # the rank that receives nothing: gloo used its buffer as scratch space
    assert one["gy"] == [2.0, 2.0, 3.0, 3.0] and one["b"] == one["gy"]


@rows("B2.6")
def test_the_output_argument_of_gathers_scatters_and_exchanges_is_written(ranks) -> None:
    for writer in ("reduce_scatter", "reduce_scatter_tensor"):
        for rank, seen in enumerate(_seen(ranks, writer)):
            # the reduced half (1 + 2) lands in `g[:2]`, a view of the shared buffer
            assert seen["b"] == seen["gy"] == [3.0, 3.0, rank + 1.0, rank + 1.0], writer
    for writer in ("all_gather", "all_gather_into_tensor"):
        for seen in _seen(ranks, writer):
            assert seen["b"] == seen["gy"] == [7.0, 7.0, 8.0, 8.0]
            assert seen["version"] > 0  # written through views: the counter records it
    for seen in _seen(ranks, "all_to_all_single"):
        assert seen["b"] == seen["gy"] == [5.0, 5.0, 6.0, 6.0] and seen["version"] == 0


@rows("B2.7")
def test_the_input_argument_is_only_read(ranks) -> None:
    for writer in ("gather from g", "scatter from g", "exchange from g"):
        for rank, seen in enumerate(_seen(ranks, writer)):
            assert seen["b"] == seen["gy"] == [float(rank + 1)] * 4, writer
            assert seen["version"] == 0


@rows("B2.8")
def test_a_copy_taken_first_keeps_the_result_and_the_shared_buffer(ranks) -> None:
    for rank, seen in enumerate(_seen(ranks, "all_reduce a copy")):
        assert seen["a"] == [3.0] * 4  # the Function's own gradient: the reduced sum, as before
        assert seen["b"] == seen["gy"] == [float(rank + 1)] * 4
    for op in LAYOUT_OPS:
        for layout in ("dense", "transposed", "offset"):
            for rank in ranks:
                original, copied = rank["copy first"][op, layout]
                assert isinstance(original, list) and original == copied, (op, layout)
    # a stride-0 output ATen checks: refused, where the copy works
    for op in ("reduce_scatter_tensor", "all_gather_into_tensor"):
        for rank in ranks:
            original, copied = rank["copy first"][op, "expanded"]
            assert original == OVERLAP and isinstance(copied, list), op


@rows("B2.9")
def test_gloo_reads_and_writes_numel_elements_from_the_data_pointer(ranks) -> None:
    zero, one = (rank["strides ignored"] for rank in ranks)
    # the narrow view: the first 12 floats of the 4x8 buffer were reduced, not the view's, so
    # rows 2-3 are left as they were (the true result is 3 everywhere) and the columns beside
    # it (another input's gradient in `torch.cat`) were written
    assert zero["narrow"] == [3.0] * 6 + [1.0] * 6 and one["narrow"] == [3.0] * 6 + [2.0] * 6
    assert zero["beside narrow"][:6] == [30.0] * 6 and zero["beside narrow"][6:] == [10.0] * 14
    # the stride-0 view: the whole storage under it was reduced
    assert zero["under expanded"] == one["under expanded"] == [10.0, 12.0, 14.0, 16.0, 18.0, 20.0]
    # on the copy: right (and so other bytes than the original's)
    for rank in ranks:
        original, copied = rank["copy first"]["all_reduce", "narrow"]
        assert original != copied
        assert copied == (_layouts(0)["dense"] + _layouts(1)["dense"]).tolist()
    original, copied = ranks[0]["copy first"]["all_to_all_single", "expanded"]
    assert original != copied
