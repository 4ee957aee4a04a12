"""The tile setters and pass options of a PyPTO kernel, gathered into the YAML schedule. Mixed
into :class:`translate.KernelPort`."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from .mapping import PASS_OPTIONS
from .values import PortError, Val, const, int_value, py_value


@dataclass
class Schedule:
    vec_tile: list[int] | None = None
    cube_tile: dict[str, list[int]] | None = None
    loops: dict[str, dict[str, Any]] = field(default_factory=dict)
    pass_options: dict[str, int] = field(default_factory=dict)
    setters: dict[str | None, ast.AST] = field(default_factory=dict)  # where each tile was set


class TilePort:
    """Needs from the translator: ``expr``, ``loop_stack``, ``schedule``."""

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
