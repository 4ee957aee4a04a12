"""The control program of one dtype variant as a C++ translation unit: what the AICPU side does on
the NPU. It runs the loops and branches, reads scalars out of tensors, allocates GM workspaces,
computes the offsets of views and the symbolic arguments, and calls the compute kernels.

It exports one ``extern "C"`` entry named after the variant (``softmax_f32``) whose parameters are,
in order: the operator's tensors (pointers to C-contiguous data), its scalar parameters, the
values of the symbols the program uses (sorted by name, ``int64_t``) and ``int poison``. With
``poison`` set, every launch starts from freshly poisoned on-chip buffers and workspaces start as
NaN bytes, as the simulator's poison mode does, so a kernel reading data nobody wrote shows it.

The entry returns 0, or the 1-based number (in program order) of the bounds guard that stopped
the call before an access outside a tensor; it then leaves that access's offset, size and dim in
the exported ``int64_t <entry>_guard[3]`` for the caller's diagnostic. It returns -1 when a check
of the CPU header failed and -2 when a GM workspace could not be allocated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ... import sym
from ...escape import cpp_comment, cpp_string
from ...ir import Func, Module, Op, TensorType
from ...ir.opdefs import Handlers, block_params
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


PRELUDE = """\
// Each launch starts from fresh on-chip buffers when poisoning, so that no kernel can pass by
// reading what an earlier one left there.
static void start_launch(int poison)
{
#ifdef PTO_CPU_SUBSET
    if (poison) {
        pto::cpu::poison_buffers();
    }
#else
    (void)poison;
#endif
}

// A GM workspace: NaN bytes when poisoning (reads of unwritten data show), zeros otherwise.
static std::vector<unsigned char> workspace(int64_t bytes, int poison)
{
    return std::vector<unsigned char>(static_cast<size_t>(bytes > 0 ? bytes : 0), poison ? 0xFF : 0);
}"""


# The entry returns 0; the number of the bounds guard that stopped it; or -1 when a check of the CPU
# header failed, and {name}_failure() then says which.
# With a real pto-isa checkout (no PTO_CPU_SUBSET) the library's own checks apply and 0 is returned.
FAILURE_ENTRY = """\
extern "C" const char* {name}_failure(void)
{{
#ifdef PTO_CPU_SUBSET
    return pto::cpu::failure_message();
#else
    return "";
#endif
}}"""
# The NPU host program (host="npu"): the same control program run by the host CPU against device
# memory through the ACL runtime. Kernels are started on the caller's stream with their
# ``<kernel>_launch`` functions; a workspace is device memory (freed once the stream has drained);
# a scalar read waits for the stream and copies the value back.
NPU_PRELUDE = """\
static thread_local void* ptodsl_stream = nullptr;  // the stream of the running entry
static thread_local bool ptodsl_failed = false;  // a device allocation failed: launch nothing more

