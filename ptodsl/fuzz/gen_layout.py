"""Blocks of random programs that use the layout builtins (reshape, squeeze/unsqueeze, transpose,
permute, concat, expand, clone) and broadcasts over tensors of rank 3 and 4.

Each block writes outputs of its own, like the blocks of :mod:`.gen`. Layout results are values
as of their statement, so some blocks change a local after taking a reshape or a clone of it and
read both afterwards. Rank-3/4 programs get vector tiles whose leading dims exceed 1, where tails
and broadcasts along some row dims but not others must still lower on every backend.
"""

from __future__ import annotations

import random
from typing import Any

from .gen import Block

# feature -> block kind
KINDS = {"reshape": "lay_reshape", "transpose": "lay_transpose", "concat": "lay_concat",
         "expand": "lay_expand", "clone": "lay_clone", "bcast_rank3": "bcast3", "bcast_rank4": "bcast4"}
FEATURES = frozenset(KINDS)


def block(g: Any, kind: str) -> Block:
    """The block of ``kind`` for the generator ``g`` (a :class:`ptodsl.fuzz.gen.Gen`)."""
    r = g.rng
    k = g.nblock
    if kind == "lay_reshape":
        ctx = g.top_ctx()
        e = g.expr(ctx, depth=2)
        form = r.choice(["flip", "unsqueeze", "rank3", "window", "local", "later"])
        if form == "later":
            return _later(g, kind, e, ctx, "reshape({}, [N, M])")
        if form == "flip":
            y = g.out("N, M")
            return Block(kind, [(0, [f"{y}[:] = reshape(", e, ", [N, M])"])], [y, *g._names(ctx)])
        if form == "unsqueeze":
            y = g.out("M, N")
            d = r.choice([0, 1, 2, -1, -3])
            return Block(kind, [(0, [f"{y}[:] = squeeze(unsqueeze(", e, f", {d}), {d % 3})"])], [y, *g._names(ctx)])
        if form == "rank3":
            y = g.out("M, 1, N")
            return Block(kind, [(0, [f"{y}[:] = reshape(", e, ", [M, 1, N]) * 2.0"])], [y, *g._names(ctx)])
        if form == "window":
            # a window cut across rows, flattened: the reshape copies it first
            y = g.out("M, N", "inout")
            g.input2("x0")
            c = r.randint(1, 3)
            return Block(kind, [(0, f"{y}[:, 0:N - {c}] = reshape(reshape(x0[:, {c}:N], [M * (N - {c})]), "
                                    f"[M, N - {c}])")], [y, "x0"])
        # a reshape of a local keeps the values the local had at that statement
        y = g.out("N, M")
        lines = [(0, f"z{k} = zeros([M, N], T)"), (0, [f"z{k}[:] = ", e, ""]),
                 (0, f"r{k} = reshape(z{k}, [N, M])"), (0, f"z{k}[:] = z{k} * 0.5 + 1.0"),
                 (0, f"{y}[:] = r{k} - reshape(z{k}, [N, M])")]
        return Block(kind, lines, [y, *g._names(ctx)])
    if kind == "lay_transpose":
        if g.has("nested_loops") and r.random() < 0.4:
            return block(g, "lay_transpose3")
        ctx = g.top_ctx()
        e = g.expr(ctx, depth=2)
        y = g.out("N, M")
        call = r.choice(["transpose({}, 0, 1)", "transpose({}, -1, -2)", "permute({}, [1, 0])"])
        head, tail = call.split("{}")
        if r.random() < 0.2:
            return _later(g, kind, e, ctx, call)
        if r.random() < 0.3:  # a transpose of a transpose, read beside its source
            return Block(kind, [(0, [f"{y}[:] = transpose(transpose(" + head, e, tail + ", 0, 1) + 1.0, 0, 1)"])],
                         [y, *g._names(ctx)])
        return Block(kind, [(0, [f"{y}[:] = " + head, e, tail])], [y, *g._names(ctx)])
    if kind == "lay_transpose3":
        x3 = g.param("x3", "T[B, M, N]", "in", "T", ("B", "M", "N"))
        perm = r.choice([(0, 2, 1), (1, 0, 2), (2, 0, 1), (1, 2, 0), (2, 1, 0)])
        dims = ("B", "M", "N")
        y = g.out(", ".join(dims[p] for p in perm))
        inner = r.choice([x3, f"abs({x3})", f"({x3} + 0.5)", f"({x3} * {x3})"])
        if perm[2] == 2 and r.random() < 0.5:
            # the last dim stays: the permute is a pointer into the local's workspace, and a later
            # loop reads it through that pointer alone (the workspace must outlive the statement)
            loop = f"L{k}"
            lines = [(0, f"z{k} = {inner} * 2.0"), (0, f"w{k} = permute(z{k}, [1, 0, 2])"),
                     (0, f'for r in loop({dims[perm[0]]}, name="{loop}"):'),
                     (1, f"{y}[r:r + 1, :, :] = w{k}[r:r + 1, :, :] + 1.0")]
            return Block(kind, lines, [y, x3], {loop: {}})
        return Block(kind, [(0, f"{y}[:] = permute({inner}, [{', '.join(map(str, perm))}])")], [y, x3])
    if kind == "lay_concat" and g.has("views_dynamic") and r.random() < 0.3:
        # a last part valid only up to a length read at run time (its tile may have no column)
        y = g.out("M, N", "inout")
        idx = g.idx()
        loop = f"L{k}"
        g.input2("x0")
        g.input2("x1")
        lines = [(0, f'for r in loop(M, name="{loop}"):'), (1, f"n{k} = {idx}[r]"),
                 (1, f"v{k} = view(x0, [1, N - 1], [r, 1], valid_shape=[1, n{k} // 2])"),
                 (1, f"{y}[r:r + 1, :] = concat([x1[r:r + 1, 0:1] * 2.0, v{k}], dim=-1)")]
        return Block(kind, lines, [y, "x0", "x1", idx], {loop: {}})
    if kind == "lay_concat":
        ctx = g.top_ctx()
        a, b = g.expr(ctx, depth=2), g.expr(ctx, depth=2)
        y = g.out("M, N")
        lines: list[tuple[int, Any]] = [(0, [f"a{k} = ", a, ""]), (0, [f"b{k} = ", b, ""])]
        if r.random() < 0.7:
            c = r.randint(1, 3)
            parts = [f"a{k}[:, {c}:N]", f"b{k}[:, 0:{c}]"]
            if r.random() < 0.4:
                parts = [f"a{k}[:, {c}:N]", f"b{k}[:, 0:1]", f"a{k}[:, 0:{c - 1}]"] if c > 1 else parts
            dim = r.choice(['-1', '1'])
            if random.Random(f"zerocols:{g.seed}:{k}").random() < 0.25:
                # (its own stream) a split at N // 16: for N < 16 the second part has no column, so
                # its nest, shared out as blocks, has a column loop of no trips
                parts = [f"a{k}[:, N // 16:N]", f"b{k}[:, 0:N // 16]"]
            if random.Random(f"inplace:{g.seed}:{k}").random() < 0.35:
                # (its own stream: other programs stay as they were) y's columns rotated in place
                # from a clone of it: where a row fits one tile, the clone is not made
                # (passes/tile_fit.py, rewrite_of), and the row must still be read before it is written
                lines.append((0, [f"{y}[:] = ", a, ""]))
                lines.append((0, f"o{k} = clone({y})"))
                parts = [p.replace(f"a{k}", f"o{k}").replace(f"b{k}", f"o{k}") for p in parts]
            lines.append((0, f"{y}[:] = concat([{', '.join(parts)}], dim={dim})"))
        else:
            g.need_rows = 2
            lines.append((0, f"{y}[:] = concat([a{k}[1:M, :], b{k}[0:1, :]], dim=0)"))
        return Block(kind, lines, [y, *g._names(ctx)])
    if kind == "lay_expand":
        ctx = g.top_ctx()
        e = g.expr(ctx, depth=2)
        y = g.out("M, N")
        g.input2("x0")
        src = r.choice(["expand(x0[0:1, :], [M, N])", "expand(x0[:, 0:1], [-1, N])",
                        "expand(x0[0, :], [M, -1])"])
        if g.has("bcast_col") and r.random() < 0.3:
            src = f"expand({g.param('cv', 'T[M, 1]', 'in', 'T', ('M', '1'))}, [M, N])"
        op = r.choice(["+", "-", "*"])
        return Block(kind, [(0, [f"{y}[:] = (", e, f" {op} {src})"])], [y, "x0", *g._names(ctx)])
    if kind == "lay_clone":
        ctx = g.top_ctx()
        e = g.expr(ctx, depth=2)
        y = g.out("M, N")
        lines = [(0, f"z{k} = zeros([M, N], T)"), (0, [f"z{k}[:] = ", e, ""]), (0, f"c{k} = clone(z{k})"),
                 (0, f"z{k}[:] = z{k} + 1.0"), (0, f"{y}[:] = c{k} * 2.0 - z{k}")]
        return Block(kind, lines, [y, *g._names(ctx)])
    if kind == "bcast3":
        x3 = g.param("x3", "T[B, M, N]", "in", "T", ("B", "M", "N"))
        shape = r.choice(["B, 1, N", "M, N", "B, M, 1", "1, 1, N", "B, 1, 1", "M, 1", "1, M, N", "N"])
        b = g.param(f"w{k}", f"T[{shape}]", "in", "T", tuple(s.strip() for s in shape.split(",")))
        y = g.out("B, M, N")
        if r.random() < 0.3:
            return Block(kind, [(0, f"{y}[:] = {b}")], [y, b])
        op = r.choice(["+", "-", "*", "maximum"])
        text = f"maximum({x3}, {b})" if op == "maximum" else f"({x3} {op} {b})"
        return Block(kind, [(0, f"{y}[:] = {text}")], [y, x3, b])
    if kind == "bcast4":
        x4 = g.param("x4", "T[B, H, M, N]", "in", "T", ("B", "H", "M", "N"))
        shape = r.choice(["B, 1, M, 1", "H, 1, N", "B, H, 1, N", "1, H, M, 1", "B, 1, 1, N", "M, N"])
        b = g.param(f"w{k}", f"T[{shape}]", "in", "T", tuple(s.strip() for s in shape.split(",")))
        y = g.out("B, H, M, N")
        op = r.choice(["+", "-", "*"])
        return Block(kind, [(0, f"{y}[:] = ({x4} {op} {b})")], [y, x4, b])
    raise ValueError(kind)


def _later(g: Any, kind: str, e: Any, ctx: Any, call: str) -> Block:
    """A local made among top-level statements, read by a later loop only through a layout view
    of it (``call``, of shape [N, M]): the view and the workspace under it outlive the implicit
    loop(1) of the statements that make them."""
    k = g.nblock
    y = g.out("N, M")
    loop = f"L{k}"
    head, tail = call.split("{}")
    lines = [(0, [f"z{k} = (", e, ") + 1.0"]), (0, f"v{k} = {head}z{k}{tail}"),
             (0, f'for r in loop(N, name="{loop}"):'), (1, f"{y}[r:r + 1, :] = v{k}[r:r + 1, :] * 2.0")]
    return Block(kind, lines, [y, *g._names(ctx)], {loop: {}})


def rank_of(g: Any) -> int:
    """The vector tile rank a program needs: the largest rank of its tensors."""
    return max([2] + [len(p.dims) for p in g.params.values() if p.kind != "scalar"])


__all__ = ["FEATURES", "KINDS", "block", "rank_of"]

