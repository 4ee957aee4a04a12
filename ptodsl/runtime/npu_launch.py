"""Calling a variant's NPU host program: torch tensors on the device, the current torch_npu stream.

The host program (``kernels/<op>/npu/<variant>/host.cpp``) exports
``int <entry>(int32_t device, void* stream, ...)`` taking the operator's device pointers, scalars
and symbols in the order of its ``build.json``, as the CPU entry does; it makes the device current
and launches every compute kernel on that stream (``<<<block_dim, nullptr, stream>>>``), and on a
failed ACL call returns -1 with ``<entry>_failure()`` naming it. This module turns a call's arguments into those: numpy inputs are
copied to the device and results copied back; torch tensors already on the NPU are passed as
device pointers and written in place. None of it has run on NPU hardware; the marshalling is
tested on the CPU with a stand-in entry.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..backends.guards import guard_failure
from ..backends.memory import allocation_failure
from ..dtypes import numpy_dtype
from ..inputs import check_aliasing
from ..ir.gm import guard_ops
from .buffers import tensor_modes
from .operator import ArgumentValueError, Operator, check_run, dim_spans
from .package import shadow

_SCALAR_CTYPES = {
    "f32": ctypes.c_float, "f16": ctypes.c_float, "bf16": ctypes.c_float, "i8": ctypes.c_int8,
    "i16": ctypes.c_int16, "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u8": ctypes.c_uint8,
    "bool": ctypes.c_uint8,
}


def ctypes_of(params: Sequence[tuple[str, str, str]]) -> list[Any]:
    """The ctypes of the host entry: the device and the stream, then one per (kind, name, dtype)
    parameter."""
    out: list[Any] = [ctypes.c_int32, ctypes.c_void_p]
    for kind, _name, dtype in params:
        out.append(ctypes.c_void_p if kind == "tensor" else ctypes.c_int if kind == "poison"
                   else _SCALAR_CTYPES[dtype])
    return out


def _to_torch(a: np.ndarray) -> Any:
    import torch

    a = np.ascontiguousarray(a)
    if a.dtype == numpy_dtype("bf16"):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _to_numpy(t: Any, dtype: str) -> np.ndarray:
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(numpy_dtype("bf16"))
    return t.numpy().astype(numpy_dtype(dtype), copy=False)


def marshal(operator: Operator, index: int, inputs: tuple[Any, ...], kwargs: Mapping[str, Any],
            symbols: Mapping[str, int], params: Sequence[tuple[str, str, str]], move: Callable[[Any], Any],
            empty: Callable[[tuple[int, ...], str], Any]) -> tuple[list[Any], Callable[[], Any]]:
    """The host entry's arguments after the stream, and a function giving the call's results once
    it has run. ``move`` puts a torch tensor on the device (contiguous); ``empty`` allocates a
    zeroed device tensor of a shape and ptodsl dtype."""
    tensors, scalars, _backend = operator.bind(tuple(inputs), dict(kwargs))
    shadows = {name: shadow(v) for name, v in tensors.items()}
    check_run(operator.program, index, shadows, scalars, symbols, lengths=False)  # scalars become numbers
    # the shadows own no memory: outputs that share device (or host) memory are refused on the
    # tensors themselves (E0717), and an input sharing memory with an output is copied on the device
    spans = dim_spans(operator.program)
    copies, problem = check_aliasing(tensor_modes(operator.program), tensors, spans)
    if problem is not None:
        raise ArgumentValueError(problem)
    numpy_in = not any(type(v).__module__.startswith("torch") for v in tensors.values())
    device: dict[str, Any] = {}
    for name, value in tensors.items():
        device[name] = _device(lambda v=value: move(v if type(v).__module__.startswith("torch")
                                                    else _to_torch(np.asarray(v))), f"input `{name}`", spans[name])
    for name, out in copies:
        given = tensors[name]
        if type(given).__module__.startswith("torch") and device[name].data_ptr() == given.data_ptr():  # in place
            device[name] = _device(device[name].clone, f"a copy of input `{name}`, which shares memory with output "
                                   f"`{out}`", spans[name])
    allocated = []
    for p in operator.outputs:
        if p.name not in device:
            dtype, shape = operator.output_shape(index, p, symbols)
            device[p.name] = _device(lambda s=shape, d=dtype: empty(s, d), f"output `{p.name}` ({list(shape)} {dtype})",
                                     spans[p.name])
            allocated.append(p.name)
    args: list[Any] = []
    for kind, name, _dtype in params:
        if kind == "tensor":
            args.append(device[name].data_ptr() or None)
        elif kind == "scalar":
            args.append(scalars[name])
        elif kind == "symbol":
            args.append(int(symbols[name]))
        else:
            args.append(0)  # no poisoning on the device

    def results() -> Any:
        outs = []
        for p in operator.outputs:
            dtype = operator.program.param_type(index, p.name)[0]
            given = tensors.get(p.name)
            if given is not None and type(given).__module__.startswith("torch"):
                if device[p.name].data_ptr() != given.data_ptr():
                    given.copy_(device[p.name])  # a non-contiguous or host tensor given as output
                outs.append(given)
            elif given is not None:  # a numpy buffer: written in place, as on the other backends
                np.copyto(given, _to_numpy(device[p.name], dtype))
                outs.append(given)
            else:
                outs.append(_to_numpy(device[p.name], dtype) if numpy_in else device[p.name])
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    return args, results


def _device(make: Callable[[], Any], what: str, span: Any) -> Any:
    """``make()``, a tensor in device memory, or E0718 naming it when the device has not the memory
    (torch raises its OutOfMemoryError, a RuntimeError, or MemoryError)."""
    try:
        return make()
    except (MemoryError, RuntimeError) as exc:
        if isinstance(exc, RuntimeError) and "out of memory" not in str(exc).lower():
            raise
        raise allocation_failure(what, None, span, "declared here", (f"{type(exc).__name__}: {exc}",)) from None


def _eval(e: Any, symbols: Mapping[str, int]) -> int:
    from .. import sym

    return int(sym.evaluate(e, symbols))


def call_host_entry(torch_npu: Any, library: Path, plan: Any, operator: Operator, index: int,
                    inputs: tuple[Any, ...], kwargs: Mapping[str, Any], symbols: Mapping[str, int],
                    device: int) -> Any:
    """Run the built host program of one variant on device ``device``'s current stream."""
    import torch

    from .npu import _fail
    from .torch_support import torch_dtype

    target = torch.device(f"npu:{device}")
    args, results = marshal(
        operator, index, inputs, kwargs, symbols, plan.params,
        lambda t: t.to(target).contiguous(),
        lambda shape, dtype: torch.zeros(shape, dtype=torch_dtype(dtype), device=target))
    lib = ctypes.CDLL(str(library))
    entry = getattr(lib, plan.entry)
    entry.restype = ctypes.c_int
    entry.argtypes = ctypes_of(plan.params)
    stream = torch_npu.npu.current_stream(target).npu_stream
    code = entry(ctypes.c_int32(device), ctypes.c_void_p(stream), *args)
    if code > 0:  # a bounds guard stopped the call before a write outside a tensor
        module = operator.program.block_module(index)
        guards = guard_ops(module, module.func(plan.entry))
        op = guards[code - 1]
        offset, extent, dim = (ctypes.c_int64 * 3).in_dll(lib, f"{plan.entry}_guard")
        raise guard_failure(op.attrs, op.span, offset, extent, dim)
    if code < 0:
        failure = getattr(lib, f"{plan.entry}_failure")
        failure.restype = ctypes.c_char_p
        said = (failure() or b"").decode("utf-8", "replace")
        raise _fail("E0932", f"the NPU run of `{operator.name}` failed: the ACL runtime reported an error",
                    "run with ASCEND_GLOBAL_LOG_LEVEL=1 and check the device log (plog) for the cause",
                    (*([said] if said else []), f"library: {library}", f"device {device}"))
    return results()


__all__ = ["call_host_entry", "ctypes_of", "marshal"]
