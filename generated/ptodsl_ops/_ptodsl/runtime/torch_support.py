"""The torch side of a generated package: what its ``torch_ops`` module's custom ops call.

Only imported when torch is: a generated package imports it from ``torch_ops``, which is imported
only when torch is installed.

The custom ops are functional (``mutates_args=()``): outputs are allocated inside, and an in-out
tensor is cloned and returned updated, so no result aliases an argument, as
``torch.library.opcheck`` and ``torch.compile`` require. The fake implementation gives every
result its shape from the out parameter's declared dims, with symbols bound from the inputs'
shapes (so symbolic sizes under ``torch.compile(dynamic=True)`` flow through), and its dtype from
the dtype variant the inputs select. Before that it checks the arguments exactly as the real op
does (:meth:`PackagedOp.validate`, the checks of a sim call without reading data), so a wrong
dtype, rank or fixed dim fails while tracing with the diagnostic the real call would raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..diagnostics import Diagnostic, DiagnosticError
from ..dtypes import numpy_dtype
from .package import PackagedOp

# ptodsl dtype -> torch dtype attribute.
TORCH_DTYPES: dict[str, str] = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32",
}


# Torch dtypes numpy also has that are not ptodsl dtypes, by their common name.
_OTHER_NUMPY_DTYPES = ("float64", "complex64", "complex128", "uint16", "uint32", "uint64")


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, TORCH_DTYPES[name])


def numpy_dtype_of(dtype: torch.dtype) -> np.dtype | None:
    """The numpy dtype of a torch dtype (float64 too, so that checks can name it), else None."""
    for name, attr in TORCH_DTYPES.items():
        if getattr(torch, attr) == dtype:
            return numpy_dtype(name)
    for attr in _OTHER_NUMPY_DTYPES:  # not an op's dtype: only to name it in the diagnostic
        if getattr(torch, attr, None) == dtype:
            return np.dtype(attr)
    return None  # no numpy equivalent (float8, ...)


def size_hints(t: torch.Tensor) -> tuple[int, ...] | None:
    """``t``'s shape as ints: a symbolic size (``torch.compile(dynamic=True)``) gives the value it is
    traced with, read without adding a guard, so checking it does not specialise the graph. None
    when a size has no such value (a data-dependent size)."""
    sizes = []
    for n in t.shape:
        if not isinstance(n, int):
            n = getattr(getattr(n, "node", None), "hint", None)
            if not isinstance(n, int):
                return None
        sizes.append(int(n))
    return tuple(sizes)


def _results(values: Sequence[torch.Tensor]) -> torch.Tensor | tuple[torch.Tensor, ...]:
    return values[0] if len(values) == 1 else tuple(values)


def run(op: PackagedOp, inputs: Sequence[torch.Tensor], scalars: Mapping[str, Any],
        backend: str = "sim") -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The real implementation: the op on CPU tensors, through the packaged wrapper's checks."""
    operator = op.operator
    args = list(inputs)
    for i, p in enumerate(operator.inputs):
        if p.mode == "inout":
            args[i] = args[i].clone(memory_format=torch.contiguous_format)
    result = op(tuple(args), {}, dict(scalars), backend=backend)
    return _results(result if isinstance(result, tuple) else (result,))


def npu_available() -> bool:
    """Whether torch_npu imports; importing it renames torch's PrivateUse1 device to "npu", which is
    what lets the generated ops register an "npu" kernel."""
    try:
        import torch_npu  # noqa: F401
    except ImportError:
        return False
    return True


def run_npu(op: PackagedOp, inputs: Sequence[torch.Tensor], scalars: Mapping[str, Any]
            ) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The PrivateUse1 ("npu") kernel of a generated op: NPU tensors in, passed as device pointers
    to the variant's host program on the current torch_npu stream of their device."""
    operator = op.operator
    args = list(inputs)
    for i, p in enumerate(operator.inputs):
        if p.mode == "inout":
            args[i] = args[i].clone(memory_format=torch.contiguous_format)
    device = next((t.device for t in args if t.device.type != "cpu"), None)
    result = op(tuple(args), {}, dict(scalars), backend="npu", device=device)
    return _results(result if isinstance(result, tuple) else (result,))


