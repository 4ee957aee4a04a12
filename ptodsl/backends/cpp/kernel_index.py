"""The C++ of the indexing tile ops (registered on ``kernel.KERNEL``).

Gathers and scatters name their table as a ``GlobalTensor`` of the rows (or the one row) an index
may reach, built like a transfer's view, and call pto-isa's MGATHER / MSCATTER with an explicit
mode: ``Coalesce::Row`` moves whole rows, ``Coalesce::Elem`` elements of one row. The control
program has checked every index against the table first (E0730); the instructions still get a
defensive out-of-bounds mode (``GatherOOB::Clamp``, ``ScatterOOB::Skip``) for the NPU. TCI, TTRI
and TROWARGMAX / TROWARGMIN are one instruction each; the arg-reductions take a scratch tile like
the row reductions do.
"""

from __future__ import annotations

from ... import sym
from ...ir import Op
from ...passes.tile_index import index_table
from .cxx import cxx_type, unsupported
from .kernel import KERNEL, InstructionUse, KernelEmitter, Operand

GATHER, SCATTER = "MGATHER", "MSCATTER"
# Of a table's layouts, `packed` rows are exactly as long as the columns moved (Ascend 950's
# MGATHER / MSCATTER assume it: they step rows by the valid columns); `strided` rows are longer.
PACKED, STRIDED = "packed", "strided"


def _table(em: KernelEmitter, op: Op, value, tile, depth: int) -> tuple[str, str]:
    """Declare the GlobalTensor of a gather's or scatter's table; returns (its name, its layout)."""
    tensor = em.tensors.get(value.name)
    if tensor is None:
        raise unsupported(f"`{op.name}` on a GM value that is not a kernel parameter", op.span)
    extents, strides = index_table(op, tensor.shape, tensor.strides)
    base: sym.Expr = 0
    for o, s in zip(op.attrs["offsets"], tensor.strides):
        base = sym.add(base, sym.mul(o, s))
    pointer = tensor.var if base == 0 else f"{tensor.var} + {em._e(base)}"
    getters = {4: f"{tile.var}.GetValidCol()"} if op.name != "tile.gather_elem" else {}
    shape_t, shape_args = em._entries([1, 1, 1, *extents], getters)
    stride_t, stride_args = em._entries([1, 1, 1, *strides], {})
    gtype = f"GlobalTensor<{cxx_type(tensor.dtype)}, Shape<{shape_t}>, Stride<{stride_t}>>"
    name = em.names.claim(f"{tensor.var}Table{em.views}")
    em.views += 1
    if not shape_args and not stride_args:
        em._line(depth, f"{gtype} {name}({pointer});", op.span)
    else:
        alias = em.names.claim(f"GmView{em.views - 1}")
        em._line(depth, f"using {alias} = {gtype};", op.span)
        args = [pointer, f"{alias}::Shape({', '.join(shape_args)})"]
        if stride_args:
            args.append(f"{alias}::Stride({', '.join(stride_args)})")
        em._line(depth, f"{alias} {name}({', '.join(args)});", op.span)
    packed = sym.sub(strides[0], extents[1]) == 0 or extents[0] == 1
    return name, PACKED if packed else STRIDED


def _use(em: KernelEmitter, instr: str, operands: list, op: Op) -> None:
    em.uses.append(InstructionUse(instr, tuple(operands), op.span))


@KERNEL.on("gather_rows", "gather_elem")
def _gather(em: KernelEmitter, op: Op, depth: int) -> None:
    em.scratch_cursor = em.scratch_base
    dst, idx = em._tile(op.operands[0], op), em._tile(op.operands[2], op)
    if dst.kind != "Vec" or idx.kind != "Vec":
        raise unsupported(f"`{op.name}` with {dst.kind} tiles", op.span)
    table, layout = _table(em, op, op.operands[1], dst, depth)
    mode = "Row" if op.name == "tile.gather_rows" else "Elem"
    em._line(depth, f"{GATHER}<Coalesce::{mode}, GatherOOB::Clamp>({dst.var}, {table}, {idx.var});", op.span)
    _use(em, GATHER, [em.operands[dst.var], Operand(dst.dtype, layout, "Gm"), em.operands[idx.var]], op)


@KERNEL.on("scatter_rows")
def _scatter(em: KernelEmitter, op: Op, depth: int) -> None:
    em.scratch_cursor = em.scratch_base
    src, idx = em._tile(op.operands[1], op), em._tile(op.operands[2], op)
    if src.kind != "Vec" or idx.kind != "Vec":
        raise unsupported(f"`{op.name}` with {src.kind} tiles", op.span)
    table, layout = _table(em, op, op.operands[0], src, depth)
    em._line(depth, f"{SCATTER}<Coalesce::Row, ScatterAtomicOp::None, ScatterOOB::Skip>({table}, {src.var}, "
                    f"{idx.var});", op.span)
    _use(em, SCATTER, [Operand(src.dtype, layout, "Gm"), em.operands[src.var], em.operands[idx.var]], op)


@KERNEL.on("ci")
def _ci(em: KernelEmitter, op: Op, depth: int) -> None:
    (dst,) = em._operands(op)
    if dst.rows != 1:
        raise unsupported(f"TCI into a tile of {dst.rows} rows (it fills one row)", op.span)
    ctype = cxx_type(dst.dtype)
    start = em._scalar(op.attrs["start"], dst.dtype)
    em._line(depth, f"TCI<{dst.alias}, {ctype}, 0>({dst.var}, static_cast<{ctype}>({start}));", op.span)
    _use(em, "TCI", [em.operands[dst.var]], op)


@KERNEL.on("tri_tile")
def _tri(em: KernelEmitter, op: Op, depth: int) -> None:
    (dst,) = em._operands(op)
    upper = 0 if op.attrs["lower"] else 1
    em._line(depth, f"TTRI<{dst.alias}, {upper}>({dst.var}, static_cast<int>({em._e(op.attrs['diagonal'])}));",
             op.span)
    _use(em, "TTRI", [em.operands[dst.var]], op)


@KERNEL.on("argreduce_tile")
def _argreduce(em: KernelEmitter, op: Op, depth: int) -> None:
    dst, src = em._operands(op)
    if int(op.attrs["axis"]) % src.tile_type.rank != src.tile_type.rank - 1:
        raise unsupported(f"`{op.name}` over an axis other than the last", op.span)
    tmp = em._scratch(src, op, depth)
    em._emit(depth, "TROWARGMAX" if op.name == "tile.argmax" else "TROWARGMIN", [dst.var, src.var, tmp], op)
