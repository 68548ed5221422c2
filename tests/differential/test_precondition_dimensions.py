"""Issue 34's "safe" fixes that changed results, one per dimension of hazards.py: the program,
the fix the code before the preconditions made (written as the edit it made), the proof that
the harness reports that old fix as a changed result (so the dimension catches it), and what
the safe tier does now: nothing (a precondition is unproven, and the note says which), or a
rewrite the harness finds equivalent."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hazards import CALLER, FALLBACK, HEADER, INLINE, UNREADABLE, program_text
from project import fix_project
from run import Program, differences, files_of, function_scenarios

from autogradlint.engine.fix_loop import single_fixes

RECOMPUTE = """\
class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @DECORATOR
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x * x
        r = torch.autograd.grad(y, x, g)[0]
        return r
"""
WRAPPED = """\
        with torch.enable_grad():
            y = x * x
            r = torch.autograd.grad(y, x, g)[0]
"""
UNWRAPPED = "        y = x * x\n        r = torch.autograd.grad(y, x, g)[0]\n"


def _decorated(code: str, line: str) -> str:
    recompute = RECOMPUTE.replace("    @DECORATOR\n", f"    {line}\n" if line else "")
    return HEADER + "\n\n" + code + "\n\n" + recompute


NULLABLE = """

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        MATERIALIZE
        return OUTPUTS

    @staticmethod
    def backward(ctx, g, lse):
        r = ext.scale_opt(lse, 2.0)
        return g * 2 + r
"""


def _nullable(materialize: str, outputs: str) -> str:
    body = NULLABLE.replace("MATERIALIZE", materialize).replace("OUTPUTS", outputs)
    return HEADER + INLINE + body


PLAIN = (
    HEADER
    + """

class Scale(torch.autograd.Function):
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


Fn = Scale
"""
)
STATIC = PLAIN.replace("    def forward(", "    @staticmethod\n    def forward(")
LAZY = '''\
"""Torch only inside a function."""
FLAG = False
MODE = 0


def build():
    import torch

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            y = x * x
            return torch.autograd.grad(y, x, g)[0]

    return Fn
'''
LAZY_OLD = (
    '"""Torch only inside a function."""\nimport torch as _torch\n' + LAZY.split("\n", 1)[1]
).replace(
    "            y = x * x\n            return torch.autograd.grad(y, x, g)[0]\n",
    "            with _torch.enable_grad():\n                y = x * x\n"
    "                return torch.autograd.grad(y, x, g)[0]\n",
)
WRITES = (
    HEADER
    + """

