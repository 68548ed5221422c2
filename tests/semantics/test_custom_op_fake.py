"""Rows D13.1-D13.5: custom ops and their fake (meta) implementations under `torch.compile`,
`torch.export` and `torch.library.opcheck` (AGL413). `backend="eager"` keeps Inductor (and a
C++ compiler) out: the failure is in tracing, before any backend runs."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.library import Library, custom_op, opcheck, triton_op

from .raw_kernel import raw_read
from .rows import first_line, rows

NO_FAKE = (
    "There was no fake impl registered for <CustomOpDef(agl_sem::d13_nofake)>. This is "
    "necessary for torch.compile/export/fx tracing to work. Please use `nofake.register_fake` "
    "to add an fake impl."
)
DATA_POINTER = (
    "Cannot access data pointer of Tensor (e.g. FakeTensor, FunctionalTensor). If you're using "
    "torch.compile/export/fx, it is likely that we are erroneously tracing into a custom "
    "kernel. To fix this, please wrap the custom kernel into an opaque custom op. Please see "
    "the following for details: https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html"
)


def compiled(op: Callable[..., torch.Tensor], *args: object) -> torch.Tensor:
    return torch.compile(lambda t: op(t, *args), backend="eager", fullgraph=True)(torch.ones(3))


def exported(op: Callable[..., torch.Tensor], *args: object) -> None:
    class Model(torch.nn.Module):
        def forward(self, t):
            return op(t, *args)

    torch.export.export(Model(), (torch.ones(3),))


def failures(op: Callable[..., torch.Tensor], *args: object) -> dict[str, str]:
    """opcheck's tests that failed, with the first line of their error."""
    found = opcheck(op, (torch.ones(3, requires_grad=True), *args), raise_exception=False)
    return {test: first_line(result) for test, result in found.items() if result != "SUCCESS"}


@custom_op("agl_sem::d13_nofake", mutates_args=())
def nofake(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s


@custom_op("agl_sem::d13_fake", mutates_args=())
def withfake(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s


@withfake.register_fake
def _(x, s):
    return torch.empty_like(x)


@custom_op("agl_sem::d13_fake_by_name", mutates_args=())
def fake_by_name(x: torch.Tensor, s: float) -> torch.Tensor:
    return x * s


torch.library.register_fake("agl_sem::d13_fake_by_name")(lambda x, s: torch.empty_like(x))

for op in (nofake, withfake, fake_by_name):
    op.register_autograd(lambda ctx, g: (g * 2, None))


@rows("D13.1")
def test_a_custom_op_without_a_fake_runs_eagerly_but_cannot_be_traced() -> None:
    assert torch.equal(nofake(torch.ones(3), 2.0), torch.full((3,), 2.0))
    with pytest.raises(Exception) as raised:
        compiled(nofake, 2.0)
    assert type(raised.value).__name__ == "TorchRuntimeError"
    assert NO_FAKE in str(raised.value)
    with pytest.raises(RuntimeError) as raised:
        exported(nofake, 2.0)
    assert first_line(raised.value) == NO_FAKE
    assert failures(nofake, 2.0) == {
        "test_faketensor": NO_FAKE,
        "test_aot_dispatch_dynamic": NO_FAKE,
    }


@rows("D13.2")
def test_a_fake_registered_on_the_op_or_by_its_name_makes_it_traceable() -> None:
    for op in (withfake, fake_by_name):
        assert torch.equal(compiled(op, 2.0), torch.full((3,), 2.0))
        exported(op, 2.0)
        assert failures(op, 2.0) == {}


LIB = Library("agl_sem_d13", "DEF")  # kept alive: the registrations live as long as it does
for name in ("cpu_only", "meta", "explicit", "implicit", "default"):
    LIB.define(f"{name}(Tensor x) -> Tensor")
LIB.impl("cpu_only", lambda x: x * 2, "CPU")
LIB.impl("meta", lambda x: x * 2, "CPU")
LIB.impl("meta", lambda x: torch.empty_like(x), "Meta")
LIB.impl("explicit", lambda x: x * 2, "CompositeExplicitAutograd")
LIB.impl("implicit", lambda x: x * 2, "CompositeImplicitAutograd")
LIB.impl("default", lambda x: x * 2)


@rows("D13.3")
def test_an_op_defined_from_a_schema_needs_a_meta_or_composite_kernel() -> None:
    cpu_only = torch.ops.agl_sem_d13.cpu_only.default
    with pytest.raises(Exception) as raised:
        compiled(cpu_only)
    assert first_line(raised.value) == "Operator does not support running with fake tensors"
    with pytest.raises(Exception) as raised:
        exported(cpu_only)
    assert type(raised.value).__name__ == "UnsupportedOperatorException"
    assert first_line(raised.value) == "agl_sem_d13.cpu_only.default"
    for name in ("meta", "explicit", "implicit", "default"):
        op = getattr(torch.ops.agl_sem_d13, name).default
        assert torch.equal(compiled(op), torch.full((3,), 2.0)), name
        exported(op)
        found = opcheck(op, (torch.ones(3),), raise_exception=False)
        assert set(found.values()) == {"SUCCESS"}, name


@rows("D13.4")
def test_a_triton_op_is_its_own_fake() -> None:
    @triton_op("agl_sem::d13_triton", mutates_args=())
    def doubled(x: torch.Tensor) -> torch.Tensor:
        return x * 2  # a body the tracer can run on fake tensors, as triton_op requires

    found = opcheck(doubled, (torch.ones(3),), raise_exception=False)
    assert set(found.values()) == {"SUCCESS"}
    assert torch.equal(compiled(doubled), torch.full((3,), 2.0))


@custom_op("agl_sem::d13_raw", mutates_args=())
def raw_double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@raw_double.register_fake
def _(x):
    return torch.empty_like(x)


def _raw_backward(ctx, g):
    # a hand-written kernel called from backward itself, not through an op
    return torch.tensor(raw_read(g.contiguous())) * 2


raw_double.register_autograd(_raw_backward)


@rows("D13.5")
def test_a_fake_does_not_cover_a_raw_kernel_backward_calls_itself() -> None:
    assert failures(raw_double) == {"test_aot_dispatch_dynamic": DATA_POINTER}


@custom_op("agl_sem::d13_fill", mutates_args=("out",))
def fill_(out: torch.Tensor, value: float) -> None:
    out.fill_(value)


@rows("D13.6")
def test_an_op_that_only_mutates_its_arguments_gets_a_generated_fake() -> None:
    def filled(t: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(t)
        fill_(out, 2.0)
        return out

    assert torch.equal(
        torch.compile(filled, backend="eager", fullgraph=True)(torch.ones(3)), torch.full((3,), 2.0)
    )
    found = opcheck(fill_, (torch.ones(3), 2.0), raise_exception=False)
    assert set(found.values()) == {"SUCCESS"}
