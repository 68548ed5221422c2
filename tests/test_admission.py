"""The gate table kept across runs (checks/admission.py): a CLI process gates files without
importing the checks (libcst) once a run kept the table, the kept gates are the registry's,
and a table derived from a module that changed since is derived again."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

from autogradlint.checks.admission import _read, _stamps, _to_data
from autogradlint.checks.registry import REGISTRY

_SCRIPT = (
    "import pickle, sys\n"
    "import autogradlint.cli  # the CLI's imports\n"
    "from autogradlint.checks.admission import can_hold_findings, gate_table\n"
    "table = gate_table()\n"
    "engine = 'libcst' in sys.modules\n"
    "admits = can_hold_findings(sys.argv[1].encode(), ['AGL402'])\n"
    "sys.stdout.buffer.write(pickle.dumps((table, engine, admits)))\n"
)
FUNCTION = "import torch\nclass Fn(torch.autograd.Function):\n    pass\n"


def _in_a_fresh_process(env: dict[str, str], source: str) -> tuple[object, bool, bool]:
    run = subprocess.run([sys.executable, "-c", _SCRIPT, source], env=env, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    return pickle.loads(run.stdout)  # type: ignore[no-any-return]


def test_a_second_cli_process_gates_without_importing_the_checks(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("AUTOGRADLINT_NO_CODE_CACHE", None)
    registry = tuple((check.codes, check.gate) for check in REGISTRY)
    first, first_engine, first_admits = _in_a_fresh_process(env, FUNCTION)
    second, second_engine, second_admits = _in_a_fresh_process(env, FUNCTION)
    _, _, rejects = _in_a_fresh_process(env, "import torch\n")
    assert first == second == registry
    assert first_engine and not second_engine  # the first derived it from the checks
    assert first_admits and second_admits and not rejects


def test_importing_the_cli_does_not_import_libcst() -> None:
    script = "import sys, autogradlint.cli, autogradlint.runner\nprint('libcst' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


def test_a_table_from_a_module_that_changed_is_not_read(tmp_path: Path) -> None:
    module = tmp_path / "check.py"
    module.write_text("gate = 1\n")
    table = tuple((check.codes, check.gate) for check in REGISTRY)
    stamps = _stamps([str(module)])
    assert _read((stamps, _to_data(table))) == table
    module.write_text("gate = 12\n")  # another size (and mtime)
    assert _read((stamps, _to_data(table))) is None
    module.unlink()
    assert _read((stamps, _to_data(table))) is None
    assert _read(("not", "a table")) is None