// A GM workspace in device memory: 0xFF bytes (NaN) when poisoning, zeros otherwise.
class DeviceWorkspace {
public:
    DeviceWorkspace(int64_t bytes, int poison)
    {
        size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
        if (aclrtMalloc(&data_, size, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
            data_ = nullptr;
            ptodsl_failed = true;
            return;
        }
        aclrtMemset(data_, size, poison ? 0xFF : 0, size);
    }
    ~DeviceWorkspace()
    {
        if (data_ != nullptr) {
            aclrtSynchronizeStream(ptodsl_stream);  // kernels queued on the stream may still use it
            aclrtFree(data_);
        }
    }
    DeviceWorkspace(const DeviceWorkspace&) = delete;
    DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
    unsigned char* data() { return static_cast<unsigned char*>(data_); }

private:
    void* data_ = nullptr;
};

// One element of device memory, once every kernel queued before has finished.
template <typename T>
static T read_device(const T* p)
{
    T value{};
    aclrtSynchronizeStream(ptodsl_stream);
    aclrtMemcpy(&value, sizeof(T), p, sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST);
    return value;
}"""

CATCH_BEGIN = ["#ifdef PTO_CPU_SUBSET", "    pto::cpu::clear_failure();", "#endif", "    try {"]
# -1: a check of the CPU header failed (guards that stop a call return their number, from 1);
# -2: a GM workspace could not be allocated (E0718), which would otherwise abort the process
CATCH_END = ["#ifdef PTO_CPU_SUBSET", "    } catch (const pto::cpu::Failure&) {", "        return -1;", "#endif",
             "    } catch (const std::bad_alloc&) {", "        return -2;", "    }", "    return 0;"]


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
    def __init__(self, module: Module, control: Func, kernels: dict[str, KernelSource], parallel: list[Op],
                 origin: str, host: str = "cpu"):
        if host not in ("cpu", "npu"):
            raise ValueError(f"host must be cpu or npu, not {host!r}")
        self.host = host
        if host == "npu":  # launches go to one stream, in order; no host threads
            parallel = []
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
        self.names = Names(["start_launch", "workspace", "poison", f"{self.control.name}_failure", *self.kernels,
                            "ptodsl_stream", "ptodsl_failed", "DeviceWorkspace", "read_device", "stream",
                            *(f"{k}_launch" for k in self.kernels)])
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
        npu = self.host == "npu"
        out = [f"// {name}: the control program of {cpp_comment(self.origin)}.",
               "// Generated by ptodsl from the Block IR: loops, branches, scalar reads, GM workspaces and the",
               "// launches of the compute kernels" + (", run by the host on device memory through ACL." if npu
                                                      else ", as the AICPU runs them on the NPU."),
               "#include <pto/pto-inst.hpp>", *(["#include \"acl/acl.h\""] if npu else []), "",
               "#include <algorithm>", "#include <cmath>", "#include <cstdint>", "#include <cstdio>",
               "#include <limits>", "#include <new>", "#include <vector>", ""]
        if npu:
            out += [k.launcher_declaration for k in self.kernels.values()]
            out += ["", NPU_PRELUDE, ""]
        else:
            out += [k.declaration for k in self.kernels.values()]
            out += ["", PRELUDE, ""]
        for h in cxx.helper_definitions(self.ctx.helpers):
            out += [h, ""]
        if self.guards:
            out += [f'extern "C" {{ int64_t {self.guard_var}[3] = {{0, 0, 0}}; }}', ""]
        params = ", ".join(decl for _, decl in self.params)
        out += FAILURE_ENTRY.format(name=name).splitlines() + [""]
        if npu:  # the caller's stream comes first; the entry returns once the stream has drained
            out.append(f'extern "C" int {name}(void* stream, {params})')
            out += ["{", "    ptodsl_stream = stream;", "    ptodsl_failed = false;"]
            out += cxx.format_lines(self.lines)
            out += ["    return aclrtSynchronizeStream(stream) == ACL_SUCCESS && !ptodsl_failed ? 0 : -1;", "}"]
        else:
            out.append(f'extern "C" int {name}({params})')
            out.append("{")
            out += CATCH_BEGIN
            out += cxx.format_lines(self.lines)
            out += CATCH_END
            out.append("}")
        return ControlSource(name, f"{name}.cpp", "\n".join(out) + "\n", [p for p, _ in self.params],
                             self.parallel_names)

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
        if id(op) in self.parallel:
            oom = self.names.claim(f"{index}_no_memory")
            self._line(depth, f"bool {oom} = false;")
            self._line(depth, "#pragma omp parallel for schedule(static)")
        cmp = "<" if step > 0 else ">"
        inc = f"++{index}" if step == 1 else f"{index} += {step}"
        self._line(depth, f"for (int64_t {index} = {self._e(op.attrs['lo'])}; {index} {cmp} "
                          f"{self._e(op.attrs['hi'])}; {inc}) {{", op)
        if id(op) not in self.parallel:
            self._block(op.regions[0], depth + 1)
            self._line(depth, "}")
            return
        # An exception may not leave an OpenMP region: each iteration catches the header's
        # Failure (the message is kept) and a failed workspace allocation, and the loop rethrows
        # them once all threads are done.
        self._line(depth + 1, "try {")
        self._block(op.regions[0], depth + 1)
        self._line(0, "#ifdef PTO_CPU_SUBSET")
        self._line(depth + 1, "} catch (const pto::cpu::Failure&) {")
        self._line(0, "#endif")
        self._line(depth + 1, "} catch (const std::bad_alloc&) {")
        self._line(0, "#pragma omp atomic write")
        self._line(depth + 2, f"{oom} = true;")
        self._line(depth + 1, "}")
        self._line(depth, "}")
        self._line(depth, f"if ({oom}) {{")
        self._line(depth + 1, "throw std::bad_alloc();")
        self._line(depth, "}")
        self._line(0, "#ifdef PTO_CPU_SUBSET")
        self._line(depth, "if (pto::cpu::failed()) {")
        self._line(depth + 1, "throw pto::cpu::Failure{};")
        self._line(depth, "}")
        self._line(0, "#endif")

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
        count: sym.Expr = 1
        for d in t.shape:
            count = sym.mul(count, d)
        var = self.vars[op.result.name] = self.names.claim(op.result.name)
        memory = self.names.claim(f"{var}_bytes")
        elements = self._e(count)
        if not re.fullmatch(r"\w+", elements):
            elements = f"({elements})"
        if self.host == "npu":
            self._line(depth, f"DeviceWorkspace {memory}({elements} * static_cast<int64_t>(sizeof({ctype})), "
                              "poison);", op)
        else:
            self._line(depth, f"std::vector<unsigned char> {memory} = workspace({elements} * "
                              f"static_cast<int64_t>(sizeof({ctype})), poison);", op)
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
        if self.host == "npu":
            self._line(depth, f"const {ctype} {var} = static_cast<{ctype}>(read_device({pointer} + "
                              f"{self._e(index)}));", op)
            return
        self._line(depth, f"const {ctype} {var} = static_cast<{ctype}>({pointer}[{self._e(index)}]);", op)

    @CONTROL.on("guard")
    def _op_guard(self, op: Op, depth: int) -> None:
        self.guards += 1
        a = op.attrs
        self._line(depth, f"if (!({self._e(a['cond'])})) {{", op)
        for k, key in enumerate(("offset", "extent", "dim")):
            self._line(depth + 1, f"{self.guard_var}[{k}] = static_cast<int64_t>({self._e(a[key])});", op)
        self._line(depth + 1, f"return {self.guards};", op)
        self._line(depth, "}")

    @CONTROL.on("print")
    def _op_print(self, op: Op, depth: int) -> None:
        fmt, args = _printf_format(op.attrs["format"], op.attrs.get("args", []), self.ctx, op)
        self._line(depth, f"std::printf({', '.join([fmt, *args])});", op)
        self._line(depth, "std::fflush(stdout);", op)

    @CONTROL.on("launch")
    def _op_launch(self, op: Op, depth: int) -> None:
        kernel = self.module.func(op.attrs["kernel"])
        if kernel is None or kernel.name not in self.kernels:
            raise unsupported(f"a launch of the unknown kernel `{op.attrs['kernel']}`", op.span)
        if "block_dim" in op.attrs or block_params(kernel):
            raise unsupported("a launch of several blocks (`block_dim`)", op.span)
        env = kernel_env(kernel, op)
        strided = self.strided.get(kernel.name, set())
        tensors = iter(op.operands)
        args = []
        for p in kernel.params:
            if p.is_tensor:
                value = next(tensors)
                args.append(self._pointer(value.name, op))
                if p.name in strided:
                    args += [self._e(s) for s in self.origins[value.name].strides[:-1]]
            else:
                args.append(self._e(env[p.name]))
        if self.host == "npu":
            self._line(depth, "if (ptodsl_failed) {", op)
            self._line(depth + 1, "return -1;", op)
            self._line(depth, "}")
            self._line(depth, f"{kernel.name}_launch(1, ptodsl_stream, {', '.join(args)});", op)
            return
        self._line(depth, "start_launch(poison);", op)
        self._line(depth, f"{kernel.name}({', '.join(args)});", op)


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


def emit_control(module: Module, control: Func, kernels: dict[str, KernelSource], parallel: list[Op],
                 origin: str, host: str = "cpu") -> ControlSource:
    """The control program for the CPU backend, or (``host="npu"``) the NPU host program."""
    return ControlEmitter(module, control, kernels, parallel, origin, host).emit()


__all__ = ["ControlSource", "EntryParam", "emit_control", "symbols_of"]


from . import control_layout  # noqa: E402,F401  (the layout ops' C++ registers on CONTROL)
