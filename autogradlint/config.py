"""Configuration: [tool.autogradlint] in pyproject.toml or .autogradlint.yaml, validated strictly."""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from .meta import rule_names
from .settings import Settings

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


def from_mapping(data: Any, origin: str, root: Path) -> Config:
    """Build a Config from a [tool.autogradlint] table or YAML mapping; strict about keys."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a table of settings")
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{origin}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    config = Config(root=root, source=Path(origin))
    lists = {
        key: _str_list(data[key], key, origin)
        for key in data
        if key not in ("per-file-ignores", "confirm")
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
    settings = config.settings
    if "extension-modules" in lists:
        settings = replace(settings, extension_modules=lists["extension-modules"])
    if "extend-extension-modules" in lists:
        settings = replace(
            settings,
            extension_modules=settings.extension_modules + lists["extend-extension-modules"],
        )
    if "stride-safe-extensions" in lists:
        settings = replace(
            settings, stride_safe=settings.stride_safe + lists["stride-safe-extensions"]
        )
    if "writing-extensions" in lists:
        settings = replace(
            settings, writing_extensions=settings.writing_extensions + lists["writing-extensions"]
        )
    if "guard-decorators" in lists:
        settings = replace(settings, guard_decorators=lists["guard-decorators"])
    if "native-sources" in lists:
        # C/C++/CUDA outside the project tree: paths relative to the configuration file
        base = Path(origin).parent
        settings = replace(
            settings,
            native_sources=tuple(str((base / p).resolve()) for p in lists["native-sources"]),
        )
    if "extension-loaders" in lists:
        settings = replace(settings, loaders=settings.loaders + lists["extension-loaders"])
    return replace(
        config,
        select=lists.get("select", config.select),
        extend_select=lists.get("extend-select", ()),
        ignore=lists.get("ignore", ()),
        per_file_ignores=tuple(pfi),
        exclude=lists.get("exclude", config.exclude),
        extend_exclude=lists.get("extend-exclude", ()),
        settings=settings,
        confirm_factories=factories,
        confirm_timeout=timeout,
    )


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


_TOO_DEEP = "nested too deeply to read"


def load_file(path: Path) -> Config | None:
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
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        except RecursionError:  # arrays or tables nested thousands deep
            raise ConfigError(f"{path}: invalid TOML: {_TOO_DEEP}") from None
        tool = doc.get("tool", {})
        if not isinstance(tool, dict):
            raise ConfigError(f"{path}: `tool` must be a table")
        table = tool.get("autogradlint")
        if table is None and path.name == "pyproject.toml":
            return None
        return from_mapping(table, str(path), path.parent)

    import yaml  # only YAML configs need it

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    except RecursionError:  # sequences or mappings nested thousands deep
        raise ConfigError(f"{path}: invalid YAML: {_TOO_DEEP}") from None
    return from_mapping(doc, str(path), path.parent)


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
