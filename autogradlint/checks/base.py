"""The check interface: a check reads shared file facts and reports through one call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst

from ..analysis.apply_sites import ApplySites
from ..analysis.contract import ContractView
from ..analysis.dependencies import encode
from ..analysis.facts import FileFacts
from ..analysis.flow import DEFAULT, MethodFlow, analyse_method
from ..analysis.inherited import Inherited
from ..analysis.methods import FileMethods
from ..analysis.summaries import PythonFiles, Summaries
from ..edits import Fix
from ..meta import all_rules
from ..model import Violation
from ..native.modules import ProjectNative
from ..settings import Settings
from ..text.torch_name import TorchNames
from .gates import Gate
from .reads import Reads


@dataclass
class CheckContext:
    """Per-file state shared by all checks: enabled rules, settings, memoised method flows."""

    facts: FileFacts
    enabled: frozenset[str]
    settings: Settings
    violations: list[Violation] = field(default_factory=list)
    _flows: dict[tuple[int, str], MethodFlow] = field(default_factory=dict)
    current_subject: str | None = None  # that class's name (what the confirmer imports)
    _contract: ContractView | None = None
    path: str = ""  # the file (its project's C++ sources are read from there, when needed)
    _native: ProjectNative | None = None
    _summaries: Summaries | None = None
    _methods: FileMethods | None = None
    _torch_names: TorchNames | None = None
    _inherited: Inherited | None = None
    _apply_sites: ApplySites | None = None

    @property
    def native(self) -> ProjectNative:
        """The project's compiled side, as this file sees it (read on first question)."""
        if self._native is None:
            self._native = ProjectNative(self.path, self.settings.native_sources)
        return self._native

    @property
    def summaries(self) -> Summaries:
        """What the project's functions do with their parameters (one call deeper)."""
        if self._summaries is None:
            self._summaries = Summaries(self.path, self.facts.source, self.settings, self.native)
        return self._summaries

    @property
    def methods(self) -> FileMethods:
        """The methods of the file's own classes, by name (read from the full text)."""
        if self._methods is None:
            self._methods = FileMethods(self.facts.source)
        return self._methods

    @property
    def apply_sites(self) -> ApplySites:
        """The file's `Fn.apply(...)` calls (its full text read when a check first asks)."""
        if self._apply_sites is None:
            self._apply_sites = ApplySites(self.facts.source)
        return self._apply_sites

    @property
    def torch_names(self) -> TorchNames:
        """How torch is spelled where a fix writes it (`ast` of the full text, parsed when a
        fix that writes torch is first built): what the fix loop itself will write."""
        if self._torch_names is None:
            self._torch_names = TorchNames(self.facts.source)
        return self._torch_names

    def depends(self) -> str:
        """The other files this file's findings were decided from (analysis/dependencies.py)."""
        natives = [self._native] if self._native is not None else []
        files: set[str] = set()
        if self._summaries is not None:
            natives += list(self._summaries.natives())
            files |= self._summaries.consulted
        if self._inherited is not None:
            files |= self._inherited.consulted
        for native in natives:
            files |= native.python_files
        stamps = {n.root: n.stamp for n in natives if n.consulted}
        return encode(stamps, files)

    def enter(self, class_node: cst.ClassDef | str | None) -> None:
        """Checks call this per class (or custom op, by the name the module binds it to) so
        violations know what they are about: what the confirmer imports."""
        if isinstance(class_node, cst.ClassDef):
            class_node = class_node.name.value
        self.current_subject = class_node

    def flow(self, function: cst.FunctionDef, inherited: str = DEFAULT) -> MethodFlow:
        """The ordered pass over one method (entered in grad mode `inherited`), computed
        once however many checks ask. A method of another file's class resolves its names
        through that file's imports."""
        key = (id(function), inherited)
        if key not in self._flows:
            imports = self.facts.imports
            if self._contract is not None:
                imports = self._contract.foreign_imports.get(id(function), imports)
            self._flows[key] = analyse_method(function, imports, inherited)
        return self._flows[key]

    def contract(self) -> ContractView:
        """The file's Function classes as the contract checks read them (built once): with
        the Function bases of other files the project index names."""
        if self._contract is None:
            inherited = None
            if self.facts.project.inherited:
                files = PythonFiles(self.path, self.facts.source)
                inherited = self._inherited = Inherited(self.facts.project, files)
            self._contract = ContractView(self.facts, self.flow, inherited)
        return self._contract


class Check:
    """Base class: a check reads the shared facts in run() and reports through report().

    Each check declares, beside its code, the rules it reports (`codes`), the byte gate every
    file that can hold one of them passes (`gate`, checks/gates.py) and what of a file it
    reads (`reads`, checks/reads.py): the registry derives the gate table and the slicer's
    selection from the enabled checks' declarations."""

    codes: ClassVar[tuple[str, ...]] = ()
    gate: ClassVar[Gate]
    reads: ClassVar[Reads] = Reads()

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx

    def report(
        self,
        rule_id: str,
        node: cst.CSTNode,
        *,
        anchor: cst.CSTNode | None = None,
        fix: Fix | None = None,
        severity: str | None = None,
        **fields: object,
    ) -> None:
        if rule_id not in self.ctx.enabled:
            return
        inherited = self.ctx._inherited
        if inherited is not None and id(anchor or node) in inherited.nodes:
            return  # a method of another file's class, read for its contract: not a place here
        meta = all_rules()[rule_id]
        help_text = meta.format_help(**fields)
        if fix is not None and fix.safety == "unsafe" and fix.note and meta.fix == "safe":
            # The rule's fix is safe where its preconditions are proven; here one is not.
            help_text += f" The fix is offered only as unsafe: {fix.note}."
        self.ctx.violations.append(
            Violation(
                rule_id,
                meta.format(**fields),
                node,
                anchor,
                fix,
                self.ctx.current_subject,
                help_text,
                severity,
            )
        )

    def run(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError
