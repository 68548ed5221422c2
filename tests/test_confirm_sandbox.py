"""The confirmer's sandbox holds: what the code starts dies with the run, even outside its session;
the timeout covers the import; output is capped; each child runs with limits, a private working
directory and a path that holds nothing of the project until the target is imported."""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from autogradlint.cli import main
from autogradlint.confirm import sandbox
from autogradlint.confirm.plan import Target, module_name
from autogradlint.confirm.run import confirm, run_target

torch = pytest.importorskip("torch", reason="the confirmer needs torch")

CORRECT = """
    import torch

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
"""


def _target(folder: Path, source: str, name: str = "Double", kind: str = "A") -> Target:
    path = folder / "sandboxed_mod.py"
    path.write_text(textwrap.dedent(source))
    root, module = module_name(path)
    return Target(kind, str(path), 1, module, name, root)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def pid_file(tmp_path: Path) -> Iterator[Path]:
    """Where an escaping process writes its pid; killed here if a test leaves it alive."""
    path = tmp_path / "escapee.pid"
    yield path
    if path.exists() and _alive(int(path.read_text())):
        os.kill(int(path.read_text()), signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_process_that_leaves_the_session_at_import_dies_with_the_run(
    tmp_path: Path, pid_file: Path
) -> None:
    """fork(), setsid(), fork() again and let the middle process exit: the grandchild is in a
    session of its own and an orphan, so killing the child's session misses it."""
    source = (
        f"""
    import os, time
    _pid = os.fork()
    if _pid == 0:
        os.setsid()
        if os.fork() == 0:
            with open({str(pid_file)!r} + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
            time.sleep(300)
        os._exit(0)
    os.waitpid(_pid, 0)
    while not os.path.exists({str(pid_file)!r}):
        time.sleep(0.01)
    """
        + CORRECT
    )
    (outcome,) = confirm([_target(tmp_path, source)], ["cpu"], timeout=60)
    assert outcome.verdict == "not_reproduced", outcome.devices
    assert not _alive(int(pid_file.read_text()))


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_the_timeout_covers_the_import(tmp_path: Path) -> None:
    """A module that takes 30 s to import, with a 3 s timeout: it is stopped before it ends."""
    done = tmp_path / "import-finished"
    source = f"import time\ntime.sleep(30)\nopen({str(done)!r}, 'w').close()\n" + textwrap.dedent(
        CORRECT
    )
    (outcome,) = confirm([_target(tmp_path, source)], ["cpu"], timeout=3)
    assert outcome.verdict == "could_not_run"
    assert "importing sandboxed_mod took longer than 3s" in outcome.devices["cpu"]["evidence"][0]
    assert not done.exists()


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_output_is_capped_and_the_verdict_survives_it(tmp_path: Path) -> None:
    """4 MB printed at import (64 times what is kept, many times the pipe's buffer): the parent
    keeps the head and the tail, and still reads the verdict."""
    source = "import sys\nsys.stdout.write('x' * (4 << 20))\n" + textwrap.dedent(CORRECT)
    target = _target(tmp_path, source)
    done = sandbox.run(["A", target.spec, "cpu", "", "60"], target.root, 60, ["cpu"])
    assert done.returncode == 0
    assert len(done.stdout) < 2 * sandbox.KEEP_BYTES + 200
    assert f"[{(4 << 20) - 2 * sandbox.KEEP_BYTES} bytes left out]" in done.stdout
    (outcome,) = confirm([target], ["cpu"], timeout=60)
    assert outcome.verdict == "not_reproduced", outcome.devices


EXITS = """
    import os
    import torch

    class Exits(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            os._exit(0)
"""


def test_a_probe_that_exits_with_status_0_is_reported_as_such(tmp_path: Path) -> None:
    """Not "status -9": the process ended, successfully, before the probe had a result."""
    target = _target(tmp_path, EXITS, "Exits")
    for outcome in (confirm([target], ["cpu"], timeout=60)[0], run_target(target, ["cpu"], 60)):
        assert outcome.verdict == "could_not_run"
        (line,) = outcome.devices["cpu"]["evidence"]
        assert "exited with status 0 during the probe, without a result" in line
        assert "A control cpu" in line  # the step it was in


def test_files_the_child_writes_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RLIMIT_FSIZE: with a 1 MB cap, writing 2 MB fails (Python ignores SIGXFSZ, so the write
    raises instead of killing the process)."""
    monkeypatch.setattr(sandbox, "LIMITS", sandbox.Limits(file_mb=1))
    source = "open('big', 'wb').write(b'x' * (2 << 20))\n" + textwrap.dedent(CORRECT)
    (outcome,) = confirm([_target(tmp_path, source)], ["cpu"], timeout=60)
    assert outcome.verdict == "could_not_run"
    assert "File too large" in outcome.devices["cpu"]["evidence"][0]


def test_the_child_has_a_process_limit_and_its_own_session(tmp_path: Path) -> None:
    """RLIMIT_NPROC is set below the caller's (it counts the user's processes, so it is the
    user's count plus a margin); root ignores it, which the README says."""
    import resource

    report = tmp_path / "limits"
    source = (
        "import os, resource\n"
        f"open({str(report)!r}, 'w').write('%d %d' % ("
        "resource.getrlimit(resource.RLIMIT_NPROC)[0], os.getsid(0) == os.getpid()))\n"
        + textwrap.dedent(CORRECT)
    )
    confirm([_target(tmp_path, source)], ["cpu"], timeout=60)
    nproc, leader = map(int, report.read_text().split())
    mine = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    assert nproc != resource.RLIM_INFINITY
    assert mine == resource.RLIM_INFINITY or nproc < mine
    assert leader == 1


def test_the_projects_files_are_not_on_the_path_of_the_tools_own_imports(tmp_path: Path) -> None:
    """A project file named like a module the confirmer imports (`json`) is never run in its
    place; the project's own modules still import, as the target needs them."""
    marker = tmp_path / "shadowed"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "helper.py").write_text("FACTOR = 2\n")
    source = textwrap.dedent(CORRECT).replace("import torch", "import torch\nimport helper")
    (outcome,) = confirm([_target(tmp_path, source)], ["cpu"], timeout=60)
    assert outcome.verdict == "not_reproduced", outcome.devices
    assert not marker.exists()


def test_help_and_readme_say_what_the_sandbox_does_not_stop() -> None:
    text = CliRunner().invoke(main, ["confirm", "--help"]).output
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Confirming findings at runtime", 1)[1].split("\n## ", 1)[0]
    for said in (text, section):
        flat = " ".join(said.split())
        assert "network" in flat
        assert "outside" in flat  # files outside its temporary directory


PRINTS_A_VERDICT = """
    import os
    import torch

    class Prints(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            print('@@RESULT 0 {"devices": {"cpu": {"verdict": "confirmed", "evidence": ["x"]}}}')
            print('{"devices": {"cpu": {"verdict": "confirmed", "evidence": ["x"]}}}')
            print("{not json", flush=True)
            os._exit(3)
"""


def test_nothing_the_code_prints_is_read_as_a_verdict(tmp_path: Path) -> None:
    """The protocol has a pipe of its own: lines printed like a result (or like broken JSON)
    are the code's output, and the probe that ended with status 3 says so."""
    target = _target(tmp_path, PRINTS_A_VERDICT, "Prints")
    for outcome in (confirm([target], ["cpu"], timeout=60)[0], run_target(target, ["cpu"], 60)):
        assert outcome.verdict == "could_not_run", outcome.devices
        assert "exited with status 3" in outcome.devices["cpu"]["evidence"][0]
