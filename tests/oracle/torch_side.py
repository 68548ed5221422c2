"""The torch side of the oracle: run generated programs under torch and say, mechanically, what
harm each one does. Run as a script in a subprocess (`python torch_side.py BATCH.json`): it
imports nothing of the oracle or of autogradlint, only torch and the programs.

A harm is a string `kind:scenario:detail`, always a difference between the program and plain
autograd on the same math (the batch's `reference`), or a side effect plain autograd never has:

- `raise:<scenario>:<Type>: <first line>`: the program raised where the reference did not;
- `wrong:<scenario>:<what>`: a gradient (`grad`, `grad2`, `sibling`) differs from the reference's;
- `changed:<scenario>:<what>`: the program changed a tensor the reference leaves alone: an
  input's values, the output the caller holds, the caller's upstream gradient (`upstream`), or
  wrote `.grad` under `torch.autograd.grad` (`leaf-grad`);
- `silent:<scenario>:<the reference's error>`: the program ran where plain autograd refuses;
- `warn:<scenario>:<Category>: <message>`: a warning plain code does not give;
- `opcheck:<test>:<message>`: `torch.library.opcheck` fails (custom ops);
- `nccl:<scenario>:<collective>`: in a process group, the program handed a `torch.distributed`
  collective a tensor NCCL refuses (`ValueError: Tensors must be contiguous`, semantics B2.11):
  the layout is observed here, on gloo, which computes on; the refusal is cited, not run.

Scenarios of the `function` driver (`model(*xs)` against `reference(*xs)`):
train (`backward` on `out + sibling`, dense upstream gradient), sum (`out.sum().backward()`: the
stride-0 gradient), grad (`torch.autograd.grad`), retain (two `autograd.grad` calls, the first
with `retain_graph=True`), double (`create_graph=True`, then second order), partial (each input
in turn without requires_grad), nonleaf (inputs `w * 1.0`, used again after the call), mutate
(inputs changed in place between forward and backward: a correct gradient or an error is fine,
a silently different gradient is not), instance (forward reached through an instance of the
Function with a stand-in ctx). The `override` driver runs ops on a Tensor subclass or inside a
mode against the same ops on plain tensors. Results go to stdout, one JSON line per program.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import re
import signal
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
torch.set_warn_always(True)  # a TORCH_WARN_ONCE warning is every program's, not the first one's
TIMEOUT_S = 20  # one program's scenarios; a hang is a verdict too
RANK = int(os.environ.get("ORACLE_RANK", "0"))
WORLD = int(os.environ.get("ORACLE_WORLD", "0"))  # 0: no process group


class Refused(Exception):
    """The scenario cannot run for this program (nothing requires grad, ...): no verdict."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    line = re.sub(r"0x[0-9a-f]+", "0x?", line)
    return f"{type(exc).__name__}: {line[:160]}"


def _value(k: int, shape: list[int]) -> torch.Tensor:
    n = math.prod(shape) if shape else 1
    base = torch.linspace(0.4, 1.6, n, dtype=torch.float64) + 0.05 * k
    return base.reshape(shape)


def _upstream(shape: torch.Size, i: int) -> torch.Tensor:
    n = math.prod(shape) if len(shape) else 1
    go = torch.linspace(0.5, 1.5, n, dtype=torch.float64).reshape(shape) * (1.0 + 0.25 * i)
    return go * (RANK + 1)


