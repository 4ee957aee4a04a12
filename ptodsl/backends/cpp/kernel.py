"""One pto-isa C++ translation unit per Block IR compute kernel (``vector`` or ``cube``).

The kernel reads like hand-written pto-isa code: a type alias per tile, ``TASSIGN`` at the memory
plan's offsets, a ``GlobalTensor`` view for each ``TLOAD`` / ``TSTORE``, one instruction per IR op
(the op -> instruction mapping comes from the op table, :mod:`ptodsl.ops`), ``set_flag`` /
``wait_flag`` / ``pipe_barrier`` for the sync ops and ``for`` loops for the grid loops. Every
statement ends with the source location it came from.

Instructions that need scratch tiles (a row reduction's tmp, TSEL's tmp, a scalar operand of a
select spread over a tile) get them in UB above the kernel's planned peak, where no live tile can
be; the scratch of one instruction is dead after it, so all instructions share that space.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ... import sym
from ...diagnostics import CompileError, Diagnostic, Span
from ...escape import cpp_comment
from ...ir import Func, Op, TensorType, TileType, Value
from ...ir.opdefs import Handlers, block_params
from ...ops import OPS
from ...targets import Target
from . import cxx, kernel_mixed
from .cxx import ExprContext, Names, camel, cxx_type, unsupported
from .gm import dense_strides
from .tiles import TileInfo, cxx_tile_type, describe, gm_extents, logical_2d, scratch_type

PIPES = {name: f"PIPE_{name}" for name in ("MTE1", "MTE2", "MTE3", "V", "M", "FIX", "S", "ALL")}
CMP_MODES = {"lt": "LT", "le": "LE", "gt": "GT", "ge": "GE", "eq": "EQ", "ne": "NE"}
CMP_SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
ROUND_MODES = {"none": "CAST_NONE", "rint": "CAST_RINT", "round": "CAST_ROUND", "floor": "CAST_FLOOR",
               "ceil": "CAST_CEIL", "trunc": "CAST_TRUNC", "odd": "CAST_ODD"}
# Broadcasts and fills are structure, not operators of the language, so the op table has no row
# for them; these are their pto-isa instructions.
ROW_EXPAND, COL_EXPAND, FILL, MOVE = "TROWEXPAND", "TCOLEXPAND", "TEXPANDS", "TMOV"
LOAD, STORE = "TLOAD", "TSTORE"


@dataclass
class KernelPlan:
    """What the variant-level analysis tells the emitter about one kernel."""

    explicit_strides: set[str] = field(default_factory=set)  # tensor params taking strides
    nonneg_scalars: frozenset[str] = frozenset()  # scalar params every launch passes >= 0
    workspace_params: frozenset[str] = frozenset()  # tensor params every launch binds to a workspace
    guard_base: int = 1  # the number of the kernel's first bounds guard (ir.gm.guard_ops)


@dataclass(frozen=True)
class Operand:
    """A tile an instruction reads or writes, as the target's rules see it."""

    dtype: str
    layout: str  # row | col1 (column-major, one column) | col
    kind: str  # Vec | Mat | Left | Right | Acc | Bias, or GM for the global side of a transfer


@dataclass(frozen=True)
class InstructionUse:
    """One pto-isa instruction of an emitted kernel and its tile operands, in argument order."""

    instruction: str
    operands: tuple[Operand, ...]
    span: Span | None


@dataclass
class KernelSource:
    name: str
    filename: str
    text: str
    declaration: str  # the prototype, for the control program
    uses: list[InstructionUse] = field(default_factory=list)  # every instruction, for rule checks
    launcher: str = ""  # NPU host function that launches the kernel on a stream (pto-isa's Launch* form)
    launcher_declaration: str = ""
    guards: int = 0  # bounds guards inside: the kernel takes a status buffer (its last parameter)
    blocks: bool = False  # the kernel runs as blocks (``block_index``/``block_count``)


@dataclass
class _Tensor:
    var: str
    dtype: str
    shape: tuple[sym.Expr, ...]
    strides: tuple[sym.Expr, ...]  # over the kernel's symbols (or its stride parameters)


# The C++ of each op family inside a compute kernel (``ir/opdefs.py``); the control program's
# ops have theirs in control.py.
KERNEL = Handlers("the kernel emitter")
# Elementwise ops whose instruction takes more than its tiles and scalar (a rounding mode, a
# scratch tile): op name -> emitter(KernelEmitter, op, depth), registered by kernel_elem.py.
ARITH_FORMS: dict[str, Callable] = {}
# A build of the kernel for the CPU (ptodsl's header or pto-isa's CPU simulation), where the control
# program runs the blocks and passes each its index and count; on the NPU a block reads them from
# the core (get_block_idx / get_block_num).
CPU_BUILD = "defined(PTO_CPU_SUBSET) || defined(__CPU_SIM)"