def fake(op: PackagedOp, inputs: Sequence[torch.Tensor],
         scalars: Mapping[str, Any] | None = None) -> torch.Tensor | tuple[torch.Tensor, ...]:
    """The fake (meta) implementation: the real op's argument checks, then empty results of the
    right shapes and dtypes."""
    if all(size_hints(t) is not None for t in inputs):
        op.validate(tuple(inputs), dict(scalars or {}))
    operator = op.operator
    prog = operator.program
    symbols: dict[str, Any] = dict(prog.symbols)
    dtypes: dict[str, torch.dtype] = {}
    given: dict[str, torch.Tensor] = {}
    for p, t in zip(operator.inputs, inputs):
        given[p.name] = t
        for d, n in zip(p.dims or (), t.shape):
            if isinstance(d, str):
                symbols.setdefault(d, n)
        if p.dtype in prog.dtypes:
            dtypes.setdefault(p.dtype, t.dtype)
    results = []
    for p in operator.outputs:
        if p.name in given:  # in-out: returned updated, with the input's shape and dtype
            results.append(torch.empty_like(given[p.name], memory_format=torch.contiguous_format))
            continue
        dims = p.dims or ()
        unbound = [d for d in dims if isinstance(d, str) and d not in symbols]
        if unbound:
            raise ValueError(f"{op.name}: output `{p.name}` has dims {', '.join(unbound)} that no input's "
                             "shape binds; fix them in the spec's `symbols:`")
        shape = [d if isinstance(d, int) else symbols[d] for d in dims]
        if p.dtype in prog.dtypes:
            dtype = dtypes.get(p.dtype) or torch_dtype(prog.dtypes[p.dtype][0])
        else:
            dtype = torch_dtype(p.dtype)
        device = inputs[0].device if inputs else torch.device("cpu")
        results.append(torch.empty(shape, dtype=dtype, device=device))
    return _results(results)


class NoBackwardError(DiagnosticError, RuntimeError):
    """``.backward()`` reached an op whose spec names no backward (E0716)."""


def register_autograd(custom_op: Any, op: PackagedOp, backward_op: Any | None) -> None:
    """Make ``custom_op`` differentiable through the custom op of its spec's ``backward:``.

    The forward keeps what the backward spec reads (``saves``: forward inputs or outputs) and
    its scalars; the backward op gets, by its own parameter names, those tensors and the
    incoming gradients ``d<output>``, on the backend the forward ran on, and its outputs
    ``d<input>`` become the gradients of those inputs (None for the others). Without a backward
    (``backward_op`` None) the gradient step raises E0716 naming the op, instead of torch's
    generic message.
    """
    operator = op.operator
    input_names = [p.name for p in operator.inputs]
    output_names = [p.name for p in operator.outputs]
    back = operator.program.backward
    if back is None or backward_op is None:
        def refuse(ctx: Any, *grads: Any) -> Any:
            raise NoBackwardError(Diagnostic(
                "E0716", f"cannot differentiate through `{op.package}.{op.name}`: its spec names no backward",
                operator.program.span, "this op has no gradient", (),
                ("torch reached it in .backward() because an input requires grad",),
                "write a spec computing the gradients and name it in the op's YAML, "
                "`backward: {spec: NAME_bwd.yaml, saves: [...]}` (see `ptodsl explain E0716`); or call the op "
                "on detached tensors or under torch.no_grad()"))

        custom_op.register_autograd(refuse)
        return
    saved = [name for _param, kind, name in back.inputs if kind == "saved"]
    gives = {fwd: param for param, fwd in back.outputs}

    def setup_context(ctx: Any, inputs: tuple[Any, ...], keyword_only_inputs: Mapping[str, Any],
                      output: Any) -> None:
        outs = output if isinstance(output, tuple) else (output,)
        values = dict(zip(input_names, inputs)) | dict(zip(output_names, outs))
        ctx.save_for_backward(*(values[name] for name in saved))
        ctx.ptodsl_keywords = {k: keyword_only_inputs[k] for k in back.scalars if k in keyword_only_inputs}
        ctx.ptodsl_keywords["backend"] = keyword_only_inputs.get("backend", "sim")

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        kept = dict(zip(saved, ctx.saved_tensors))
        incoming = dict(zip(output_names, grads))
        # the backward op's tensor inputs, in its parameter order
        args = [kept[name] if kind == "saved" else incoming[name].contiguous() for _param, kind, name in back.inputs]
        result = backward_op(*args, **ctx.ptodsl_keywords)
        by_param = dict(zip([param for param, _fwd in back.outputs], result if isinstance(result, tuple) else (result,)))
        return tuple(by_param[gives[name]] if name in gives and ctx.needs_input_grad[i] else None
                     for i, name in enumerate(input_names))

    custom_op.register_autograd(backward, setup_context=setup_context)


__all__ = ["TORCH_DTYPES", "NoBackwardError", "fake", "register_autograd", "npu_available", "numpy_dtype_of", "run", "run_npu", "size_hints", "torch_dtype"]
