"""The control program of one dtype variant as a C++ translation unit: what the AICPU side does on
the NPU. It runs the loops and branches, reads scalars out of tensors, allocates GM workspaces,
computes the offsets of views and the symbolic arguments, and calls the compute kernels.

This module is the walker both hosts share (loops, branches, views, guards, prints, the arguments
of a launch); what differs between running the program on the CPU (control_cpu.py: host memory,
blocks on threads) and on the NPU's host (control_npu.py: device memory and streams through ACL)
is in the hooks each host defines.

The entry of either host is named after the variant (``softmax_f32``) and takes, in order: the
operator's tensors (pointers to C-contiguous data), its scalar parameters, the values of the
symbols the program uses (sorted by name, ``int64_t``) and ``int poison`` (the NPU host takes the
device and the stream first). With ``poison`` set, every launch starts from freshly poisoned
on-chip buffers and workspaces start as NaN bytes, as the simulator's poison mode does, so a kernel
reading data nobody wrote shows it. A bounds guard that stops the call makes the entry return its
1-based number (in program order) and leave the access's offset, size and dim in the exported
``int64_t <entry>_guard[3]`` for the caller's diagnostic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ... import sym
from ...escape import cpp_comment, cpp_string
from ...ir import Func, Module, Op, Param, TensorType
from ...ir.opdefs import Handlers, block_params
from ...shapes import product
from . import cxx
from .cxx import ExprContext, Names, cxx_type, unsupported
from .gm import Origin, explicit_strides, kernel_env, linear_offset, trace_origins, walk_ops
from .kernel import KernelSource

# Ops whose result is a pointer into their operand's memory (layout ops: control_layout.py).
ALIASES = ("view", "reshape", "permute")
ENTRY_SCALAR_TYPES = {"f32": "float", "f16": "float", "bf16": "float"}  # 16-bit floats cross as float


@dataclass(frozen=True)
class EntryParam:
    """One parameter of the exported entry."""

    kind: str  # tensor | scalar | symbol | poison
    name: str  # the IR name (parameter or symbol)
    dtype: str  # element dtype (tensor), scalar dtype, or i64 (symbols), i32 (poison)


@dataclass
class ControlSource:
    name: str
    filename: str
    text: str
    params: list[EntryParam]
    parallel: list[str]  # names of the loops that run with OpenMP


# After a launch of a kernel holding bounds guards: each block that stopped at one left its number,
# offset, extent and dim in its four status entries; the first such block (blocks run contiguous
# ranges of iterations, in order) is the guard the call stops at, as if run one after another.
GUARD_STOPPED = """\
static int64_t guard_stopped(const int64_t* status, int64_t blocks, int64_t* values)
{
    for (int64_t b = 0; b < blocks; ++b) {
        if (status[4 * b] != 0) {
            for (int k = 0; k < 3; ++k) {
                values[k] = status[4 * b + 1 + k];
            }
            return status[4 * b];
        }
    }
    return 0;
}"""


def symbols_of(control: Func) -> list[str]:
    """The free symbols of a control program: the values the entry takes, sorted."""
    found: set[str] = set()
    for p in control.params:
        if p.is_tensor:
            for e in p.type.shape:
                found |= sym.free_symbols(e)
    defined = {p.name for p in control.params if not p.is_tensor}
    for op in walk_ops(control.body):
        for value in op.attrs.values():
            for e in value if isinstance(value, list) else [value]:
                if isinstance(e, (sym.Sym, sym.BinExpr, sym.CallExpr, sym.NegExpr)):
                    found |= sym.free_symbols(e)
        for r in op.results:
            if isinstance(r.type, TensorType):
                for e in r.type.shape:
                    found |= sym.free_symbols(e)
        if op.name == "loop":
            defined.add(op.attrs["index"])
        elif op.name == "read":
            defined.add(op.attrs["sym"])
    return sorted(found - defined)


# The C++ of each op family of a control program (``ir/opdefs.py``); compute kernels' ops have
# theirs in kernel.py.
CONTROL = Handlers("the control program emitter")


class ControlEmitter:
    """The walker: one control program's C++ body, with the host-specific parts left to hooks."""

    # names the host's prelude defines, which no variable of the program may take
    RESERVED: tuple[str, ...] = ()

    def __init__(self, module: Module, control: Func, kernels: dict[str, KernelSource], parallel: list[Op],
                 origin: str):
        self.module = module
        self.control = control
        self.kernels = kernels
        self.parallel = {id(op) for op in parallel}
        self.parallel_names = [op.attrs.get("name", op.attrs["index"]) for op in parallel]
        self.origin = origin
        self.origins: dict[str, Origin] = trace_origins(control)
        self.strided = explicit_strides(module, [control])
        self.lines: list[tuple[int, str, str]] = []
        self.vars: dict[str, str] = {}  # GM value -> pointer variable
        self.guards = 0
        self.hoisted: set[int] = set()  # workspaces declared up front (see _hoist_allocs)
        self.hoisted_views: set[int] = set()  # views whose pointers are declared up front
        self._context()

    def _context(self) -> None:
        self.names = Names(["poison", f"{self.control.name}_failure", *self.kernels, "guard_stopped",
                            *self.RESERVED, *(f"{k}_launch" for k in self.kernels)])
        self.guard_var = self.names.claim(f"{self.control.name}_guard")
        names: dict[str, str] = {}
        kinds: dict[str, str] = {}
        self.params: list[tuple[EntryParam, str]] = []
        for p in self.control.params:
            var = self.names.claim(p.name)
            if p.is_tensor:
                self.vars[p.name] = var
                self.params.append((EntryParam("tensor", p.name, p.dtype), f"{cxx_type(p.dtype)}* {var}"))
            else:
                names[p.name] = var
                kinds[p.name] = cxx.FLOAT if p.dtype in cxx.FLOAT_DTYPES else cxx.INT
                ctype = ENTRY_SCALAR_TYPES.get(p.dtype) or cxx_type(p.dtype)
                self.params.append((EntryParam("scalar", p.name, p.dtype), f"{ctype} {var}"))
        self.symbols = symbols_of(self.control)
        for s in self.symbols:
            names[s] = self.names.claim(s)
            self.params.append((EntryParam("symbol", s, "i64"), f"int64_t {names[s]}"))
        self.params.append((EntryParam("poison", "poison", "i32"), "int poison"))
        nonneg = set(self.symbols)
        for op in walk_ops(self.control.body):
            if op.name == "loop":
                names[op.attrs["index"]] = self.names.claim(op.attrs["index"])
                if sym.prove_nonneg(op.attrs["lo"], {n: (0, None) for n in nonneg}):
                    nonneg.add(op.attrs["index"])
            elif op.name == "read":
                names[op.attrs["sym"]] = self.names.claim(op.attrs["sym"])
                kinds[op.attrs["sym"]] = cxx.FLOAT if op.attrs["dtype"] in cxx.FLOAT_DTYPES else cxx.INT
        self.ctx = ExprContext(kinds, names, frozenset(nonneg))

    def nonneg(self, e: sym.Expr) -> bool:
        return self.ctx.is_nonneg(e)

    # ------------------------------------------------------------------ output

    def emit(self) -> ControlSource:
        self._hoist_allocs()
        self._block(self.control.body, 1)
        name = self.control.name
        out = [f"// {name}: the control program of {cpp_comment(self.origin)}.",
               "// Generated by ptodsl from the Block IR: loops, branches, scalar reads, GM workspaces and the",
               f"// launches of the compute kernels{self.RUN_BY}",
               "#include <pto/pto-inst.hpp>", *self.INCLUDES, "",
               "#include <algorithm>", "#include <cmath>", "#include <cstdint>", "#include <cstdio>",
               "#include <limits>", "#include <new>", "#include <utility>", "#include <vector>", ""]
        out += self._declarations()
        out += ["", self.PRELUDE, ""]
        for h in cxx.helper_definitions(self.ctx.helpers):
            out += [h, ""]
        if any(k.guards for k in self.kernels.values()):
            out += [GUARD_STOPPED, ""]
        if self.guards or any(k.guards for k in self.kernels.values()):
            out += [f'extern "C" {{ int64_t {self.guard_var}[3] = {{0, 0, 0}}; }}', ""]
        out += self._entry(", ".join(decl for _, decl in self.params))
        return ControlSource(name, f"{name}.cpp", "\n".join(out) + "\n", [p for p, _ in self.params],
                             self.parallel_names)

    # ------------------------------------------------------------------ the host's hooks

    RUN_BY = "."  # how the comment at the top ends: who runs the program
    INCLUDES: tuple[str, ...] = ()
    PRELUDE = ""

    def _declarations(self) -> list[str]:
        """What the program calls of each kernel."""
        raise NotImplementedError

    def _entry(self, params: str) -> list[str]:
        """The exported entry around the program's body (``self.lines``)."""
        raise NotImplementedError

    def _workspace(self, depth: int, memory: str, nbytes: str, op: Op) -> None:
        """Declare ``memory``, a GM workspace of ``nbytes`` bytes with a ``data()``."""
        raise NotImplementedError

    def _read_value(self, pointer: str, index: str, source: Param | None) -> str:
        """The expression reading element ``index`` of ``pointer``; ``source``: the entry's input
        tensor the pointer points into when nothing in the call writes it, else None."""
        raise NotImplementedError

    def _after_device_call(self, depth: int, op: Op) -> None:
        """After a workspace or a read: stop the call if the host's runtime failed."""

    def _block_args(self, block: str, blocks: str) -> tuple[str | None, str | None]:
        """What a kernel taking its block index and count as parameters gets (None: nothing)."""
        raise NotImplementedError

    def _status(self, depth: int, status: str, count: str, op: Op) -> str:
        """Declare the status buffer of a kernel holding guards; returns the kernel's argument."""
        raise NotImplementedError

    def _start(self, depth: int, kernel: Func, args: list[str], blocks: str | None, block: str | None,
               op: Op) -> None:
        """Start ``kernel`` with ``args``: once, or ``blocks`` times (``block`` the index)."""
        raise NotImplementedError

    def _status_entries(self, depth: int, status: str, count: str, op: Op) -> str:
        """The host pointer to the status entries once the kernel is done."""
        raise NotImplementedError

    def _openmp(self, depth: int, head: str, index: str, body: Callable[[int], None], op: Op) -> None:
        """``head`` (a ``for`` over ``index``) shared out over the host's threads; only a host that
        has them is given parallel loops."""
        raise NotImplementedError

    def _line(self, depth: int, code: str, op: Op | None = None) -> None:
        self.lines.append((depth, code, cxx.location(op.span if op is not None else None)))

    def _e(self, e: sym.Expr) -> str:
        return cxx.expr(e, self.ctx)

    # ------------------------------------------------------------------ ops

    def _block(self, ops: list[Op], depth: int) -> None:
        for op in ops:
            handler = CONTROL.get(op)
            if handler is None:
                raise unsupported(f"the op `{op.name}` in a control program", op.span)
            handler(self, op, depth)

    @CONTROL.on("loop")
    def _op_loop(self, op: Op, depth: int) -> None:
        index = self.ctx.names[op.attrs["index"]]
        step = op.attrs["step"]
        if not isinstance(step, int) or step == 0:
            raise unsupported(f"a loop with step {sym.to_text(step)}", op.span)
        cmp = "<" if step > 0 else ">"
        inc = f"++{index}" if step == 1 else f"{index} += {step}"
        head = (f"for (int64_t {index} = {self._e(op.attrs['lo'])}; {index} {cmp} "
                f"{self._e(op.attrs['hi'])}; {inc}) {{")
        if id(op) in self.parallel:
            self._openmp(depth, head, index, lambda d: self._block(op.regions[0], d), op)
            return
        self._line(depth, head, op)
        self._block(op.regions[0], depth + 1)
        self._line(depth, "}")

    @CONTROL.on("if")
    def _op_if(self, op: Op, depth: int) -> None:
        self._line(depth, f"if ({self._e(op.attrs['cond'])}) {{", op)
        self._block(op.regions[0], depth + 1)
        if len(op.regions) > 1 and op.regions[1]:
            self._line(depth, "} else {")
            self._block(op.regions[1], depth + 1)
        self._line(depth, "}")

    def _pointer(self, name: str, op: Op) -> str:
        var = self.vars.get(name)
        if var is None:
            raise unsupported(f"the GM value `%{name}` here", op.span)
        return var

    def _pointer_var(self, op: Op, value: str, depth: int) -> None:
        if id(op) in self.hoisted_views:  # declared up front (see _hoist_allocs)
            self._line(depth, f"{self.vars[op.result.name]} = {value};", op)
            return
        var = self.vars[op.result.name] = self.names.claim(op.result.name)
        self._line(depth, f"{cxx_type(op.result.type.dtype)}* {var} = {value};", op)

    @CONTROL.on("view")
    def _op_view(self, op: Op, depth: int) -> None:
        parent = self._pointer(op.operands[0].name, op)
        offset = linear_offset(tuple(op.attrs["offsets"]), self.origins[op.result.name].strides)
        self._pointer_var(op, parent if offset == 0 else f"{parent} + {self._e(offset)}", depth)

    @CONTROL.on("reshape")
    def _op_reshape(self, op: Op, depth: int) -> None:
        self._pointer_var(op, self._pointer(op.operands[0].name, op), depth)

    def _hoist_allocs(self) -> None:
        """Declare at function scope the workspaces of an implicit top-level ``loop(1)`` that code
        after that loop uses.

        A local declared among top-level statements lands in their implicit single-trip loop, yet
        later loops use it; a C++ declaration inside that loop's braces would be out of their
        scope. Such a workspace (sized by the entry's symbols and scalars) is declared up front
        instead. Every other workspace stays where it is: one per iteration, per thread.
        """
        entry = set(self.symbols) | {p.name for p in self.control.params if not p.is_tensor}

        def single_trip(op: Op) -> bool:
            return (op.name == "loop" and id(op) not in self.parallel and op.attrs["lo"] == 0
                    and op.attrs["hi"] == 1)

        def allocs(ops: list[Op]) -> list[Op]:
            found = []
            for op in ops:
                if op.name == "alloc" or op.name in ALIASES:
                    found.append(op)
                elif single_trip(op):
                    found += allocs(op.regions[0])
            return found

        body = self.control.body
        for k, top in enumerate(body):
            if not single_trip(top):
                continue
            later = {v.name for op in body[k + 1:] for o in op.walk() for v in o.operands}
            made = allocs(top.regions[0])
            # a view used later keeps the memory it points into alive: its parent, and so on up
            # to the workspace (a reshape of a transpose of a workspace, all made up here)
            for op in reversed(made):
                if op.name in ALIASES and op.result.name in later:
                    later.add(op.operands[0].name)
            for op in made:
                if op.result.name not in later:
                    continue
                if op.name != "alloc":
                    # a view made among top-level statements and used by a later loop: its pointer
                    # is declared up front and set where the view is made (its offsets may be
                    # values read there)
                    var = self.vars[op.result.name] = self.names.claim(op.result.name)
                    self._line(1, f"{cxx_type(op.result.type.dtype)}* {var} = nullptr;", op)
                    self.hoisted_views.add(id(op))
                elif all(sym.free_symbols(d) <= entry for d in op.result.type.shape):
                    self._op_alloc(op, 1)
                    self.hoisted.add(id(op))
                else:  # freed at the end of its loop's braces while a later loop still reads it
                    raise unsupported(f"a workspace sized by a value read at run time (`%{op.result.name}`) "
                                      "that a later loop reads", op.span)

    @CONTROL.on("alloc")
    def _op_alloc(self, op: Op, depth: int) -> None:
        if id(op) in self.hoisted:
            return
        t: TensorType = op.result.type
        ctype = cxx_type(t.dtype)
        count = product(t.shape)
        var = self.vars[op.result.name] = self.names.claim(op.result.name)
        memory = self.names.claim(f"{var}_bytes")
        elements = self._e(count)
        if not re.fullmatch(r"\w+", elements):
            elements = f"({elements})"
        self._workspace(depth, memory, f"{elements} * static_cast<int64_t>(sizeof({ctype}))", op)
        self._line(depth, f"{ctype}* {var} = reinterpret_cast<{ctype}*>({memory}.data());", op)

    @CONTROL.on("read")
    def _op_read(self, op: Op, depth: int) -> None:
        tensor = op.operands[0]
        pointer = self._pointer(tensor.name, op)
        index = linear_offset(tuple(op.attrs["index"]), self.origins[tensor.name].strides)
        dtype = op.attrs["dtype"]
        # an integer read is held as int64_t, so that the guards' and offsets' arithmetic on it
        # (`r + 1 <= R`) cannot overflow the tensor's element type, whatever value the data holds
        ctype = "float" if dtype in cxx.FLOAT_DTYPES else "int64_t"
        var = self.ctx.names[op.attrs["sym"]]
        origin = self.origins[tensor.name]
        source = next((p for p in self.control.params if p.name == origin.root and p.is_tensor
                       and p.mode == "in" and not origin.workspace), None)
        value = self._read_value(pointer, self._e(index), source)
        self._line(depth, f"const {ctype} {var} = static_cast<{ctype}>({value});", op)
        self._after_device_call(depth, op)

    @CONTROL.on("guard")
    def _op_guard(self, op: Op, depth: int) -> None:
        self.guards += 1
        a = op.attrs
        if op.operands:
            self._repeat_guard(op, depth)
            return
        self._line(depth, f"if (!({self._e(a['cond'])})) {{", op)
        for k, key in enumerate(("offset", "extent", "dim")):
            self._line(depth + 1, f"{self.guard_var}[{k}] = static_cast<int64_t>({self._e(a[key])});", op)
        self._line(depth + 1, f"return {self.guards};", op)
        self._line(depth, "}")

    def _repeat_guard(self, op: Op, depth: int) -> None:
        """Stop the call at the first element of the index that an earlier one holds: the (value,
        position) pairs sorted, the smallest position that follows an equal value in that order.
        Memory grows with the index, not with the dim it indexes."""
        a = op.attrs
        index = op.operands[0]
        pointer = self._pointer(index.name, op)
        origin = self.origins[index.name]
        source = next((p for p in self.control.params if p.name == origin.root and p.is_tensor
                       and p.mode == "in" and not origin.workspace), None)
        pairs, n, i, k, at, value = (self.names.claim(x) for x in ("_pairs", "_rn", "_ri", "_rk", "_rat", "_rv"))
        self._line(depth, "{", op)
        self._line(depth + 1, f"const int64_t {n} = static_cast<int64_t>({self._e(a['extent'])});", op)
        self._line(depth + 1, f"std::vector<std::pair<int64_t, int64_t>> {pairs};", op)
        self._line(depth + 1, f"{pairs}.reserve(static_cast<size_t>({n} > 0 ? {n} : 0));", op)
        self._line(depth + 1, f"for (int64_t {i} = 0; {i} < {n}; ++{i}) {{", op)
        stride = origin.strides[-1]
        where = i if stride == 1 else f"{i} * ({self._e(stride)})"
        self._line(depth + 2, f"{pairs}.emplace_back(static_cast<int64_t>({self._read_value(pointer, where, source)}), "
                              f"{i});", op)
        self._after_device_call(depth + 2, op)
        self._line(depth + 1, "}")
        self._line(depth + 1, f"std::sort({pairs}.begin(), {pairs}.end());", op)
        self._line(depth + 1, f"int64_t {at} = -1, {value} = 0;", op)
        self._line(depth + 1, f"for (size_t {k} = 1; {k} < {pairs}.size(); ++{k}) {{", op)
        self._line(depth + 2, f"if ({pairs}[{k}].first == {pairs}[{k} - 1].first && "
                              f"({at} < 0 || {pairs}[{k}].second < {at})) {{", op)
        self._line(depth + 3, f"{at} = {pairs}[{k}].second;", op)
        self._line(depth + 3, f"{value} = {pairs}[{k}].first;", op)
        self._line(depth + 2, "}")
        self._line(depth + 1, "}")
        self._line(depth + 1, f"if ({at} >= 0) {{", op)
        for slot, x in enumerate((value, at, f"static_cast<int64_t>({self._e(a['dim'])})")):
            self._line(depth + 2, f"{self.guard_var}[{slot}] = {x};", op)
        self._line(depth + 2, f"return {self.guards};", op)
        self._line(depth + 1, "}")
        self._line(depth, "}")

    @CONTROL.on("print")
    def _op_print(self, op: Op, depth: int) -> None:
        fmt, args = _printf_format(op.attrs["format"], op.attrs.get("args", []), self.ctx, op)
        self._line(depth, f"std::printf({', '.join([fmt, *args])});", op)
        self._line(depth, "std::fflush(stdout);", op)

    @CONTROL.on("launch")
    def _op_launch(self, op: Op, depth: int) -> None:
        """Start a compute kernel: once, or (``block_dim``) once per block, each block given its
        index and the block count. A kernel holding bounds guards also takes a status buffer of
        four entries per block, checked once it is done (``GUARD_STOPPED``)."""
        kernel = self.module.func(op.attrs["kernel"])
        if kernel is None or kernel.name not in self.kernels:
            raise unsupported(f"a launch of the unknown kernel `{op.attrs['kernel']}`", op.span)
        source = self.kernels[kernel.name]
        env = kernel_env(kernel, op)
        strided = self.strided.get(kernel.name, set())
        tensors = iter(op.operands)
        own = dict(zip(("block_index", "block_count"), block_params(kernel)))
        blocks = block = None
        if "block_dim" in op.attrs or own:
            blocks = self.names.claim(f"{kernel.name}_blocks")
            block = self.names.claim(f"{kernel.name}_block")
        given = dict(zip(("block_index", "block_count"), self._block_args(block or "", blocks or "")))
        args: list[str | None] = []
        for p in kernel.params:
            if p.is_tensor:
                value = next(tensors)
                args.append(self._pointer(value.name, op))
                if p.name in strided:
                    args += [self._e(s) for s in self.origins[value.name].strides[:-1]]
            elif p.name == own.get("block_index"):
                args.append(given["block_index"])
            elif p.name == own.get("block_count"):
                args.append(given["block_count"])
            else:
                args.append(self._e(env[p.name]))
        kept = [a for a in args if a is not None]
        count = blocks or "1"
        scoped = blocks is not None or source.guards > 0  # a scope for the block count and status buffer
        inner = depth + 1 if scoped else depth
        if scoped:
            self._line(depth, "{", op)
        if blocks is not None:
            self._line(inner, f"const int64_t {blocks} = {self._e(op.attrs.get('block_dim', 1))};", op)
        status = None
        if source.guards:
            status = self.names.claim(f"{kernel.name}_status")
            kept.append(self._status(inner, status, count, op))
        self._start(inner, kernel, kept, blocks, block, op)
        if status is not None:
            stopped = self.names.claim(f"{kernel.name}_stopped")
            entries = self._status_entries(inner, status, count, op)
            self._line(inner, f"const int64_t {stopped} = guard_stopped({entries}, {count}, {self.guard_var});", op)
            self._line(inner, f"if ({stopped} != 0) {{", op)
            self._line(inner + 1, f"return static_cast<int>({stopped});", op)
            self._line(inner, "}")
        if scoped:
            self._line(depth, "}")


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{[^{}]*\}|%")