class KernelEmitter:
    def __init__(self, func: Func, target: Target, plan: KernelPlan, origin: str):
        self.func = func
        self.target = target
        self.plan = plan
        self.origin = origin  # "softmax (softmax.pto), variant T=f32"
        self.lines: list[tuple[int, str, str]] = []
        self.tags: list[kernel_mixed.Tag] = []  # per line: the core that runs it, in a mixed kernel
        self._tag = kernel_mixed.BOTH
        self.aliases: list[str] = []
        self.tiles: dict[str, TileInfo] = {}
        self.tensors: dict[str, _Tensor] = {}
        self.views = 0
        self.scratch_aliases: dict[str, str] = {}
        self.scratch_offsets: dict[str, int] = {}
        self.scratch_count = 0
        self.scratch_base = _align(int(func.attrs.get("ub_bytes", 0)), target.ub_block_bytes)
        self.scratch_cursor = self.scratch_base
        self.scratch_peak = self.scratch_base
        self.scratch_span: Span | None = None
        self.operands: dict[str, Operand] = {}  # C++ tile variable -> what rules see of it
        self.uses: list[InstructionUse] = []
        self._names_and_context()

    # ------------------------------------------------------------------ names and signature

    def _names_and_context(self) -> None:
        func = self.func
        indices = sorted({op.attrs["index"] for op in func.walk() if op.name == "loop"})
        self.names = Names([func.name])
        names: dict[str, str] = {}
        kinds: dict[str, str] = {}
        self.params: list[str] = []  # the parameters of the CPU build, in IR order
        self.npu_params: list[str] = []  # the NPU build's: no block index or count
        self.block_locals: list[str] = []  # the NPU build reads those from the core
        if func.kind == "mixed":  # its cube and vector cores signal each other through the FFTS
            self.ffts, self.aiv0 = self.names.claim(kernel_mixed.FFTS_PARAM), self.names.claim(kernel_mixed.AIV0)
            self.npu_params.append(f"__gm__ uint64_t* {self.ffts}")
        own = block_params(func)
        self.workspaces = set(self.plan.workspace_params)
        for p in func.params:
            var = self.names.claim(p.name)
            if p.is_tensor:
                t: TensorType = p.type
                strides = dense_strides(t.shape)
                decl = [f"__gm__ {cxx_type(p.dtype)}* {var}"]
                if p.name in self.plan.explicit_strides:
                    stride_syms = []
                    for k in range(t.rank - 1):
                        s = self.names.claim(f"{var}_stride{k}")
                        decl.append(f"int64_t {s}")
                        names[s] = s
                        stride_syms.append(sym.Sym(s))
                    strides = (*stride_syms, 1)
                self.tensors[p.name] = _Tensor(var, p.dtype, t.shape, strides)
                self.params.extend(decl)
                self.npu_params.extend(decl)
            else:
                names[p.name] = var
                kinds[p.name] = cxx.FLOAT if p.dtype in cxx.FLOAT_DTYPES else cxx.INT
                self.params.append(f"{cxx_type(p.dtype)} {var}")
                if p.name in own:
                    getter = "get_block_idx" if p.name == func.attrs.get("block_index") else "get_block_num"
                    self.block_locals.append(f"const {cxx_type(p.dtype)} {var} = static_cast<{cxx_type(p.dtype)}>"
                                             f"({getter}());")
                else:
                    self.npu_params.append(f"{cxx_type(p.dtype)} {var}")
        for op in func.walk():  # values read from tensors by the kernel's scalar unit
            if op.name == "read":
                names[op.attrs["sym"]] = self.names.claim(op.attrs["sym"])
                kinds[op.attrs["sym"]] = cxx.FLOAT if op.attrs["dtype"] in cxx.FLOAT_DTYPES else cxx.INT
        self.guards = [op for op in func.walk() if op.name == "guard"]
        self.status = ""
        if self.guards:  # where a failed guard leaves its number and values for the control program
            self.status = self.names.claim("status")
            self.params.append(f"__gm__ int64_t* {self.status}")
            self.npu_params.append(f"__gm__ int64_t* {self.status}")
        for index in indices:
            names[index] = self.names.claim(index)
        nonneg = set(self.plan.nonneg_scalars)
        for op in func.walk():  # loop indices start at their lower bound
            if op.name == "loop" and sym.prove_nonneg(op.attrs["lo"], {n: (0, None) for n in nonneg}):
                nonneg.add(op.attrs["index"])
        self.ctx = ExprContext(kinds, names, frozenset(nonneg))
        for op in func.walk():
            if op.name == "tile.alloc":
                base = op.result.name.lstrip("_") or op.result.name
                var = self.names.claim(base if base not in self.names.taken else f"{base}Tile")
                alias = self.names.claim("Tile" + camel(var))
                self.tiles[op.result.name] = describe(op, var, alias)
        self._mark_transposed()
        for info in self.tiles.values():
            # the layout the emitted type has (Vec tiles, per-row values too, are row-major)
            blayout = "col" if "BLayout::ColMajor" in cxx_tile_type(info, self.target) else "row"
            self.operands[info.var] = Operand(info.dtype, _layout(blayout, info.cols), info.kind)

    def _mark_transposed(self) -> None:
        """A Mat tile feeding a transposed TMOV holds its data transposed: it is loaded through a
        column-major (DN) view, so the move itself is a plain TMOV. A Mat tile moved into the bias
        table is a plain row (row-major, no fractals), as TMOV into a Bias tile takes it."""
        plain: set[str] = set()
        for op in self.func.walk():
            if op.name == "tile.mov":
                src = self.tiles.get(op.operands[1].name)
                dst = self.tiles.get(op.operands[0].name)
                if src is None or dst is None:
                    raise unsupported("a move between things that are not tiles", op.span)
                if dst.kind == "Bias":
                    if src.kind != "Mat" or op.attrs.get("transpose"):
                        raise unsupported(f"a move into the bias table out of a {src.kind} tile", op.span)
                    src.bias_row = True
                if op.attrs.get("transpose"):
                    if src.kind != "Mat":
                        raise unsupported(f"a transposed move out of a {src.kind} tile", op.span)
                    src.transposed = True
                else:
                    plain.add(src.value)
        for info in self.tiles.values():
            if info.transposed and (info.value in plain or info.bias_row):
                raise unsupported("a Mat tile moved both transposed and not transposed", info.span)

    def declaration(self, params: list[str] | None = None) -> str:
        """The kernel's signature in the CPU build (or with ``params``)."""
        params = self.params if params is None else params
        return f'extern "C" __global__ AICORE void {self.func.name}({", ".join(params)})'

    def _signature(self) -> list[str]:
        if not self.block_locals and self.func.kind != "mixed":
            return [self.declaration()]
        return [f"#if {CPU_BUILD}", self.declaration(), "#else", self.declaration(self.npu_params), "#endif"]

    # ------------------------------------------------------------------ output

    def emit(self) -> KernelSource:
        self.hoisted_views = kernel_control.declare_hoisted_views(self)
        self._block(self.func.body, 1)
        if self.scratch_peak > self.target.ub_bytes:
            raise CompileError([Diagnostic(
                "E0611", f"kernel `{self.func.name}` needs {self.scratch_peak} bytes of UB with the scratch "
                f"tiles of its instructions, more than the {self.target.ub_bytes} bytes of "
                f"{self.target.name}", self.scratch_span, "this instruction's scratch does not fit",
                notes=(f"the memory plan uses {self.func.attrs.get('ub_bytes', 0)} bytes",),
                help="use a smaller vec_tile in the schedule",
            )])
        aliases = [f"using {info.alias} = {cxx_tile_type(info, self.target)};" for info in self.tiles.values()]
        aliases += self.aliases  # the scratch tiles'
        out = [f"// {self.func.name}: {self.func.kind} kernel of {cpp_comment(self.origin)}.",
               "// Generated by ptodsl from the Block IR; tiles sit at the offsets of its memory plan.",
               "#include <pto/pto-inst.hpp>", "", "using namespace pto;", ""]
        helpers = cxx.helper_definitions(self.ctx.helpers)
        for h in helpers:
            out += [h, ""]
        out += self._signature()
        out.append("{")
        if self.func.kind == "mixed":
            out += [f"    {a}" for a in aliases]
            second = any(o.name == "tile.alloc" and o.attrs.get("aiv") == 1 for o in self.func.walk())
            out += kernel_mixed.layout(self.lines, self.tags, [f"    {b}" for b in self.block_locals], CPU_BUILD,
                                       self.ffts, self.aiv0, self.target.ub_bytes if second else None)
        else:
            if self.block_locals:
                out += [f"#if !({CPU_BUILD})", *(f"    {b}" for b in self.block_locals), "#endif"]
            out += [f"    {a}" for a in aliases]
            if aliases:
                out.append("")
            out += cxx.format_lines(self.lines)
        out.append("}")
        launcher, launcher_decl = self._launcher()
        return KernelSource(self.func.name, f"{self.func.name}.cpp", "\n".join(out) + "\n",
                            self.declaration() + ";", self.uses, launcher, launcher_decl, len(self.guards),
                            bool(self.block_locals))

    def _launcher(self) -> tuple[str, str]:
        """``<kernel>_launch(block_dim, stream, args...)``: the host side of an NPU build starts the
        kernel with ``<<<block_dim, nullptr, stream>>>``, as pto-isa's own tests do. Tensors cross
        as plain device pointers and are cast to the kernel's ``__gm__`` pointers here."""
        host, args = ["uint32_t block_dim", "void* stream"], []
        for decl in self.npu_params:
            if decl.startswith("__gm__ "):
                ctype, var = decl[len("__gm__ "):].rsplit(" ", 1)
                host.append(f"{ctype} {var}")
                args.append(f"({decl.rsplit(' ', 1)[0]}){var}")
            else:
                host.append(decl)
                args.append(decl.rsplit(" ", 1)[1])
        head = f'extern "C" void {self.func.name}_launch({", ".join(host)})'
        body = [f"// Launches {self.func.name} on an NPU stream ({self.func.kind} core).", head, "{",
                f"    {self.func.name}<<<block_dim, nullptr, stream>>>({', '.join(args)});", "}"]
        return "\n".join(body) + "\n", head + ";"

    def _line(self, depth: int, code: str, span: Span | None = None) -> None:
        self.lines.append((depth, code, cxx.location(span)))
        self.tags.append(self._tag)

    def _e(self, e: sym.Expr) -> str:
        return cxx.expr(e, self.ctx)

    # ------------------------------------------------------------------ structure

    def _block(self, ops: list[Op], depth: int) -> None:
        for op in ops:
            self._op(op, depth)

    def _op(self, op: Op, depth: int) -> None:
        handler = KERNEL.get(op)
        if handler is None:
            raise unsupported(f"the op `{op.name}` in a compute kernel", op.span)
        if self.func.kind != "mixed":
            handler(self, op, depth)
            return
        outer, self._tag = self._tag, kernel_mixed.tag_of(op)
        handler(self, op, depth)
        self._tag = outer

    @KERNEL.on("if")
    def _if(self, op: Op, depth: int) -> None:
        self._line(depth, f"if ({self._e(op.attrs['cond'])}) {{", op.span)
        self._block(op.regions[0], depth + 1)
        if len(op.regions) > 1 and op.regions[1]:
            self._line(depth, "} else {")
            self._block(op.regions[1], depth + 1)
        self._line(depth, "}")

    @KERNEL.on("sync_set", "sync_wait")
    def _flag(self, op: Op, depth: int) -> None:
        if self.func.kind == "mixed":
            for self._tag, code in kernel_mixed.flag_lines(op, _pipe):
                self._line(depth, code, op.span)
            return
        fn = "set_flag" if op.name == "sync.set" else "wait_flag"
        src, dst = _pipe(op.attrs["src"], op), _pipe(op.attrs["dst"], op)
        self._line(depth, f"{fn}({src}, {dst}, EVENT_ID{int(op.attrs['event'])});", op.span)

    @KERNEL.on("sync_barrier")
    def _barrier(self, op: Op, depth: int) -> None:
        self._line(depth, f"pipe_barrier({_pipe(op.attrs['pipe'], op)});", op.span)

    @KERNEL.on("loop")
    def _loop(self, op: Op, depth: int) -> None:
        index = self.ctx.names[op.attrs["index"]]
        step = op.attrs["step"]
        if not isinstance(step, int) or step == 0:
            raise unsupported(f"a loop with step {sym.to_text(step)}", op.span)
        cmp = "<" if step > 0 else ">"
        inc = f"++{index}" if step == 1 else f"{index} += {step}"
        self._line(depth, f"for (int64_t {index} = {self._e(op.attrs['lo'])}; {index} {cmp} "
                          f"{self._e(op.attrs['hi'])}; {inc}) {{", op.span)
        self._block(op.regions[0], depth + 1)
        self._line(depth, "}")

    @KERNEL.on("tile_alloc")
    def _alloc(self, op: Op, depth: int) -> None:
        info = self.tiles[op.result.name]
        args = ", ".join(self._e(v) for v in info.valid() if not isinstance(v, int))
        self._line(depth, f"{info.alias} {info.var}{f'({args})' if args else ''};", op.span)
        self._line(depth, f"TASSIGN({info.var}, {info.offset});", op.span)

    # ------------------------------------------------------------------ GM transfers

    @KERNEL.on("load", "store")
    def _transfer(self, op: Op, depth: int) -> None:
        if op.name == "tile.load":
            tile_v, gm_v = op.operands[0], op.operands[1]
        else:
            gm_v, tile_v = op.operands[0], op.operands[1]
        tile = self.tiles[tile_v.name]
        tensor = self.tensors.get(gm_v.name)
        if tensor is None:
            raise unsupported("a transfer from a GM value that is not a kernel parameter or a view of one", op.span)
        if tile.tile_type.rank != len(tensor.shape):
            raise unsupported(f"a rank-{tile.tile_type.rank} tile moved to or from a rank-{len(tensor.shape)} "
                              "tensor", op.span)
        if len(tensor.shape) > 5:
            raise unsupported("a GM tensor of rank above 5", op.span)
        if tile.kind not in ("Vec", "Mat", "Acc") or (op.name == "tile.load" and tile.kind == "Acc") \
                or (op.name == "tile.store" and tile.kind == "Mat"):
            raise unsupported(f"{op.name} with a {tile.kind} tile", op.span)
        if tile.dtype == "bool" and gm_v.name not in self.workspaces:
            # A comparison result is a packed predicate (a bit per element); GM bool tensors of the
            # operator hold a byte per element. Workspaces are fine: the same tile grid stores the
            # mask and loads it back, so its bytes travel unchanged.
            raise unsupported(f"moving a comparison mask to or from the operator's bool tensor `{gm_v.name}`",
                              op.span, "compute the mask inside the kernel that selects with it")
        view = self._gm_view(tensor, tile, op.attrs["offsets"], gm_v, op.span, depth)
        gm = Operand(tensor.dtype, "row", "GM")
        if op.name == "tile.load":
            self._use(LOAD, (self.operands[tile.var], gm), op.span)
            self._line(depth, f"TLOAD({tile.var}, {view});", op.span)
        else:
            self._use(STORE, (gm, self.operands[tile.var]), op.span)
            if op.attrs.get("relu"):
                # the fixpipe's relu on the way out of L0C; the real header's overload that takes it
                # names the atomic mode first, without a default
                self._line(depth, f"TSTORE<decltype({tile.var}), decltype({view}), AtomicType::AtomicNone, "
                                  f"ReluPreMode::NormalRelu>({view}, {tile.var});", op.span)
            else:
                self._line(depth, f"TSTORE({view}, {tile.var});", op.span)

    def _gm_view(self, tensor: _Tensor, tile: TileInfo, offsets: list[sym.Expr], gm: Value,
                 span: Span | None, depth: int) -> str:
        """Declare the GlobalTensor a transfer moves through; returns its name."""
        rank = len(tensor.shape)
        extents = gm_extents(tile.tile_type)
        strides = list(tensor.strides)
        dn = tile.transposed
        if tile.transposed:
            # A [r, c] block of row-major data read as the column-major [c, r] matrix it is (the
            # dims before them, a batch entry, have extent 1).
            extents = [*extents[:-2], extents[-1], extents[-2]]
            strides = [*strides[:-2], strides[-1], strides[-2]]
        # The 2-D extents of rank <= 2 tiles are the tile's own valid extents: name them so.
        getters: dict[int, str] = {}
        if rank <= 2:
            getters[4] = f"{tile.var}.GetValidCol()"
            if rank == 2:
                getters[3] = f"{tile.var}.GetValidRow()"
        shape = [1] * (5 - rank) + extents
        stride = [1] * (5 - rank) + strides
        shape_t, shape_args = self._entries(shape, getters)
        stride_t, stride_args = self._entries(stride, {})
        layout = ", Layout::DN" if dn else ""
        ctype = cxx_type(tensor.dtype)
        gtype = f"GlobalTensor<{ctype}, Shape<{shape_t}>, Stride<{stride_t}>{layout}>"
        base: sym.Expr = 0
        for o, s in zip(offsets, tensor.strides):
            base = sym.add(base, sym.mul(o, s))
        pointer = tensor.var if base == 0 else f"{tensor.var} + {self._e(base)}"
        name = self.names.claim(f"{tensor.var}Gm{self.views}")
        self.views += 1
        if not shape_args and not stride_args:
            self._line(depth, f"{gtype} {name}({pointer});", span)
            return name
        alias = self.names.claim(f"GmView{self.views - 1}")
        self._line(depth, f"using {alias} = {gtype};", span)
        args = [pointer, f"{alias}::Shape({', '.join(shape_args)})"]
        if stride_args:
            args.append(f"{alias}::Stride({', '.join(stride_args)})")
        self._line(depth, f"{alias} {name}({', '.join(args)});", span)
        return name

    def _entries(self, values: list[sym.Expr], getters: dict[int, str]) -> tuple[str, list[str]]:
        static, dynamic = [], []
        for k, v in enumerate(values):
            if isinstance(v, int):
                static.append(str(v))
            else:
                static.append("DYNAMIC")
                dynamic.append(getters.get(k) or self._e(v))
        return ", ".join(static), dynamic

    # ------------------------------------------------------------------ instructions

    def _tile(self, v: Value, op: Op) -> TileInfo:
        info = self.tiles.get(v.name)
        if info is None:
            raise unsupported(f"an operand of `{op.name}` that is not a tile", op.span)
        return info

    def _operands(self, op: Op, cube: bool = False) -> list[TileInfo]:
        """The tiles of an instruction; the scratch of the previous one is free again."""
        self.scratch_cursor = self.scratch_base
        tiles = [self._tile(v, op) for v in op.operands]
        if not cube and any(t.kind != "Vec" for t in tiles):
            raise unsupported(f"`{op.name}` on {'/'.join(sorted({t.kind for t in tiles}))} tiles", op.span)
        return tiles

    @KERNEL.on("mov")
    def _mov(self, op: Op, depth: int) -> None:
        tiles = self._operands(op, cube=True)
        self._emit(depth, MOVE, [tiles[0].var, tiles[1].var], op)

    @KERNEL.on("matmul")
    def _matmul(self, op: Op, depth: int) -> None:
        self._emit(depth, OPS["matmul"].pto, [t.var for t in self._operands(op, cube=True)], op)

    @KERNEL.on("matmul_acc")
    def _matmul_acc(self, op: Op, depth: int) -> None:
        self._emit(depth, OPS["matmul"].acc_pto, [t.var for t in self._operands(op, cube=True)], op)

    @KERNEL.on("matmul_bias")
    def _matmul_bias(self, op: Op, depth: int) -> None:
        self._emit(depth, OPS["matmul"].bias_pto, [t.var for t in self._operands(op, cube=True)], op)

    @KERNEL.on("fill_tile")
    def _fill(self, op: Op, depth: int) -> None:
        dst = self._operands(op)[0]
        self._emit(depth, FILL, [dst.var, self._scalar(op.attrs["scalar"], dst.dtype)], op)

    def _emit(self, depth: int, instr: str | None, args: list[str], op: Op) -> None:
        if instr is None:
            raise unsupported(f"`{op.name}` (the op table names no pto-isa instruction for it)", op.span)
        self._use(instr, tuple(self.operands[a] for a in args if a in self.operands), op.span)
        self._line(depth, f"{instr}({', '.join(args)});", op.span)

    def _use(self, instr: str, operands: tuple[Operand, ...], span: Span | None) -> None:
        self.uses.append(InstructionUse(instr, operands, span))

    def _scalar(self, e: sym.Expr, dtype: str) -> str:
        return cxx.scalar_value(e, dtype, self.ctx)

    @KERNEL.on("unary", "binary")
    def _arith(self, op: Op, depth: int) -> None:
        name = op.name[len("tile."):]
        special = ARITH_FORMS.get(name)
        if special is not None:
            special(self, op, depth)
            return
        tiles = self._operands(op)
        od = OPS[name]
        if od.pto is None:
            raise unsupported(f"`{op.name}` (the op table names no pto-isa instruction for it)", op.span)
        dst = tiles[0]
        if od.kind == "unary":
            self._emit(depth, od.pto, [dst.var, tiles[1].var], op)
            return
        if "scalar" not in op.attrs:
            self._emit(depth, od.pto, [t.var for t in tiles], op)
            return
        s = self._scalar(op.attrs["scalar"], tiles[1].dtype)
        if op.attrs.get("side") != "left" or od.commutative:
            self._emit(depth, od.pto_scalar, [dst.var, tiles[1].var, s], op)
        elif name == "div":
            self._emit(depth, od.pto_scalar, [dst.var, s, tiles[1].var], op)  # TDIVS's scalar-first form
        elif name == "sub":
            # s - x == -(x - s) exactly: both roundings see the same magnitude.
            self._emit(depth, od.pto_scalar, [dst.var, tiles[1].var, s], op)
            self._line(depth, "pipe_barrier(PIPE_V);", op.span)
            self._emit(depth, OPS["neg"].pto, [dst.var, dst.var], op)
        else:
            raise unsupported(f"`{op.name}` with the scalar on the left", op.span)

    @KERNEL.on("cast")
    def _cast(self, op: Op, depth: int) -> None:
        tiles = self._operands(op)
        if "bool" in (tiles[0].dtype, tiles[1].dtype):
            raise unsupported("a cast to or from bool", op.span)
        if tiles[0].dtype == tiles[1].dtype:
            # TCVT to the same float dtype rounds to an integral value (pto-isa's f32 -> f32
            # "round-only" conversion); an identity cast is a copy
            self._emit(depth, MOVE, [tiles[0].var, tiles[1].var], op)
            return
        mode = ROUND_MODES.get(op.attrs.get("mode", "rint"))
        if mode is None:
            raise unsupported(f"the rounding mode `{op.attrs.get('mode')}`", op.span)
        self._emit(depth, OPS["cast"].pto, [tiles[0].var, tiles[1].var, f"RoundMode::{mode}"], op)

    # Masks. pto-isa's TCMPS packs each source row as Cols / 8 bytes (its static width) and lays the
    # bytes out in mask rows of the mask's valid column count; TSEL reads the destination's valid
    # region as one bit stream, moving to the next mask row after that many bytes. Rows line up
    # only over whole rows, so both instructions work on views of the same memory (a second tile
    # TASSIGNed at the same offset) whose valid columns are whole rows: the compare's mask view
    # has the source's Cols / 8 bytes, and the select covers the tile's logical width rounded up
    # to a byte of mask, which every operand's row holds. The columns past the valid region it
    # computes land in padding, which nothing reads.

    def _view(self, dtype: str, rows: int, cols: int, offset: int, valid_rows: sym.Expr, valid_cols: int,
              op: Op, depth: int) -> str:
        """A tile over ``rows`` x ``cols`` memory at ``offset`` with the given valid extents."""
        vr = valid_rows if isinstance(valid_rows, int) else "DYNAMIC"
        ctype = f"Tile<TileType::Vec, {cxx_type(dtype)}, {rows}, {cols}, BLayout::RowMajor, {vr}, {valid_cols}>"
        alias, var = self._scratch_names(ctype, "TileView", "view")
        args = "" if isinstance(valid_rows, int) else f"({self._e(valid_rows)})"
        self._line(depth, f"{alias} {var}{args};", op.span)
        self._line(depth, f"TASSIGN({var}, {offset});", op.span)
        return var

    def _mask_view(self, mask: TileInfo, row_bytes: int, op: Op, depth: int) -> str:
        if mask.dtype != "bool" or row_bytes > mask.cols:
            raise unsupported(f"a {mask.rows}x{mask.cols} {mask.dtype} mask for rows of {row_bytes} bytes", op.span)
        return self._view("bool", mask.rows, mask.cols, mask.offset, mask.valid()[0], row_bytes, op, depth)

    @KERNEL.on("compare")
    def _compare(self, op: Op, depth: int) -> None:
        tiles = self._operands(op)
        od = OPS["cmp"]
        mode = op.attrs["mode"]
        mask = self._mask_view(tiles[0], tiles[1].cols // 8, op, depth)
        if "scalar" in op.attrs:
            if op.attrs.get("side") == "left":
                mode = CMP_SWAPPED[mode]  # s < x is x > s
            s = self._scalar(op.attrs["scalar"], tiles[1].dtype)
            args, instr = [mask, tiles[1].var, s], od.pto_scalar
        else:
            args, instr = [mask, *(t.var for t in tiles[1:])], od.pto
        self._emit(depth, instr, [*args, f"CmpMode::{CMP_MODES[mode]}"], op)

    @KERNEL.on("select")
    def _select(self, op: Op, depth: int) -> None:
        tiles = self._operands(op)
        dst, mask = tiles[0], tiles[1]
        width = -(-logical_2d(dst.tile_type.shape)[1] // 8) * 8
        rows = dst.valid()[0]
        rest = list(tiles[2:])
        offsets = []
        for key in ("scalar", "scalar2"):
            if key in op.attrs:
                filled = self._scratch(dst, op, depth)
                self._emit(depth, FILL, [filled, self._scalar(op.attrs[key], dst.dtype)], op)
                offsets.append(self.scratch_offsets[filled])
            else:
                src = rest.pop(0)
                if (src.rows, src.cols) != (dst.rows, dst.cols):
                    raise unsupported(f"a select from a {src.rows}x{src.cols} tile into a {dst.rows}x{dst.cols} "
                                      "one (TSEL takes operands of one tile type)", op.span)
                offsets.append(src.offset)
        if len(offsets) == 2 and any(k in op.attrs for k in ("scalar", "scalar2")):
            self._line(depth, "pipe_barrier(PIPE_V);", op.span)
        views = [self._view(dst.dtype, dst.rows, dst.cols, o, rows, width, op, depth) for o in (dst.offset, *offsets)]
        mask_view = self._mask_view(mask, width // 8, op, depth)
        tmp = self._scratch(dst, op, depth)
        self._emit(depth, OPS["where"].pto, [views[0], mask_view, *views[1:], tmp], op)

    @KERNEL.on("reduce")
    def _reduce(self, op: Op, depth: int) -> None:
        tiles = self._operands(op)
        name = op.name[len("tile."):]
        od = OPS[name]
        if od.mean_of is not None:
            raise unsupported(f"`{op.name}` (the tile pass lowers it to `{od.mean_of}` and a scale)", op.span)
        dst, src = tiles
        t: TileType = src.tile_type
        axis = int(op.attrs["axis"]) % t.rank
        if axis == t.rank - 1:
            tmp = self._scratch(src, op, depth)
            self._emit(depth, od.row_pto, [dst.var, src.var, tmp], op)
        elif all(d == 1 for k, d in enumerate(t.shape[:-1]) if k != axis):
            # the tile is 2-D with the reduced axis as its rows (see passes/reduce_axes.py)
            self._emit(depth, od.col_pto, [dst.var, src.var], op)
        else:
            raise unsupported(f"a reduction over axis {axis} of a rank-{t.rank} tile", op.span)

    @KERNEL.on("expand")
    def _expand(self, op: Op, depth: int) -> None:
        tiles = self._operands(op)
        """Broadcast src over dst: one value per row (TROWEXPAND), one per column (TCOLEXPAND),
        a single value, spread along a row first and then down the columns, or the same rows under
        more dims (TMOV). Tiling keeps every broadcast one of these (``passes/tile_shape.py``)."""
        dst, src = tiles
        rd, cd = logical_2d(dst.tile_type.shape)
        rs, cs = logical_2d(src.tile_type.shape)
        if rs == 1 and cs == cd:
            self._emit(depth, COL_EXPAND, [dst.var, src.var], op)
        elif rs == rd and cs == 1:
            self._emit(depth, ROW_EXPAND, [dst.var, src.var], op)
        elif (rs, cs) == (rd, cd):
            # only leading dims of 1 added (a [S, H] value written as [1, S, H]): the same rows
            self._emit(depth, MOVE, [dst.var, src.var], op)
        elif rs == 1 and cs == 1:
            row = self._scratch(dst, op, depth, rows=1)
            self._emit(depth, ROW_EXPAND, [row, src.var], op)
            self._line(depth, "pipe_barrier(PIPE_V);", op.span)
            self._emit(depth, COL_EXPAND, [dst.var, row], op)
        else:
            raise unsupported(f"a broadcast from {list(src.tile_type.shape)} to {list(dst.tile_type.shape)} "
                              "that is neither per row nor per column", op.span)

    def _scratch_names(self, ctype: str, alias_stem: str, var_stem: str) -> tuple[str, str]:
        """The type alias of ``ctype`` (one per distinct type) and a fresh variable name."""
        alias = self.scratch_aliases.get(ctype)
        if alias is None:
            alias = self.names.claim(f"{alias_stem}{len(self.scratch_aliases)}")
            self.scratch_aliases[ctype] = alias
            self.aliases.append(f"using {alias} = {ctype};")
        var = self.names.claim(f"{var_stem}{self.scratch_count}")
        self.scratch_count += 1
        return alias, var

    def _scratch(self, like: TileInfo, op: Op, depth: int, rows: int | None = None, valid: bool = False) -> str:
        """A scratch tile shaped like ``like`` (or ``rows`` of its rows), above the planned peak;
        ``valid``: with ``like``'s valid extents (instructions that check operands' valid shapes
        against each other), else wholly valid."""
        rows = like.rows if rows is None else rows
        return self._scratch_tile(like.dtype, rows, like.cols, op, depth, like.valid() if valid else None)

    def _scratch_tile(self, dtype: str, rows: int, cols: int, op: Op, depth: int,
                      valid: tuple[sym.Expr, sym.Expr] | None = None) -> str:
        """A ``rows`` x ``cols`` scratch tile above the planned peak, with the ``valid`` extents
        given, else wholly valid."""
        ctype = scratch_type(dtype, rows, cols)
        extents = ""
        if valid is not None:
            vr, vc = valid
            ctype = ctype[:-1] + f", {vr if isinstance(vr, int) else 'DYNAMIC'}, {vc if isinstance(vc, int) else 'DYNAMIC'}>"
            dynamic = [self._e(v) for v in (vr, vc) if not isinstance(v, int)]
            extents = f"({', '.join(dynamic)})" if dynamic else ""
        alias, var = self._scratch_names(ctype, "TileTmp", "tmp")
        self.operands[var] = Operand(dtype, _layout("row", cols), "Vec")
        offset = self.scratch_cursor
        size = rows * cols * _itemsize(dtype)
        self.scratch_cursor = _align(offset + size, self.target.ub_block_bytes)
        if self.scratch_cursor > self.scratch_peak:
            self.scratch_peak = self.scratch_cursor
            self.scratch_span = op.span
        self._line(depth, f"{alias} {var}{extents};", op.span)
        self._line(depth, f"TASSIGN({var}, {offset});", op.span)
        self.scratch_offsets[var] = offset
        return var


def _layout(layout: str, cols: int) -> str:
    return "row" if layout == "row" else "col1" if cols == 1 else "col"


def _itemsize(dtype: str) -> int:
    from ...dtypes import itemsize

    return itemsize(dtype)


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _pipe(name: str, op: Op) -> str:
    pipe = PIPES.get(str(name).upper())
    if pipe is None:
        raise unsupported(f"the pipe `{name}`", op.span)
    return pipe


def emit_kernel(func: Func, target: Target, plan: KernelPlan, origin: str) -> KernelSource:
    """The C++ translation unit of one compute kernel; raises CompileError (E0800) when the
    kernel uses something the emitter cannot express."""
    return KernelEmitter(func, target, plan, origin).emit()


__all__ = ["InstructionUse", "KernelPlan", "KernelSource", "Operand", "emit_kernel"]

from . import kernel_control, kernel_elem, kernel_fused, kernel_index, kernel_layout  # noqa: E402,F401  (they register their ops' C++ on KERNEL and ARITH_FORMS)
