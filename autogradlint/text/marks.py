"""Text-level marks of code a check reads, found at memory speed: direct calls on a Function
class (`Fn.forward(`, `Fn()(`, `Fn.apply(`) and the calls that build a graph in a helper."""

from __future__ import annotations

CALL_TAILS = (".forward(", "()(", ".apply(")


def direct_call_offsets(
    text: str, function_like: set[str], tails: tuple[str, ...] = CALL_TAILS
) -> list[int]:
    """Where `Fn.forward(`, `Fn()(` or `Fn.apply(` is called on a Function class (AGL407 and
    AGL410 read those).

    Found from the two literal tails, so the search runs at memory speed on large files."""
    if not function_like:
        return []
    out: list[int] = []
    for tail in tails:
        at = text.find(tail)
        while at != -1:
            head = at
            while head > 0 and (text[head - 1].isalnum() or text[head - 1] == "_"):
                head -= 1
            if text[head:at] in function_like:
                out.append(head)
            at = text.find(tail, at + 1)
    return out


def holds_graph_call(text: str) -> bool:
    """What makes a helper worth following: family A looks for `x.backward(` /
    `autograd.backward(` and `autograd.grad(` / an imported `grad(` in it (not `compute_grad(`).
    A helper without them, calling none that has them, is not parsed."""
    if ".backward(" in text:
        return True
    at = text.find("grad(")
    while at != -1:
        if not word_char(text[at - 1 : at]):
            return True
        at = text.find("grad(", at + 1)
    return False


def word_char(char: str) -> bool:
    return char.isalnum() or char == "_"
