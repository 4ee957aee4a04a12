"""Where the GM tensors of a Block IR control program live: the root buffer each value points
into, its offset there and the root's element strides.

Roots are dense, C-contiguous buffers: the operator's tensor arguments and the control program's
workspaces (``alloc``). A ``view`` shares its parent's strides at an offset; a ``reshape`` labels
the same bytes with other dims (``shapes.reshape_strides``: only where each group of dims it
merges or splits is contiguous); a ``permute`` orders the parent's dims and strides anew.

A compute kernel sees each tensor parameter through its type's shape only. When the strides of
the root a launch passes are those of that shape laid out densely (the common case: a row of a
matrix, a block of rows), the kernel computes them itself; otherwise the parameter takes its
strides as extra arguments (:func:`explicit_strides`). The C++ emitter and the stack estimate
(``passes/stack.py``) both read this, so they agree on which parameters take strides.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .. import sym
from ..shapes import permute, reshape_strides
from .core import Func, Module, Op, TensorType, Value
from .opdefs import launched_params


class GmLayoutError(Exception):
    """A control program whose GM values this analysis cannot place (the emitter's E0800)."""

    def __init__(self, what: str, op: Op, hint: str | None = None):
        super().__init__(what)
        self.what, self.op, self.hint = what, op, hint


@dataclass(frozen=True)
class Origin:
    """A GM value: which root it points into, where, and the root's strides."""

    root: str  # name of the root value (a control parameter or a workspace)
    offsets: tuple[sym.Expr, ...] | None  # in root coordinates; None after a reshape
    strides: tuple[sym.Expr, ...]  # element strides of this value's dims
    workspace: bool  # the root is an `alloc` of the control program


def dense_strides(shape: tuple[sym.Expr, ...]) -> tuple[sym.Expr, ...]:
    strides: list[sym.Expr] = []
    acc: sym.Expr = 1
    for dim in reversed(shape):
        strides.append(acc)
        acc = sym.mul(acc, dim)
    return tuple(reversed(strides))


def linear_offset(index: tuple[sym.Expr, ...], strides: tuple[sym.Expr, ...]) -> sym.Expr:
    total: sym.Expr = 0
    for i, s in zip(index, strides):
        total = sym.add(total, sym.mul(i, s))
    return total


def walk_ops(ops: list[Op]) -> Iterator[Op]:
    for op in ops:
        yield op
        for region in op.regions:
            yield from walk_ops(region)


def trace_origins(control: Func) -> dict[str, Origin]:
    """The origin of every GM value of a control program, by value name; raises
    :class:`GmLayoutError` for a reshape of a strided view or an op of unknown GM meaning."""
    origins: dict[str, Origin] = {}
    for p in control.params:
        if p.is_tensor:
            t: TensorType = p.type
            origins[p.name] = Origin(p.name, tuple(0 for _ in t.shape), dense_strides(t.shape), False)
    for op in walk_ops(control.body):
        if op.name == "alloc":
            t = op.result.type
            origins[op.result.name] = Origin(op.result.name, tuple(0 for _ in t.shape), dense_strides(t.shape), True)
        elif op.name == "view":
            parent = origins[op.operands[0].name]
            offsets = None if parent.offsets is None else tuple(
                sym.add(a, b) for a, b in zip(parent.offsets, op.attrs["offsets"]))
            origins[op.result.name] = Origin(parent.root, offsets, parent.strides, parent.workspace)
        elif op.name == "reshape":
            parent = origins[op.operands[0].name]
            source: TensorType = op.operands[0].type
            strides = reshape_strides(source.shape, parent.strides, op.result.type.shape)
            if strides is None:
                raise GmLayoutError("a reshape of a strided view", op,
                                    "reshape the whole tensor, or a view that is contiguous")
            origins[op.result.name] = Origin(parent.root, None, strides, parent.workspace)
        elif op.name == "permute":
            parent = origins[op.operands[0].name]
            perm = [int(p) for p in op.attrs["perm"]]
            origins[op.result.name] = Origin(parent.root, None, permute(parent.strides, perm), parent.workspace)
        elif any(isinstance(r.type, TensorType) for r in op.results):
            raise GmLayoutError(f"the op `{op.name}` making a GM tensor in a control program", op)
    return origins


def launches(control: Func) -> Iterator[Op]:
    return (op for op in walk_ops(control.body) if op.name == "launch")


def kernel_env(kernel: Func, launch: Op) -> dict[str, sym.Expr]:
    """Kernel scalar parameter -> the control-program expression the launch passes (a block's
    index and count, ``opdefs.block_params``, are not passed by the launch)."""
    scalars = launched_params(kernel)
    return {p.name: e for p, e in zip(scalars, launch.attrs["scalars"])}


def tensor_args(kernel: Func, launch: Op) -> list[tuple[str, Value]]:
    tensors = [p for p in kernel.params if p.is_tensor]
    return [(p.name, v) for p, v in zip(tensors, launch.operands)]


def guard_ops(module: Module, control: Func) -> list[Op]:
    """Every bounds guard a call of ``control`` may stop at, in the order that numbers them from 1:
    the control program's own in program order, then those inside each compute kernel it launches
    (in order of first launch), each kernel's in program order. The emitted entries return the
    number of the guard that stopped the call, and the runtimes map it back through this list."""
    out = [op for op in walk_ops(control.body) if op.name == "guard"]
    seen: set[str] = set()
    for launch in launches(control):
        name = launch.attrs["kernel"]
        if name not in seen:
            seen.add(name)
            out += [op for op in module.func(name).walk() if op.name == "guard"]
    return out


def explicit_strides(module: Module, controls: list[Func]) -> dict[str, set[str]]:
    """Kernel name -> the tensor parameters that take their strides as arguments."""
    out: dict[str, set[str]] = {}
    for control in controls:
        origins = trace_origins(control)
        for launch in launches(control):
            kernel = module.func(launch.attrs["kernel"])
            scalars = {p.name for p in kernel.params if not p.is_tensor}
            env = kernel_env(kernel, launch)
            wanted = out.setdefault(kernel.name, set())
            for name, value in tensor_args(kernel, launch):
                param_type: TensorType = kernel.param(name).type
                dense = dense_strides(param_type.shape)
                actual = origins[value.name].strides
                for k, (d, a) in enumerate(zip(dense[:-1], actual[:-1])):
                    if param_type.shape[k] == 1:
                        continue  # a single index along this dim: its stride never matters
                    if not sym.free_symbols(d) <= scalars or sym.sub(sym.substitute(d, env), a) != 0:
                        wanted.add(name)
    return out


__all__ = ["GmLayoutError", "Origin", "dense_strides", "explicit_strides", "guard_ops", "kernel_env", "launches",
           "linear_offset", "tensor_args", "trace_origins", "walk_ops"]
