"""Blocks of the random programs whose loop carries only accumulations (``gen.Gen.block`` calls in),
the loops the split-reduction pass (``passes/splitred.py``) turns into partial accumulations and a
combine: f32 sums in either operand order, maximum and minimum (also of T, exact in any order),
one or two accumulators, from a fill or set by the first iteration (the same expression written in
both arms), read after the loop or by a trailing ``is_loop_end`` branch, beside per-row outputs of
the same loop (sometimes scaled by a statistic of their row, as a norm's backward is). Some variants are ones the pass must leave alone (a difference, a read of the running
value), so the fuzzer also checks that nothing else is split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gen import Block, Gen

FEATURE = "split_accum"


def split_accum_block(g: Gen, k: int) -> Block:
    from .gen import Block, Context, accumulated, leaf

    r = g.rng
    loop = f"L{k}"
    settings: dict[str, Any] = {}
    g.unroll(loop, settings)
    g.loop_tile(settings)
    ctx = g.row_ctx("r")
    y = g.out("1, N")
    params = [y]
    first_form = r.random() < 0.3
    at_end = r.random() < 0.4
    head = "M" if first_form or at_end else r.choice(["M", "M", "1, M"])
    accs: list[tuple[str, str, str]] = []  # (name, dtype, combine form over {a} and {x})
    for j in range(r.choice([1, 1, 2])):
        form = r.choice(["{a} + {x}", "{x} + {a}", "maximum({a}, {x})", "minimum({x}, {a})",
                         "{a} - {x}", "{a} + {x}"])  # `-` is not an associative accumulation: left alone
        dtype = "T" if "imum" in form and r.random() < 0.5 else "f32"
        accs.append((f"acc{k}_{j}", dtype, form))
    lines: list[tuple[int, Any]] = []
    inits: dict[str, float] = {}
    for name, dtype, _ in accs:
        if first_form:
            lines.append((0, f"{name} = tensor([1, N], {dtype})"))
            inits[name] = 0.0
        else:
            init = r.choice(["zeros([1, N], {d})", "full(0.25, [1, N], {d})", "full(-2.0, [1, N], {d})"])
            lines.append((0, f"{name} = {init.format(d=dtype)}"))
            inits[name] = 2.0
    bound = 0.0  # of the accumulators' total, read after the loop
    lines.append((0, f'for r in loop({head}, name="{loop}"):'))
    if head == "M" and r.random() < 0.5:
        z = g.param(f"z{k}", "out T[M, N]", "out", "T", ("M", "N"))
        params.append(z)
        # sometimes scaled by a statistic of its row (a norm's backward: the loop then also gets a
        # one-pass version, the split share's nest as a whole, passes/tile_fit.py); rsqrt(m + 1) <= 1
        norm = (" * cast(rsqrt(mean(cast(x0[r, :], f32) * cast(x0[r, :], f32), dim=-1, keepdim=True) + 1.0), T)"
                if r.random() < 0.5 else "")
        lines.append((1, [f"{z}[r, :] = ", g.expr(ctx), norm]))
    running = r.random() < 0.15 and head == "M"
    for name, dtype, form in accs:
        if first_form:
            x = r.choice(["x0[r, :]", "x0[r, :] * 0.5", "abs(x0[r, :])"])
            x = x if dtype == "T" else f"cast({x}, f32)"
            lines += [(1, "if is_loop_begin(r):"), (2, f"{name}[:] = {x}"), (1, "else:"),
                      (2, f"{name}[:] = {form.format(a=name, x=x)}")]
            bound += accumulated(form, 1.0)
        else:
            row = f"row{k}_{name[-1]}"
            e = g.expr(ctx, dtype, "full", 2)
            lines.append((1, [f"{row} = ", e, ""]))
            lines.append((1, f"{name}[:] = {form.format(a=name, x=row)}"))
            bound += accumulated(form, e.bound, inits[name])
    if running:  # a read of the running value: the loop must stay as it is
        w = g.param(f"w{k}", "out T[M, N]", "out", "T", ("M", "N"))
        params.append(w)
        lines.append((1, f"{w}[r, :] = cast({accs[0][0]}, T)"))
    total = " + ".join(name if dtype == "f32" else f"cast({name}, f32)" for name, dtype, _ in accs)
    fin = g.expr(Context([leaf(f"({total})", "f32", bound=bound)], [], [], g.scalars(), {}, []), "f32", "full", 1)
    if at_end:
        lines += [(1, "if is_loop_end(r):"), (2, [f"{y}[:] = cast(", fin, ", T)"])]
    else:
        lines.append((0, [f"{y}[:] = cast(", fin, ", T)"]))
    return Block("split_accum", lines, params + g._names(ctx), {loop: settings})


__all__ = ["FEATURE", "split_accum_block"]
