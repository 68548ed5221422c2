#!/usr/bin/env python3
"""Extract the .py files (and, with --native, the C/C++/CUDA sources) of a wheel or sdist into DEST.

Usage: extract_py.py ARCHIVE DEST [--native]

--native also keeps .c .cc .cpp .cxx .cu .cuh .h .hh .hpp .hxx .inl files: the kernels and the
pybind11 / TORCH_LIBRARY bindings that Python code calls, so that a tool can see what a compiled
function does with the tensors it is given.

* wheels: every *.py member is written at its path inside the wheel
  (e.g. DEST/flash_attn/flash_attn_interface.py); *.data/purelib|platlib/
  prefixes are stripped.
* sdists: the single top-level folder (name-version/) is stripped, so paths
  are relative to the sdist root (e.g. DEST/flash_attn/..., DEST/setup.py).
Members with absolute paths or '..' components are skipped.
Prints the number of files written.
"""

import os
import sys
import tarfile
import zipfile


def _safe(rel):
    rel = rel.replace("\\", "/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or rel.startswith("/") or ".." in parts:
        return None
    return "/".join(parts)


def _wheel_rel(name):
    parts = name.split("/")
    # foo-1.0.data/purelib/pkg/x.py -> pkg/x.py
    if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
        parts = parts[2:]
    return "/".join(parts)


def _strip_top(name):
    parts = name.split("/", 1)
    return parts[1] if len(parts) == 2 else ""


NATIVE = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl")


def main():
    archive, dest = sys.argv[1], sys.argv[2]
    keep = (".py",) + (NATIVE if "--native" in sys.argv[3:] else ())
    n = 0
    if archive.endswith(".whl") or (archive.endswith(".zip") and zipfile.is_zipfile(archive)):
        is_wheel = archive.endswith(".whl")
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if info.is_dir() or not info.filename.endswith(keep):
                    continue
                rel = _wheel_rel(info.filename) if is_wheel else _strip_top(info.filename)
                rel = _safe(rel)
                if rel is None:
                    continue
                out = os.path.join(dest, rel)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with zf.open(info) as src, open(out, "wb") as dst:
                    dst.write(src.read())
                n += 1
    else:
        with tarfile.open(archive) as tf:
            for m in tf.getmembers():
                if not m.isfile() or not m.name.endswith(keep):
                    continue
                rel = _safe(_strip_top(m.name))
                if rel is None:
                    continue
                out = os.path.join(dest, rel)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                f = tf.extractfile(m)
                with open(out, "wb") as dst:
                    dst.write(f.read())
                n += 1
    print(n)


if __name__ == "__main__":
    main()
