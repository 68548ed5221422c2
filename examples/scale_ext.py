"""A tiny real C++ extension for the family-B examples, built with load_inline on first use.

`raw_scale(g, s)` reads `g.data_ptr()` densely (ignoring strides) and returns a new tensor;
`raw_scale_(g, s)` scales `g` in place through the raw pointer. Both are how hand-written
kernels often treat their inputs. The build takes about a minute on 2 cores, then is cached.
"""

from __future__ import annotations

import os
import tempfile

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

BUILD_DIR = os.environ.get(
    "AGL_EXAMPLE_BUILD_DIR", os.path.join(tempfile.gettempdir(), "autogradlint-example-ext")
)
os.makedirs(BUILD_DIR, exist_ok=True)

scale_ext = load_inline(
    name="autogradlint_scale_ext",
    cpp_sources=[SOURCE],
    functions=["raw_scale", "raw_scale_"],
    build_directory=BUILD_DIR,
    extra_cflags=["-O1"],
    verbose=False,
)
