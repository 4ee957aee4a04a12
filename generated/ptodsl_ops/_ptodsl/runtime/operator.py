"""Calling a compiled operator: argument binding, validation, and the backends.

Arguments are validated by parameter name before anything runs: dtype (which also picks the dtype
variant), rank, symbol consistency, contiguity and device. A wrong argument raises
:class:`ArgumentError` (a ``TypeError`` or ``ValueError``) carrying a diagnostic that names the
parameter, what was expected and what was given, and points at the parameter in the ``.pto``.

A call with a torch tensor that requires grad, with grad mode on, is one autograd records
(:func:`wants_grad`): it goes through :mod:`ptodsl.runtime.torch_support`, so that its results
carry a ``grad_fn``, instead of through numpy, where torch would lose the graph without a word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .. import inputs, sym
from ..backends.memory import AllocationError, allocation_failure
from ..diagnostics import Diagnostic, DiagnosticError, did_you_mean
from ..dtypes import from_numpy, numpy_dtype
from .buffers import allocate, separate, tensor_modes, workspaces
from .program import ParamInfo, Program

BACKENDS = ("sim", "cpu", "npu")


class ArgumentError(DiagnosticError):
    """A call-time argument error; ``.diagnostic`` holds the structured form."""


class ArgumentTypeError(ArgumentError, TypeError):
    pass


class ArgumentValueError(ArgumentError, ValueError):
    pass


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def wants_grad(values: Iterable[Any]) -> bool:
    """Whether torch's autograd records a call with these arguments: one is a torch tensor that
    requires grad, and grad mode is on. Imports nothing when no argument is a torch tensor."""
    if not any(is_torch(x) and getattr(x, "requires_grad", False) for x in values):
        return False
    import torch

    return torch.is_grad_enabled()


def to_numpy(x: Any) -> np.ndarray:
    """A numpy view of a CPU torch tensor (bf16 through its bit pattern), or the array itself."""
    if is_torch(x):
        import torch

        t = x.detach()
        if t.dtype == torch.bfloat16:
            return t.contiguous().view(torch.int16).numpy().view(numpy_dtype("bf16"))
        return t.numpy()
    return x


def dtype_of(x: Any) -> tuple[str | None, str]:
    """The ptodsl dtype of an array or a torch tensor (None when ptodsl has no such element type)
    and the name to show for it: the ptodsl name, else numpy's (``float64``, ``complex64``), else
    torch's without its prefix (``float8_e4m3fn``), the same for a tensor and its numpy stand-in."""
    if is_torch(x):
        import torch

        if x.dtype == torch.bfloat16:
            return "bf16", "bf16"
        name = str(x.dtype).removeprefix("torch.")
        try:
            got = from_numpy(np.dtype(name))
        except TypeError:  # no numpy counterpart (float8, quantized, complex32)
            got = None
        return got, got or name
    got = from_numpy(x.dtype)
    return got, got or str(x.dtype)


def _torch_strided() -> Any:
    import torch

    return torch.strided


