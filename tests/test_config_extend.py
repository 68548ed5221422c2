"""`extend` (a configuration inherits another, as in ruff) and `--show-settings`, which prints
every setting under the key that sets it, as a table that reads back as the same settings."""

from __future__ import annotations

import re
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, SQUARE_BUG

from autogradlint.cli import main
from autogradlint.config import (
    KNOWN_KEYS,
    SETTING_KEYS,
    Config,
    ConfigError,
    discover,
    from_mapping,
    load_file,
)
from autogradlint.settings import DEFAULT_EXTENSION_MODULES, Settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args))


# --- extend ------------------------------------------------------------------------------------
@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """A shared configuration at the top, a package below that extends it."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.autogradlint]\n"
        'ignore = ["AGL105"]\n'
        'extend-exclude = ["pkg/generated", "tools/scratch", "*.tmp"]\n'
        'native-sources = ["kernels"]\n'
        'per-file-ignores = { "pkg/tests/*" = ["AGL1"] }\n'
        "[tool.autogradlint.confirm]\n"
        "timeout = 30\n"
    )
    (tmp_path / "kernels").mkdir()
    package = tmp_path / "pkg"
    package.mkdir()
    (package / ".autogradlint.yaml").write_text(
        "extend: ../pyproject.toml\nextend-select: [AGL1]\nextend-exclude: [old]\n"
    )
    return tmp_path


def test_a_configuration_inherits_the_one_it_extends(monorepo: Path) -> None:
    config = discover(monorepo / "pkg")
    assert config.source == monorepo / "pkg" / ".autogradlint.yaml"
    assert config.root == monorepo / "pkg"
    assert config.extended == ((monorepo / "pyproject.toml").resolve(),)
    assert "AGL105" not in config.enabled_rules()
    assert config.confirm_timeout == 30
    # relative paths mean what they meant in the file that wrote them
    assert config.settings.native_sources == (str((monorepo / "kernels").resolve()),)
    assert config.extend_exclude == ("generated", "../tools/scratch", "*.tmp", "old")
    assert config.per_file_ignores == (("tests/*", ("AGL1",)),)
    assert config.is_excluded(monorepo / "pkg" / "generated" / "x.py")
    # the top's tools/scratch, not the package's
    assert not config.is_excluded(monorepo / "pkg" / "tools" / "scratch" / "x.py")
    assert "AGL101" not in config.enabled_for(monorepo / "pkg" / "tests" / "t.py")


def test_a_select_of_its_own_replaces_the_inherited_selection(monorepo: Path) -> None:
    (monorepo / "pkg" / ".autogradlint.yaml").write_text(
        "extend: ../pyproject.toml\nselect: [AGL1]\n"
    )
    config = discover(monorepo / "pkg")
    assert config.enabled_rules() == {"AGL101", "AGL102", "AGL103", "AGL104", "AGL105"}


def test_check_reads_the_extended_configuration(monorepo: Path) -> None:
    (monorepo / "pkg" / "bug.py").write_text(SQUARE_BUG)
    (monorepo / "pyproject.toml").write_text('[tool.autogradlint]\nignore = ["AGL101"]\n')
    assert run("check", "--no-cache", str(monorepo / "pkg")).exit_code == 0
    (monorepo / "pkg" / ".autogradlint.yaml").write_text("select: [ALL]\n")
    assert run("check", "--no-cache", str(monorepo / "pkg")).exit_code == 1


def test_extend_errors_name_the_file(monorepo: Path) -> None:
    config = monorepo / "pkg" / ".autogradlint.yaml"
    config.write_text("extend: ../missing.toml\n")
    with pytest.raises(ConfigError, match=r"\.autogradlint\.yaml: `extend`: .*missing\.toml"):
        discover(config)
    (monorepo / "pyproject.toml").write_text(
        '[tool.autogradlint]\nextend = "pkg/.autogradlint.yaml"\n'
    )
    config.write_text("extend: ../pyproject.toml\n")
    with pytest.raises(ConfigError, match="`extend` makes a cycle"):
        discover(config)
    (monorepo / "pyproject.toml").write_text("[tool.black]\n")
    with pytest.raises(ConfigError, match="no \\[tool.autogradlint\\] table"):
        discover(config)


@pytest.mark.parametrize(
    ("pattern", "below", "seen_from_below"),
    [
        ("pkg/generated", "pkg", "generated"),
        ("pkg/", "pkg", "*/"),  # the whole package
        ("tools/scratch", "pkg", "../tools/scratch"),  # elsewhere: matches nothing below
        ("*.tmp", "pkg", "*.tmp"),  # a name, anywhere
        ("*/gen/*.py", "pkg", "*/gen/*.py"),  # a glob first: at any depth
        ("pkg/*/gen", "pkg", "*/gen"),
        ("src/*/gen", "src/a", "gen"),
        ("src/*/gen", "src", "*/gen"),
    ],
)
def test_an_inherited_path_pattern_means_the_same_files(
    pattern: str, below: str, seen_from_below: str
) -> None:
    from autogradlint.config import _rebase_pattern

    top = Path("/repo")
    assert _rebase_pattern(pattern, top, top / below) == seen_from_below


# --- --show-settings ---------------------------------------------------------------------------
def _table(text: str) -> dict[str, object]:
    """The TOML part of --show-settings' output (the comment lines above it say where from)."""
    document = tomllib.loads(text)
    table = document["tool"]["autogradlint"]
    assert isinstance(table, dict)
    return table


