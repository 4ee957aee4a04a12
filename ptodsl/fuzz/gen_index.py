"""Blocks of the random programs that exercise the indexing builtins (``gen.Gen.block`` calls in).

Index tensors are inputs whose values the driver draws in ``[0, dim)`` of the dim they index
(``Param.index_of``); a third of them (``Param.oob``) may also get one value outside it, negative
or past the end, which the call must refuse with E0730 on every backend (the oracle raises
``Stopped``). Arg-reductions and top-k read inputs only (never rounded values, whose order could
differ between the oracle and a backend), some of them small integers, so that equal values and
the lowest-index rule among them are exercised.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gen import Block, Gen

# block kind -> the generator feature that enables it
# ("index_gather": gen.py's "gather" feature is the row views and element reads at indices read
# from a tensor)
INDEX_FEATURES: dict[str, str] = {"gather_last": "index_gather", "index_select": "index_gather",
                                  "scatter": "scatter", "arange": "arange", "triangle": "triu",
                                  "argmax": "argmax", "topk": "topk"}
TOPK_ROWS = (4, 8, 16)  # row lengths of the top-k blocks (the symbol E, fixed in the YAML)


def _index(g: Gen, k: int, dims: str, of: str, rank: int = 1) -> str:
    name = f"ix{k}"
    dtype = g.rng.choice(["i32", "i32", "i64"])
    p = g.param(name, f"{dtype}[{dims}]", "in", dtype, tuple(d.strip() for d in dims.split(",")))
    g.params[p].index_of = of
    g.params[p].oob = g.rng.random() < 0.34
    return p


def _small_ints(g: Gen, name: str, dims: str) -> str:
    p = g.param(name, f"i32[{dims}]", "in", "i32", tuple(d.strip() for d in dims.split(",")))
    g.params[p].ints = (0, 3)
    return p


def index_block(g: Gen, kind: str, k: int) -> Block:
    from .gen import Block, Ex, leaf

    r = g.rng
    if kind == "index_select":
        if r.random() < 0.5:  # rows of x0
            y = g.out("K, N")
            ix = _index(g, k, "K", "M")
            call = f"index_select(x0, 0, {ix})"
        else:  # columns of x0
            y = g.out("M, K")
            ix = _index(g, k, "K", "N")
            call = f"index_select(x0, {r.choice(['1', '-1'])}, {ix})"
        g.input2("x0")
        e = leaf(call)
        if r.random() < 0.4:  # the gathered rows feed an elementwise op
            e = Ex(r.choice(["relu({})", "({} * 2.0)", "abs({})"]), (e,), "T", "full", 2.0)
        return Block(kind, [(0, [f"{y}[:] = ", e, ""])], [y, "x0", ix])
    if kind == "gather_last":
        y = g.out("M, K")
        ix = _index(g, k, "M, K", "N")
        g.input2("x1")
        return Block(kind, [(0, f"{y}[:] = gather(x1, -1, {ix})")], [y, "x1", ix])
    if kind == "scatter":
        # rows not named keep their values: an inout output, updated in place
        y = g.out("M, N", "inout")
        src = g.param(f"xs{k}", "T[K, N]", "in", "T", ("K", "N"))
        ix = _index(g, k, "K", "M")
        # (a stream of its own: programs without the feature keep their draws)
        unique = g.has("scatter_unique") and random.Random(f"scatter_unique:{g.seed}:{k}").random() < 0.5
        flag = ", unique_indices=True" if unique else ""
        g.params[ix].distinct = unique
        lines: list[tuple[int, Any]] = [(0, f"scatter_update({y}, 0, {ix}, {src}{flag})")]
        if r.random() < 0.5:  # and a later update of the same tensor, from computed rows
            g.input2("x0")
            lines.append((0, f"scatter_update({y}, 0, {ix}, {src} * 2.0 + 1.0{flag})"))
        return Block(kind, lines, [y, src, ix, "x0"])
    if kind == "arange":
        y = g.out("M, N")
        g.input2("x0")
        start = r.choice(["0", "3", "M"])
        ramp = f"arange({start}, {start} + N, T)" if start != "0" else r.choice(["arange(N, T)", "arange(0, N, T)"])
        return Block(kind, [(0, f"{y}[:] = x0 + {ramp} * 0.25")], [y, "x0"])
    if kind == "triangle":
        y = g.out("M, N")
        g.input2("x0")
        d = r.choice(["0", "1", "-1", "2", "-3", "N - M"])
        fn = r.choice(["triu", "tril"])
        call = r.choice([f"{fn}(x0, {d})", f"{fn}(x0, diagonal={d})", f"{fn}(x0)"])
        return Block(kind, [(0, f"{y}[:] = {call}")], [y, "x0"])
    if kind == "argmax":
        fn = r.choice(["argmax", "argmin"])
        keep = r.random() < 0.5
        y = g.out("M, 1" if keep else "M", dtype="i32")
        src = _small_ints(g, f"xa{k}", "M, N") if r.random() < 0.4 else g.input2(r.choice(["x0", "x1"]))
        tail = ", keepdim=True" if keep else ""
        return Block(kind, [(0, f"{y}[:] = {fn}({src}, dim=-1{tail})")], [y, src])
    if kind == "topk":
        # every top-k block of a program ranks rows of the one E: a later block drew k within E as
        # an earlier block fixed it (drawn all the same, so other programs of the seed stay as they were)
        n = g.fixed_extra.setdefault("E", r.choice(TOPK_ROWS))
        g.topk_rows = max(getattr(g, "topk_rows", 0), n)
        src = _small_ints(g, f"xt{k}", "M, E") if r.random() < 0.4 else \
            g.param("xe", "T[M, E]", "in", "T", ("M", "E"))
        if r.random() < 0.3:
            y = g.out("M, E", dtype="i32")
            return Block(kind, [(0, f"{y}[:] = argsort({src}, descending={r.choice(['True', 'False'])})")],
                         [y, src])
        kk = r.randint(1, n)
        dt = "i32" if src.startswith("xt") else "T"
        vals = g.param(f"yv{k}", f"out {dt}[M, {kk}]", "out", dt, ("M", str(kk)))
        ids = g.param(f"yi{k}", f"out i32[M, {kk}]", "out", "i32", ("M", str(kk)))
        largest = r.choice(["", ", largest=False", ", largest=True"])
        return Block(kind, [(0, f"v{k}, i{k} = topk({src}, {kk}{largest})"), (0, f"{vals}[:] = v{k}"),
                            (0, f"{ids}[:] = i{k}")], [vals, ids, src])
    raise ValueError(kind)
