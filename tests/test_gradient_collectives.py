"""AGL406 on `torch.distributed` collectives: a backward that hands its incoming gradient (or a
view of it) to a collective that writes into it changes a buffer autograd shares with other
consumers and the caller (semantics B2.4-B2.6); the input of a gather or scatter is only read
(B2.7). The copy-first fix is unsafe there: gloo ignores strides (B2.9)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from autogradlint import lint_source
from autogradlint.config import Config
from autogradlint.engine.fix_loop import fix_text
from autogradlint.engine.request import LintRequest
from autogradlint.model import Finding
from autogradlint.runner import discover, lint_paths

AGL406 = frozenset({"AGL406"})


def _findings(source: str) -> list[Finding]:
    result = lint_source(textwrap.dedent(source), "layers.py", enabled=AGL406)
    assert result.error is None, result.error
    return result.findings


def _lines(source: str) -> list[int]:
    return [f.line for f in _findings(source)]


def backward(body: str, head: str = "import torch.distributed as dist") -> str:
    """A module with one Function whose backward runs `body` (given `grad_output`)."""
    return (
        f"import torch\n{head}\n\n\n"
        "class Region(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        + textwrap.indent(textwrap.dedent(body), " " * 8)
    )


def test_all_reduce_into_the_gradient_is_flagged_at_the_call() -> None:
    (finding,) = _findings(backward("dist.all_reduce(grad_output)\nreturn grad_output\n"))
    assert (finding.line, finding.col) == (12, 8)
    assert finding.message == (
        "`Region.backward` changes gradient `grad_output` in place: others share that buffer"
    )
    assert finding.help.startswith(
        "`torch.distributed.all_reduce` writes its result into the tensor it is given."
    )


def test_every_spelling_and_the_async_form_are_flagged() -> None:
    bodies = {
        "import torch.distributed as dist": [
            "dist.all_reduce(grad_output, async_op=True).wait()",
            "work = dist.all_reduce(tensor=grad_output, async_op=True)\nwork.wait()",
            "dist.broadcast(grad_output, src=0)",
            "dist.reduce(grad_output, dst=0)",
        ],
        "from torch.distributed import all_reduce as ar": ["ar(grad_output)"],
        "from torch import distributed": ["distributed.all_reduce(grad_output)"],
        "from deepspeed import comm as dist": ["dist.all_reduce(grad_output)"],
        "": ["torch.distributed.all_reduce(grad_output)"],
    }
    for head, calls in bodies.items():
        for call in calls:
            assert _lines(backward(f"{call}\nreturn grad_output\n", head)) == [12], call


def test_views_and_aliases_of_the_gradient_are_followed() -> None:
    for body in (
        "h = grad_output.view(-1)\ndist.all_reduce(h)\n",
        "dist.all_reduce(grad_output.contiguous())\n",
        "dist.reduce_scatter_tensor(grad_output[:2], torch.ones(4))\n",
        "dist.all_gather(list(grad_output.chunk(2)), torch.ones(2))\n",
        "parts = torch.split(grad_output, 2)\ndist.all_gather(parts, torch.ones(2))\n",
        "dist.all_gather_into_tensor(output_tensor=grad_output, input_tensor=torch.ones(2))\n",
        "dist.all_to_all_single(grad_output, torch.ones(4))\n",
    ):
        assert len(_lines(backward(body + "return grad_output\n"))) == 1, body


def test_the_input_of_a_gather_scatter_or_exchange_is_only_read() -> None:
    for body in (
        "out = torch.empty(8)\ndist.all_gather_into_tensor(out, grad_output)\nreturn out\n",
        "out = torch.empty(2)\ndist.reduce_scatter_tensor(out, grad_output)\nreturn out\n",
        "out = torch.empty_like(grad_output)\ndist.all_to_all_single(out, grad_output)\n"
        "return out\n",
        "parts = [torch.empty(4) for _ in range(2)]\ndist.all_gather(parts, grad_output)\n"
        "return torch.cat(parts)\n",
    ):
        assert _lines(backward(body)) == [], body
    # the same exchange the other way round writes the gradient
    swapped = "out = torch.ones(4)\ndist.all_to_all_single(grad_output, out)\nreturn out\n"
    assert _lines(backward(swapped)) == [13]


def test_a_private_copy_and_the_out_of_place_collectives_are_quiet() -> None:
    assert _lines(backward("g = grad_output.clone()\ndist.all_reduce(g)\nreturn g\n")) == []
    assert _lines(backward("g = grad_output\ndist.all_reduce(g)\nreturn g\n")) == [13]
    out_of_place = {
        "import torch.distributed.nn as dnn": "return dnn.all_reduce(grad_output)\n",
        "import torch.distributed._functional_collectives as funcol": (
            'return funcol.all_reduce(grad_output, "sum", None)\n'
        ),
    }
    for head, body in out_of_place.items():
        assert _lines(backward(body, head)) == [], head
        in_place = body.replace("return ", "").replace(', "sum", None', "")
        in_place = in_place.replace("dnn.", "dist.").replace("funcol.", "dist.")
        assert _lines(backward(in_place + "return grad_output\n")) == [12], in_place


MEGATRON = """\
import torch
import torch.distributed as dist