def to_torch(a: np.ndarray) -> Any:
    import torch

    if a.dtype == numpy_dtype("bf16"):
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class Operator:
    """A compiled operator; call it like a function."""

    def __init__(self, program: Program):
        self.program = program
        self.name = program.op
        self.__doc__ = program.doc or f"ptodsl operator {program.op}"
        params = program.params
        self.inputs = [p for p in params if p.is_tensor and p.mode != "out"]
        self.outputs = [p for p in params if p.is_tensor and p.mode != "in"]
        self.scalars = [p for p in params if not p.is_tensor]

    def __repr__(self) -> str:
        sig = ", ".join(p.name for p in self.program.params)
        return f"<ptodsl operator {self.name}({sig})>"

    # ------------------------------------------------------------------ calling
    def _error(self, cls: type[ArgumentError], code: str, param: ParamInfo | None, message: str, label: str,
               help: str) -> ArgumentError:
        span = param.span if param is not None else self.program.span
        return cls(Diagnostic(code, message, span, label, (), (), help))

    def bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any], str]:
        """Map positional/keyword arguments to parameters; returns (tensors, scalars, backend)."""
        kwargs = dict(kwargs)
        backend = kwargs.pop("backend", "sim")
        if backend not in BACKENDS:
            raise self._error(ArgumentValueError, "E0707", None, f"unknown backend {backend!r}",
                              "", f"use one of {', '.join(BACKENDS)}")
        tensors: dict[str, Any] = {}
        if len(args) > len(self.inputs):
            raise self._error(ArgumentTypeError, "E0704", None,
                              f"{self.name}() takes {len(self.inputs)} positional tensor argument"
                              f"{'s' if len(self.inputs) != 1 else ''} but {len(args)} were given",
                              "", "pass outputs and scalars by name, e.g. "
                              + ", ".join(f"{p.name}=..." for p in self.outputs + self.scalars))
        for p, a in zip(self.inputs, args):
            tensors[p.name] = a
        scalars: dict[str, Any] = {}
        names = {p.name: p for p in self.program.params}
        for k, v in kwargs.items():
            p = names.get(k)
            if p is None:
                raise self._error(ArgumentTypeError, "E0704", None, f"{self.name}() got an unknown argument `{k}`",
                                  "", did_you_mean(k, list(names)) or f"parameters: {', '.join(names)}")
            if k in tensors:
                raise self._error(ArgumentTypeError, "E0704", p, f"argument `{k}` given twice", "",
                                  "pass it either by position or by name")
            (tensors if p.is_tensor else scalars)[k] = v
        for p in self.inputs:
            if p.name not in tensors:
                raise self._error(ArgumentTypeError, "E0703", p, f"missing tensor argument `{p.name}`",
                                  "declared here", f"pass `{p.name}` positionally or as `{p.name}=...`")
        for p in self.scalars:
            if p.name not in scalars:
                if p.default is None:
                    raise self._error(ArgumentTypeError, "E0703", p, f"missing scalar argument `{p.name}`",
                                      "declared here without a default", f"pass it by name: `{p.name}=...`")
                scalars[p.name] = p.default
        return tensors, scalars, backend

    def resolve(self, tensors: Mapping[str, Any]) -> tuple[int, dict[str, np.ndarray], dict[str, int]]:
        """Check every tensor argument; pick the variant and bind the symbols."""
        prog = self.program
        variant: dict[str, str] = {}
        arrays: dict[str, np.ndarray] = {}
        for p in prog.params:
            if not p.is_tensor or p.name not in tensors:
                continue
            assert p.dims is not None
            x = tensors[p.name]
            if is_torch(x):
                if x.device.type != "cpu":
                    raise self._error(ArgumentValueError, "E0708", p, f"`{p.name}` is on device {x.device}",
                                      "", "the sim and cpu backends take CPU tensors; call `.cpu()` first")
            elif not isinstance(x, np.ndarray):
                raise self._error(ArgumentTypeError, "E0705", p,
                                  f"`{p.name}` must be a numpy array or torch tensor, got {type(x).__name__}",
                                  "declared as a tensor here", f"pass e.g. `np.asarray({p.name})`")
            # the dtype is checked before any conversion: numpy has no float8 or quantized dtype
            got, shown = dtype_of(x)
            want = p.dtype
            if want in prog.dtypes:
                if want in variant and variant[want] != got:
                    raise self._error(ArgumentTypeError, "E0700", p,
                                      f"`{p.name}` has dtype {shown}, but `{want}` is {variant[want]} from an earlier "
                                      "argument", f"dtype `{want}`", f"pass `{p.name}` as {variant[want]}")
                if got not in prog.dtypes[want]:
                    raise self._error(ArgumentTypeError, "E0700", p,
                                      f"`{p.name}` has dtype {shown}, expected one of "
                                      + ", ".join(prog.dtypes[want]), f"dtype `{want}`",
                                      f"convert it, e.g. to {prog.dtypes[want][0]}")
                variant[want] = got  # type: ignore[assignment]
            elif got != want:
                raise self._error(ArgumentTypeError, "E0700", p,
                                  f"`{p.name}` has dtype {shown}, expected {want}",
                                  f"declared {want} here", f"convert it to {want} first")
            if is_torch(x) and x.layout != _torch_strided():
                raise self._error(ArgumentTypeError, "E0705", p,
                                  f"`{p.name}` is a {str(x.layout).removeprefix('torch.')} tensor, not a dense one",
                                  "declared as a tensor here", f"pass `{p.name}.to_dense()`")
            a = to_numpy(x)
            if a.ndim != len(p.dims):
                raise self._error(ArgumentValueError, "E0701", p,
                                  f"`{p.name}` has rank {a.ndim} (shape {list(a.shape)}), expected rank {len(p.dims)}",
                                  f"declared with {len(p.dims)} dims here", "reshape it to match the declaration")
            arrays[p.name] = a
        for var, dts in prog.dtypes.items():
            variant.setdefault(var, dts[0])
        index = prog.kernel_for(variant)
        symbols: dict[str, int] = dict(prog.symbols)
        origin: dict[str, str] = {}
        for p in prog.params:
            if p.name not in arrays:
                continue
            a = arrays[p.name]
            for axis, d in enumerate(p.dims or ()):
                n = int(a.shape[axis])
                if isinstance(d, int):
                    if n != d:
                        raise self._error(ArgumentValueError, "E0702", p,
                                          f"`{p.name}` has {n} on dim {axis}, expected {d}",
                                          "shape declared here", f"pass a tensor with dim {axis} = {d}")
                    continue
                if d in symbols and (d in origin or d in prog.symbols):
                    if symbols[d] != n:
                        src = f"`{origin[d]}`" if d in origin else "the YAML's `symbols:`"
                        raise self._error(ArgumentValueError, "E0702", p,
                                          f"symbol `{d}` is {n} in `{p.name}` (dim {axis}) but "
                                          f"{symbols[d]} in {src}", f"`{d}` used here",
                                          "every use of one symbol must have the same size")
                else:
                    symbols[d] = n
                    origin[d] = p.name
        problem = sym.bind_defined(prog.defined, symbols)
        if problem is not None:
            at = origin.get(problem.dim) or next((origin[k] for k in sorted(problem.values) if k in origin), None)
            raise self._error(ArgumentValueError, "E0866", prog.param(at) if at else None,
                              f"the argument shapes break the spec's definition: {problem.message()}",
                              f"`{problem.dim}` is bound here" if at == origin.get(problem.dim) else "bound here",
                              f"pass tensors whose dims satisfy `{problem.dim} = {sym.to_text(problem.definition)}` "
                              "(the YAML's `symbols:`)")
        for dim, top in prog.max_dims.items():
            n = symbols.get(dim)
            if n is not None and not 1 <= n <= top:
                p = prog.param(origin[dim]) if dim in origin else None
                span = p.span if p is not None else prog.span
                if p is not None and dim in (p.dims or ()) and len(p.dim_spans) == len(p.dims or ()):
                    span = p.dim_spans[list(p.dims or ()).index(dim)] or span  # at the dim itself
                raise ArgumentValueError(Diagnostic(
                    "E0867", f"`{dim}` is {n}, outside the 1 to {top} that the spec's `max_dims:` allows", span,
                    f"`{dim}` is bound here", (), (),
                    f"pass tensors whose `{dim}` is from 1 to {top}: the kernels are tiled for at most {top}"))
        for name in prog.nondecreasing:
            self._check_nondecreasing(prog.param(name), arrays.get(name))
        return index, arrays, symbols

    def _check_nondecreasing(self, p: ParamInfo | None, a: np.ndarray | None) -> None:
        """E0732 for an input of the spec's ``nondecreasing:`` one of whose elements is below the
        one before it: the kernels may run the row ranges it bounds at once."""
        if p is None or a is None or a.ndim != 1 or a.size < 2:
            return
        values = a.astype(np.int64)
        drops = np.flatnonzero(values[1:] < values[:-1])
        if drops.size:
            k = int(drops[0]) + 1
            raise ArgumentValueError(Diagnostic(
                "E0732", f"`{p.name}[{k}]` is {int(values[k])}, below `{p.name}[{k - 1}]` = {int(values[k - 1])}: "
                "the spec's `nondecreasing:` says its elements never decrease", p.span,
                "declared nondecreasing", (), (),
                f"pass cumulative lengths (each element at least the one before it), or remove `{p.name}` from "
                "`nondecreasing:` (the rows it bounds then run one range after another)"))

    def output_shape(self, index: int, p: ParamInfo, symbols: Mapping[str, int]) -> tuple[str, tuple[int, ...]]:
        """The dtype and shape of an output no buffer was given for; E0703 when no input binds a dim."""
        dtype, shape = self.program.param_type(index, p.name)
        assert shape is not None
        unbound = sorted(set().union(*(sym.free_symbols(s) for s in shape)) - set(symbols))
        if unbound:
            dims = ", ".join(f"`{u}`" for u in unbound)
            raise self._error(ArgumentTypeError, "E0703", p,
                              f"output `{p.name}` must be passed: no input binds its dim {dims}",
                              "its size is known only from a buffer passed here",
                              f"pass a preallocated array by name, `{p.name}=np.empty(...)`, or fix "
                              f"{dims} in the YAML's `symbols:`")
        return dtype, tuple(int(sym.evaluate(s, symbols)) for s in shape)

    def backward_operator(self) -> Any:
        """The operator computing this one's gradients (its spec's ``backward:``), or None when
        there is none or it cannot be loaded from the program alone (the compiler's
        :class:`ptodsl.api.Operator` loads it from the spec)."""
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors, scalars, backend = self.bind(args, kwargs)
        if wants_grad(tensors.values()):
            from .torch_support import differentiable_call

            return differentiable_call(self, tensors, scalars, backend)
        return self.call_bound(tensors, scalars, backend)

    def call_bound(self, tensors: dict[str, Any], scalars: dict[str, Any], backend: str) -> Any:
        """Run the op on arguments :meth:`bind` has mapped to parameters (through numpy: torch
        tensors in give torch tensors out, without autograd)."""
        torch_in = any(is_torch(x) for x in tensors.values())
        index, arrays, symbols = self.resolve(tensors)
        program = self.program
        problem = inputs.check_dims(symbols, dim_spans(program))
        if problem is not None:  # before outputs of those dims are allocated
            raise ArgumentValueError(problem)
        results = []
        fresh: dict[str, tuple[tuple[int, ...], str]] = {}
        for p in self.outputs:
            if p.name in arrays:
                a, given = arrays[p.name], tensors[p.name]
                # a non-contiguous bf16 torch tensor is seen through a contiguous copy: refused too
                if not a.flags.c_contiguous or not a.flags.writeable or is_torch(given) and not given.is_contiguous():
                    raise self._error(ArgumentValueError, "E0709", p,
                                      f"output `{p.name}` must be a contiguous, writable array", "",
                                      "pass a fresh contiguous buffer (np.empty / torch.empty)")
                results.append((p.name, given))
                continue
            dtype, shape = self.output_shape(index, p, symbols)
            fresh[p.name] = (shape, dtype)
            results.append((p.name, None))
        strided = [name for name, a in arrays.items() if not a.flags.c_contiguous]
        # every buffer the call allocates, in order, against the memory of the machine (E0718)
        spans = dim_spans(program)
        made = {n: (f"output `{n}` ({list(shape)} {dtype})", inputs.buffer_bytes(shape, dtype), spans[n])
                for n, (shape, dtype) in fresh.items()}
        copied = {n: (f"the contiguous copy of input `{n}` ({list(arrays[n].shape)} {from_numpy(arrays[n].dtype)})",
                      int(arrays[n].size) * arrays[n].itemsize, spans[n]) for n in strided}
        problem = inputs.check_memory([*made.values(), *copied.values(), *workspaces(program, index, symbols)],
                                      inputs.memory_limit())
        if problem is not None:
            raise AllocationError(problem)
        for name, (shape, dtype) in fresh.items():
            arrays[name] = allocate(lambda s=shape, d=dtype: np.zeros(s, numpy_dtype(d)), made[name])
        for name in strided:
            arrays[name] = allocate(lambda a=arrays[name]: np.ascontiguousarray(a), copied[name])
        run_kernel(program, index, arrays, scalars, symbols, backend)
        outs = []
        for name, given in results:
            if given is not None:
                outs.append(given)
            else:
                outs.append(to_torch(arrays[name]) if torch_in else arrays[name])
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)


