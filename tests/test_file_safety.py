"""No file is harmed: `fix --apply` writes like a careful editor, and reading never hangs.

Each test is a reproduction from issue 17: the file as it was, what `fix` or `check` did to it
before, and what it must do instead."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import SQUARE_BUG

from autogradlint.cli import main
from autogradlint.fix import write

FIXED_MARK = "with torch.enable_grad():"


def fix(*paths: Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["fix", "--apply", *map(str, paths)])


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error: ")]


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.py"
    target.write_text(SQUARE_BUG)
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    result = fix(link)
    assert result.exit_code == 1, result.output  # AGL105 remains (unsafe tier)
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert FIXED_MARK in target.read_text()


def test_hard_links_stay_one_file(tmp_path: Path) -> None:
    first = tmp_path / "a.py"
    first.write_text(SQUARE_BUG)
    second = tmp_path / "b.py"
    os.link(first, second)
    fix(first)
    assert first.stat().st_ino == second.stat().st_ino
    assert FIXED_MARK in second.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(write.TEMP_SUFFIX)]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a file of another owner")
def test_root_keeps_the_owner_group_and_mode_of_another_users_file(tmp_path: Path) -> None:
    path = tmp_path / "theirs.py"
    path.write_text(SQUARE_BUG)
    os.chown(path, 4321, 4321)
    path.chmod(0o664)
    fix(path)
    info = path.stat()
    assert FIXED_MARK in path.read_text()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4321, 0o664)


def test_a_read_only_file_is_refused_and_the_run_goes_on(tmp_path: Path) -> None:
    locked = tmp_path / "locked.py"
    locked.write_text(SQUARE_BUG)
    locked.chmod(0o444)
    other = tmp_path / "other.py"
    other.write_text(SQUARE_BUG)
    result = fix(tmp_path)
    assert result.exit_code == 2
    assert any("locked.py: is read-only; not written" in e for e in _errors(result.output))
    assert locked.read_text() == SQUARE_BUG
    assert FIXED_MARK in other.read_text()


def test_an_edit_during_the_write_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.py"
    path.write_text(SQUARE_BUG)
    real_fsync = os.fsync

    def edit_meanwhile(fd: int) -> None:  # the user saves while the fix is being synced
        real_fsync(fd)
        path.write_text(SQUARE_BUG + "# my edit\n")

    monkeypatch.setattr(write.os, "fsync", edit_meanwhile)
    result = fix(path)
    assert result.exit_code == 2
    assert any("changed since it was read" in e for e in _errors(result.output))
    assert path.read_text() == SQUARE_BUG + "# my edit\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(write.TEMP_SUFFIX)]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES], ids=["ENOSPC", "EACCES"])
def test_a_write_error_is_a_per_file_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(SQUARE_BUG)
    real_open = os.open
    failed: list[str] = []

    def failing_open(path, flags, *args):  # type: ignore[no-untyped-def]
        if str(path).endswith(write.TEMP_SUFFIX) and not failed:
            failed.append(str(path))
            raise OSError(code, os.strerror(code))
        return real_open(path, flags, *args)

    monkeypatch.setattr(write.os, "open", failing_open)
    result = fix(tmp_path)
    assert result.exit_code == 2, result.output
    assert any(f"cannot write: {os.strerror(code)}" in e for e in _errors(result.output))
    texts = [(tmp_path / n).read_text() for n in ("a.py", "b.py")]
    assert texts.count(SQUARE_BUG) == 1  # one refused, untouched
    assert sum(FIXED_MARK in text for text in texts) == 1  # the other fixed


def test_a_temporary_file_left_by_a_killed_run_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(SQUARE_BUG)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".m.py.{dead.pid}{write.TEMP_SUFFIX}"
    stale.write_text("half a file")
    fix(path)
    assert not stale.exists()
    (tmp_path / "sub").mkdir()
    stale_below = tmp_path / "sub" / f".x.py.{dead.pid}{write.TEMP_SUFFIX}"
    stale_below.write_text("half a file")
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(main, ["clean"])
    finally:
        os.chdir(Path(__file__).parent)
    assert "Removed 1 temporary file" in result.output
    assert not stale_below.exists()


def test_sigterm_during_fix_leaves_every_file_old_or_new_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(200):
        (tree / f"m{i:03}.py").write_text(SQUARE_BUG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autogradlint", "fix", "--apply", str(tree)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until writing has started
        if any(FIXED_MARK in p.read_text() for p in tree.iterdir() if p.suffix == ".py"):
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert not [p.name for p in tree.iterdir() if not p.name.endswith(".py")]
    for path in tree.iterdir():
        text = path.read_text()
        assert text == SQUARE_BUG or FIXED_MARK in text


# --- reading ---------------------------------------------------------------------------------
def _check_in_subprocess(*paths: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autogradlint", "check", "--no-cache", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=timeout,  # a read that blocks fails the test instead of hanging it
    )


def test_a_fifo_named_like_python_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "bug.py").write_text(SQUARE_BUG)
    result = _check_in_subprocess(tmp_path, tmp_path / "pipe.py")
    assert "pipe.py: not a regular file (a FIFO): not read" in result.stderr
    assert "AGL101" in result.stdout


@pytest.mark.skipif(not os.path.exists("/proc/kmsg"), reason="needs /proc/kmsg")
def test_a_link_into_proc_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "kmsg.py").symlink_to("/proc/kmsg")
    (tmp_path / "bug.py").write_text(SQUARE_BUG)
    result = _check_in_subprocess(tmp_path)
    assert "kmsg.py:" in result.stderr and "not read" in result.stderr
    assert "AGL101" in result.stdout


def test_a_device_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    result = _check_in_subprocess(tmp_path / "zero.py")
    assert "zero.py: not a regular file (a device): not read" in result.stderr


@pytest.mark.parametrize("newline", ["\r", "\r\n", "mixed"])
def test_old_mac_and_mixed_line_endings_are_checked_and_kept(tmp_path: Path, newline: str) -> None:
    lines = SQUARE_BUG.splitlines(keepends=True)
    if newline == "mixed":
        text = "".join(
            line.replace("\n", "\r" if i % 2 else "\r\n") for i, line in enumerate(lines)
        )
    else:
        text = SQUARE_BUG.replace("\n", newline)
    path = tmp_path / "m.py"
    path.write_bytes(text.encode())
    checked = CliRunner().invoke(
        main, ["check", "--no-cache", "--output-format", "json", str(path)]
    )
    found = json.loads(checked.output)
    assert [(f["code"], f["location"]["row"]) for f in found] == [("AGL101", 13)]  # was clean
    fix(path)
    fixed = path.read_bytes().decode()
    assert FIXED_MARK in fixed
    if newline == "\r":
        assert "\n" not in fixed  # still an old-Mac file
    elif newline == "\r\n":
        assert fixed.count("\r\n") == fixed.count("\n")


# --- writes stay inside the checked paths (issue 34, item 4) ---------------------------------
@pytest.fixture
def linked_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A tree whose `link.py` leads out of it to another project's file; the cwd is the tree."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    victim = outside / "victim.py"
    victim.write_text(SQUARE_BUG)
    (tree / "link.py").symlink_to("../outside/victim.py")
    (tree / "own.py").write_text(SQUARE_BUG)
    monkeypatch.chdir(tree)
    return tree, victim


def test_fix_does_not_write_through_a_symlink_out_of_the_tree(
    linked_out: tuple[Path, Path],
) -> None:
    tree, victim = linked_out
    result = fix(Path("."))
    assert victim.read_text() == SQUARE_BUG  # it used to be rewritten
    assert FIXED_MARK in (tree / "own.py").read_text()  # the tree's own file is fixed
    assert result.exit_code == 2, result.output
    (error,) = _errors(result.output)
    assert error.startswith(f"error: link.py: leads through a symlink to {victim},")
    assert "outside the checked paths; not written" in error
    assert "--follow-symlinks-outside" in error


def test_follow_symlinks_outside_writes_through_when_asked(linked_out: tuple[Path, Path]) -> None:
    tree, victim = linked_out
    result = CliRunner().invoke(main, ["fix", "--apply", "--follow-symlinks-outside", "."])
    assert result.exit_code == 1, result.output  # AGL105 remains (unsafe tier)
    assert FIXED_MARK in victim.read_text()
    assert (tree / "link.py").is_symlink()


def test_add_noqa_does_not_write_through_a_symlink_out_of_the_tree(
    linked_out: tuple[Path, Path],
) -> None:
    _tree, victim = linked_out
    result = CliRunner().invoke(main, ["check", "--no-cache", "--add-noqa", "."])
    assert victim.read_text() == SQUARE_BUG  # it used to get noqa comments
    assert result.exit_code == 2, result.output
    assert any("link.py: leads through a symlink" in line for line in _errors(result.output))


# --- Ctrl-C (issue 34, item 17) --------------------------------------------------------------
def test_ctrl_c_during_fix_exits_130_and_names_the_files_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(SQUARE_BUG)
    real_replace = write._replace
    replaced: list[Path] = []

    def replace_then_ctrl_c(read: write.ReadFile, data: bytes) -> None:
        real_replace(read, data)
        replaced.append(read.path)
        if len(replaced) == 2:
            # A real SIGINT, arriving while the replace holds interrupts off: it is raised
            # once the second file is in place.
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(write, "_replace", replace_then_ctrl_c)
    result = fix(tmp_path)
    # It used to exit 1 ("findings remain") without saying that files had been rewritten.
    assert result.exit_code == 130, result.output
    written = [p for p in sorted(tmp_path.glob("*.py")) if FIXED_MARK in p.read_text()]
    assert written == sorted(replaced) and len(written) == 2
    assert "Interrupted: 2 of 5 fixed files written, the others unchanged. Written:" in (
        result.output
    )
    assert all(f"  {path}" in result.output.splitlines() for path in written)


def test_ctrl_c_during_check_exits_130_not_the_findings_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """click turns Ctrl-C into "Aborted!" and exit 1, which reads as "findings" in CI."""
    import autogradlint.cli.check as check_command

    (tmp_path / "m.py").write_text(SQUARE_BUG)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(check_command, "_lint", interrupted)
    result = CliRunner().invoke(main, ["check", "--no-cache", str(tmp_path)])
    assert result.exit_code == 130, result.output
    assert "Interrupted." in result.output