def _reduce(input_, group=None):
    # mutated in place when contiguous
    input_ = input_.contiguous()
    dist.all_reduce(input_, group=group)
    return input_


def _wrapped(input_):
    return _reduce(input_)


class CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return _reduce(grad_output)


class TwoDeep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return _wrapped(grad_output), None
"""


def test_a_helper_that_reduces_its_argument_is_followed_two_calls_deep() -> None:
    found = _findings(MEGATRON)
    assert [(f.line, f.subject) for f in found] == [(23, "CopyToRegion"), (33, "TwoDeep")]
    assert found[0].help.startswith(
        "`torch.distributed.all_reduce` (reached through `_reduce`) writes its result"
    )
    assert "(reached through `_wrapped` -> `_reduce`)" in found[1].help


def test_a_helper_in_another_module_of_the_project_is_followed(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "comm.py").write_text(
        "import torch.distributed as dist\n\n\ndef reduce_(t):\n    dist.all_reduce(t)\n"
        "    return t\n"
    )
    (package / "layers.py").write_text(
        "import torch\n\nfrom .comm import reduce_\n\n\n"
        "class Region(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        return x\n\n"
        "    @staticmethod\n    def backward(ctx, grad_output):\n"
        "        return reduce_(grad_output)\n"
    )
    config = Config(root=tmp_path, select=("AGL406",))
    found = discover([str(tmp_path)], config)
    results = lint_paths(found.files, config)
    flagged = [(Path(r.path).name, f.line) for r in results for f in r.findings]
    assert flagged == [("layers.py", 13)]


def test_a_custom_op_backward_is_checked_the_same_way() -> None:
    source = """\
    import torch
    import torch.distributed as dist

    @torch.library.custom_op("mylib::region", mutates_args=())
    def region(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @region.register_fake
    def _(x):
        return torch.empty_like(x)

    def _backward(ctx, grad):
        dist.all_reduce(grad)
        return grad

    region.register_autograd(_backward)
    """
    assert _lines(source) == [13]


def test_the_copy_first_fix_is_unsafe_for_a_collective() -> None:
    source = backward("dist.all_reduce(grad_output)\nreturn grad_output\n")
    assert not fix_text(LintRequest(source, enabled=AGL406)).changed
    fixed = fix_text(LintRequest(source, enabled=AGL406, plan="unsafe"))
    assert fixed.applied == ["AGL406"]
    assert fixed.source.endswith(
        "    def backward(ctx, grad_output):\n"
        "        if grad_output is not None:\n"
        "            grad_output = grad_output.clone()\n"
        "        dist.all_reduce(grad_output)\n"
        "        return grad_output\n"
    )
    (finding,) = _findings(source)
    assert finding.fixable == "unsafe"


def test_an_in_place_write_after_a_layout_read_gets_an_unsafe_copy() -> None:
    """The copy of the stride-0 gradient of `out.sum()` is dense: a branch on the layout takes
    the other path on it (AGL406's `layout-not-read`)."""
    layout = backward(
        "if grad_output.stride(0) == 0:\n    return grad_output * 3\n"
        "grad_output.mul_(2)\nreturn grad_output\n",
        "",
    )
    (finding,) = _findings(layout)
    assert finding.fixable == "unsafe"
    fixed = fix_text(LintRequest(layout, enabled=AGL406, plan="unsafe"))
    assert fixed.applied == ["AGL406"]
    plain = backward("grad_output.mul_(2)\nreturn grad_output\n", "")
    (finding,) = _findings(plain)
    assert finding.fixable == "safe"
