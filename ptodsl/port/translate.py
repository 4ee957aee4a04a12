"""One PyPTO kernel, statement by statement, into ptodsl lines and a schedule.

Each statement is translated on its own: one that cannot be is a diagnostic at its Python line
and, for ``--partial``, a ``# TODO`` line and a ``port_todo()`` call that ``ptodsl check``
rejects. Trace-time statements (tile setters, Python values, prints) leave no line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .exprs import ExprPort, PortError, int_value, py_value
from .mapping import LOOP_KEYWORDS, PASS_OPTIONS
from .names import legal
from .signature import Param, bind
from .values import Val, const, scalar, tensor, text_of


@dataclass
class Line:
    indent: int
    text: str
    node: ast.AST | None  # the Python statement it comes from
    todo: bool = False


@dataclass
class Schedule:
    vec_tile: list[int] | None = None
    cube_tile: dict[str, list[int]] | None = None
    loops: dict[str, dict[str, Any]] = field(default_factory=dict)
    pass_options: dict[str, int] = field(default_factory=dict)
    setters: dict[str | None, ast.AST] = field(default_factory=dict)  # where each tile was set


class KernelPort(ExprPort):
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
        path = _pypto_path(f)
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

    def tile_setter(self, which: str, c: ast.Call) -> None:
        args: list[Val] = []
        for a in c.args:
            if isinstance(a, ast.Starred):
                v = self.expr(a.value)
                args.extend(v.items if v.kind in ("seq", "shape") else [v])
            else:
                args.append(self.expr(a))
        loop = self.loop_stack[-1] if self.loop_stack else None
        if which == "set_vec_tile_shapes":
            dims = [int_value(a) for a in args]
            if not dims or None in dims or c.keywords:
                raise PortError("E1005", "a tile shape must be integers known when the kernel is traced", c)
            self.put_tile(loop, "vec_tile", dims, c)
            return
        kw = {k.arg: self.expr(k.value) for k in c.keywords if k.arg}
        split = kw.pop("enable_split_k", const(False))
        if split.kind != "const" or split.py:
            raise PortError("E1007", "`enable_split_k=True` has no ptodsl form", c)
        for i, name in enumerate(("m", "k", "n")):
            if name in kw and i >= len(args):
                args.append(kw.pop(name))
        try:
            levels = [py_value(a) for a in args]
        except KeyError:
            levels = []
        if kw or len(levels) != 3 or not all(isinstance(lv, list) and len(lv) == 2 and all(
                isinstance(x, int) for x in lv) for lv in levels):
            raise PortError("E1005", "cube tiles must be three [L0, L1] pairs of integers", c)
        cube = dict(zip(("m", "k", "n"), levels, strict=True))
        old = self.schedule.cube_tile
        if old is not None and old != cube:
            raise PortError("E1006", "a second cube tile that differs from the first", c,
                            help="ptodsl has one `cube_tile` per kernel; keep one")
        self.schedule.cube_tile = cube

    def put_tile(self, loop: str | None, key: str, dims: list[int], c: ast.AST) -> None:
        where = self.schedule.loops.setdefault(loop, {}) if loop is not None else None
        old = where.get(key) if where is not None else self.schedule.vec_tile
        if old is not None and old != dims:
            scope = f"loop `{loop}`" if loop is not None else "the kernel outside its loops"
            raise PortError("E1006", f"a second vector tile in {scope} differs from the first ({old})", c,
                            help="ptodsl keeps one `vec_tile` per loop: keep one, or move these ops into a loop")
        if where is not None:
            where[key] = dims
        else:
            self.schedule.vec_tile = dims

    def pass_options(self, opts: dict[str, ast.expr], node: ast.AST) -> None:
        for k, v in opts.items():
            if k in PASS_OPTIONS:
                val = int_value(self.expr(v))
                if val is None or val < 1:
                    raise PortError("E1007", f"`{k}` must be a positive integer", v)
                self.schedule.pass_options[k] = val

    # ------------------------------------------------------------ loops and branches
    def for_stmt(self, s: ast.For) -> None:
        if s.orelse:
            raise PortError("E1003", "`for ... else` is Python control flow", s)
        it = s.iter
        path = _pypto_path(it.func) if isinstance(it, ast.Call) else None
        if path not in ("loop", "loop_unroll"):
            raise PortError("E1003", "a `for` over a Python iterable runs at trace time, not on the device", s,
                            help="write the loop with `pypto.loop(...)`")
        assert isinstance(it, ast.Call)
        bounds = [self.expr(a) for a in it.args]
        if not 1 <= len(bounds) <= 3 or any(text_of(b) is None or b.kind not in ("const", "scalar") for b in bounds):
            raise PortError("E1007", "`pypto.loop` takes 1 to 3 integer bounds", it)
        kws = {k.arg: k.value for k in it.keywords if k.arg}
        for k in kws:
            if k not in LOOP_KEYWORDS:
                raise PortError("E1007", f"`pypto.loop` option `{k}` has no ptodsl form", kws[k])
        name_v = self.expr(kws["name"]) if "name" in kws else None
        name = legal(name_v.py if name_v is not None and isinstance(name_v.py, str) else
                     f"loop_{len(self.loop_names)}", self.loop_names | self.taken)
        targets = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        want = 2 if path == "loop_unroll" else 1
        if len(targets) != want or not all(isinstance(t, ast.Name) for t in targets):
            raise PortError("E1008", f"`pypto.{path}` binds {want} name{'s' if want > 1 else ''}", s.target)
        sched: dict[str, Any] = {}
        if "unroll_list" in kws:
            try:
                factors = py_value(self.expr(kws["unroll_list"]))
            except KeyError:
                factors = None
            if not isinstance(factors, list) or not factors or not all(
                    isinstance(f, int) and f > 0 for f in factors):
                raise PortError("E1007", "`unroll_list` must be positive integers known when traced",
                                kws["unroll_list"])
            sched["unroll"] = sorted(set(factors) | {1}, reverse=True)
        if "submit_before_loop" in kws:
            sub = self.expr(kws["submit_before_loop"])
            if sub.kind != "const" or sub.py:
                raise PortError("E1007", "`submit_before_loop=True` has no ptodsl form (ptodsl never submits early)",
                                kws["submit_before_loop"])
        idx_names = []
        for t in targets:
            assert isinstance(t, ast.Name)
            idx = legal(t.id, self.taken | self.loop_names | {name})
            idx_names.append(idx)
        bound_text = ", ".join(text_of(b) for b in bounds)  # type: ignore[misc]
        self.emit(f"for {', '.join(idx_names)} in {path}({bound_text}, name=\"{name}\"):", s)
        self.loop_names.add(name)
        if sched:
            self.schedule.loops.setdefault(name, {}).update(sched)
        saved = {t.id: self.env.get(t.id) for t in targets if isinstance(t, ast.Name)}
        for t, idx in zip(targets, idx_names, strict=True):
            assert isinstance(t, ast.Name)
            self.env[t.id] = scalar(idx)
        self.taken.update(idx_names)
        self.loop_stack.append(name)
        self.nested(s.body, s)
        self.loop_stack.pop()
        self.taken.difference_update(idx_names)
        self.loop_names.update(idx_names)
        for k, v in saved.items():
            if v is not None:
                self.env[k] = v

    def nested(self, body: list[ast.stmt], s: ast.stmt) -> None:
        self.indent += 1
        start = len(self.lines)
        self.block(body)
        if len(self.lines) == start:
            self.emit("pass", s)
        self.indent -= 1

    def if_stmt(self, s: ast.If, word: str = "if") -> None:
        test = self.expr(s.test)
        if test.kind == "const":  # decided when the kernel is traced: only one arm exists
            if word == "elif":
                raise PortError("E1008", "an `elif` known at trace time after a runtime `if` has no ptodsl form",
                                s.test, help="drop the arm that never runs")
            self.block(s.body if test.py else s.orelse)
            return
        if test.kind != "scalar":
            raise PortError("E1008", "a condition must be a scalar (a loop index, a dim, a value read from a tensor)",
                            s.test)
        self.emit(f"{word} {test.text}:", s)
        self.nested(s.body, s)
        if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If):
            inner = s.orelse[0]
            inner_test = self.expr(inner.test)
            if inner_test.kind != "const":
                self.if_stmt(inner, "elif")
                return
        if s.orelse:
            self.emit("else:", None)
            self.nested(s.orelse, s)

    # ------------------------------------------------------------ helpers
    def inline(self, name: str, c: ast.Call) -> Val:
        fn = self.helpers[name]
        if name in self.helper_stack:
            raise PortError("E1004", f"helper `{name}` calls itself", c, help="write the recursion out by hand")
        a = fn.args
        if a.vararg or a.kwarg or a.posonlyargs:
            raise PortError("E1004", f"helper `{name}` takes *args or **kwargs", c)
        names = [x.arg for x in a.args]
        bound: dict[str, Val] = {}
        for n, arg in zip(names, c.args, strict=False):
            if isinstance(arg, ast.Starred):
                raise PortError("E1004", "a call with *args cannot be inlined", arg)
            # passing a tensor is no read of it: only what the helper does with it counts
            bound[n] = self.lookup(arg.id, arg, mark=False) if isinstance(arg, ast.Name) else self.expr(arg)
        if len(c.args) > len(names):
            raise PortError("E1004", f"helper `{name}` takes {len(names)} arguments", c)
        for k in c.keywords:
            if k.arg not in names:
                raise PortError("E1004", f"helper `{name}` has no parameter `{k.arg}`", k)
            bound[k.arg] = self.expr(k.value)
        for n, d in zip(names[len(names) - len(a.defaults):], a.defaults, strict=True):
            if n not in bound:
                bound[n] = self.expr(d)
        missing = [n for n in names if n not in bound]
        if missing:
            raise PortError("E1004", f"helper `{name}` is called without `{missing[0]}`", c)
        body = list(fn.body)
        ret = body.pop() if body and isinstance(body[-1], ast.Return) else None
        saved_env, saved_frame = self.env, self.frame
        self.env, self.frame = bound, set()
        self.helper_stack.append(name)
        try:
            self.block(body)
            result = self.expr(ret.value) if ret is not None and ret.value is not None else const(None)
        finally:
            self.helper_stack.pop()
            self.env, self.frame = saved_env, saved_frame
        return result

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


def _pypto_path(f: ast.expr) -> str | None:
    """``set_vec_tile_shapes`` for ``pypto.set_vec_tile_shapes`` (and ``pypto.frontend.X``)."""
    parts = []
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name) and f.id == "pypto" and parts:
        return parts[0]
    return None


def _list_text(v: Val, node: ast.AST) -> str:
    if v.kind not in ("seq", "shape"):
        raise PortError("E1007", "offsets must be a list", node)
    parts = [text_of(i) for i in v.items]
    if None in parts:
        raise PortError("E1007", "offsets must be integer expressions", node)
    return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
