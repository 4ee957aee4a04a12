"""One PyPTO kernel, statement by statement, into ptodsl lines and a schedule.

Each statement is translated on its own: one that cannot be is a diagnostic at its Python line
and, for ``--partial``, a ``# TODO`` line and a ``port_todo()`` call that ``ptodsl check``
rejects. Trace-time statements (tile setters, Python values, prints) leave no line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from .control import ControlPort, pypto_path
from .exprs import ExprPort, PortError
from .names import legal
from .signature import Param, bind
from .tiles import Schedule, TilePort
from .values import Val, tensor, text_of


@dataclass
class Line:
    indent: int
    text: str
    node: ast.AST | None  # the Python statement it comes from
    todo: bool = False


class KernelPort(ControlPort, TilePort, ExprPort):
    def __init__(self, fn: ast.FunctionDef, params: list[Param], module_env: dict[str, Any],
                 helpers: dict[str, ast.FunctionDef], errors: list[PortError]):
        self.fn, self.params, self.module_env, self.helpers = fn, params, module_env, helpers
        self.errors = errors
        self.lines: list[Line] = []
        self.schedule = Schedule()
        self.indent = 0
        self.loop_stack: list[str | None] = []
        self.helper_stack: list[str] = []
        self.taken: set[str] = set()
        self.by_param: dict[str, Param] = {}
        self.env: dict[str, Val] = {}
        self.clock = 0
        self.first_read: dict[str, int] = {}
        self.first_write: dict[str, int] = {}
        self.rebound: set[str] = set()
        self.loop_names: set[str] = set()
        self.doc: str | None = None
        self.frame: set[str] = set()  # the ptodsl names bound by the function being translated
        for p in params:
            p.pto_name = p.pto_name or legal(p.name, self.taken)
            self.taken.add(p.pto_name)
            self.by_param[p.pto_name] = p
            self.env[p.name] = bind(p)

    # ------------------------------------------------------------ names
    def env_names(self) -> set[str]:
        return set(self.env)

    def lookup(self, name: str, node: ast.AST, mark: bool = True) -> Val:
        if name in self.env:
            v = self.env[name]
            if v.kind == "error":
                raise PortError("E1008", f"`{name}` was not translated", node, cascade=True)
            if mark and v.kind == "tensor":
                self.mark_read(v.text)
            return v
        if name == "pypto":
            return Val("module", path="")
        if name in self.module_env:
            from .signature import _py

            return _py(self.module_env[name])
        raise PortError("E1008", f"`{name}` is not known when the kernel is traced", node,
                        help="define it in the kernel, pass it as a parameter, or give it a value at module level")

    def mark_read(self, pto_name: str) -> None:
        if pto_name in self.by_param:
            self.first_read.setdefault(pto_name, self.tick())

    def mark_write(self, target: Val, node: ast.AST) -> None:
        if target.kind != "tensor":
            raise PortError("E1008", "only a tensor can be written", node)
        name = target.text.split("[", 1)[0]
        if name in self.by_param:
            self.first_write.setdefault(name, self.tick())

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def emit(self, text: str, node: ast.AST | None, todo: bool = False) -> None:
        self.lines.append(Line(self.indent, text, node, todo))

    # ------------------------------------------------------------ statements
    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            try:
                self.stmt(stmt)
            except PortError as e:
                if not e.cascade:
                    self.errors.append(e)
                for t in getattr(stmt, "targets", [getattr(stmt, "target", None)]):
                    for n in ast.walk(t) if t is not None else ():
                        if isinstance(n, ast.Name) and n.id not in self.env:
                            # a name this statement would have bound: its uses are this error, not new
                            # ones (a name bound before keeps its value, so the lines after translate)
                            self.env[n.id] = Val("error")
                src = ast.unparse(stmt).splitlines()[0] if stmt else ""
                self.emit(f"# TODO(port): {src}", stmt, todo=True)
                self.emit("port_todo()", stmt, todo=True)

    def stmt(self, s: ast.stmt) -> None:  # noqa: C901 - one case per statement form
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                if self.doc is None and not self.lines and not self.helper_stack:
                    self.doc = s.value.value
                return
            if isinstance(s.value, ast.Call):
                self.call_stmt(s.value, s)
                return
            self.expr(s.value)
            return
        if isinstance(s, ast.Assign):
            value = self.expr(s.value)
            for t in s.targets:
                self.assign(t, value, s)
            return
        if isinstance(s, ast.AnnAssign) and s.value is not None:
            self.assign(s.target, self.expr(s.value), s)
            return
        if isinstance(s, ast.AugAssign):
            op = ast.BinOp(s.target, s.op, s.value)
            ast.copy_location(op, s)
            if isinstance(s.target, ast.Name):
                load = ast.Name(s.target.id, ast.Load())
                ast.copy_location(load, s.target)
                op.left = load
            self.assign(s.target, self.expr(op), s)
            return
        if isinstance(s, ast.For):
            self.for_stmt(s)
            return
        if isinstance(s, ast.If):
            self.if_stmt(s)
            return
        if isinstance(s, ast.Pass):
            return
        if isinstance(s, ast.Return):
            raise PortError("E1004" if self.helper_stack else "E1008",
                            "a return inside a branch or loop of a helper cannot be inlined" if self.helper_stack
                            else "a PyPTO kernel returns nothing: results go to its output tensors", s,
                            help="return once, as the helper's last statement" if self.helper_stack
                            else "write into an output: `out[:] = ...`")
        if isinstance(s, (ast.While, ast.Break, ast.Continue, ast.With, ast.Try, ast.AsyncFor)):
            word = type(s).__name__.lower()
            raise PortError("E1003", f"`{word}` is Python control flow, not a PyPTO loop or condition", s,
                            help="write the loop with `pypto.loop(...)`, or unroll it by hand")
        if isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            raise PortError("E1008", "this statement has no place in a ptodsl kernel", s,
                            help="move it out of the kernel")
        raise PortError("E1008", "this statement has no ptodsl form", s)

    def assign(self, target: ast.expr, value: Val, s: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            if value.kind not in ("seq", "shape") or len(value.items) != len(target.elts):
                raise PortError("E1008", "only a list known when the kernel is traced can be unpacked", s)
            for t, v in zip(target.elts, value.items, strict=True):
                self.assign(t, v, s)
            return
        if isinstance(target, ast.Subscript):
            base = self.expr(target.value) if not isinstance(target.value, ast.Name) else \
                self.lookup(target.value.id, target.value, mark=False)
            if base.kind != "tensor":
                raise PortError("E1008", "only a tensor can be written", target)
            text, region, _ = self.region(base, target.slice, target)
            self.mark_write(base, target)
            vtext = self.value_text(value, s)
            starts = self.starts(base, target.slice)
            if _differs(region, value) and starts is not None:
                # PyPTO's `t[a:, ...] = v` assembles v at the slice's start: it writes v's own shape,
                # where ptodsl's `t[a:, ...] = v` would broadcast v over the whole region
                self.emit(f"{base.text}.assemble({vtext}, [{', '.join(starts)}])", s)
            else:
                self.emit(f"{base.text}[{text}] = {vtext}", s)
            return
        if not isinstance(target, ast.Name):
            raise PortError("E1008", "this assignment target has no ptodsl form", target)
        name = target.id
        if value.kind in ("tensor",) or (value.kind == "scalar" and value.runtime):
            old = self.env.get(name)
            if old is not None and old.kind == "tensor" and old.text in self.by_param:
                p = old.text
                if p not in self.first_read and p not in self.first_write:
                    # PyPTO's silent trap: the output's name now means a new value. Kept as written so
                    # that `ptodsl check` reports it (E0400) at this line.
                    self.rebound.add(p)
                    self.emit(f"{p} = {self.value_text(value, s)}", s)
                    self.env[name] = tensor(p, value.shape, value.dtype)
                    return
                pto = legal(name, self.taken)
            elif old is not None and old.kind in ("tensor", "scalar") and old.text in self.frame:
                pto = old.text  # rebinding a local keeps its name, as in PyPTO
            else:
                pto = legal(name, self.taken)
            self.taken.add(pto)
            self.frame.add(pto)
            self.emit(f"{pto} = {self.value_text(value, s)}", s)
            self.env[name] = Val(value.kind, text=pto, shape=value.shape, dtype=value.dtype, runtime=value.runtime)
            return
        self.env[name] = value  # a value of the trace: folded where it is used

    def starts(self, base: Val, index: ast.expr) -> list[str] | None:
        """The offsets of ``base[index]``, one per dim of ``base``, or None when they cannot be said."""
        elts = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        if base.rank is None:
            return None
        out: list[str] = []
        for e in elts:
            if isinstance(e, ast.Constant) and e.value is Ellipsis:
                out += ["0"] * (base.rank - (len(elts) - 1))
            elif isinstance(e, ast.Slice):
                out.append(text_of(self.expr(e.lower)) or "0" if e.lower is not None else "0")
            else:
                out.append(text_of(self.expr(e)) or "0")
        out += ["0"] * (base.rank - len(out))
        return out if len(out) == base.rank else None

    def value_text(self, value: Val, node: ast.AST) -> str:
        if value.kind == "const" and isinstance(value.py, bool):
            raise PortError("E1008", "a boolean cannot be stored", node)
        text = text_of(value)
        if text is None or value.kind in ("seq", "dtype", "shape"):
            raise PortError("E1008", "this value cannot be stored in a tensor", node)
        return text

    # ------------------------------------------------------------ calls as statements
    def call_stmt(self, c: ast.Call, s: ast.stmt) -> None:
        f = c.func
        path = pypto_path(f)
        if path in ("set_vec_tile_shapes", "set_cube_tile_shapes"):
            self.tile_setter(path, c)
            return
        if path == "set_pass_options":
            self.pass_options({k.arg: k.value for k in c.keywords if k.arg}, c)
            return
        if isinstance(f, ast.Name) and f.id == "print" and "print" not in self.env:
            return  # PyPTO prints while tracing; the device program has no such print
        if path == "assemble":
            self.assemble(c, s)
            return
        if isinstance(f, ast.Attribute) and f.attr in ("move", "assemble"):
            target = self.expr(f.value) if not isinstance(f.value, ast.Name) else \
                self.lookup(f.value.id, f.value, mark=False)
            if target.kind == "tensor":
                args = [self.expr(a) for a in c.args]
                if f.attr == "move" and len(args) == 1 and not c.keywords:
                    self.mark_write(target, c)
                    self.emit(f"{target.text}.move({self.value_text(args[0], c)})", s)
                    return
                if f.attr == "assemble" and len(args) == 2 and not c.keywords:
                    self.mark_write(target, c)
                    self.emit(f"{target.text}.assemble({self.value_text(args[0], c)}, {_list_text(args[1], c)})", s)
                    return
                raise PortError("E1007", f"`.{f.attr}` with these arguments has no ptodsl form", c)
        v = self.expr(c)
        if v.kind == "tensor":
            return  # a value nobody keeps: nothing to compute

    def assemble(self, c: ast.Call, s: ast.stmt) -> None:
        if c.keywords and any(k.arg != "parallel" for k in c.keywords):
            raise PortError("E1007", "`pypto.assemble` with these keywords has no ptodsl form", c)
        args = [self.expr(a) if i + 1 < len(c.args) or not isinstance(a, ast.Name) else
                self.lookup(a.id, a, mark=False) for i, a in enumerate(c.args)]
        pairs: list[tuple[Val, Val]]
        if len(args) == 3:
            pairs, dst = [(args[0], args[1])], args[2]
        elif len(args) == 2 and args[0].kind == "seq":
            pairs = [(p.items[0], p.items[1]) for p in args[0].items if p.kind == "seq" and len(p.items) == 2]
            dst = args[1]
        else:
            raise PortError("E1007", "`pypto.assemble` takes (src, offsets, dst)", c)
        if dst.kind != "tensor":
            raise PortError("E1008", "the destination of `assemble` must be a tensor", c)
        self.mark_write(dst, c)
        for src, offs in pairs:
            self.emit(f"{dst.text}.assemble({self.value_text(src, c)}, {_list_text(offs, c)})", s)

    def outputs(self) -> dict[str, str]:
        """Each tensor parameter's mode: out (written, or rebound before any read), inout (read
        before its first write), or in."""
        modes = {}
        for pto, p in self.by_param.items():
            if p.kind != "tensor":
                continue
            w = self.first_write.get(pto)
            r = self.first_read.get(pto)
            if pto in self.rebound:
                modes[pto] = "out"
            elif w is not None:
                modes[pto] = "inout" if r is not None and r < w else "out"
            else:
                modes[pto] = "in"
        return modes


def _differs(region: list[Val] | None, value: Val) -> bool:
    """Whether ``value`` (a tensor of the same rank) is known to be smaller than ``region``."""
    if region is None or value.kind != "tensor" or value.shape is None or len(value.shape) != len(region):
        return False
    return any(text_of(r) != text_of(v) for r, v in zip(region, value.shape, strict=True))


def _list_text(v: Val, node: ast.AST) -> str:
    if v.kind not in ("seq", "shape"):
        raise PortError("E1007", "offsets must be a list", node)
    parts = [text_of(i) for i in v.items]
    if None in parts:
        raise PortError("E1007", "offsets must be integer expressions", node)
    return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
