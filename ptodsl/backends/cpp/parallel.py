"""Which control-program loop may run its iterations on several cores (``#pragma omp parallel for``).

The analysis is deliberately conservative: a loop qualifies only when it is provably free of
cross-iteration dependencies. For the loop with index ``i`` and step ``s``:

- every GM write inside it (a ``tile.store`` of a launched kernel) goes either to a workspace the
  iteration allocates itself, or to a region whose offset along one dim is ``k * i + c`` with
  constant ``k >= 1`` and ``c``, all writes to that tensor using the same dim and ``k`` and their
  extents fitting in ``k * s`` rows, so two iterations never touch the same element;
- nothing written (outside the iteration's own workspaces) is also read, by a kernel or by a
  scalar ``read``, so no iteration sees another's results;
- no workspace allocated outside the loop is written (it would be shared by the iterations);
- nothing prints (the output order would change).

The outermost qualifying loop gets the pragma; loops nested in it stay sequential. Workspaces an
iteration allocates live in that iteration, and the CPU header's on-chip buffers are per thread,
so the iterations share nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import sym
from ...ir import Func, Module, Op
from ...ir.opdefs import indexed_gm
from .gm import Origin, kernel_env, tensor_args, trace_origins, walk_ops


@dataclass(frozen=True)
class _Write:
    offsets: tuple[sym.Expr, ...] | None
    extents: tuple[int, ...]


def parallel_loops(module: Module, control: Func) -> list[Op]:
    """The loops of ``control`` to run in parallel, outermost first."""
    origins = trace_origins(control)
    found: list[Op] = []

    def visit(ops: list[Op]) -> None:
        for op in ops:
            if op.name == "loop" and independent(module, op, origins):
                found.append(op)
                continue
            for region in op.regions:
                visit(region)

    visit(control.body)
    return found


def independent(module: Module, loop: Op, origins: dict[str, Origin]) -> bool:
    step = loop.attrs["step"]
    if loop.attrs.get("kind") in ("implicit", "peeled") or not isinstance(step, int) or step < 1:
        return False
    trip = sym.sub(loop.attrs["hi"], loop.attrs["lo"])
    if isinstance(trip, int) and trip <= step:
        return False  # a single iteration: nothing to share out
    body = loop.regions[0]
    local = {op.result.name for op in walk_ops(body) if op.name == "alloc"}
    writes: dict[str, list[_Write]] = {}
    reads: set[str] = set()
    for op in walk_ops(body):
        if op.name in ("print", "guard"):
            return False  # output order; a failed guard stops the whole call
        if op.name == "read":
            reads.add(origins[op.operands[0].name].root)
        elif op.name == "launch":
            _kernel_accesses(module, op, origins, writes, reads)
    index = loop.attrs["index"]
    for root, ws in writes.items():
        if root in local:
            continue
        if origins[root].workspace or root in reads:
            return False
        if not _disjoint(ws, index, step):
            return False
    return True


def _kernel_accesses(module: Module, launch: Op, origins: dict[str, Origin],
                     writes: dict[str, list[_Write]], reads: set[str]) -> None:
    kernel = module.func(launch.attrs["kernel"])
    env = kernel_env(kernel, launch)
    args = {name: origins[value.name] for name, value in tensor_args(kernel, launch)}
    for op in kernel.walk():
        if op.name == "tile.load" and op.operands[1].name in args:
            reads.add(args[op.operands[1].name].root)
        elif op.name == "tile.store" and op.operands[0].name in args:
            origin = args[op.operands[0].name]
            offsets = None
            if origin.offsets is not None:
                offsets = tuple(sym.add(base, sym.substitute(o, env))
                                for base, o in zip(origin.offsets, op.attrs["offsets"]))
            writes.setdefault(origin.root, []).append(_Write(offsets, tuple(op.operands[1].type.shape)))
        else:  # a gather or scatter: rows only the data knows, so nothing about where it writes
            read, written = indexed_gm(op)
            reads.update(args[v.name].root for v in read if v.name in args)
            for v in written:
                if v.name in args:
                    writes.setdefault(args[v.name].root, []).append(_Write(None, ()))


def _disjoint(writes: list[_Write], index: str, step: int) -> bool:
    """Some dim along which every iteration writes its own band of ``k * step`` indices."""
    if any(w.offsets is None or len(w.offsets) != len(w.extents) for w in writes):
        return False
    for dim in range(len(writes[0].offsets)):
        bands = []
        for w in writes:
            form = sym.linear(w.offsets[dim])
            if form is None:
                break
            coeffs, const = form
            k = coeffs.get(index, 0)
            if set(coeffs) != {index} or not isinstance(k, int) or k < 1 or not isinstance(const, int):
                break
            bands.append((k, const, w.extents[dim]))
        else:
            ks = {k for k, _, _ in bands}
            if len(ks) == 1:
                k = ks.pop()
                low = min(c for _, c, _ in bands)
                high = max(c + e for _, c, e in bands)
                if high - low <= k * step:
                    return True
    return False


__all__ = ["independent", "parallel_loops"]