def check_divisions(program: Program, index: int, symbols: Mapping[str, int]) -> None:
    """The divisions the kernel relies on (``loop(L / BL)``) and the element counts its reshapes
    equate must hold for these dims."""
    for req in program.variants[index].requires:
        try:
            num, den = int(sym.evaluate(req.num, symbols)), int(sym.evaluate(req.den, symbols))
        except (KeyError, ValueError, TypeError, ZeroDivisionError, OverflowError):
            continue  # not decidable from the dims alone: the checker only admits dims here
        names = sorted(sym.free_symbols(req.num) | sym.free_symbols(req.den))
        values = ", ".join(f"{n} = {symbols[n]}" for n in names if n in symbols)
        a, b = sym.to_text(req.num), sym.to_text(req.den)
        if req.kind == "equal":
            if num == den:
                continue
            raise ArgumentValueError(Diagnostic(
                "E0833", f"{req.what} differ: the tensor's `{a}` is {num}, the new shape's "
                f"{str(den) if b == str(den) else f'`{b}` is {den}'} ({values})", req.span,
                "the reshape needs equal element counts", (), (),
                "pass dims for which the new shape holds exactly the elements of the old one"))
        if req.kind == "whole":
            if max(num, 0) == den:
                continue
            why = (f"has a negative extent: `{b}` is {den}" if den < 0 else
                   f"is not whole: its valid extent `{a}` is {num}, its extent `{b}` is {den}")
            raise ArgumentValueError(Diagnostic(
                "E0839", f"{req.what} {why} ({values})", req.span, "a layout op needs this extent whole", (), (),
                "pass dims for which the extent is whole, or change the slice"))
        if den != 0 and (req.kind != "exact" or num % den == 0):
            continue
        why = (f"divides by `{b}`, which is 0" if den == 0 else
               f"needs `{b}` to divide `{a}`, but {num} / {den} is not an integer")
        raise ArgumentValueError(Diagnostic(
            "E0715", f"{req.what} {why}: {values}", req.span,
            "needs an exact division", (), (),
            "pass dims that divide exactly, or write `cdiv(a, b)` (partial last block) or `a // b` "
            "(drop the remainder) in the spec"))


