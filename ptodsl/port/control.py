"""Loops, branches and helper calls of a PyPTO kernel. Mixed into :class:`translate.KernelPort`."""

from __future__ import annotations

import ast
from typing import Any

from .mapping import LOOP_KEYWORDS
from .names import legal
from .values import PortError, Val, const, py_value, scalar, text_of


class ControlPort:
    """Needs from the translator: ``expr``, ``lookup``, ``emit``, ``block``, ``env``, ``taken``,
    ``loop_names``, ``loop_stack``, ``helper_stack``, ``helpers``, ``schedule``, ``frame``."""

    def for_stmt(self, s: ast.For) -> None:
        if s.orelse:
            raise PortError("E1003", "`for ... else` is Python control flow", s)
        it = s.iter
        path = pypto_path(it.func) if isinstance(it, ast.Call) else None
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


def pypto_path(f: ast.expr) -> str | None:
    """``set_vec_tile_shapes`` for ``pypto.set_vec_tile_shapes`` (and ``pypto.frontend.X``)."""
    parts = []
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name) and f.id == "pypto" and parts:
        return parts[0]
    return None