class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
BODY"""
)


def _writes(*lines: str) -> str:
    return WRITES.replace("BODY", "".join(f"        {line}\n" for line in lines))


@dataclass(frozen=True)
class Case:
    program: Program
    rules: frozenset[str]
    old_fix: tuple[str, str]  # (text the old fix replaced, what it wrote) in generated.py
    precondition: str  # the one the note names, or "" where the safe fix is now a proven one
    old_header: str = ""  # a line the old fix added at the top (its `import torch as _torch`)

    def old_fixed(self) -> dict[str, str]:
        files = files_of(self.program)
        before, after = self.old_fix
        assert before in files["generated.py"]
        files["generated.py"] = files["generated.py"].replace(before, after)
        return files


A = frozenset({"AGL101"})
CASES = {
    "decorator that catches and falls back": Case(
        _decorated(FALLBACK, "@fallback"), A, (UNWRAPPED, WRAPPED), "nothing-catches"
    ),
    "decorator from another file that falls back": Case(
        {
            "generated.py": _decorated("from decos import fallback\n", "@fallback"),
            "decos.py": FALLBACK,
        },
        A,
        (UNWRAPPED, WRAPPED),
        "nothing-catches",
    ),
    "decorator whose source cannot be read": Case(
        _decorated(UNREADABLE, "@rescue"), A, (UNWRAPPED, WRAPPED), "nothing-catches"
    ),
    "subclass whose backward calls this one and falls back": Case(
        _decorated("", "") + CALLER,
        A,
        (UNWRAPPED, WRAPPED),
        "nothing-catches",
    ),
    "materialize off, an unused output's gradient to an optional argument": Case(
        _nullable("ctx.set_materialize_grads(False)", "x * 2, x * 3"),
        frozenset({"AGL201"}),
        ("ext.scale_opt(lse, 2.0)", "ext.scale_opt(lse.contiguous(), 2.0)"),
        "",
    ),
    "the gradient of a non-tensor output to an optional argument": Case(
        _nullable("pass", "x * 2, 3"),
        frozenset({"AGL201"}),
        ("ext.scale_opt(lse, 2.0)", "ext.scale_opt(lse.contiguous(), 2.0)"),
        "",
    ),
    "an instance made in another file": Case(
        {
            "generated.py": PLAIN,
            "user.py": "import torch\nfrom generated import Scale\n\n\ndef use():\n"
            "    helper = Scale()\n    return helper.forward(torch.ones(3, 4))\n",
        },
        frozenset({"AGL402"}),
        ("    def forward(", "    @staticmethod\n    def forward("),
        "no-instance",
    ),
    "an instance of a subclass in another file": Case(
        {
            "generated.py": PLAIN,
            "user.py": "import torch\nfrom generated import Scale\n\n\nclass Scale3(Scale):\n"
            "    pass\n\n\ndef use():\n    return Scale3().forward(torch.ones(3, 4))\n",
        },
        frozenset({"AGL402"}),
        ("    def forward(", "    @staticmethod\n    def forward("),
        "no-instance",
    ),
    "an instance made after an import inside a function": Case(
        {
            "generated.py": PLAIN,
            "user.py": "import torch\n\n\ndef use():\n    from generated import Scale as S\n\n"
            "    return S().forward(torch.ones(3, 4))\n",
        },
        frozenset({"AGL402"}),
        ("    def forward(", "    @staticmethod\n    def forward("),
        "no-instance",
    ),
    "torch imported only inside the factory": Case(LAZY, A, (LAZY, LAZY_OLD), ""),
    "backward reads its locals through locals()": Case(
        _writes("frame = locals()", "g.mul_(2)", "return frame['g']"),
        frozenset({"AGL406"}),
        ("        g.mul_(2)\n", "        g = g.clone()\n        g.mul_(2)\n"),
        "locals-not-introspected",
    ),
    "a write through an index reaches every element of an expanded gradient": Case(
        _writes(
            "h = g.view(-1)",
            "if MODE == 1:",
            "    h[0] = 0.5",
            "else:",
            "    g *= 2",
            "return g",
        ),
        frozenset({"AGL406"}),
        ("        h = g.view(-1)\n", "        g = g.clone()\n        h = g.view(-1)\n"),
        "whole-gradient-writes",
    ),
    "a fill of one row of an expanded gradient reaches every row": Case(
        _writes("h = g[0]", "h.zero_()", "return g"),
        frozenset({"AGL406"}),
        ("        h = g[0]\n", "        g = g.clone()\n        h = g[0]\n"),
        "whole-gradient-writes",
    ),
    "a write through a view of a part (`select`)": Case(
        _writes("g.select(0, 1).zero_()", "return g"),
        frozenset({"AGL406"}),
        ("        g.select(", "        g = g.clone()\n        g.select("),
        "whole-gradient-writes",
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_the_old_fix_changed_a_result_and_the_safe_tier_no_longer_does(case: Case) -> None:
    old = case.old_fixed()
    assert differences(case.program, old, function_scenarios), "the harness misses the old fix"
    fixed = fix_project(case.program, case.rules)
    assert not fixed.errors, fixed.errors
    assert fixed.files != old
    found = differences(case.program, fixed.files, function_scenarios) if fixed.changed else []
    assert not found, program_text(fixed.files) + "\n".join(found[:5])
    if case.precondition:
        assert not fixed.changed, program_text(fixed.files)
        assert fix_project(case.program, case.rules, unsafe=True).changed  # offered as unsafe
    else:
        assert fixed.changed  # a proven rewrite: None passed on as None, torch from the factory


@pytest.mark.parametrize(
    "case",
    [c for c in CASES.values() if c.precondition],
    ids=[n for n, c in CASES.items() if c.precondition],
)
def test_the_note_names_the_precondition_that_failed(case: Case, tmp_path) -> None:
    from autogradlint.preconditions import declared
    from autogradlint.runner import project_index

    files = files_of(case.program)
    (tmp_path / "pyproject.toml").write_text("")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "generated.py"
    index = project_index([(tmp_path / n, t.encode()) for n, t in files.items()], [], tmp_path)
    fixes = single_fixes(
        files["generated.py"], str(path), enabled=case.rules, project=index.view(str(path))
    )
    assert fixes and all(f.safety == "unsafe" for f in fixes)
    (rule,) = case.rules
    claim = declared(rule)[case.precondition].split(": ", 1)[0]
    assert any(claim[1:] in f.note for f in fixes), [f.note for f in fixes]


STRIDED_WRITER = _writes("done = ext.scale_strided(g, 2.0)", "return g").replace(
    HEADER, HEADER + INLINE, 1
)


def test_a_kernel_that_writes_through_an_auto_pointer_gets_a_private_copy() -> None:
    """Issue 34 item 6, the check side. `scale_strided` writes into its argument through
    `auto p = g.data_ptr<float>()`, indexing it by its strides, and returns a scalar; backward
    keeps the result, so only the C++ says it writes. `.contiguous()` would make it scale a
    temporary on a transposed gradient (a factor of 2 lost): the scanner's write verdict is
    AGL201's `callee-does-not-write` precondition, so once autogradlint/native/scan.py reports
    this write the finding is AGL202 and the fix the dense private copy. (Passes with the
    scanner that sees writes through `auto` pointers whatever the order of `data_ptr` and
    `stride` in the text.)"""
    fixed = fix_project(STRIDED_WRITER, {"AGL201", "AGL202"})
    assert not fixed.errors, fixed.errors
    assert ".contiguous()" not in fixed.files["generated.py"], fixed.files["generated.py"]
    assert differences(STRIDED_WRITER, fixed.files, function_scenarios) == []


OPAQUE = _writes("return fused_cuda.scale_bwd(g, 2.0)").replace(
    HEADER, HEADER + "import fused_cuda\n", 1
)


def test_a_kernel_whose_source_is_not_in_the_project_gets_contiguous_only_as_unsafe(
    tmp_path,
) -> None:
    # whether `fused_cuda.scale_bwd` writes into `g` is not known: `.contiguous()` is not proven
    path = tmp_path / "generated.py"
    (tmp_path / "pyproject.toml").write_text("")
    path.write_text(OPAQUE)
    (fix,) = single_fixes(OPAQUE, str(path), enabled=frozenset({"AGL201"}))
    assert fix.safety == "unsafe"
    assert fix.note.startswith("not proven that the callee does not write into the gradient")
    assert "`fused_cuda.scale_bwd`" in fix.note
    assert not fix_project(OPAQUE, {"AGL201"}).changed