def dim_spans(program: Program) -> dict[str, Any]:
    """Where each parameter and each dim symbol is declared, for call-time diagnostics."""
    spans: dict[str, Any] = {}
    for p in program.params:
        spans[p.name] = p.span
        for d, s in zip(p.dims or (), p.dim_spans):
            if isinstance(d, str):
                spans.setdefault(d, s or p.span)
    return spans


def check_run(program: Program, index: int, arrays: Mapping[str, np.ndarray], scalars: dict[str, Any],
              symbols: Mapping[str, int], lengths: bool = True) -> bool:
    """Validate every runtime value of a call (see :mod:`ptodsl.inputs`); raises ArgumentError.

    Scalars in ``scalars`` are replaced by the Python numbers the kernel takes. Returns True when
    there is nothing to compute (every output is empty). ``lengths=False`` skips the values read
    from tensors, for arrays that are shape-only stand-ins of device memory.
    """
    spans = dim_spans(program)
    for p in program.params:
        if p.is_tensor:
            continue
        dtype, _ = program.param_type(index, p.name)
        value, problem = inputs.scalar_value(p.name, dtype, scalars.get(p.name), p.span)
        if problem is not None:
            raise (ArgumentTypeError if "real number" in problem.message else ArgumentValueError)(problem)
        scalars[p.name] = value
    problem = inputs.check_dims(symbols, spans)
    if problem is None:
        check_divisions(program, index, symbols)
    outputs = {p.name: arrays[p.name] for p in program.params
               if p.is_tensor and p.mode != "in" and p.name in arrays}
    empty, zero_problem = inputs.check_empty(symbols, outputs, spans)
    problem = problem or zero_problem
    if problem is None:
        problem = inputs.check_aliasing(tensor_modes(program), arrays, spans)[1]
    if problem is None and not empty and lengths:
        problem = inputs.check_lengths(program.tensor_func(index), arrays, symbols, spans)
    if problem is not None:
        raise ArgumentValueError(problem)
    return empty


