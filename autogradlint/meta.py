"""Rule metadata: one YAML file per rule (rules/AGLxxx.yaml), the single source of truth."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAMILIES = {
    "A": "graph building inside Function.backward",
    "B": "gradients passed to compiled code",
    "C": "__torch_function__ overrides and modes",
    "D": "the autograd.Function contract",
    "S": "suppression comments",
}
# Families A-D rest on verified PyTorch behaviour (docs/semantics.md); S is about autogradlint's
# own comments, where there is no PyTorch behaviour to cite.
CITES_SEMANTICS = ("A", "B", "C", "D")
SEVERITIES = ("error", "warning")
FIX_SAFETIES = ("safe", "unsafe", "none")
_ID_RE = re.compile(r"^AGL\d{3}$")
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_REQUIRED = (
    "id",
    "name",
    "family",
    "severity",
    "message",
    "summary",
    "docs",
    "fix",
    "semantics",
    "examples",
)
# A row of docs/semantics.md: `A2.1`, `B1.4b`, `FIX-A3`.
ROW_ID = re.compile(r"^(?:[A-D]\d+\.\d+[a-z]?|FIX-[A-D]\d+)$")


@dataclass(frozen=True)
class InvalidExample:
    code: str
    fixed: str | None = None


@dataclass(frozen=True)
class RuleMeta:
    id: str
    name: str
    family: str
    severity: str
    message: str
    summary: str
    docs: str
    fix: str
    help: str = ""  # the detail under the headline: why it is a bug, what to do
    semantics: tuple[str, ...] = ()  # the rows of docs/semantics.md the rule rests on
    valid: tuple[str, ...] = field(default_factory=tuple)
    invalid: tuple[InvalidExample, ...] = field(default_factory=tuple)

    def format(self, **fields: object) -> str:
        """The headline: short enough for one line (fields longer than HEADLINE_FIELD are
        shortened here; the help line shows them whole)."""
        short = {k: _shorten(v) for k, v in fields.items()}
        return self.message.format(**short)

    def format_help(self, **fields: object) -> str:
        return self.help.format(**fields).strip() if self.help else ""

    @property
    def url(self) -> str:
        return rule_url(self.id)


HEADLINE_FIELD = 32  # characters of one field in a headline


_QUOTED = re.compile(r"`([^`]*)`")


def _shorten(value: object) -> object:
    """A long name is cut; a field that is a phrase quoting names (`gets 2 non-tensors: `n`
    and 1 more`) keeps its words and cuts only the quoted names."""
    if not isinstance(value, str) or len(value) <= HEADLINE_FIELD:
        return value
    if _QUOTED.search(value) and _QUOTED.sub("", value).strip(" :,"):
        return _QUOTED.sub(lambda m: f"`{_shorten(m.group(1))}`", value)
    return value[: HEADLINE_FIELD - 3] + "..."


def rule_url(rule_id: str) -> str:
    """Where a rule's documentation is: its YAML file as installed (`rules/CODE.yaml` of this
    repository, shipped in the package), a `file://` URI that exists wherever autogradlint
    runs; `autogradlint rule CODE` prints the same documentation."""
    return (rules_dir() / f"{rule_id}.yaml").as_uri()


_NAME_LINE = re.compile(r"^name:\s*(\S+)\s*$", re.M)


@functools.cache
def rule_names() -> dict[str, str]:
    """id -> name, read with a regex (selectors need only these; YAML parsing costs more)."""
    names: dict[str, str] = {}
    for path in sorted(rules_dir().glob("AGL*.yaml")):
        match = _NAME_LINE.search(path.read_text(encoding="utf-8"))
        if match is None:
            raise RuleFileError(f"{path}: missing `name:`")
        names[path.stem] = match.group(1)
    if not names:
        raise RuleFileError(f"no rule files found in {rules_dir()}")
    return names


class RuleFileError(ValueError):
    """A rules/*.yaml file that does not describe a rule properly."""


def rules_dir() -> Path:
    """Where the YAML files are: inside the wheel (`_rules`), else the source checkout's `rules/`."""
    here = Path(__file__).resolve().parent
    packaged = here / "_rules"
    if packaged.is_dir():
        return packaged
    return here.parent / "rules"


def parse_rule(data: Any, origin: str) -> RuleMeta:
    """Validate one rule document; every problem names the file it came from."""
    if not isinstance(data, dict):
        raise RuleFileError(f"{origin}: expected a mapping")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise RuleFileError(f"{origin}: missing keys {', '.join(missing)}")
    if not _ID_RE.match(str(data["id"])):
        raise RuleFileError(f"{origin}: id {data['id']!r} is not of the form AGL123")
    if not _NAME_RE.match(str(data["name"])):
        raise RuleFileError(f"{origin}: name {data['name']!r} is not kebab-case")
    if data["family"] not in FAMILIES:
        raise RuleFileError(f"{origin}: family must be one of {', '.join(FAMILIES)}")
    if data["severity"] not in SEVERITIES:
        raise RuleFileError(f"{origin}: severity must be one of {', '.join(SEVERITIES)}")
    if data["fix"] not in FIX_SAFETIES:
        raise RuleFileError(f"{origin}: fix must be one of {', '.join(FIX_SAFETIES)}")
    rows = data["semantics"]
    needed = data["family"] in CITES_SEMANTICS
    if (
        not isinstance(rows, list)
        or (needed and not rows)
        or not all(ROW_ID.match(str(r)) for r in rows)
    ):
        raise RuleFileError(
            f"{origin}: semantics must list the rows of docs/semantics.md the rule rests on "
            "(ids like A2.1 or FIX-B1)"
        )
    examples = data["examples"] or {}
    invalid = []
    for item in examples.get("invalid", []) or []:
        if isinstance(item, str):
            invalid.append(InvalidExample(code=item))
        else:
            invalid.append(InvalidExample(code=item["code"], fixed=item.get("fixed")))
    if not invalid or not examples.get("valid"):
        raise RuleFileError(f"{origin}: needs at least one valid and one invalid example")
    return RuleMeta(
        id=data["id"],
        name=data["name"],
        family=data["family"],
        severity=data["severity"],
        message=data["message"].strip(),
        help=str(data.get("help") or "").strip(),
        summary=data["summary"].strip(),
        docs=data["docs"].strip(),
        fix=data["fix"],
        semantics=tuple(str(r) for r in rows),
        valid=tuple(examples.get("valid", [])),
        invalid=tuple(invalid),
    )


@functools.cache
def all_rules() -> dict[str, RuleMeta]:
    """Every rule, by id, in id order."""
    directory = rules_dir()
    rules: dict[str, RuleMeta] = {}
    with parsed_yaml() as parse:
        for path in sorted(directory.glob("AGL*.yaml")):
            meta = parse_rule(parse(path.read_text(encoding="utf-8")), str(path))
            if meta.id != path.stem:
                raise RuleFileError(f"{path}: id {meta.id} does not match the file name")
            rules[meta.id] = meta
    if not rules:
        raise RuleFileError(f"no rule files found in {directory}")
    return rules


@contextlib.contextmanager
def parsed_yaml() -> Iterator[Callable[[str], Any]]:
    """`parse(text)`: the YAML document, reused from the last runs where the text is the
    same (importing yaml and parsing the rule files is ~0.1 s of every cold run, before any
    file is read). Keyed by the whole text, so an edited rule file is parsed again; the
    documents are plain data, validated by parse_rule either way."""
    from .runtime.kept_files import cache_file, load_owned, save_atomic

    path = cache_file("rule-documents")
    known = load_owned(path) if path is not None else None
    known = known if isinstance(known, dict) else {}
    used: dict[str, Any] = {}

    def parse(text: str) -> Any:
        if text in known:
            document = known[text]
        else:
            import yaml  # only for a text not parsed before

            document = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        used[text] = document
        return document

    yield parse
    if path is not None and used.keys() != known.keys():
        save_atomic(path, used)  # this run's texts only: an edited file's old text goes


def get_rule(key: str) -> RuleMeta | None:
    """Look a rule up by id (`AGL101`) or by name (`autograd-grad-without-enable-grad`)."""
    rules = all_rules()
    if key.upper() in rules:
        return rules[key.upper()]
    for meta in rules.values():
        if meta.name == key:
            return meta
    return None
