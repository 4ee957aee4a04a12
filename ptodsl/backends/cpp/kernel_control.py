"""The C++ of the control ops a compute kernel may hold since loops of the user's run inside kernels
(``passes/persistent.py``): views, element reads and bounds guards.

- A ``view`` is pointer arithmetic on the kernel's tensor: ``__gm__ T* v = x + offset``, the view
  keeping its parent's strides, so the transfers through it compute their GM offsets as from the
  parent (declared up front when made among top-level work and used by a later loop, as the
  control program does).
- A ``read`` is a load by the kernel's scalar unit, ``const int64_t r = x[offset]`` (``float`` for
  a float element): partitioning places only reads of tensors nothing in the call writes in a
  kernel, which on the NPU need no cache maintenance.
- A failed ``guard`` writes its number (:func:`ptodsl.ir.gm.guard_ops`) and its offset, extent and
  dim into the kernel's status buffer (four entries per block, at the block's index) and returns;
  the control program then stops the call with that guard's diagnostic, as it does for its own
  guards. Before returning it waits for the flags set and not yet waited for at that point, so no
  event is left set for the next kernel on the core. On the NPU the status entries are written by
  the scalar unit through its data cache, which is written back (``dcci``) before the return, as
  the build turns off the compiler's own cache maintenance for scalar accesses. In a mixed kernel
  both cores run the guard (it is part of the skeleton both run) and stop at it together; each
  waits for what it consumes, cross-core hand-overs included.
"""

from __future__ import annotations

from ...ir import Op
from . import cxx, kernel_mixed
from .cxx import cxx_type, unsupported
from .gm import linear_offset
from .kernel import CPU_BUILD, KERNEL, KernelEmitter, _pipe, _Tensor

STATUS_ENTRIES = 4  # per block: guard number, offset, extent, dim


def declare_hoisted_views(self: KernelEmitter) -> dict[int, str]:
    """Declare at function scope the pointers of the views made inside a top-level one-trip loop
    (the implicit loop around top-level work) that a later top-level op uses: inside that loop's
    braces the later loop could not see them. Returns their variables, by op; each is set where
    its view is made (its offsets may be values read there)."""
    def one_trip(op: Op) -> bool:
        return op.name == "loop" and op.attrs["lo"] == 0 and op.attrs["hi"] == 1

    def views(ops: list[Op]) -> list[Op]:
        found = []
        for op in ops:
            if op.name == "view":
                found.append(op)
            elif one_trip(op):
                found += views(op.regions[0])
        return found

    hoisted: dict[int, str] = {}
    body = self.func.body
    for k, top in enumerate(body):
        if not one_trip(top):
            continue
        later = {v.name for op in body[k + 1:] for o in op.walk() for v in o.operands}
        for op in views(top.regions[0]):
            if op.result.name in later:
                var = hoisted[id(op)] = self.names.claim(op.result.name)
                self._line(1, f"__gm__ {cxx_type(op.result.type.dtype)}* {var} = nullptr;", op.span)
    return hoisted


@KERNEL.on("view")
def _view(self: KernelEmitter, op: Op, depth: int) -> None:
    parent = self.tensors.get(op.operands[0].name)
    if parent is None:
        raise unsupported("a view of a GM value that is not a kernel parameter or a view of one", op.span)
    offset = linear_offset(tuple(op.attrs["offsets"]), parent.strides)
    value = parent.var if offset == 0 else f"{parent.var} + {self._e(offset)}"
    var = self.hoisted_views.get(id(op))
    if var is not None:
        self._line(depth, f"{var} = {value};", op.span)
    else:
        var = self.names.claim(op.result.name)
        self._line(depth, f"__gm__ {cxx_type(op.result.type.dtype)}* {var} = {value};", op.span)
    self.tensors[op.result.name] = _Tensor(var, op.result.type.dtype, tuple(op.result.type.shape), parent.strides)
    if op.operands[0].name in self.workspaces:
        self.workspaces.add(op.result.name)


