"""The runtime confirmer: buggy examples confirmed, fixed twins not reproduced, hangs and crashes
contained; CUDA probes run only where a GPU is."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from autogradlint.cli import main
from autogradlint.confirm.plan import Target, module_name
from autogradlint.confirm.run import confirm, run_target

torch = pytest.importorskip("torch", reason="the confirmer needs torch")
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.slow
def test_confirm_examples_json() -> None:
    """Every buggy example is confirmed on CPU and every fixed twin is not reproduced (the
    family-B pair builds the C++ extension once; cached afterwards)."""
    result = CliRunner().invoke(
        main, ["confirm", "--device", "cpu", "--output-format", "json", str(EXAMPLES)]
    )
    assert result.exit_code == 1, result.output  # confirmed findings
    rows = {(r["target"], r["probe"]): r for r in json.loads(result.stdout)}
    expected = {
        ("reentrant_bug:SoftplusRecompute", "A"): "confirmed",
        ("reentrant_bug:CubeInnerBackward", "A"): "confirmed",
        ("reentrant_fixed:SoftplusRecompute", "A"): "not_reproduced",
        ("reentrant_fixed:CubeInnerBackward", "A"): "not_reproduced",
        ("extension_grads_bug:Scale", "B"): "confirmed",
        ("extension_grads_bug:ScaleInPlace", "B"): "confirmed",
        ("extension_grads_fixed:Scale", "B"): "not_reproduced",
        ("extension_grads_fixed:ScaleInPlace", "B"): "not_reproduced",
        ("torch_function_bug:UpcastTensor", "C"): "confirmed",
        ("torch_function_fixed:UpcastTensor", "C"): "not_reproduced",
        ("custom_op_bug:double", "B"): "confirmed",
        ("custom_op_bug:scaled", "arity"): "confirmed",
        ("custom_op_bug:scaled", "fake"): "confirmed",
        ("custom_op_fixed:double", "B"): "not_reproduced",
        # a fixed twin runs its buggy twin's probes too
        ("custom_op_fixed:scaled", "arity"): "not_reproduced",
        ("custom_op_fixed:scaled", "fake"): "not_reproduced",
        # triton and a GPU are not here: the import fails, and that is what they say
        ("triton_op_bug:triton_double", "B"): "could_not_run"
        if not torch.cuda.is_available()
        else "confirmed",
        ("triton_op_fixed:triton_double", "B"): "could_not_run"
        if not torch.cuda.is_available()
        else "not_reproduced",
    }
    assert {key: row["verdict"] for key, row in rows.items()} == expected
    softplus = rows[("reentrant_bug:SoftplusRecompute", "A")]["devices"]["cpu"]["evidence"]
    assert any("element 0 of tensors does not require grad" in line for line in softplus)
    writer = rows[("extension_grads_bug:ScaleInPlace", "B")]["devices"]["cpu"]["evidence"]
    assert any("version 0 -> 0" in line for line in writer)  # a raw write, not an ATen op
    # AGL413: the op without a fake fails opcheck's fake-tensor test; its fixed twin passes it
    fake = rows[("custom_op_bug:scaled", "fake")]["devices"]["cpu"]["evidence"]
    assert fake[0].startswith("opcheck test_faketensor failed: RuntimeError: There was no fake")
    twin = rows[("custom_op_fixed:scaled", "fake")]["devices"]["cpu"]["evidence"]
    assert any("test_faketensor" in line and line.endswith("passed") for line in twin)


def test_text_table_and_cuda_not_run(tmp_path: Path) -> None:
    module = tmp_path / "upcast.py"
    module.write_text((EXAMPLES / "torch_function_bug.py").read_text())
    result = CliRunner().invoke(main, ["confirm", "--device", "all", str(module)])
    assert "confirmed" in result.output
    if not torch.cuda.is_available():
        assert "cuda not run (no such device on this machine)" in result.output


def _target(tmp_path: Path, source: str, kind: str, name: str) -> Target:
    path = tmp_path / "targets_mod.py"
    path.write_text(textwrap.dedent(source))
    root, module = module_name(path)
    return Target(kind, str(path), 1, module, name, root)


BASE = """
    import os
    import signal
    import torch

    class Hangs(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            while True:
                pass

    class Crashes(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            os.kill(os.getpid(), signal.SIGSEGV)
"""


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_a_hanging_target_could_not_run(tmp_path: Path) -> None:
    outcome = run_target(_target(tmp_path, BASE, "A", "Hangs"), ["cpu"], timeout=3)
    assert outcome.verdict == "could_not_run"
    (line,) = outcome.devices["cpu"]["evidence"]
    assert line.startswith("timeout after 3s (last step: A control cpu, draw 1/3)")


def test_a_crashing_target_could_not_run(tmp_path: Path) -> None:
    outcome = run_target(_target(tmp_path, BASE, "A", "Crashes"), ["cpu"], timeout=60)
    assert outcome.verdict == "could_not_run"
    assert "exited with status -11" in outcome.devices["cpu"]["evidence"][0]


def test_missing_symbol_and_import_errors_could_not_run(tmp_path: Path) -> None:
    outcomes = confirm([_target(tmp_path, BASE, "A", "DoesNotExist")], ["cpu"], timeout=60)
    assert outcomes[0].verdict == "could_not_run"
    assert "import failed: AttributeError" in outcomes[0].devices["cpu"]["evidence"][0]
    broken = _target(tmp_path, "raise ImportError('no such extension')\n", "A", "X")
    (outcome,) = confirm([broken], ["cpu"], timeout=60)
    assert "ImportError: no such extension" in outcome.devices["cpu"]["evidence"][0]


def test_user_factory_from_config(tmp_path: Path) -> None:
    (tmp_path / "factories.py").write_text(
        "import torch\n\ndef make(dtype, device):\n"
        "    return (torch.tensor([0.5, 1.0, 1.5], dtype=dtype, device=device), 3.0)\n"
    )
    (tmp_path / "scaled.py").write_text(
        textwrap.dedent("""
        import torch

        class Scaled(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, factor):
                ctx.factor = factor
                return x * factor

            @staticmethod
            def backward(ctx, g):
                return g * ctx.factor
    """)
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.autogradlint.confirm]\nfactories = { "scaled:Scaled" = "factories:make" }\n'
    )
    result = CliRunner().invoke(
        main, ["confirm", "--device", "cpu", "--output-format", "json", str(tmp_path / "scaled.py")]
    )
    rows = json.loads(result.stdout)
    scaled = next(r for r in rows if r["target"] == "scaled:Scaled")
    assert scaled["verdict"] == "confirmed"  # AGL401: backward returns 1 gradient for 2 inputs
    assert "incorrect number of gradients (expected 2, got 1)" in json.dumps(scaled)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_and_cpu_both_run_and_agree_on_examples() -> None:
    result = CliRunner().invoke(
        main,
        [
            "confirm",
            "--device",
            "all",
            "--output-format",
            "json",
            str(EXAMPLES / "reentrant_bug.py"),
        ],
    )
    for row in json.loads(result.stdout):
        assert set(row["devices"]) == {"cpu", "cuda"}
        assert row["devices"]["cuda"]["verdict"] != "not_run"


SQUARE = """
    import torch

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            y = x * x
            return torch.autograd.grad(y, x, g)[0]
"""


def test_a_file_name_is_never_run_as_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "os;open('INJECTED','w').py").write_text(textwrap.dedent(SQUARE))
    monkeypatch.chdir(project)
    result = CliRunner().invoke(
        main, ["confirm", "--device", "cpu", "--output-format", "json", "."]
    )
    (row,) = json.loads(result.stdout)
    assert row["verdict"] == "could_not_run"
    assert "not a valid module name" in row["devices"]["cpu"]["evidence"][0]
    assert not list(tmp_path.rglob("INJECTED"))


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_a_probes_grandchild_does_not_survive_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    source = (
        BASE
        + f"""
    import subprocess
    _child = subprocess.Popen(["sleep", "300"])
    open({str(pid_file)!r}, "w").write(str(_child.pid))
    """
    )
    outcome = run_target(_target(tmp_path, source, "A", "Hangs"), ["cpu"], timeout=3)
    assert outcome.verdict == "could_not_run"
    pid = int(pid_file.read_text())
    assert (
        not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    )


def test_probes_run_outside_the_project_with_a_memory_limit(tmp_path: Path) -> None:
    source = (
        SQUARE
        + """
    open("written-by-the-probe", "w").write("x")
    """
    )
    outcome = run_target(_target(tmp_path, source, "A", "Square"), ["cpu"], timeout=120)
    assert outcome.verdict == "confirmed"
    assert not (tmp_path / "written-by-the-probe").exists()  # its cwd is a private temp dir
    greedy = (
        SQUARE
        + """
    _hog = bytearray(64 << 30)  # 64 GB: over the confirmer's cap
    """
    )
    (outcome,) = confirm([_target(tmp_path, greedy, "A", "Square")], ["cpu"], timeout=120)
    assert outcome.verdict == "could_not_run"
    assert "MemoryError" in outcome.devices["cpu"]["evidence"][0]


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_probes_sharing_one_process_are_isolated_from_each_other(tmp_path: Path) -> None:
    """One module's probes share one interpreter (torch imported once), each in a fork with its
    own timeout: a hang and a crash cost their own probe only, and the next still runs."""
    source = BASE + textwrap.indent(textwrap.dedent(SQUARE).replace("import torch\n", ""), "    ")
    module = tmp_path / "targets_mod.py"
    targets = [_target(tmp_path, source, "A", name) for name in ("Hangs", "Crashes", "Square")]
    assert module.is_file()
    hang, crash, bug = confirm(targets, ["cpu"], timeout=3)
    assert hang.devices["cpu"]["evidence"][0].startswith(
        "timeout after 3s (last step: A control cpu, draw 1/3)"
    )
    assert crash.verdict == "could_not_run"
    assert "exited with status -11" in crash.devices["cpu"]["evidence"][0]
    assert bug.verdict == "confirmed"


WRONG_INPUTS = """
    import torch

    def _scale_bwd(grad, scale):
        # what a pybind11 function says when it is handed a tensor for a float
        if not isinstance(scale, float):
            raise TypeError("scale_bwd(): incompatible function arguments")
        return grad * scale

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.scale = scale
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return _scale_bwd(grad, ctx.scale), None
"""


@pytest.mark.parametrize("probe", ["A", "B"])
def test_a_probe_that_cannot_call_the_code_is_never_confirmed(tmp_path: Path, probe: str) -> None:
    """The probe synthesises a tensor for `scale`; the code raises on every layout, the dense
    control included. That says nothing about the code: could_not_run, and what to do."""
    (outcome,) = confirm([_target(tmp_path, WRONG_INPUTS, probe, "Scale")], ["cpu"], timeout=60)
    assert outcome.verdict == "could_not_run"
    (evidence,) = outcome.devices["cpu"]["evidence"]
    assert "TypeError: scale_bwd(): incompatible function arguments" in evidence
    assert "factor" in evidence  # it says how to give the probe proper inputs


CUSTOM_OPS = """
    import torch

    def dense_read(g):
        # what a kernel indexing data_ptr() densely sees: the storage from the offset on
        flat = torch.empty(g.numel(), dtype=g.dtype)
        storage = g.untyped_storage()
        n = min(g.numel(), storage.nbytes() // g.element_size() - g.storage_offset())
        flat[:n] = torch.tensor([], dtype=g.dtype).set_(storage, g.storage_offset(), (n,))
        flat[n:] = 0
        return flat.view(g.shape)

    @torch.library.custom_op("agl_confirm::raw_double", mutates_args=())
    def raw_double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    raw_double.register_autograd(lambda ctx, g: dense_read(g) * 2)

    @torch.library.custom_op("agl_confirm::safe_double", mutates_args=())
    def safe_double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    safe_double.register_autograd(lambda ctx, g: dense_read(g.contiguous()) * 2)

    @torch.library.custom_op("agl_confirm::short", mutates_args=())
    def short(x: torch.Tensor, factor: float) -> torch.Tensor:
        return x * factor

    def _setup(ctx, inputs, output):
        ctx.factor = inputs[1]

    short.register_autograd(lambda ctx, g: g * ctx.factor, setup_context=_setup)
"""


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_custom_op_backwards_are_probed_like_functions(tmp_path: Path) -> None:
    """A torch.library custom op is called as is, its inputs built from its own signature; the
    narrow view torch.cat's backward hands it is among the layouts (pytorch/pytorch#194719)."""
    raw, safe, short = confirm(
        [
            _target(tmp_path, CUSTOM_OPS, "B", "raw_double"),
            _target(tmp_path, CUSTOM_OPS, "B", "safe_double"),
            _target(tmp_path, CUSTOM_OPS, "arity", "short"),
        ],
        ["cpu"],
        timeout=120,
    )
    assert raw.verdict == "confirmed", raw.devices
    evidence = raw.devices["cpu"]["evidence"]
    assert any("narrow view" in line for line in evidence)
    # gradcheck and opcheck feed contiguous gradients only: they pass where the layouts fail
    assert "(beside) gradcheck passed" in evidence
    assert raw.devices["cpu"]["opcheck"]["test_autograd_registration"] == "passed"
    assert safe.verdict == "not_reproduced", safe.devices
    assert short.verdict == "confirmed", short.devices
    assert "incorrect number of gradients" in short.devices["cpu"]["evidence"][0]


def test_a_backward_that_writes_a_saved_input_is_confirmed(tmp_path: Path) -> None:
    """AGL409: the B probe compares forward's inputs before and after backward."""
    source = """
        import torch

        class Doubles(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                x.mul_(2)
                return g * x
    """
    (outcome,) = confirm([_target(tmp_path, source, "B", "Doubles")], ["cpu"], timeout=120)
    assert outcome.verdict == "confirmed", outcome.devices
    assert any(
        "backward changed forward's input 0" in line for line in outcome.devices["cpu"]["evidence"]
    )


def test_the_default_probes_findings_and_their_clean_twins_and_all_probes_every_class(
    tmp_path: Path,
) -> None:
    """`Scale` is flagged in bug.py: its fixed twin in fixed.py (same name) and `Other` beside
    it are probed too; `Unrelated` in a third file only with --all; --no-clean keeps the
    flagged class alone."""
    from autogradlint.confirm.plan import plan
    from autogradlint.model import ClassSummary, FileResult, Finding

    def result(name: str, classes: list[str], flagged: str | None = None) -> FileResult:
        findings = []
        if flagged is not None:
            findings.append(
                Finding(
                    str(tmp_path / name),
                    "AGL101",
                    "x",
                    "A",
                    "error",
                    "m",
                    3,
                    1,
                    3,
                    2,
                    subject=flagged,
                )
            )
        summaries = [ClassSummary(c, i + 1, "A") for i, c in enumerate(classes)]
        return FileResult(str(tmp_path / name), findings=findings, parsed=True, classes=summaries)

    results = [
        result("bug.py", ["Scale", "Other"], flagged="Scale"),
        result("fixed.py", ["Scale"]),
        result("elsewhere.py", ["Unrelated"]),
    ]

    def probed(clean: str) -> list[tuple[str, str, bool]]:
        return [(Path(t.path).name, t.qualname, bool(t.findings)) for t in plan(results, clean)]

    assert sorted(probed("twins")) == [
        ("bug.py", "Other", False),
        ("bug.py", "Scale", True),
        ("fixed.py", "Scale", False),
    ]
    assert ("elsewhere.py", "Unrelated", False) in probed("all")
    assert probed("none") == [("bug.py", "Scale", True)]
    both = CliRunner().invoke(main, ["confirm", "--all", "--no-clean", str(tmp_path)])
    assert both.exit_code == 2 and "contradict" in both.output
    (tmp_path / "clean.py").write_text("x = 1\n")
    nothing = CliRunner().invoke(main, ["confirm", "--device", "cpu", str(tmp_path / "clean.py")])
    assert nothing.exit_code == 0 and "Nothing to probe" in nothing.output


SCHEMA_OPS = """\
import torch

lib = torch.library.Library("agl_schema", "DEF")
lib.define("scale(Tensor x, float s) -> Tensor")
lib.define("short(Tensor x, float s) -> Tensor")


def _scale(x, s):
    return x * s


lib.impl("scale", _scale, "CompositeExplicitAutograd")
lib.impl("short", _scale, "CompositeExplicitAutograd")


def _setup(ctx, inputs, output):
    ctx.s = inputs[1]


def _scale_backward(ctx, grad):
    return grad * ctx.s, None


def _short_backward(ctx, grad):
    return (grad * ctx.s,)


torch.library.register_autograd("agl_schema::scale", _scale_backward, setup_context=_setup)
torch.library.register_autograd("agl_schema::short", _short_backward, setup_context=_setup)
"""


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_an_op_defined_from_a_schema_string_is_probed_with_inputs_from_its_schema(
    tmp_path: Path,
) -> None:
    """No Python signature: `scale(Tensor x, float s)` gives the probe a tensor and 2.0. The
    op is found through torch.ops by its qualified name once the module is imported."""
    (tmp_path / "schema_ops.py").write_text(SCHEMA_OPS)
    result = CliRunner().invoke(
        main,
        ["confirm", "--device", "cpu", "--output-format", "json", str(tmp_path / "schema_ops.py")],
    )
    outcomes = {o["target"].rsplit(":", 1)[-1]: o for o in json.loads(result.output)}
    assert set(outcomes) == {"scale", "short"}, result.output
    short, scale = outcomes["short"], outcomes["scale"]
    assert short["verdict"] == "confirmed", short
    assert "incorrect number of gradients" in short["devices"]["cpu"]["evidence"][0]
    assert scale["verdict"] == "not_reproduced", scale


NO_FAKE = """
    import torch

    @torch.library.custom_op("agl_confirm_nofake::triple", mutates_args=())
    def triple(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    triple.register_autograd(lambda ctx, g: g * 3)
"""


@pytest.mark.slow  # seconds of torch subprocesses; CI runs it with -m slow
def test_a_custom_ops_opcheck_results_are_evidence_of_their_own(tmp_path: Path) -> None:
    """A custom op with a correct backward and no fake implementation: probe A reproduces
    nothing, and opcheck's test_faketensor fails (torch.compile and torch.export would).
    Each opcheck test is reported, in the evidence and under "opcheck", whatever the probe."""
    (outcome,) = confirm([_target(tmp_path, NO_FAKE, "A", "triple")], ["cpu"], timeout=120)
    assert outcome.verdict == "not_reproduced", outcome.devices
    cpu = outcome.devices["cpu"]
    assert cpu["opcheck"]["test_schema"] == "passed"
    assert cpu["opcheck"]["test_faketensor"].startswith(
        "failed: RuntimeError: There was no fake impl registered"
    )
    assert any(line.startswith("opcheck test_faketensor failed") for line in cpu["evidence"])


def test_the_table_never_cuts_a_name_when_the_output_is_no_terminal() -> None:
    """rich draws for 80 columns when it sees no terminal: a pipe or a file gets the table as
    wide as its longest row instead."""
    import io

    from rich.console import Console

    from autogradlint.confirm.report import render_confirm_table
    from autogradlint.confirm.run import Outcome

    name = "a_module_whose_name_alone_is_longer_than_a_narrow_terminal_is_wide.py"
    target = Target("A", f"/src/{name}", 12, "pkg.mod", "RecomputeWithALongName", Path("/src"))
    outcome = Outcome(
        target,
        {
            "cpu": {"verdict": "confirmed", "evidence": ["element 0 of tensors ..."]},
            "cuda": {"verdict": "not_run", "evidence": []},
        },
    )
    piped = io.StringIO()
    render_confirm_table(Console(file=piped), [outcome], ["cpu", "cuda"])
    assert f"{name}:12 RecomputeWithALongName" in piped.getvalue()
    assert "…" not in piped.getvalue()
