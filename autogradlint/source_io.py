"""Reading source files safely, and decoding them as Python does.

Only regular files are read: a FIFO, a device, or a `.py` symlink into /proc or /sys would block
the run or never end. Files are opened non-blocking (opening a FIFO for reading otherwise waits
for a writer), checked with fstat, and read to the end.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import tokenize
from pathlib import Path

from .model import FileError

# Pseudo-file systems whose "regular" files are endless or block on read (/proc/kmsg).
_PSEUDO = ("/proc/", "/sys/", "/dev/")


def read_source(path: Path | str) -> bytes | FileError:
    """The file's bytes, or a FileError saying why it cannot be read."""
    try:
        data, _ = read_regular(path)
        return data
    except IsADirectoryError:
        return FileError(str(path), "is a directory")
    except NotRegularFile as exc:
        return FileError(str(path), str(exc))
    except OSError as exc:
        return FileError(str(path), f"cannot read: {exc.strerror or exc}")


class NotRegularFile(OSError):
    """A path that names a FIFO, a device, a socket or a pseudo-file: never read."""


def read_regular(path: Path | str) -> tuple[bytes, os.stat_result]:
    """Bytes and fstat of a regular file, with one open, one fstat and usually one read (a
    quarter of what Path.read_bytes costs: it matters for the thousands of files the gates
    reject). Raises NotRegularFile for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"not a regular file ({kind_of(info.st_mode)}): not read")
        if info.st_size == 0 and os.path.realpath(path).startswith(_PSEUDO):
            raise NotRegularFile("a pseudo-file (/proc, /sys or /dev): not read")
        size = info.st_size
        try:
            data = os.read(fd, size + 1)
        except BlockingIOError:
            raise NotRegularFile("reading it would block: not read") from None
        if len(data) == size:
            return data, info
        parts = [data]  # a short read, or the file changed since fstat: read to the end
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
        return b"".join(parts), info
    finally:
        os.close(fd)


def kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def detect_encoding(data: bytes) -> str:
    """The encoding Python would read the file with (BOM, then coding cookie, else UTF-8)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding


def decode(raw: bytes) -> str | FileError:
    """Decode like Python does: BOM, then a PEP 263 coding cookie, else UTF-8. The FileError
    has no path (the caller knows it) but the line and column of the first bad byte."""
    try:
        encoding = detect_encoding(raw)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            return FileError("", f"cannot decode: {exc}")
        encoding = "utf-8"  # no cookie, and not UTF-8 in its first lines: say where
    except LookupError as exc:
        return FileError("", f"cannot decode: {exc}")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1)
        byte = raw[exc.start : exc.start + 1].hex()
        return FileError(
            "",
            f"cannot decode as {encoding}: byte 0x{byte} at line {line}, column {column + 1} "
            "(declare the encoding with a `# -*- coding: ... -*-` line)",
            line,
            column,
        )


def decode_problem(raw: bytes) -> FileError | None:
    """Why Python could not read `raw` as text (as decode() says it), or None when it can.

    For the files the gates skip, which are never decoded otherwise: an ASCII or UTF-8 file
    without a BOM or a coding cookie, nearly every file, takes one pass over its bytes."""
    second = raw.find(b"\n", raw.find(b"\n") + 1)
    head = raw if second < 0 else raw[:second]
    if not raw.startswith(codecs.BOM_UTF8) and b"coding" not in head:
        if raw.isascii():
            return None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            pass  # decode() says where
        else:
            return None
    text = decode(raw)
    return None if isinstance(text, str) else text
