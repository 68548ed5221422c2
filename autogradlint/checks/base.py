"""The check interface: a check reads shared file facts and reports through one call."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from ..analysis.facts import DEFAULT_LOADERS, FileFacts
from ..analysis.flow import MethodFlow, analyse_method
from ..fixes import Fix
from ..meta import all_rules
from ..model import Violation

DEFAULT_EXTENSION_MODULES = ("*_cuda", "*_C", "_C", "*_ext", "*_cpp", "*_kernels", "*_cuda_kernel")
# Entry points whose C++ side makes its gradient contiguous itself (read-safe). The fused softmax
# kernels shared by Megatron, Apex and ColossalAI call `output_grads_.contiguous()` in bwd_cuda.
DEFAULT_STRIDE_SAFE = ("*scaled*softmax*.backward",)
# Entry points known to write their result into the gradient they are given. ColossalAI's
# scaled_masked_softmax bwd_cuda says so in its source: "backward pass is completely in-place".
DEFAULT_WRITING = ("scaled_masked_softmax.backward",)
DEFAULT_GUARD_DECORATORS = ("input_guard", "contiguous")


@dataclass(frozen=True)
class Settings:
    """What the checks may be configured with (from [tool.autogradlint])."""

    extension_modules: tuple[str, ...] = DEFAULT_EXTENSION_MODULES
    stride_safe: tuple[str, ...] = DEFAULT_STRIDE_SAFE
    writing_extensions: tuple[str, ...] = DEFAULT_WRITING
    guard_decorators: tuple[str, ...] = DEFAULT_GUARD_DECORATORS
    loaders: tuple[str, ...] = DEFAULT_LOADERS


@dataclass
class CheckContext:
    """Per-file state shared by all checks: enabled rules, settings, memoised method flows."""

    facts: FileFacts
    enabled: frozenset[str]
    settings: Settings
    violations: list[Violation] = field(default_factory=list)
    _flows: dict[int, MethodFlow] = field(default_factory=dict)

    def flow(self, function: cst.FunctionDef) -> MethodFlow:
        """The ordered pass over one method, computed once however many checks ask."""
        key = id(function)
        if key not in self._flows:
            self._flows[key] = analyse_method(function, self.facts.imports)
        return self._flows[key]


class Check:
    """Base class. Subclasses set IDS (the rules they report) and PREFILTER (bytes regex)."""

    IDS: ClassVar[tuple[str, ...]] = ()
    PREFILTER: ClassVar[re.Pattern[bytes]] = re.compile(b"")
    # True for checks that start from autograd.Function classes: a file subclassing a Function
    # defined elsewhere in the project (the cross-file index) must reach them.
    STARTS_FROM_FUNCTIONS: ClassVar[bool] = False
    # Bytes every file this check can report in contains (all of them), besides PREFILTER.
    REQUIRES: ClassVar[tuple[bytes, ...]] = ()

    @classmethod
    def admits(cls, raw: bytes) -> bool:
        """The byte prefilter: cheap, and never wrong about a file that holds a finding."""
        return all(token in raw for token in cls.REQUIRES) and cls.PREFILTER.search(raw) is not None

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx

    def enabled(self, rule_id: str) -> bool:
        return rule_id in self.ctx.enabled

    def report(
        self,
        rule_id: str,
        node: cst.CSTNode,
        *,
        anchor: cst.CSTNode | None = None,
        fix: Fix | None = None,
        **fields: object,
    ) -> None:
        if rule_id not in self.ctx.enabled:
            return
        meta = all_rules()[rule_id]
        self.ctx.violations.append(Violation(rule_id, meta.format(**fields), node, anchor, fix))

    def run(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError
