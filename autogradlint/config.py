"""Configuration: [tool.autogradlint] in pyproject.toml or .autogradlint.yaml, validated strictly."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from .meta import rule_names
from .settings import DEFAULT_LOADERS, DEFAULT_STRIDE_SAFE, DEFAULT_WRITING, Settings

KNOWN_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "extension-modules",
    "extend-extension-modules",
    "stride-safe-extensions",
    "writing-extensions",
    "guard-decorators",
    "extension-loaders",
    "native-sources",
    "confirm",
    "extend",
}
DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".mypy_cache",
    ".nox",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pypackages__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "venv",
    ".autogradlint_cache",
    "__pycache__",
)


CONFIG_FILES = (".autogradlint.yaml", ".autogradlint.yml", "pyproject.toml")


class ConfigError(ValueError):
    """A configuration problem, always naming the file (and key) at fault."""


@dataclass(frozen=True)
class Config:
    """The effective configuration for one run."""

    root: Path = field(default_factory=Path.cwd)
    source: Path | None = None  # the file it came from, if any
    select: tuple[str, ...] = ("ALL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    settings: Settings = field(default_factory=Settings)
    # [tool.autogradlint.confirm]: input factories by "module:Class", and the probe timeout
    confirm_factories: tuple[tuple[str, str], ...] = ()
    confirm_timeout: float | None = None
    notes: tuple[str, ...] = ()  # warnings about how the configuration was found
    extended: tuple[Path, ...] = ()  # the files `extend` inherits from, nearest first

    def enabled_rules(self) -> frozenset[str]:
        # Config is frozen: memoise on the instance (asked once per file).
        cached = self.__dict__.get("_enabled")
        if cached is None:
            cached = expand_selectors(self.select + self.extend_select) - expand_selectors(
                self.ignore
            )
            object.__setattr__(self, "_enabled", cached)
        return cached

    def enabled_for(self, path: str | Path) -> frozenset[str]:
        """Enabled rules for one file, after per-file-ignores (patterns relative to root)."""
        enabled = self.enabled_rules()
        if not self.per_file_ignores:
            return enabled
        rel = _relative(path, self.root)
        for pattern, codes in self.per_file_ignores:
            if _glob(rel, pattern):
                enabled = enabled - expand_selectors(codes)
        return enabled

    def is_excluded(self, path: Path) -> bool:
        """Whether any component of `path` (relative to root) matches an exclude pattern."""
        rel = _relative(path, self.root)
        if any(self.excludes_name(part) for part in PurePosixPath(rel).parts):
            return True
        return self._path_regex().match(rel) is not None

    def excludes_name(self, name: str) -> bool:
        """The cheap test the directory walk uses: one entry name against the name patterns."""
        return self._name_regex().match(name) is not None

    def _name_regex(self) -> re.Pattern[str]:
        # Config is frozen: memoise on the instance (called once per directory entry).
        cached = self.__dict__.get("_name_re")
        if cached is None:
            cached = _compiled(tuple(p for p in self.exclude + self.extend_exclude if "/" not in p))
            object.__setattr__(self, "_name_re", cached)
        return cached

    def _path_regex(self) -> re.Pattern[str]:
        patterns = tuple(p.rstrip("/") for p in self.exclude + self.extend_exclude if "/" in p)
        return _compiled(patterns + tuple(f"{p}/*" for p in patterns))

    def fingerprint(self) -> str:
        """A stable text of everything that can change findings (for the cache key)."""
        return repr((sorted(self.enabled_rules()), self.per_file_ignores, self.settings))


@functools.lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str]:
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def _relative(path: str | Path, root: Path) -> str:
    path = Path(path)
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _glob(rel: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(rel, f"{pattern}/*"):
        return True
    return "/" not in pattern and fnmatch.fnmatchcase(PurePosixPath(rel).name, pattern)


def expand_selectors(selectors: Iterable[str]) -> frozenset[str]:
    """Rule ids for selectors: ALL, an id, an id prefix (AGL1), or a rule name."""
    rules = rule_names()
    out: set[str] = set()
    for selector in selectors:
        out |= set(match_selector(selector, rules))
    return frozenset(out)


def match_selector(selector: str, rules: dict[str, str] | None = None) -> list[str]:
    rules = rules or rule_names()
    sel = selector.strip()
    if sel.upper() == "ALL":
        return list(rules)
    by_name = [rid for rid, name in rules.items() if name == sel]
    if by_name:
        return by_name
    prefixed = (
        [rid for rid in rules if rid.startswith(sel.upper())]
        if sel.upper().startswith("AGL")
        else []
    )
    if prefixed:
        return prefixed
    raise ConfigError(
        f"unknown rule selector {selector!r} (expected ALL, AGL101, AGL1, or a rule name)"
    )


def _str_list(value: Any, key: str, origin: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{origin}: `{key}` must be a list of strings")
    return tuple(value)


def from_mapping(data: Any, origin: str, root: Path, *, chain: tuple[Path, ...] = ()) -> Config:
    """Build a Config from a [tool.autogradlint] table or YAML mapping; strict about keys.

    With `extend`, the named file's configuration comes first and this one's keys change it
    (`chain`: the files already being read, so that a cycle is an error)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a table of settings")
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{origin}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    base = Config(root=root)
    if "extend" in data:
        base = _rebased(_extended(data["extend"], origin, chain), root)
    lists = {
        key: _str_list(data[key], key, origin)
        for key in data
        if key not in ("per-file-ignores", "confirm", "extend")
    }
    factories, timeout = _confirm_table(data.get("confirm", {}), origin)
    for key in ("select", "extend-select", "ignore"):
        if key in lists:
            try:
                expand_selectors(lists[key])
            except ConfigError as exc:
                raise ConfigError(f"{origin}: `{key}`: {exc}") from None
    pfi: list[tuple[str, tuple[str, ...]]] = []
    raw_pfi = data.get("per-file-ignores", {})
    if not isinstance(raw_pfi, dict):
        raise ConfigError(f"{origin}: `per-file-ignores` must map glob patterns to lists of codes")
    for pattern, codes in raw_pfi.items():
        codes_t = _str_list(codes, f"per-file-ignores.{pattern}", origin)
        try:
            expand_selectors(codes_t)
        except ConfigError as exc:
            raise ConfigError(f"{origin}: `per-file-ignores.{pattern}`: {exc}") from None
        pfi.append((str(pattern), codes_t))
    settings = base.settings
    # A key replaces what the extended configuration said; an `extend-` key adds to it.
    if "extension-modules" in lists:
        settings = replace(settings, extension_modules=lists["extension-modules"])
    if "extend-extension-modules" in lists:
        settings = replace(
            settings,
            extension_modules=_joined(
                settings.extension_modules, lists["extend-extension-modules"]
            ),
        )
    # These three add to built-in defaults (empty for the first two).
    if "stride-safe-extensions" in lists:
        settings = replace(
            settings, stride_safe=_joined(DEFAULT_STRIDE_SAFE, lists["stride-safe-extensions"])
        )
    if "writing-extensions" in lists:
        settings = replace(
            settings, writing_extensions=_joined(DEFAULT_WRITING, lists["writing-extensions"])
        )
    if "extension-loaders" in lists:
        settings = replace(settings, loaders=_joined(DEFAULT_LOADERS, lists["extension-loaders"]))
    if "guard-decorators" in lists:
        settings = replace(settings, guard_decorators=lists["guard-decorators"])
    if "native-sources" in lists:
        # C/C++/CUDA outside the project tree: paths relative to the configuration file
        here = Path(origin).parent
        settings = replace(
            settings,
            native_sources=tuple(str((here / p).resolve()) for p in lists["native-sources"]),
        )
    if "select" in lists:  # a selection of its own: the extended one's is not inherited
        select = lists["select"]
        extend_select = lists.get("extend-select", ())
        ignore = lists.get("ignore", ())
    else:
        select = base.select
        extend_select = base.extend_select + lists.get("extend-select", ())
        ignore = base.ignore + lists.get("ignore", ())
    table = data.get("confirm", {})
    return replace(
        base,
        root=root,
        source=Path(origin),
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        per_file_ignores=tuple(pfi) if "per-file-ignores" in data else base.per_file_ignores,
        exclude=lists.get("exclude", base.exclude),
        extend_exclude=base.extend_exclude + lists.get("extend-exclude", ()),
        settings=settings,
        confirm_factories=factories if "factories" in table else base.confirm_factories,
        confirm_timeout=timeout if "timeout" in table else base.confirm_timeout,
    )


def _joined(first: tuple[str, ...], then: tuple[str, ...]) -> tuple[str, ...]:
    """`first`, then what `then` adds to it (each once: a list printed by --show-settings,
    defaults included, reads back as the same list)."""
    return first + tuple(dict.fromkeys(x for x in then if x not in first))


def _extended(value: Any, origin: str, chain: tuple[Path, ...]) -> Config:
    """The configuration `extend` names, relative to the file that names it (as ruff reads
    it: `~` and environment variables expanded)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{origin}: `extend` must be the path of a configuration file")
    target = Path(os.path.expandvars(os.path.expanduser(value)))
    if not target.is_absolute():
        target = Path(origin).parent / target
    target = target.resolve()
    seen = (*chain, Path(origin).resolve())
    if target in seen:
        cycle = " -> ".join(str(p) for p in (*seen, target))
        raise ConfigError(f"{origin}: `extend` makes a cycle: {cycle}")
    if not target.is_file():
        raise ConfigError(f"{origin}: `extend`: {target}: no such file")
    loaded = load_file(target, chain=seen)
    if loaded is None:
        raise ConfigError(f"{origin}: `extend`: {target}: no [tool.autogradlint] table")
    return replace(loaded, extended=(target, *loaded.extended))


def _rebased(config: Config, root: Path) -> Config:
    """An extended configuration whose path patterns (those with a `/`, relative to its own
    directory) now say the same relative to `root`."""
    old = config.root
    if old.resolve() == root.resolve():
        return config

    def moved(pattern: str) -> str:
        return _rebase_pattern(pattern, old.resolve(), root.resolve())

    return replace(
        config,
        exclude=tuple(moved(p) for p in config.exclude),
        extend_exclude=tuple(moved(p) for p in config.extend_exclude),
        per_file_ignores=tuple((moved(p), codes) for p, codes in config.per_file_ignores),
    )


_GLOB = re.compile(r"[*?\[]")


def _rebase_pattern(pattern: str, old: Path, new: Path) -> str:
    """A pattern relative to `old` as a pattern relative to `new`. A pattern without `/`
    matches a name anywhere and stays; so does one that starts with a glob (it matches at any
    depth). Otherwise its literal leading directories move (`sub/gen/*.py` seen from `sub` is
    `gen/*.py`); one that leads elsewhere is kept as `../...`, which matches nothing below
    `new`."""
    bare = pattern.rstrip("/")
    if "/" not in pattern or _GLOB.match(bare):
        return pattern
    parts = bare.split("/")
    literal = next((i for i, part in enumerate(parts) if _GLOB.search(part)), len(parts))
    fixed = old.joinpath(*parts[:literal]) if literal else old
    rest = "/".join(parts[literal:])
    trailing = "/" if pattern.endswith("/") else ""
    try:
        inside = fixed.relative_to(new).as_posix()
    except ValueError:
        try:
            above = new.relative_to(fixed).parts
        except ValueError:  # elsewhere: matches nothing below `new`
            return os.path.relpath(old / bare, new).replace(os.sep, "/") + trailing
        # `new` is below the literal part: a pattern that excludes it all, or the glob with
        # the directories `new` already went down consumed where they match literally.
        if not rest:
            return "*"
        remaining = rest.split("/")
        for part in above:
            if not remaining or not fnmatch.fnmatchcase(part, remaining[0]):
                return os.path.relpath(old / bare, new).replace(os.sep, "/") + trailing
            remaining = remaining[1:]
        return ("/".join(remaining) or "*") + trailing
    joined = "/".join(x for x in (inside if inside != "." else "", rest) if x)
    return (joined or "*") + trailing


def _confirm_table(table: Any, origin: str) -> tuple[tuple[tuple[str, str], ...], float | None]:
    if not isinstance(table, dict):
        raise ConfigError(f"{origin}: `confirm` must be a table")
    unknown = sorted(set(table) - {"factories", "timeout"})
    if unknown:
        raise ConfigError(f"{origin}: unknown key(s) confirm.{', confirm.'.join(unknown)}")
    factories = table.get("factories", {})
    if not isinstance(factories, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and ":" in k and ":" in v
        for k, v in factories.items()
    ):
        raise ConfigError(f'{origin}: `confirm.factories` maps "module:Class" to "module:function"')
    timeout = table.get("timeout")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ConfigError(f"{origin}: `confirm.timeout` must be a positive number of seconds")
    return tuple(sorted(factories.items())), float(timeout) if timeout is not None else None


# The configuration key of each Settings field.
SETTING_KEYS = {
    "extension_modules": "extension-modules",
    "stride_safe": "stride-safe-extensions",
    "writing_extensions": "writing-extensions",
    "guard_decorators": "guard-decorators",
    "loaders": "extension-loaders",
    "native_sources": "native-sources",
}


def to_toml(config: Config) -> str:
    """The effective configuration as a [tool.autogradlint] table: every value (defaults and
    inherited ones included) under the key that sets it, so the text reads back as the same
    configuration (`extend` is not written: what it brought is in the values)."""
    import json

    def text(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string

    def strings(values: Iterable[str]) -> str:
        return "[" + ", ".join(text(v) for v in values) + "]"

    def table(pairs: Iterable[tuple[str, str]]) -> str:
        inner = ", ".join(f"{text(k)} = {v}" for k, v in pairs)
        return "{ " + inner + " }" if inner else "{}"

    lines = [
        "[tool.autogradlint]",
        f"select = {strings(config.select)}",
        f"extend-select = {strings(config.extend_select)}",
        f"ignore = {strings(config.ignore)}",
        "per-file-ignores = "
        + table((pattern, strings(codes)) for pattern, codes in config.per_file_ignores),
        f"exclude = {strings(config.exclude)}",
        f"extend-exclude = {strings(config.extend_exclude)}",
    ]
    for name, key in SETTING_KEYS.items():
        lines.append(f"{key} = {strings(getattr(config.settings, name))}")
    lines += [
        "",
        "[tool.autogradlint.confirm]",
        "factories = " + table((k, text(v)) for k, v in config.confirm_factories),
    ]
    if config.confirm_timeout is not None:
        lines.append(f"timeout = {config.confirm_timeout!r}")
    return "\n".join(lines)


_TOO_DEEP = "nested too deeply to read"


def load_file(path: Path, *, chain: tuple[Path, ...] = ()) -> Config | None:
    """Read one config file; None if it is a pyproject.toml without [tool.autogradlint]."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):  # imported here: a tree without a TOML file never needs it
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        doc = _parse(path, text, "TOML", tomllib.loads, tomllib.TOMLDecodeError)
        tool = doc.get("tool", {})
        if not isinstance(tool, dict):
            raise ConfigError(f"{path}: `tool` must be a table")
        table = tool.get("autogradlint")
        if table is None and path.name == "pyproject.toml":
            return None
        return from_mapping(table, str(path), path.parent, chain=chain)

    import yaml  # only YAML configs need it

    doc = _parse(path, text, "YAML", yaml.safe_load, yaml.YAMLError)
    return from_mapping(doc, str(path), path.parent, chain=chain)


def _parse(
    path: Path,
    text: str,
    kind: str,
    parse: Callable[[str], Any],
    invalid: type[Exception],
) -> Any:
    """`text` read by `parse`, its errors as the file's ConfigError."""
    try:
        return parse(text)
    except invalid as exc:
        raise ConfigError(f"{path}: invalid {kind}: {exc}") from None
    except RecursionError:  # arrays, tables, sequences or mappings nested thousands deep
        raise ConfigError(f"{path}: invalid {kind}: {_TOO_DEEP}") from None


def discover(start: Path) -> Config:
    """The nearest .autogradlint.yaml or pyproject.toml with [tool.autogradlint] above `start`."""
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate_dir in (directory, *directory.parents):
        found: list[tuple[Path, Config]] = []
        for name in CONFIG_FILES:
            candidate = candidate_dir / name
            if candidate.is_file():
                loaded = load_file(candidate)
                if loaded is not None:
                    found.append((candidate, loaded))
        if found:
            used, config = found[0]
            if len(found) > 1:
                ignored = ", ".join(f"{path.name}" for path, _ in found[1:])
                note = (
                    f"{candidate_dir} has more than one autogradlint configuration: "
                    f"using {used.name}, ignoring {ignored}"
                )
                config = replace(config, notes=(*config.notes, note))
            return config
    return Config(root=Path.cwd())
