"""A tiny real C++ extension for the family-B examples, built with load_inline on first use.

`raw_scale(g, s)` reads `g.data_ptr()` densely (ignoring strides) and returns a new tensor;
`raw_scale_(g, s)` scales `g` in place through the raw pointer. Both are how hand-written
kernels often treat their inputs. The build takes about a minute on 2 cores, then is cached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys

import torch
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor raw_scale(torch::Tensor g, double s) {
  TORCH_CHECK(g.scalar_type() == torch::kFloat && g.device().is_cpu(), "cpu float32 only");
  auto out = torch::empty(g.sizes(), g.options().memory_format(at::MemoryFormat::Contiguous));
  const float* src = g.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < g.numel(); ++i) dst[i] = src[i] * static_cast<float>(s);
  return out;
}

void raw_scale_(torch::Tensor g, double s) {
  TORCH_CHECK(g.scalar_type() == torch::kFloat && g.device().is_cpu(), "cpu float32 only");
  float* p = g.data_ptr<float>();
  for (int64_t i = 0; i < g.numel(); ++i) p[i] *= static_cast<float>(s);
}
"""

FLAGS = ["-O1"]


def build_directory() -> str:
    """A private per-user cache (mode 0700), one directory per fingerprint of everything the
    build depends on: never a predictable path in the shared temp directory (another user could
    plant a library there), and two environments never rebuild each other's copy in turn."""
    override = os.environ.get("AGL_EXAMPLE_BUILD_DIR")
    if override:
        return override
    compiler = shutil.which(os.environ.get("CXX", "c++")) or "c++"
    try:
        compiler_id = f"{compiler}:{os.stat(compiler).st_mtime_ns}"
    except OSError:
        compiler_id = compiler
    fingerprint = hashlib.sha256(
        "\0".join(
            [SOURCE, torch.__version__, sys.version, sys.prefix, compiler_id, *FLAGS]
        ).encode()
    ).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = os.path.join(cache, "autogradlint")
    path = os.path.join(base, "extensions", fingerprint)
    for directory in (base, os.path.dirname(path), path):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.lstat(directory)
        if info.st_uid != os.getuid() or info.st_mode & 0o022 or not os.path.isdir(directory):
            raise RuntimeError(f"{directory}: not a private directory of this user; remove it")
    return path


BUILD_DIR = build_directory()

scale_ext = load_inline(
    name="autogradlint_scale_ext",
    cpp_sources=[SOURCE],
    functions=["raw_scale", "raw_scale_"],
    build_directory=BUILD_DIR,
    extra_cflags=FLAGS,
    verbose=False,
)
