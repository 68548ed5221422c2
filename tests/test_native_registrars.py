"""Ops bound the way gsplat binds them: `m.impl("op_bwd", to_torch_op<&op_bwd>)` in a function
handed the library by a `TORCH_LIBRARY_IMPL` block, gradients packed in a marshalled struct, and
a backward that calls the op through a factory handed `f"{cls.base}_bwd"`.

Each end-to-end test is a small project on disk (setup.py, csrc/, a package)."""

from __future__ import annotations

from pathlib import Path

from autogradlint.config import Config
from autogradlint.native.index import NativeIndex
from autogradlint.native.scan import CHECKED, GUARDED, RAW, STRIDED, Source
from autogradlint.runner import discover, lint_paths

EXT = """\
#include <torch/extension.h>
namespace myops { void register_scale_cuda_impl(torch::Library &m); }
TORCH_LIBRARY(myops, m) {
    m.def("scale_bwd(Tensor x, Tensor? v_out, Tensor? v_aux, bool flag) -> Tensor");
    m.def("scale_l1_bwd(Tensor x, Tensor? v_out, Tensor? v_aux, bool flag) -> Tensor");
}
TORCH_LIBRARY_IMPL(myops, CUDA, m) { myops::register_scale_cuda_impl(m); }
"""
# The op takes (x, v_out, v_aux, flag); the C++ takes the two gradients as one struct that
# `TorchArgDef` flattens, in the order its `to()` lists the fields.
SCALE = """\
#include "Common.h"
struct ScaleGrad {
    static constexpr bool is_grad_bundle = true;
    at::Tensor out;
    at::optional<at::Tensor> aux;
};
template<> struct TorchArgDef<ScaleGrad> {
    static auto to(const ScaleGrad &g) { return to_torch_args(g.out, g.aux); }
};
at::Tensor scale_bwd(const at::Tensor &x, const ScaleGrad &grad, bool flag) {
    CHECK_INPUT(grad.out);
    if (grad.aux.has_value()) { CHECK_INPUT(grad.aux.value()); }
    at::Tensor v = at::empty_like(x);
    launch_scale_bwd_kernel(x, grad.out, grad.aux, v);
    return v;
}
at::Tensor scale_l1_bwd(const at::Tensor &x, const ScaleGrad &grad, bool flag) {
    at::Tensor out = grad.out.contiguous();
    at::Tensor aux = grad.aux.value().contiguous();
    at::Tensor v = at::empty_like(x);
    launch_scale_bwd_kernel(x, out, aux, v);
    return v;
}
namespace myops {
void register_scale_cuda_impl(torch::Library &m) {
    m.impl("scale_bwd", to_torch_op<&scale_bwd>);
    m.impl("scale_l1_bwd", to_torch_op<&scale_l1_bwd>);
}
}
"""
COMMON = """\
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CONTIGUOUS(x)
"""


def _index(scale: str = SCALE) -> NativeIndex:
    return NativeIndex(
        [Source("ext.cpp", EXT), Source("csrc/Scale.cpp", scale), Source("Common.h", COMMON)]
    )


# --- the C++ reader ----------------------------------------------------------------------------
def test_an_op_bound_in_a_function_handed_the_library_has_the_namespace_of_its_caller() -> None:
    """`register_scale_cuda_impl(m)` is called from `TORCH_LIBRARY_IMPL(myops, ...)` in another
    file: its `m.impl("scale_bwd", to_torch_op<&scale_bwd>)` binds `torch.ops.myops.scale_bwd`
    to `scale_bwd`."""
    index = _index()
    assert "myops" in index.namespaces
    found = index.op_evidence("myops", "scale_bwd", 0)
    assert found is not None and found.chain == ("scale_bwd",)
    assert index.op_evidence("otherns", "scale_bwd", 0) is None


