"""Family C held to torch (tests/oracle, known.md K4-K9): overrides whose harm torch shows
through a module constant, a helper, or the result, each as bad code, the finding, and the
fixed code."""

from __future__ import annotations

import textwrap

from autogradlint import lint_source as lint_file

FAMILY_C = frozenset({"AGL301", "AGL302", "AGL303", "AGL304", "AGL305", "AGL306"})


def _found(source: str) -> list[tuple[str, int]]:
    result = lint_file(textwrap.dedent(source).encode(), "overrides.py", enabled=FAMILY_C)
    return [(f.rule_id, f.line) for f in result.findings]


MODE = """\
    import torch
    from torch.overrides import TorchFunctionMode

    TARGET = {target}


    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
            args = tuple(a.to(TARGET) if isinstance(a, torch.Tensor) else a for a in args)
            return func(*args, **kwargs)
    """


def test_a_device_constant_is_read_as_a_device_not_a_dtype() -> None:
    """K5: `.to(TARGET)` with `TARGET = torch.device("cuda")` moves, it does not cast."""
    assert _found(MODE.format(target='torch.device("cuda")')) == [("AGL302", 10)]
    assert _found(MODE.format(target='"cuda:1"')) == [("AGL302", 10)]
    assert _found(MODE.format(target="torch.float64")) == [("AGL301", 10)]


def test_a_meta_constant_is_the_tracing_redirect_the_rule_exempts() -> None:
    """K5/K6: `TARGET = torch.device("meta")` is `.to(torch.device("meta"))` spelled once at
    the top: the redirect tracing subclasses make (exempt, as the literal is: K7)."""
    assert _found(MODE.format(target='torch.device("meta")')) == []
    assert _found(MODE.format(target='"meta"')) == []


CAST_EACH = """\
    import torch
    from torch.overrides import TorchFunctionMode


    def _cast(a):
        return a.to(torch.float64) if isinstance(a, torch.Tensor) else a


    def _cast_all(args):
        return tuple(_cast(a) for a in args)


    def _cast_each(args):
        out = []
        for a in args:
            out.append(a.to(torch.float64) if isinstance(a, torch.Tensor) else a)
        return tuple(out)


    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
            args = {convert}
            return func(*args, **kwargs)
    """


def test_a_helper_building_a_tuple_of_conversions_converts() -> None:
    """K4: `for a in args: out.append(a.to(...))` then `return tuple(out)`."""
    assert _found(CAST_EACH.format(convert="_cast_each(args)")) == [("AGL301", 23)]


def test_a_helper_calling_a_converting_helper_converts() -> None:
    """K4: `_cast_all(args)` returns `tuple(_cast(a) for a in args)`, two helpers deep."""
    assert _found(CAST_EACH.format(convert="_cast_all(args)")) == [("AGL301", 23)]


def test_the_fixed_mode_converts_nothing() -> None:
    """The fix: the mode hands the caller's own tensors on (cast where the numerics need it)."""
    assert _found(CAST_EACH.format(convert="args")) == []


REENTER = """\
    import torch


    def _seen(args):
        return [a.shape for a in args if isinstance(a, torch.Tensor)]


    def _log(args):
        return _seen(args)


    class Tagged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
{body}
            return out
    """


def _reenter(body: str) -> str:
    return REENTER.format(body=textwrap.indent(textwrap.dedent(body), " " * 12))


def test_a_helper_reading_tensor_attributes_re_enters_the_override() -> None:
    """K9: the read in `_seen(args)` goes through `__torch_function__` again: RecursionError."""
    body = """\
        seen = _seen(args)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
    """
    assert _found(_reenter(body)) == [("AGL304", 16)]


def test_a_helper_two_calls_deep_re_enters_the_override() -> None:
    body = """\
        seen = _log(args)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
    """
    assert _found(_reenter(body)) == [("AGL304", 16)]


def test_the_helper_called_with_the_override_disabled_is_fine() -> None:
    """The fix: read under `DisableTorchFunctionSubclass()`, where reads do not dispatch."""
    body = """\
        with torch._C.DisableTorchFunctionSubclass():
            seen = _seen(args)
            out = func(*args, **kwargs)
    """
    assert _found(_reenter(body)) == []


RESULT = """\
    import torch


    class Tagged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
            out = super().__torch_function__(func, types, args, kwargs)
            if isinstance(out, torch.Tensor):
                with torch._C.DisableTorchFunctionSubclass():
                    out = {cast}
            return out
    """


def test_a_result_cast_to_a_fixed_dtype_reaches_the_caller() -> None:
    """K8: float32 in, float64 out, and `.dtype` misreported, as with a cast argument."""
    assert _found(RESULT.format(cast="out.to(torch.float64)")) == [("AGL301", 11)]
    assert _found(RESULT.format(cast="out.half()")) == [("AGL301", 11)]
    source = textwrap.dedent(RESULT.format(cast="out.half()")).encode()
    [finding] = lint_file(source, "overrides.py", enabled=FAMILY_C).findings
    assert finding.message == (
        "`Tagged.__torch_function__` changes result dtypes after redispatch: `out.half()`"
    )


def test_a_result_cast_inline_in_the_return_reaches_the_caller() -> None:
    source = """\
        import torch
        from torch.overrides import TorchFunctionMode


        class Upcast(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {})).double()
        """
    assert _found(source) == [("AGL301", 7)]


def test_a_result_cast_back_to_the_callers_dtype_is_fine() -> None:
    """The fix: return the op's own result, or cast back to a dtype read from the call."""
    assert _found(RESULT.format(cast="out.to(out.dtype)")) == []
    assert _found(RESULT.format(cast="out.to(args[0].dtype)")) == []
    assert _found(RESULT.format(cast="out")) == []


OWN_DTYPE = """\
    import torch
    from torch.overrides import TorchFunctionMode


    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
            args = tuple({conversion} if isinstance(a, torch.Tensor) else a for a in args)
            return func(*args, **kwargs)
    """


def test_a_move_to_the_tensors_own_dtype_or_device_changes_nothing() -> None:
    """The long oracle run: `a.to(a.dtype)` returns `a` itself, torch shows nothing."""
    assert _found(OWN_DTYPE.format(conversion="a.to(torch.float64)")) == [("AGL301", 8)]
    assert _found(OWN_DTYPE.format(conversion="a.to(a.dtype)")) == []
    assert _found(OWN_DTYPE.format(conversion="a.to(dtype=a.dtype)")) == []
    assert _found(OWN_DTYPE.format(conversion="a.to(a.device)")) == []
