"""How the oracle judges issue 31's collective programs without a GPU, and what it keeps of a
rank that aborts: the harms as torch_side reports them, the verdicts harms.py gives."""

from __future__ import annotations

from .batch import _parse
from .harms import judge


def test_a_layout_nccl_refuses_is_a_harm_agl201_predicts() -> None:
    # gloo computed on; the `nccl:` harm says the collective was handed a tensor NCCL refuses
    harms = ["nccl:train:all_gather"]
    assert [d.key for d in judge("collective-layout", harms, [])] == [
        "collective-layout/missed/AGL201+AGL406"
    ]
    assert judge("collective-layout", harms, ["AGL201"]) == []


def test_gloo_refusals_and_a_narrow_write_are_agl201s() -> None:
    for harm in (
        "raise:sum:ValueError: Tensors must be contiguous",
        "raise:train:RuntimeError: input tensor has to be contiguous",
        "wrong:train:grad",
        "crash:sum:rc=-6:munmap_chunk(): invalid pointer",
    ):
        assert judge("collective-layout", [harm], ["AGL201"]) == [], harm


def test_a_second_gradient_read_from_a_written_upstream_is_agl406s_not_the_layouts() -> None:
    # `h = g.contiguous()` on a dense gradient: the write reaches the caller's upstream
    # gradient, which the retain scenario's second call reads again
    harms = ["changed:train:upstream", "wrong:train:sibling", "wrong:retain:grad"]
    assert judge("collective-layout", harms, ["AGL406"]) == []


def test_a_clone_no_layout_refuses_is_a_false_alarm_of_agl201() -> None:
    found = judge("collective-layout", [], ["AGL201"])
    assert [d.key for d in found] == ["collective-layout/false-alarm/AGL201"]


def test_a_rank_that_aborts_keeps_the_harms_it_showed_before() -> None:
    log = _parse(
        "@@START p0000\n@@SCEN train\n"
        '{"id": "p0000", "harms": []}\n'
        "@@START p0001\n@@SCEN train\n@@HARM changed:train:upstream\n@@SCEN sum\n"
        "@@HARM nccl:sum:all_reduce\nmunmap_chunk(): invalid pointer\n"
    )
    assert log.done == {"p0000": []}
    assert (log.started, log.scenario) == ("p0001", "sum")
    assert log.seen == ["changed:train:upstream", "nccl:sum:all_reduce"]
    assert not log.first  # p0000 ran before it in the same process: the abort may be inherited


def test_the_first_program_of_a_process_owns_its_abort() -> None:
    log = _parse("@@START p0003\n@@SCEN sum\n@@HARM nccl:sum:broadcast\n")
    assert log.started == "p0003" and log.first