def _printf_format(fmt: str, args: list, ctx: ExprContext, op: Op) -> tuple[str, list[str]]:
    """A ``str.format`` template with ``{}`` fields as a printf format and its arguments."""
    out: list[str] = []
    values: list[str] = []
    pos = 0
    arg_iter = iter(args)
    for m in _PLACEHOLDER.finditer(fmt):
        out.append(fmt[pos:m.start()])
        tok = m.group()
        pos = m.end()
        if tok in ("{{", "}}"):
            out.append(tok[0])
        elif tok == "%":
            out.append("%%")
        elif tok == "{}":
            e = next(arg_iter, None)
            if e is None:
                raise unsupported("a print with more `{}` fields than values", op.span)
            text = cxx.expr(e, ctx)
            if cxx.kind_of(e, ctx) == cxx.FLOAT:
                out.append("%g")
                values.append(f"static_cast<double>({text})")
            else:
                out.append("%lld")
                values.append(f"static_cast<long long>({text})")
        else:
            raise unsupported(f"the print field `{tok}` (only `{{}}` is emitted)", op.span)
    out.append(fmt[pos:])
    return f'"{cpp_string("".join(out))}\\n"', values


def openmp_loops(control: Func, kernels: Mapping[str, Func]) -> list[Op]:
    """The loops of a control program that the cpu backend runs with OpenMP, outermost first: the
    outermost loops the parallel pass proved independent (``parallel = 1``, ``passes/parallel.py``),
    except one holding a guard, or launching a kernel (of ``kernels``, by name) that holds one: a
    failed guard stops the call by returning from the entry, and no return may leave an OpenMP
    region."""
    found: list[Op] = []

    def guarded(op: Op) -> bool:
        return op.name == "guard" or (op.name == "launch" and any(
            o.name == "guard" for o in kernels[op.attrs["kernel"]].walk()))

    def visit(ops: list[Op]) -> None:
        for op in ops:
            if op.name == "loop" and op.attrs.get("parallel") and not any(
                    guarded(o) for o in walk_ops(op.regions[0])):
                found.append(op)
                continue
            for region in op.regions:
                visit(region)

    visit(control.body)
    return found


# The hosts a control program is emitted for, registered by control_cpu.py and control_npu.py.
HOSTS: dict[str, type[ControlEmitter]] = {}


def emit_control(module: Module, control: Func, kernels: dict[str, KernelSource], parallel: list[Op],
                 origin: str, host: str = "cpu") -> ControlSource:
    """The control program for the CPU backend, or (``host="npu"``) the NPU host program."""
    if host not in HOSTS:
        raise ValueError(f"host must be one of {sorted(HOSTS)}, not {host!r}")
    return HOSTS[host](module, control, kernels, parallel, origin).emit()


__all__ = ["HOSTS", "ControlEmitter", "ControlSource", "EntryParam", "emit_control", "openmp_loops", "symbols_of"]


from . import control_cpu, control_layout, control_npu  # noqa: E402,F401  (hosts and layout ops register here)
