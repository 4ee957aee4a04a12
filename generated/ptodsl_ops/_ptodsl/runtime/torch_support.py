"""The torch side of a generated package, what its ``torch_ops`` module's custom ops call, and
autograd for calls of ptodsl operators with tensors that require grad.

Only imported when torch is: a generated package imports it from ``torch_ops``, which is imported
only once torch is (see :mod:`ptodsl.runtime.package`), and an operator imports it for a call with
a torch tensor that requires grad.

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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .. import sym
from ..diagnostics import Diagnostic, DiagnosticError
from ..dtypes import numpy_dtype
from .operator import ArgumentValueError, Operator, is_torch, to_numpy, to_torch
from .package import PackagedOp
from .program import Backward, Program

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
    # detached: autograd is the custom op's business here, the wrapper must not route back to it
    args = [t.detach() for t in inputs]
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
    sym.bind_defined(prog.defined, symbols)  # dims defined by others (`D: 2*H`); validate refused a breach
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


def no_backward(name: str, program: Program) -> NoBackwardError:
    """E0716 for the op called ``name`` in the message (``package.op``, or the op's name)."""
    return NoBackwardError(Diagnostic(
        "E0716", f"cannot differentiate through `{name}`: its spec names no backward",
        program.span, "this op has no gradient", (),
        ("torch reached it in .backward() because an input requires grad",),
        "write a spec computing the gradients and name it in the op's YAML, "
        "`backward: {spec: NAME_bwd.yaml, saves: [...]}` (see `ptodsl explain E0716`); or call the op "
        "on detached tensors or under torch.no_grad()"))


def _saved(back: Backward, values: Mapping[str, Any]) -> list[Any]:
    """The forward tensors the backward op reads (its ``saves``), from the call's inputs and outputs."""
    return [values[name] for _param, kind, name in back.inputs if kind == "saved"]


def _keywords(back: Backward, scalars: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """The backward op's keywords: the forward scalars it takes, and the backend the forward ran on."""
    return {k: scalars[k] for k in back.scalars if k in scalars} | {"backend": backend}


def _gradients(back: Backward, input_names: Sequence[str], output_names: Sequence[str], saved: Sequence[Any],
               grads: Sequence[Any], needed: Sequence[bool], backward_op: Callable[..., Any],
               keywords: Mapping[str, Any]) -> tuple[Any, ...]:
    """The gradient of each forward input (None for those without one or that need none): the
    backward op run on the saved tensors and the incoming gradients ``d<output>``, by its own
    parameter names; its outputs ``d<input>`` are the inputs' gradients."""
    kept = dict(zip([name for _param, kind, name in back.inputs if kind == "saved"], saved))
    incoming = dict(zip(output_names, grads))
    args = [kept[name] if kind == "saved" else incoming[name].contiguous() for _param, kind, name in back.inputs]
    result = backward_op(*args, **keywords)
    by_param = dict(zip([param for param, _fwd in back.outputs], result if isinstance(result, tuple) else (result,)))
    gives = {fwd: param for param, fwd in back.outputs}
    return tuple(by_param[gives[name]] if name in gives and needed[i] else None for i, name in enumerate(input_names))


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
            raise no_backward(f"{op.package}.{op.name}", operator.program)

        custom_op.register_autograd(refuse)
        return

    def setup_context(ctx: Any, inputs: tuple[Any, ...], keyword_only_inputs: Mapping[str, Any],
                      output: Any) -> None:
        outs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*_saved(back, dict(zip(input_names, inputs)) | dict(zip(output_names, outs))))
        ctx.ptodsl_keywords = _keywords(back, keyword_only_inputs, keyword_only_inputs.get("backend", "sim"))

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return _gradients(back, input_names, output_names, ctx.saved_tensors, grads, ctx.needs_input_grad,
                          backward_op, ctx.ptodsl_keywords)

    custom_op.register_autograd(backward, setup_context=setup_context)


def _plain_results(operator: Operator, given: Mapping[str, Any], results: Any) -> Any:
    """What the plain call returns, from a functional call's results (in the order of
    ``operator.outputs``): an output whose buffer was passed (an in-out tensor, or an output by
    name) is written into it, through ``copy_`` so that autograd records the write, and returned."""
    outs = results if isinstance(results, tuple) else (results,)
    final = []
    for p, value in zip(operator.outputs, outs):
        buffer = given.get(p.name)
        if buffer is None:
            final.append(value)
            continue
        if is_torch(buffer):
            buffer.copy_(value)
        else:  # a numpy buffer beside torch inputs: it gets the values, autograd cannot follow them
            np.copyto(buffer, to_numpy(value))
        final.append(buffer)
    if not final:
        return None
    return final[0] if len(final) == 1 else tuple(final)


def _as_tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    """Numpy arrays beside tensors that require grad become tensors (sharing their memory): the
    custom op and the autograd function take tensors only."""
    return [x if is_torch(x) else to_torch(np.asarray(x)) for x in values]


def call_custom_op(op: PackagedOp, inputs: Sequence[Any], outputs: Mapping[str, Any], scalars: Mapping[str, Any],
                   backend: str, device: Any) -> Any:
    """A generated package's plain wrapper called with a tensor that requires grad: the call runs
    the op's torch custom op, ``torch.ops.<package>.<op>``, which autograd knows, instead of
    numpy, which it cannot follow. Every argument is checked first as the plain call checks it
    (output buffers too, which the functional custom op does not take)."""
    if device is not None:
        raise ArgumentValueError(Diagnostic(
            "E0704", f"{op.name}() got `device={device!r}` with a tensor that requires grad", None, "", (),
            ("a call autograd records runs the torch custom op, which takes the device of its tensors",),
            "move the tensors to the device (`.to(\"npu:N\")`) and drop `device=`; or call the op on detached "
            "tensors or under torch.no_grad()"))
    _index, _symbols, checked = op.checked(tuple(inputs), {**outputs, **scalars})
    custom = getattr(getattr(torch.ops, op.package), op.name)
    results = custom(*_as_tensors(inputs), **{k: checked[k] for k in scalars}, backend=backend)
    given = {p.name: x for p, x in zip(op.operator.inputs, inputs) if p.mode == "inout"} | dict(outputs)
    return _plain_results(op.operator, given, results)


class _Call:
    """One differentiable call of an operator, as :class:`_Differentiable` takes it."""

    def __init__(self, operator: Operator, scalars: Mapping[str, Any], backend: str):
        self.operator = operator
        self.scalars = dict(scalars)
        self.backend = backend


class _Differentiable(torch.autograd.Function):
    """A call of a compiled operator (``ptodsl.load``) that autograd records: the forward runs the
    op on the detached inputs, the backward runs its spec's backward op (E0716 without one), as
    :func:`register_autograd` makes a generated package's custom ops do."""

    @staticmethod
    def forward(ctx: Any, call: _Call, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        operator = call.operator
        args = {}
        for p, t in zip(operator.inputs, inputs):  # in-out tensors are returned updated, not written
            if is_torch(t):
                t = t.detach().clone(memory_format=torch.contiguous_format) if p.mode == "inout" else t.detach()
            args[p.name] = t
        result = operator.call_bound(args, dict(call.scalars), call.backend)
        outs = result if isinstance(result, tuple) else (result,)
        ctx.ptodsl_call = call
        back = operator.program.backward
        if back is not None:
            values = dict(zip([p.name for p in operator.inputs], inputs))
            values |= dict(zip([p.name for p in operator.outputs], outs))
            ctx.save_for_backward(*_saved(back, values))
        return outs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        call = ctx.ptodsl_call
        operator = call.operator
        back = operator.program.backward
        backward_op = operator.backward_operator() if back is not None else None
        if back is None or backward_op is None:
            raise no_backward(operator.name, operator.program)
        return (None, *_gradients(back, [p.name for p in operator.inputs], [p.name for p in operator.outputs],
                                  ctx.saved_tensors, grads, ctx.needs_input_grad[1:], backward_op,
                                  _keywords(back, call.scalars, call.backend)))


def differentiable_call(operator: Operator, tensors: Mapping[str, Any], scalars: Mapping[str, Any],
                        backend: str) -> Any:
    """An operator called (with :meth:`Operator.bind`'s arguments) with a tensor that requires grad,
    grad mode on: its results carry a ``grad_fn`` (through :class:`_Differentiable`). Every argument
    is checked first as the plain call checks it, output buffers too."""
    operator.resolve(tensors)
    given = {p.name: tensors[p.name] for p in operator.outputs if p.name in tensors}
    if not operator.outputs:  # nothing to differentiate
        return operator.call_bound({k: v.detach() if is_torch(v) else v for k, v in tensors.items()},
                                   dict(scalars), backend)
    results = _Differentiable.apply(_Call(operator, scalars, backend), *_as_tensors([tensors[p.name] for p in operator.inputs]))
    return _plain_results(operator, given, results)


__all__ = ["TORCH_DTYPES", "NoBackwardError", "call_custom_op", "differentiable_call", "fake", "no_backward",
           "npu_available", "numpy_dtype_of", "register_autograd", "run", "run_npu", "size_hints", "torch_dtype"]