def test_struct_fields_take_one_op_argument_each_in_the_marshalled_order() -> None:
    """The op's argument 1 is `grad.out` (checked), 2 is `grad.aux` (checked through
    `.value()`); in `scale_l1_bwd` `grad.out` is made contiguous first."""
    index = _index()
    out = index.op_evidence("myops", "scale_bwd", 1)
    aux = index.op_evidence("myops", "scale_bwd", 2)
    assert out is not None and (out.how, out.where) == (CHECKED, "csrc/Scale.cpp:11")
    assert aux is not None and (aux.how, aux.where) == (CHECKED, "csrc/Scale.cpp:12")
    guarded = index.op_evidence("myops", "scale_l1_bwd", 1)
    assert guarded is not None and guarded.how == GUARDED
    # without the marshalling specialization the text does not say how the struct is split
    bare = _index(SCALE.replace("return to_torch_args(g.out, g.aux);", "return pack(g);"))
    unknown = bare.op_evidence("myops", "scale_l1_bwd", 1)
    assert unknown is not None and unknown.how != GUARDED


def test_an_optional_tensor_used_through_value_is_the_tensor() -> None:
    """`CHECK_INPUT(g.value())` hands the tensor to the check; `g.value().data_ptr<float>()`
    is a raw read of it."""
    text = """
    at::Tensor f(const at::optional<at::Tensor> &g) {
        CHECK_INPUT(g.value());
        return launch(g.value().data_ptr<float>());
    }
    """
    function = Source("a.cpp", text).functions("f")[0]
    assert [how for how, _ in function.reads] == [RAW]
    assert [macro for _, macro, _ in function.macros] == ["CHECK_INPUT"]


def test_a_gradient_only_read_by_aten_and_returned_is_stride_aware() -> None:
    """gsplat's `spherical_harmonics_l0_bwd`: checks, then `return v.unsqueeze(-2).mul(c)`."""
    text = """
    at::Tensor l0_bwd(const at::Tensor &sh0, const at::Tensor &v) {
        CHECK_DENSE(v);
        TORCH_CHECK(v.dim() == 2, "v must be 2-d, got ", v.sizes());
        return v.unsqueeze(-2).mul(0.28).to(sh0.scalar_type());
    }
    at::Tensor handed_bwd(const at::Tensor &v) {
        return launch(v.view(-1));
    }
    """
    source = Source("a.cpp", text)
    assert [how for f in source.functions("l0_bwd") for how, _ in f.reads][1] == STRIDED
    assert [how for f in source.functions("handed_bwd") for how, _ in f.reads] == ["unknown"]


# --- the finding ----------------------------------------------------------------------------------
WRAPPER = """\
import torch


def _make_lazy_cuda_func(name):
    def call_cuda(*args, **kwargs):
        return getattr(torch.ops.myops, name)(*args, **kwargs)

    return call_cuda


def _register_autograd(register):
    base = register.base  # gsplat's spelling
    torch.library.register_autograd(
        f"myops::{base}", register.backward, setup_context=register.setup_context
    )


def _ensure():
    _register_autograd(ScaleHooks)
    _register_autograd(ScaleL1Hooks)


class ScaleHooks:
    base = "scale"

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, _flag = inputs
        ctx.save_for_backward(x)

    @classmethod
    def backward(cls, ctx, v_out, v_aux):
        (x,) = ctx.saved_tensors
        return _make_lazy_cuda_func({name})(x, v_out, v_aux, False), None


class ScaleL1Hooks(ScaleHooks):
    base = "scale_l1"
"""


def _project(tmp_path: Path, name: str, scale: str = SCALE) -> Path:
    root = tmp_path / "proj"
    (root / "csrc").mkdir(parents=True)
    (root / "mypkg").mkdir()
    (root / "setup.py").write_text("from setuptools import setup\nsetup(name='mypkg')\n")
    (root / "ext.cpp").write_text(EXT)
    (root / "csrc" / "Scale.cpp").write_text(scale)
    (root / "csrc" / "Common.h").write_text(COMMON)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "_wrapper.py").write_text(WRAPPER.replace("{name}", name))
    return root