def run_kernel(program: Program, index: int, arrays: dict[str, np.ndarray], scalars: Mapping[str, Any],
               symbols: dict[str, int], backend: str, poison: bool = False, level: str = "block") -> Any:
    """Run one dtype variant; the simulator runs the Block IR by default (or ``level="tile"``).

    Every runtime value is validated first (:func:`check_run`); nothing runs for empty outputs.
    Returns the simulator's machine (with its traffic and timeline) for ``sim``, else None.
    """
    scalars = dict(scalars)
    if check_run(program, index, arrays, scalars, symbols):
        return None
    arrays = separate(program, index, arrays, symbols)
    if backend == "sim":
        from ..backends import sim

        try:
            if level == "tile":
                assert program.tile is not None, "the Tile IR is kept by the compiler only"
                return sim.run(program.tile.funcs[index], arrays, scalars, symbols, poison=poison)
            return sim.run_block(program.block_module(index), program.control(index), arrays, scalars, symbols,
                                 program.target, poison=poison)
        except AllocationError:
            raise
        except MemoryError as exc:  # past the limit check: the machine refused a workspace after all
            raise allocation_failure(f"a buffer the simulator allocates for `{program.op}`", None, program.span,
                                     "in this op", (f"numpy: {type(exc).__name__}: {exc}",)) from None
    if backend == "cpu":
        from .cpu import run_variant

        run_variant(program, index, arrays, scalars, symbols, poison=poison)
        return None
    raise ArgumentValueError(Diagnostic("E0707", f"backend {backend!r} is not available yet", None, "", (), (),
                                        "use backend=\"sim\""))


__all__ = ["BACKENDS", "AllocationError", "ArgumentError", "ArgumentTypeError", "ArgumentValueError", "Operator",
           "check_run", "dim_spans", "is_torch", "run_kernel", "to_numpy", "to_torch", "wants_grad"]
