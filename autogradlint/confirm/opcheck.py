"""torch.library.opcheck on a custom op (runs in the child): each of its tests' result, as
evidence of its own beside the probe's.

opcheck tests what the probes do not: the declared schema against what the op mutates, the
autograd registration, a fake (meta) implementation and the AOT dispatch that torch.compile and
torch.export need. It feeds contiguous inputs and gradients only, so it does not decide a
probe's verdict (a stride-unsafe backward passes it); it is reported for every custom op, per
test, and in the JSON under "opcheck".
"""

from __future__ import annotations

from typing import Any

PASSED = "passed"


def is_custom_op(fn: Any) -> bool:
    """A `torch.library.custom_op` (its CustomOpDef) or an op found through `torch.ops`."""
    import torch

    if hasattr(fn, "_opoverload"):
        return True
    return isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def report(fn: Any, args: list[Any], tests: tuple[str, ...] | None = None) -> dict[str, str]:
    """Each opcheck test (all, or `tests`): "passed", or "failed: " and the first line of what
    it raised."""
    import torch

    op = getattr(fn, "_opoverload", fn)
    try:
        if tests:
            results = torch.library.opcheck(
                op, tuple(args), test_utils=tests, raise_exception=False
            )
        else:
            results = torch.library.opcheck(op, tuple(args), raise_exception=False)
    except Exception as exc:  # noqa: BLE001 - opcheck itself could not run these inputs
        return {"opcheck": f"failed: {_first_line(exc)}"}
    return {
        name: PASSED if outcome == "SUCCESS" else f"failed: {_first_line(outcome)}"
        for name, outcome in results.items()
    }


# What tracing on fake tensors raises for an op without a fake (semantics D13.1, D13.3).
NO_FAKE = (
    "There was no fake impl registered",
    "does not support running with fake tensors",
    "UnsupportedOperatorException",
)


def lacks_fake(outcome: str) -> bool:
    """Whether a failed opcheck test failed for want of a fake implementation."""
    return any(text in outcome for text in NO_FAKE)


def lines(results: dict[str, str]) -> list[str]:
    """Evidence lines: the tests that passed on one line, each failure on its own."""
    passed = [name for name, outcome in results.items() if outcome == PASSED]
    out = [f"opcheck {name} {outcome}" for name, outcome in results.items() if outcome != PASSED]
    if passed:
        out.append(f"opcheck {', '.join(passed)} passed")
    return out


def _first_line(outcome: Any) -> str:
    if isinstance(outcome, BaseException):
        text = str(outcome).strip().splitlines()
        return f"{type(outcome).__name__}: {text[0][:200] if text else ''}"
    return str(outcome).strip().splitlines()[0][:200] if str(outcome).strip() else "?"