def _tensors(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        a, b = a.detach(), b.detach()
        return bool(torch.allclose(a, b, rtol=1e-7, atol=1e-10, equal_nan=True))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return a == b


class Harms:
    """The harms of one program, in order, without repeats."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, harm: str) -> None:
        if harm not in self.items:
            self.items.append(harm)
            # as it is seen: a later crash of the process keeps what was seen before it
            print("@@HARM " + harm, flush=True)


@contextlib.contextmanager
def _caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield seen


def _warnings(seen: list[warnings.WarningMessage]) -> set[str]:
    skip = ("Failed to initialize NumPy", "Using backward() with create_graph=True")
    return {
        f"{w.category.__name__}: {str(w.message).splitlines()[0][:120]}"
        for w in seen
        if not any(s in str(w.message) for s in skip)
    }


def _attempt(run: Callable[[], dict[str, Any]]) -> tuple[str, Any, set[str]]:
    """("ok", observations) or ("raise", first line), with the warnings it gave."""
    with _caught() as seen:
        try:
            return "ok", run(), _warnings(seen)
        except Refused:
            return "refused", None, set()
        except RecursionError as exc:
            return "raise", _first_line(exc), _warnings(seen)
        except Exception as exc:  # noqa: BLE001 - every exception is a verdict
            return "raise", _first_line(exc), _warnings(seen)


class Program:
    """One program as the driver sees it: its modules, model, reference and inputs."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.package = spec["package"]
        self.main = importlib.import_module(f"{self.package}.main")
        namespace: dict[str, Any] = {"torch": torch, "F": F, "oracle": _Helpers}
        exec(compile(spec.get("reference", ""), f"<{self.package} reference>", "exec"), namespace)
        self.reference = namespace.get("reference")
        self.namespace = namespace
        self.shapes: list[list[int]] = spec.get("inputs", [])
        self.nograd: set[int] = set(spec.get("nograd", []))

    def modules(self) -> list[types.ModuleType]:
        return [m for name, m in list(sys.modules.items()) if name.startswith(self.package + ".")]

    def leaves(self) -> list[torch.Tensor]:
        """Module-level leaves of the program (parameters a nested backward may reach)."""
        out = []
        for module in self.modules():
            for value in vars(module).values():
                if isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad:
                    out.append(value)
        return out

    def clear(self) -> None:
        for leaf in self.leaves():
            leaf.grad = None


# --- the function driver ---------------------------------------------------------------------


def _inputs(prog: Program, grad: set[int]) -> list[torch.Tensor]:
    return [_value(k, s).requires_grad_(k in grad) for k, s in enumerate(prog.shapes)]


def _wants(prog: Program) -> set[int]:
    return {k for k in range(len(prog.shapes)) if k not in prog.nograd}


def _differentiable(ref_out: Any) -> list[int]:
    """Output positions plain autograd differentiates (chosen on the reference)."""
    return [
        i
        for i, o in enumerate(_tensors(ref_out))
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]


def _grads(xs: list[torch.Tensor]) -> dict[str, Any]:
    return {
        f"grad{k}": (x.grad.detach().clone() if x.grad is not None else None)
        for k, x in enumerate(xs)
    }


class FunctionDriver:
    """Scenarios for `model(*xs)`: one call of the program's Function in user code."""

    def __init__(self, prog: Program, harms: Harms) -> None:
        self.prog = prog
        self.harms = harms

    def run(self) -> None:
        prog = self.prog
        wants = _wants(prog)
        # The reference decides which outputs are differentiable, and their shapes (on
        # non-leaf inputs: plain autograd refuses in-place changes of leaves, D5.2).
        state, probe, _ = _attempt(
            lambda: {
                "out": prog.reference(
                    *[x * 1.0 if x.requires_grad else x for x in _inputs(prog, wants)]
                )
            }
        )
        if state != "ok":
            self.harms.add(f"harness:reference:{probe}")
            return
        self.diff = _differentiable(probe["out"])
        self.shapes = [tuple(o.shape) for o in _tensors(probe["out"])]
        scenarios: list[tuple[str, Callable[[Callable[..., Any], set[int]], dict[str, Any]]]] = [
            ("train", self.train),
            ("sum", self.sum),
            ("grad", self.grad),
            ("retain", self.retain),
            ("double", self.double),
            ("nonleaf", self.nonleaf),
        ]
        results: dict[str, tuple[str, Any, set[str]]] = {}
        for name, scenario in scenarios:
            results[name] = self.compare(name, scenario, wants)
        for k in sorted(wants):
            if len(wants) > 1:
                self.compare("partial", self.train_plain, wants - {k})
        self.mutate(wants, results.get("train"))
        if prog.spec.get("function"):
            self.instance(wants)

    def compare(
        self,
        name: str,
        scenario: Callable[[Callable[..., Any], set[int]], dict[str, Any]],
        grad: set[int],
    ) -> tuple[str, Any, set[str]]:
        prog = self.prog
        print(f"@@SCEN {name}", flush=True)  # a crash is attributed to the scenario
        prog.clear()
        with _watching(self.harms, name):
            mine = _attempt(lambda: scenario(self.model, grad))
        prog.clear()
        ref = _attempt(lambda: scenario(prog.reference, grad))
        if "refused" in (mine[0], ref[0]):
            return ref
        for w in sorted(mine[2] - ref[2]):
            self.harms.add(f"warn:{name}:{w}")
        if mine[0] == "raise" and ref[0] != "raise":
            self.harms.add(f"raise:{name}:{mine[1]}")
        elif mine[0] == "ok" and ref[0] == "raise":
            self.harms.add(f"silent:{name}:{ref[1]}")
        elif mine[0] == "ok" and ref[0] == "ok":
            self._diff(name, mine[1], ref[1])
        return ref

    def _diff(self, name: str, mine: dict[str, Any], ref: dict[str, Any]) -> None:
        for key in sorted(set(mine) | set(ref)):
            a, b = mine.get(key), ref.get(key)
            if key.startswith("!"):  # an absolute check: any value is a harm
                if a:
                    self.harms.add(f"changed:{name}:{key[1:]}")
                continue
            if _same(a, b):
                continue
            what = re.sub(r"\d+$", "", key)
            kind = "changed" if what in ("input", "output", "upstream") else "wrong"
            self.harms.add(f"{kind}:{name}:{what}")

    def model(self, *xs: Any) -> Any:
        return self.prog.main.model(*xs)

    # Each scenario runs `call` (the program's model or the reference) on fresh inputs.
    def _forward(self, call: Callable[..., Any], xs: list[Any]) -> list[Any]:
        outs = _tensors(call(*xs))
        if len(outs) < len(self.shapes):
            raise RuntimeError(f"oracle: {len(outs)} outputs, the reference has {len(self.shapes)}")
        return outs

    def _roots(self, outs: list[Any]) -> tuple[list[Any], list[torch.Tensor]]:
        roots = [outs[i] for i in self.diff]
        ups = [_upstream(torch.Size(self.shapes[i]), i) for i in self.diff]
        if not roots:
            raise Refused()
        return roots, ups

    def train(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        xs = _inputs(self.prog, grad)
        if not grad:
            raise Refused()
        siblings = [
            torch.zeros(self.shapes[i], dtype=torch.float64, requires_grad=True) for i in self.diff
        ]
        # Created before the call, so the Function's node is newer and runs first (B2.2).
        sib = [s * 1.0 for s in siblings]
        outs = self._forward(call, xs)
        held = [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outs]
        roots, ups = self._roots(outs)
        kept = [u.clone() for u in ups]
        torch.autograd.backward([r + s for r, s in zip(roots, sib, strict=True)], ups)
        obs = _grads(xs)
        for i, s in enumerate(siblings):
            obs[f"sibling{i}"] = s.grad
        for i, (u, k) in enumerate(zip(ups, kept, strict=True)):
            obs[f"upstream{i}"] = bool(not torch.equal(u, k))
        for i, (o, h) in enumerate(zip(outs, held, strict=False)):
            if isinstance(o, torch.Tensor):
                obs[f"output{i}"] = bool(o.shape != h.shape or not torch.equal(o.detach(), h))
        for k, x in enumerate(xs):
            obs[f"input{k}"] = x.detach().clone()
        return obs

    def train_plain(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        xs = _inputs(self.prog, grad)
        if not grad:
            raise Refused()
        outs = self._forward(call, xs)
        roots, ups = self._roots(outs)
        torch.autograd.backward(roots, ups)
        return _grads(xs)

    def sum(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        xs = _inputs(self.prog, grad)
        outs = self._forward(call, xs)
        roots, _ = self._roots(outs)
        torch.autograd.backward([r.sum() for r in roots])
        return _grads(xs)

    def grad(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        xs = _inputs(self.prog, grad)
        outs = self._forward(call, xs)
        roots, ups = self._roots(outs)
        wanted = [xs[k] for k in sorted(grad)]
        got = torch.autograd.grad(roots, wanted, ups, allow_unused=True)
        obs = {f"grad{k}": g for k, g in zip(sorted(grad), got, strict=True)}
        # torch.autograd.grad never writes .grad (A2.7c): any leaf's .grad is a side effect.
        touched = [x for x in xs if x.grad is not None] + [
            p for p in self.prog.leaves() if p.grad is not None
        ]
        obs["!leaf-grad"] = bool(touched)
        return obs

    def retain(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        xs = _inputs(self.prog, grad)
        outs = self._forward(call, xs)
        roots, ups = self._roots(outs)
        wanted = [xs[k] for k in sorted(grad)]
        try:
            torch.autograd.grad(roots, wanted, ups, retain_graph=True, allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - the first call's failure is `grad`'s verdict
            raise Refused() from exc
        second = torch.autograd.grad(roots, wanted, ups, allow_unused=True)
        return {f"grad{k}": g for k, g in zip(sorted(grad), second, strict=True)}

    def double(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        """Second order, as a gradient penalty takes it: the upstream gradient requires grad
        (a loss that is not linear in the output), and the penalty goes through `.backward()`
        to the inputs and that gradient."""
        xs = _inputs(self.prog, grad)
        outs = self._forward(call, xs)
        roots, ups = self._roots(outs)
        ups = [u.requires_grad_() for u in ups]
        wanted = [xs[k] for k in sorted(grad)]
        first = torch.autograd.grad(roots, wanted, ups, create_graph=True, allow_unused=True)
        total = sum((x * x).sum() for x in wanted)
        for k, g in enumerate(first):
            if g is not None and g.requires_grad:
                total = total + (g * (0.5 + k)).sum()
        # `.backward()`, as a training step takes a penalty: it reaches an
        # @once_differentiable node's error (A5.2), which autograd.grad does not (A5.3).
        total.backward()
        obs = {
            f"grad{k}": g.detach() if g is not None else None
            for k, g in zip(sorted(grad), first, strict=True)
        }
        obs.update({f"second{k}": t.grad for k, t in enumerate(wanted + ups)})
        return obs

    def nonleaf(self, call: Callable[..., Any], grad: set[int]) -> dict[str, Any]:
        ws = _inputs(self.prog, grad)
        xs = [w * 1.0 if w.requires_grad else w for w in ws]
        outs = self._forward(call, xs)
        roots, ups = self._roots(outs)
        # The inputs used again after the call: their history must include the call (D5.1).
        again = [(x * 0.7).sum() for x in xs if x.requires_grad]
        torch.autograd.backward(
            roots + again, ups + [torch.tensor(1.0, dtype=torch.float64)] * len(again)
        )
        return _grads(ws)

    def mutate(self, grad: set[int], train_ref: tuple[str, Any, set[str]] | None) -> None:
        """One input (or the outputs) changed in place after forward: an error, or the
        gradient at the values forward saw, are fine; a different gradient without an error
        is a harm (D3.1). One at a time, so a tensor saved properly does not mask another."""
        if not train_ref or train_ref[0] != "ok":
            return
        print("@@SCEN mutate", flush=True)
        for victim in [*range(len(self.prog.shapes)), -1]:

            def run(victim: int = victim) -> dict[str, Any]:
                xs = _inputs(self.prog, grad)
                outs = self._forward(self.model, xs)
                roots, ups = self._roots(outs)
                changed = (
                    [o for o in outs if isinstance(o, torch.Tensor)] if victim < 0 else [xs[victim]]
                )
                with torch.no_grad():
                    for t in changed:
                        t.mul_(3.0)
                torch.autograd.backward(roots, ups)
                return _grads(xs)

            self.prog.clear()
            state, mine, _ = _attempt(run)
            if state != "ok":
                continue
            for key, value in mine.items():
                if not _same(value, train_ref[1].get(key)):
                    self.harms.add("wrong:mutate:grad")

    def instance(self, grad: set[int]) -> None:
        """The Function's methods reached through an instance (D2.2), with a stand-in ctx:
        forward (and setup_context), then backward."""
        cls = getattr(self.prog.main, self.prog.spec["function"], None)
        if cls is None:
            return
        base_setup = torch.autograd.Function.setup_context

        def through_instance(c: Any, *args: Any, **kwargs: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inst = c()
            custom = getattr(c.setup_context, "__func__", c.setup_context) is not getattr(
                base_setup, "__func__", base_setup
            )
            ctx = _Ctx(len(args))
            if custom:
                out = inst.forward(*args, **kwargs)
                inst.setup_context(ctx, args, out)
            else:
                out = inst.forward(ctx, *args, **kwargs)
            ones = [
                torch.ones_like(o) if isinstance(o, torch.Tensor) else None for o in _tensors(out)
            ]
            inst.backward(ctx, *ones)
            return out

        def run() -> dict[str, Any]:
            xs = _inputs(self.prog, grad)
            with torch.no_grad():
                expected = _tensors(self.model(*xs))
            cls.apply = classmethod(through_instance)
            try:
                with torch.no_grad():
                    got = _tensors(self.model(*_inputs(self.prog, grad)))
            finally:
                del cls.apply
            return {"same": all(_same(a, b) for a, b in zip(got, expected, strict=False))}

        print("@@SCEN instance", flush=True)
        state, result, _ = _attempt(run)
        if state == "raise":
            self.harms.add(f"raise:instance:{result}")
        elif state == "ok" and not result["same"]:
            self.harms.add("wrong:instance:output")


class _Ctx:
    """A permissive stand-in for a FunctionCtx, for the instance scenario only."""

    def __init__(self, n: int) -> None:
        self.needs_input_grad = (True,) * n
        self.saved_tensors: tuple[Any, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


# --- the override driver (family C): float32 inputs, so a conversion to float64 shows --------

OPS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "linear": lambda a, w, b: F.linear(a, w, b),
    "add": lambda a, w, b: torch.add(a, a),
    "mul": lambda a, w, b: a * 2,
    "matmul": lambda a, w, b: torch.matmul(a, w.t()),
    "sum": lambda a, w, b: a.sum(),
    "dtype": lambda a, w, b: a.dtype,
    "device": lambda a, w, b: a.device,
    "zeros_like": lambda a, w, b: torch.zeros_like(a, dtype=torch.float64),
    "new_zeros": lambda a, w, b: a.new_zeros((5,)),
    "to": lambda a, w, b: a.to(torch.float64),
}


def _describe(value: Any) -> Any:
    """What the caller can see of a result, read without going through any override."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunction():
            meta = (str(value.dtype), str(value.device), tuple(value.shape))
            try:
                data = (
                    value.detach().to("cpu", torch.float64).clone()
                    if value.device.type != "meta"
                    else None
                )
                if data is not None and type(data) is not torch.Tensor:
                    data = data.as_subclass(torch.Tensor)
            except Exception:  # noqa: BLE001 - a wrapper without storage: metadata only
                data = None
        return meta, data
    return repr(value), None


def run_override(prog: Program, harms: Harms) -> None:
    spec = prog.spec
    for name, op in OPS.items():

        def plain(op: Callable[..., Any] = op) -> dict[str, Any]:
            a, w, b = (_value(k, s).float() for k, s in enumerate([[3, 4], [2, 4], [2]]))
            return {"r": _describe(op(a, w, b))}

        def wrapped(op: Callable[..., Any] = op) -> dict[str, Any]:
            a, w, b = (_value(k, s).float() for k, s in enumerate([[3, 4], [2, 4], [2]]))
            if spec.get("mode"):
                with prog.main.make_mode():
                    result = op(a, w, b)
                return {"r": _describe(result)}  # read outside the mode, which may handle reads
            return {"r": _describe(op(prog.main.wrap(a), w, b))}

        ref = _attempt(plain)
        mine = _attempt(wrapped)
        for w in sorted(mine[2] - ref[2]):
            harms.add(f"warn:{name}:{w}")
        if mine[0] == "raise" and ref[0] != "raise":
            harms.add(f"raise:{name}:{mine[1]}")
        elif mine[0] == "ok" and ref[0] == "ok":
            (m_meta, m_data), (r_meta, r_data) = mine[1]["r"], ref[1]["r"]
            if isinstance(m_meta, str) or isinstance(r_meta, str):
                if m_meta != r_meta:
                    harms.add(f"wrong:{name}:value")
                continue
            for what, a, b in zip(("dtype", "device", "shape"), m_meta, r_meta, strict=True):
                if a != b:
                    harms.add(f"wrong:{name}:{what}")
            if m_meta == r_meta and m_data is not None and r_data is not None:
                if m_data.shape == r_data.shape and not torch.allclose(
                    m_data, r_data, rtol=1e-3, atol=1e-3
                ):
                    harms.add(f"wrong:{name}:value")


# --- custom ops ------------------------------------------------------------------------------


def run_opcheck(prog: Program, harms: Harms) -> None:
    cases = prog.namespace.get("opcheck_cases")
    if cases is None:
        return
    for op, args in cases(prog.main, _value):
        with _caught():
            try:
                torch.library.opcheck(op, args)
            except Exception as exc:  # noqa: BLE001 - opcheck's failure is the verdict
                if _timed_out(exc):
                    # the program's alarm went off inside opcheck (a loaded machine), which
                    # reports it as a failed test: a timeout, not a verdict on the op
                    raise TimeoutError(f"oracle: program ran past {TIMEOUT_S}s") from exc
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                found = re.search(r"(test_\w+) failed with (.*)", text)
                test, why = (found.group(1), found.group(2)) if found else ("call", text)
                harms.add(f"opcheck:{test}:{why[:120]}")


def _timed_out(exc: BaseException | None) -> bool:
    """Whether the program's own alarm (`_alarm`) is what an exception reports, wrapped or not."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, TimeoutError) or "oracle: program ran past" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


# --- what NCCL would refuse (semantics B2.11) ---------------------------------------------------

# The collectives whose NCCL implementation runs `check_gpu_single_tensor` on the tensor they
# are handed (ProcessGroupNCCL.cpp): it raises `ValueError: Tensors must be contiguous` for one
# that is not `is_contiguous(suggest_memory_format())`. Point-to-point send/recv only warn
# there (gloo raises on them, B2.10, which the program's own run shows).
NCCL_CHECKED = (
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "_all_gather_base",
    "reduce_scatter_tensor",
    "_reduce_scatter_base",
    "all_to_all_single",
)
_WATCH: tuple[Harms, str] | None = None  # the program's harms and scenario, while it runs


def _nccl_refuses(t: torch.Tensor) -> bool:
    """NCCL's test: contiguous in the memory format torch suggests for the tensor."""
    if t.is_contiguous():
        return False
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return False
    return not (t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d))


@contextlib.contextmanager
def _watching(harms: Harms, scenario: str) -> Iterator[None]:
    """Collectives the program (not the reference) calls in this scenario are watched."""
    global _WATCH
    _WATCH = (harms, scenario)
    try:
        yield
    finally:
        _WATCH = None


def _watch_collectives() -> None:
    """Wrap the NCCL-checked collectives of `torch.distributed` (before any program imports
    them by name): a tensor argument NCCL would refuse is the harm `nccl:<scenario>:<op>`.
    Observed on gloo, which computes on (B2.10); the refusal itself is B2.11's, cited."""
    dist = torch.distributed

    def watched(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if _WATCH is not None:
                tensors = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor)]
                if any(_nccl_refuses(t) for t in tensors):
                    _WATCH[0].add(f"nccl:{_WATCH[1]}:{name}")
            return real(*args, **kwargs)

        return call

    for name in NCCL_CHECKED:
        setattr(dist, name, watched(name, getattr(dist, name)))


# --- helpers references may use ---------------------------------------------------------------


class _CollectiveGrad(torch.autograd.Function):
    """Identity forward; backward runs the collective on a copy of the gradient: the trusted
    twin of a backward that runs it on the gradient itself."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, kind: str) -> torch.Tensor:
        ctx.kind = kind
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        g = g.clone()
        if WORLD:
            dist = torch.distributed
            if ctx.kind == "all_reduce":
                dist.all_reduce(g)
            elif ctx.kind == "broadcast":
                dist.broadcast(g, src=0)
            elif ctx.kind == "reduce":
                dist.reduce(g, dst=0)
        return g, None


class _Helpers:
    @staticmethod
    def collective_grad(x: torch.Tensor, kind: str) -> torch.Tensor:
        return _CollectiveGrad.apply(x, kind)


# --- main ------------------------------------------------------------------------------------


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"oracle: program ran past {TIMEOUT_S}s")


def run_program(spec: dict[str, Any]) -> dict[str, Any]:
    harms = Harms()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        with _caught():
            try:
                prog = Program(spec)
            except Exception as exc:  # noqa: BLE001 - a module that fails to import is a verdict
                harms.add(f"raise:import:{_first_line(exc)}")
                return {"id": spec["id"], "harms": harms.items}
        driver = spec.get("driver", "function")
        if driver in ("function", "customop"):
            FunctionDriver(prog, harms).run()
        if driver == "customop":
            run_opcheck(prog, harms)
        if driver == "override":
            run_override(prog, harms)
    except TimeoutError as exc:
        harms.add(f"raise:timeout:{_first_line(exc)}")
    except Exception:  # noqa: BLE001 - a harness failure is reported, not hidden
        harms.add("harness:" + traceback.format_exc(limit=3).replace("\n", " | ")[:400])
    finally:
        signal.alarm(0)
    return {"id": spec["id"], "harms": harms.items}


def main(path: str) -> None:
    with open(path) as f:
        batch = json.load(f)
    sys.path.insert(0, batch["root"])
    if WORLD:
        import datetime

        import torch.distributed as dist

        dist.init_process_group(
            "gloo",
            init_method="file://" + batch["store"],
            rank=RANK,
            world_size=WORLD,
            timeout=datetime.timedelta(seconds=30),
        )
        _watch_collectives()
    skip = set(os.environ.get("ORACLE_SKIP", "").split(",")) - {""}
    for spec in batch["programs"]:
        if spec["id"] in skip:
            continue
        print("@@START " + spec["id"], flush=True)
        print(json.dumps(run_program(spec)), flush=True)
    if WORLD:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