@KERNEL.on("read")
def _read(self: KernelEmitter, op: Op, depth: int) -> None:
    tensor = self.tensors.get(op.operands[0].name)
    if tensor is None:
        raise unsupported("an element read of a GM value that is not a kernel parameter or a view of one", op.span)
    index = linear_offset(tuple(op.attrs["index"]), tensor.strides)
    # an integer read is held as int64_t, as the control program holds it, so that the guards' and
    # offsets' arithmetic on it cannot overflow the element type
    ctype = "float" if op.attrs["dtype"] in cxx.FLOAT_DTYPES else "int64_t"
    var = self.ctx.names[op.attrs["sym"]]
    self._line(depth, f"const {ctype} {var} = static_cast<{ctype}>({tensor.var}[{self._e(index)}]);", op.span)


@KERNEL.on("guard")
def _guard(self: KernelEmitter, op: Op, depth: int) -> None:
    if op.operands:
        raise unsupported("a check that an index's positions are distinct inside a compute kernel", op.span,
                          "the control program checks them before the launch")
    number = self.plan.guard_base + next(k for k, g in enumerate(self.guards) if g is op)
    a = op.attrs
    index = self.func.attrs.get("block_index")
    slot = self.status if index is None else f"{self.status}[{STATUS_ENTRIES} * {self.ctx.names[index]}]"
    if index is not None:
        slot = f"(&{slot})"
    self._line(depth, f"if (!({self._e(a['cond'])})) {{", op.span)
    self._line(depth + 1, f"{slot}[0] = {number};", op.span)
    for k, key in enumerate(("offset", "extent", "dim"), start=1):
        self._line(depth + 1, f"{slot}[{k}] = static_cast<int64_t>({self._e(a[key])});", op.span)
    self._line(0, f"#if !({CPU_BUILD})")
    self._line(depth + 1, f"dcci({slot}, cache_line_t::ENTIRE_DATA_CACHE);", op.span)
    self._line(0, "#endif")
    if not hasattr(self, "pending"):
        self.pending = pending_flags(self.func.body)
    outer = self._tag
    for src, dst, event in self.pending.get(id(op), ()):
        if self.func.kind == "mixed":
            # both cores run every guard of the skeleton and stop at the same one: each waits for
            # what it consumes, its own pipes' flags and the other core's hand-overs (set before
            # this point in the other core's program order, so the wait completes)
            wait = Op("sync.wait", [], {"src": src, "dst": dst, "event": event})
            for self._tag, code in kernel_mixed.flag_lines(wait, _pipe):
                self._line(depth + 1, code, op.span)
            self._tag = outer
            continue
        self._line(depth + 1, f"wait_flag({_pipe(src, op)}, {_pipe(dst, op)}, EVENT_ID{event});", op.span)
    self._line(depth + 1, "return;", op.span)
    self._line(depth, "}")


def pending_flags(body: list[Op]) -> dict[int, list[tuple[str, str, int]]]:
    """For each guard of a kernel body, the flags set and not yet waited for where it stands.

    Every region's sets and waits balance (the sync checker proves it), so what is pending at a
    point is what the ops before it in its own region and in each enclosing region (before the op
    holding it) set and did not wait for; an iteration of a loop body starts as the first one
    does."""
    out: dict[int, list[tuple[str, str, int]]] = {}

    def walk(ops: list[Op], counts: dict[tuple[str, str, int], int]) -> None:
        for op in ops:
            if op.name in ("sync.set", "sync.wait"):
                key = (op.attrs["src"], op.attrs["dst"], int(op.attrs["event"]))
                counts[key] = counts.get(key, 0) + (1 if op.name == "sync.set" else -1)
            elif op.name == "guard":
                out[id(op)] = sorted(k for k, n in counts.items() for _ in range(max(n, 0)))
            for region in op.regions:
                walk(region, dict(counts))

    walk(body, {})
    return out


__all__ = ["STATUS_ENTRIES", "pending_flags"]