def _findings(root: Path) -> list[tuple[str, int, str, str]]:
    config = Config(root=root)
    found = discover([str(root)], config, respect_gitignore=False)
    results = lint_paths(found.files, config, root=root)
    return [(f.rule_id, f.line, f.severity, f.help) for r in results for f in r.findings]


def test_an_op_called_through_a_factory_handed_the_class_base_is_read_from_its_cpp(
    tmp_path: Path,
) -> None:
    """Bad: `_make_lazy_cuda_func(f"{cls.base}_bwd")(x, v_out, ...)` is `torch.ops.myops.
    scale_bwd` (and `scale_l1_bwd` for the subclass inheriting the backward), whose C++
    CHECK_INPUTs both gradients: a warning on each, naming the C++ line."""
    found = _findings(_project(tmp_path / "bad", 'f"{cls.base}_bwd"'))
    assert [(rule, line, severity) for rule, line, severity, _ in found] == [
        ("AGL201", 34, "warning"),
        ("AGL201", 34, "warning"),
    ]
    assert all("`scale_bwd` checks contiguity (" in help_ for *_, help_ in found)
    assert all("csrc/Scale.cpp:1" in help_ for *_, help_ in found)


def test_the_op_makes_the_gradient_contiguous_so_nothing_is_found(tmp_path: Path) -> None:
    """Fixed (in the C++, as gsplat fixed it): both ops make the gradients contiguous before
    their check and the kernel."""
    fixed = SCALE.replace(
        "    CHECK_INPUT(grad.out);\n    if (grad.aux.has_value()) "
        "{ CHECK_INPUT(grad.aux.value()); }\n    at::Tensor v = at::empty_like(x);\n"
        "    launch_scale_bwd_kernel(x, grad.out, grad.aux, v);",
        "    at::Tensor out = grad.out.contiguous();\n"
        "    at::Tensor aux = grad.aux.value().contiguous();\n"
        "    at::Tensor v = at::empty_like(x);\n    launch_scale_bwd_kernel(x, out, aux, v);",
    )
    assert fixed != SCALE
    assert _findings(_project(tmp_path, 'f"{cls.base}_bwd"', fixed)) == []


def test_an_inherited_backward_is_judged_by_each_class_op(tmp_path: Path) -> None:
    """The parent's op is safe here, the subclass's (`base = "scale_l1"`) checks contiguity:
    the inherited backward still reports, naming the subclass's op."""
    swapped = (
        SCALE.replace("<&scale_bwd>", "<&TMP>")
        .replace("<&scale_l1_bwd>", "<&scale_bwd>")
        .replace("<&TMP>", "<&scale_l1_bwd>")
    )
    found = _findings(_project(tmp_path, 'f"{cls.base}_bwd"', swapped))
    assert [(rule, severity) for rule, _, severity, _ in found] == [("AGL201", "warning")] * 2
    assert all("`torch.ops.myops.scale_l1_bwd`" in help_ for *_, help_ in found)


def test_a_name_the_text_does_not_build_stays_unknown(tmp_path: Path) -> None:
    """`_make_lazy_cuda_func(ctx.op_name)`: no op name is made up; the call stays code the
    linter cannot read (a warning that says so), whatever the C++ says. A literal name is
    built: `_make_lazy_cuda_func("scale_l1_bwd")` is that op, safe in its C++."""
    found = _findings(_project(tmp_path / "unbuilt", "ctx.op_name"))
    assert [(rule, severity) for rule, _, severity, _ in found] == [("AGL201", "warning")] * 2
    assert all("is called on what a call returned" in help_ for *_, help_ in found)
    assert not any("torch.ops.myops" in help_ for *_, help_ in found)
    assert _findings(_project(tmp_path / "literal", '"scale_l1_bwd"')) == []