def test_show_settings_round_trips(monorepo: Path) -> None:
    (monorepo / "pyproject.toml").write_text(
        (monorepo / "pyproject.toml")
        .read_text()
        .replace(
            "[tool.autogradlint]\n",
            "[tool.autogradlint]\n"
            'stride-safe-extensions = ["pkg.ops.bwd"]\n'
            'extension-loaders = ["pkg.build.load"]\n'
            'extend-extension-modules = ["mykernels"]\n',
        )
    )
    config = discover(monorepo / "pkg")
    result = run("check", "--show-settings", str(monorepo / "pkg"))
    assert result.exit_code == 0
    table = _table(result.stdout)
    printed = {key for key in table if key != "confirm"} | {"confirm"}
    assert printed <= KNOWN_KEYS  # every key it prints is one the configuration takes
    assert set(SETTING_KEYS) == {f.name for f in fields(Settings)}  # and every setting has one
    again = from_mapping(table, str(config.source), config.root)
    for name in (
        "select",
        "extend_select",
        "ignore",
        "per_file_ignores",
        "exclude",
        "extend_exclude",
        "settings",
        "confirm_factories",
        "confirm_timeout",
    ):
        assert getattr(again, name) == getattr(config, name), name
    assert again.enabled_rules() == config.enabled_rules()
    assert "# Settings path: " in result.stdout and "(extends " in result.stdout


def test_show_settings_prints_the_keys_the_configuration_takes(tmp_path: Path) -> None:
    """`stride-safe` and `loaders` were printed, and refused by the configuration."""
    text = run("check", "--show-settings", str(tmp_path)).stdout
    keys = set(re.findall(r"^([a-z-]+) = ", text, re.M))
    assert {"stride-safe-extensions", "extension-loaders", "extension-modules"} <= keys
    assert keys <= KNOWN_KEYS | {"factories", "timeout"}
    assert not {"stride-safe", "loaders", "writing", "root"} & keys


def test_the_readme_lists_the_default_extension_modules() -> None:
    readme = (ROOT / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("extension-modules = "))
    listed = tuple(re.findall(r'"([^"]+)"', line.split("#")[0]))
    assert listed == DEFAULT_EXTENSION_MODULES


def test_a_settings_file_read_back_is_the_same_configuration(tmp_path: Path) -> None:
    """What --show-settings prints, saved as a pyproject.toml, configures the same run."""
    config = Config(root=tmp_path)
    text = run("check", "--show-settings", str(tmp_path)).stdout
    saved = tmp_path / "pyproject.toml"
    saved.write_text(text)
    loaded = load_file(saved)
    assert loaded is not None
    assert loaded.settings == config.settings and loaded.exclude == config.exclude
