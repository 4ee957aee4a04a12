"""Matmul blocks of the random program generator (:mod:`ptodsl.fuzz.gen`): the cube path.

A block writes one product ``y = matmul(a, b, ...)`` with a random mix of the language's matmul
forms: batch dims broadcast as torch.matmul does (a missing dim, a dim of 1, a rank-2 operand),
``trans_a`` / ``trans_b``, ``out_dtype`` rounded on the way out of L0C, a ``bias`` row, int8
operands accumulated exactly in i32, and a left operand computed by a vector expression (so a
vector kernel feeds the cube through GM). ``cube_tile.split_k`` comes with the program's YAML.

Its choices draw from a random stream of their own, so programs without a matmul block are the
same with the matmul features on or off (the regression seed sets keep their programs).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .gen import Block, Gen

MATMUL_FEATURES = frozenset({
    "matmul",  # y = matmul(a, b) blocks, with trans_a / trans_b
    "bmm",  # batched operands of rank 3 and 4, batch dims broadcast (missing, 1, or equal)
    "mm_out",  # out_dtype=T (f16 / bf16 rounded once on the way out of L0C)
    "mm_bias",  # bias=v, a row of f32 (or T for f16 / f32 programs; i32 for int8)
    "mm_i8",  # int8 x int8 -> int32
    "mm_split",  # cube_tile.split_k: partial products summed by a vector kernel
    "mm_steps",  # the product inside a loop whose steps carry an f32 state (attention's KV loop shape),
    # sometimes with a second product of the step before's value (flash attention's pipelined form)
    # or of this step's (attention's form as written, pipelined by the compiler)
    "mm_epilogue",  # relu(matmul(...) + v) and its parts: the bias table and the fixpipe's relu
    "mm_end",  # the last step writes the state plus a product of it (its tile lives across the product)
    "mm_chain",  # a product, vector work on it (sometimes into a local), a second product of that (an
    # FFN: with row_interchange one mixed kernel over row blocks, skewed, passes/rowgrid.py, skew.py)
})
# what a matmul block wraps its product in: (prefix, suffix), the suffix's `{v}` a row of the
# accumulator's dtype; the folds of passes/epilogue.py and forms next to them that must not fold
EPILOGUES = (("relu(", ")"), ("", " + {v}"), ("relu(", " + {v})"), ("relu(", ") + {v}"), ("{v} + ", ""))

# (a's batch dims, b's batch dims): each pair broadcasts, as torch.matmul's do
BATCHES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("B",), ()), ((), ("B",)), (("B",), ("B",)), (("1",), ("B",)), (("B", "H"), ("H",)),
    (("B", "1"), ("B", "H")), (("H",), ("B", "H")), (("B", "H"), ("B", "H")),
)
MM_BLOCK_CHANCE = 0.2  # a program's last block becomes a matmul block this often


def _broadcast(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = max(len(a), len(b))
    a, b = ("1",) * (n - len(a)) + a, ("1",) * (n - len(b)) + b
    return tuple(y if x == "1" else x for x, y in zip(a, b))


def wants_matmul(seed: int, gen: Gen) -> random.Random | None:
    """The matmul stream of ``seed`` when its program gets a matmul block, else None."""
    if not gen.has("matmul"):
        return None
    rng = random.Random(f"matmul:{seed}")
    return rng if rng.random() < MM_BLOCK_CHANCE else None


def matmul_block(gen: Gen, k: int, rng: random.Random) -> Block:
    from .gen import Block, leaf

    int8 = gen.has("mm_i8") and rng.random() < 0.3
    in_dt, acc = ("i8", "i32") if int8 else ("T", "f32")
    ba, bb = rng.choice(BATCHES) if gen.has("bmm") and rng.random() < 0.6 else ((), ())
    batch = _broadcast(ba, bb)
    ta, tb = rng.random() < 0.3, rng.random() < 0.3
    # the left operand as a vector expression of the [M, N] inputs: K is then N
    computed = not (int8 or batch or ta) and rng.random() < 0.3
    kk = "N" if computed else "K"
    nn = "N" if not (batch or int8 or computed) and rng.random() < 0.4 else "P"
    out = acc
    if not int8 and gen.has("mm_out") and rng.random() < 0.5:
        out = "T"
    lo, hi = (-128.0, 127.0) if int8 else (-1.0, 1.0)
    a_dims = (*ba, *((kk, "M") if ta else ("M", kk)))
    b_dims = (*bb, *((nn, kk) if tb else (kk, nn)))
    names: list[str] = []
    if computed:
        ctx = gen.top_ctx()
        a_ex = gen.expr(ctx, "T", "full", 2)
        names += gen._names(ctx)
    else:
        a = gen.param(f"a{k}", f"{in_dt}[{', '.join(a_dims)}]", "in", in_dt, a_dims, lo, hi)
        a_ex = leaf(a, in_dt)
        names.append(a)
    b = gen.param(f"b{k}", f"{in_dt}[{', '.join(b_dims)}]", "in", in_dt, b_dims, lo, hi)
    names.append(b)
    first: list[tuple[int, Any]] = []
    short = random.Random(f"mm_short_k:{gen.seed}:{k}")
    if not batch and short.random() < 0.2:
        # b through a view holding fewer valid k than a's (a partial last KV block's rows): the
        # product sums over the k both hold
        c = short.randint(1, 3)
        valid = f"[{nn}, max({kk} - {c}, 1)]" if tb else f"[max({kk} - {c}, 1), {nn}]"
        shape = f"[{nn}, {kk}]" if tb else f"[{kk}, {nn}]"
        first.append((0, f"bv{k} = view({b}, {shape}, [0, 0], valid_shape={valid})"))
        b = f"bv{k}"
    flags = []
    if ta:
        flags.append("trans_a=True")
    if tb:
        flags.append("trans_b=True")
    if out != acc or rng.random() < 0.3:
        flags.append(f"out_dtype={out}")
    if gen.has("mm_bias") and rng.random() < 0.4:
        # the 910B's bias table widens f16 rows to f32, but not bf16 ones
        choices = ["i32"] if int8 else ["f32"] + (["T"] if gen.dtype in ("f16", "f32") else [])
        bdt = rng.choice(choices)
        bias = gen.param(f"v{k}", f"{bdt}[{nn}]", "in", bdt, (nn,))
        flags.append(f"bias={bias}")
        names.append(bias)
    y = gen.out(", ".join((*batch, "M", nn)), dtype=out)
    if out == "T" and (*batch, "M", nn) == ("M", "N"):
        gen.full_outs.append(y)  # a later block may read it: a cube kernel feeding a vector one
    tail = "".join(f", {f}" for f in flags)
    # (a stream of its own: the sizes and tiles drawn after this block stay those of the seed)
    steps_rng = random.Random(f"mm_steps:{gen.seed}:{k}")
    if gen.has("mm_steps") and not (batch or int8 or computed or ta) and steps_rng.random() < 0.4:
        block = _steps_block(gen, k, steps_rng, y, f"matmul({a_ex.render()}, {b}{tail})", nn, out, names)
        block.lines[0:0] = first
        return block
    chain = random.Random(f"mm_chain:{gen.seed}:{k}")
    if gen.has("mm_chain") and not (batch or int8 or computed) and chain.random() < 0.3:
        return _chain_block(gen, k, chain, y, f"matmul({a_ex.render()}, {b}{tail})", nn, out, [*first], names)
    pre, post = _epilogue(gen, k, out == acc and not any(f.startswith("bias=") for f in flags), acc, nn, names)
    line: Any = ([f"{y}[:] = {pre}matmul(", a_ex, f", {b}{tail}){post}"] if computed
                 else f"{y}[:] = {pre}matmul({a_ex.render()}, {b}{tail}){post}")
    return Block("matmul", [*first, (0, line)], [y, *names])


def _epilogue(gen: Gen, k: int, row_ok: bool, acc: str, nn: str, names: list[str]) -> tuple[str, str]:
    """What the product is wrapped in (a stream of its own, so other seeds keep their programs); an
    added row needs the product in the accumulator's dtype and no bias of its own."""
    rng = random.Random(f"mm_epilogue:{gen.seed}:{k}")
    if not gen.has("mm_epilogue") or rng.random() >= 0.4:
        return "", ""
    pre, post = rng.choice([e for e in EPILOGUES if row_ok or "{v}" not in e[0] + e[1]])
    if "{v}" in pre + post:
        v = gen.param(f"u{k}", f"{acc}[{nn}]", "in", acc, (nn,))
        names.append(v)
        pre, post = pre.format(v=v), post.format(v=v)
    return pre, post


def _steps_block(gen: Gen, k: int, rng: random.Random, y: str, product: str, nn: str, out: str,
                 names: list[str]) -> Block:
    """The product in a loop of a few steps carrying an f32 state of its rows, combined by vector
    work and written at the last step: cube and vector work of one state-carrying loop, each op
    row-wise (row_interchange then runs it as a mixed kernel over row blocks)."""
    from .gen import Block

    steps: Any = rng.randint(2, 5)  # from 3 on, a loop of the middle steps between the peeled ends
    comb = rng.choice([f"maximum(st{k}, t{k}) * 0.5 + t{k}", f"st{k} * 0.25 + exp(t{k} * 0.125)",
                       f"st{k} + relu(t{k})"])
    # (a stream of its own, so the programs drawn before it keep theirs) half the time the steps
    # run a number of times known only at the call, inside a loop of rounds that each rewrite y:
    # the peeled first and last steps sit behind branches inside a loop of the user's, which run
    # as loops of 0 or 1 trips in one mixed kernel (passes/branches.py, passes/persistent.py)
    nest = random.Random(f"mm_steps_nest:{gen.seed}:{k}")
    rounds = nest.randint(1, 2) if nest.random() < 0.5 else 0
    if rounds:
        steps = f"cdiv(K, {nest.choice([8, 16, 32])})"
    lines: list[tuple[int, Any]] = [
        (0, f"st{k} = tensor([M, {nn}], f32)"),
        (0, f'for j in loop({steps}, name="S{k}"):'),
        (1, f"t{k} = cast({product}, f32)"),
        (1, "if is_loop_begin(j):"),
        (2, f"st{k}[:] = t{k}"),
        (1, "else:"),
        (2, f"st{k}[:] = {comb}"),
        (1, "if is_loop_end(j):"),
        (2, f"{y}[:] = cast(st{k}, {out})"),
    ]
    if random.Random(f"mm_carry:{gen.seed}:{k}").random() < 0.4:
        # pipelined as flash attention is: a second product reads what the vector work of the
        # step before left in a local (read before this step writes it again), so the cube works
        # on step j - 1's value while the vector cores work out step j's
        d = gen.param(f"d{k}", f"T[{nn}, {nn}]", "in", "T", (nn, nn))
        names.append(d)
        lines[0:1] = [(0, f"st{k} = tensor([M, {nn}], f32)"), (0, f"pr{k} = tensor([M, {nn}], T)")]
        at = lines.index((2, f"st{k}[:] = {comb}"))
        lines[at] = (2, f"st{k}[:] = {comb} + matmul(pr{k}, {d}, out_dtype=f32)")
        carry = (2, f"pr{k}[:] = cast(tanh(st{k}), T)")
        lines.insert(at + 1, carry)
        lines.insert(lines.index((2, f"st{k}[:] = t{k}")) + 1, carry)
    elif (stage := random.Random(f"mm_stage:{gen.seed}:{k}")).random() < 0.4:
        # attention's form as written: a second product of what this step's vector work made
        # (of its step: a step handed another's value computes wrong), added into the state,
        # which the compiler pipelines by stages (passes/skew.py); four steps or more, so that
        # the steps between the peeled ends go in pairs at least once
        d = gen.param(f"d{k}", f"T[{nn}, {nn}]", "in", "T", (nn, nn))
        names.append(d)
        lines[1] = (0, f'for j in loop({stage.randint(4, 9)}, name="S{k}"):')
        at = lines.index((2, f"st{k}[:] = {comb}"))
        lines[at] = (2, f"st{k}[:] = {comb} + matmul(cast(tanh(t{k} * (j + 1) * 0.25), T), {d}, out_dtype=f32)")
    if gen.has("mm_end") and random.Random(f"mm_end:{gen.seed}:{k}").random() < 0.3:
        # the last step's write multiplies the state on the cube and adds the state again: its
        # vector tile lives across the product (a mixed kernel keeps it in UB; where the loop is
        # launched per step, its body cut by kind of core, it must not be cut there)
        e = gen.param(f"g{k}", f"T[{nn}, {nn}]", "in", "T", (nn, nn))
        names.append(e)
        end = lines.index((2, f"{y}[:] = cast(st{k}, {out})"))
        lines[end] = (2, f"{y}[:] = cast(st{k} * 0.5 + matmul(cast(st{k}, T), {e}, out_dtype=f32), {out})")
    if rounds:
        lines = [(0, f'for r{k} in loop({rounds}, name="R{k}"):'), *((d + 1, text) for d, text in lines)]
    return Block("matmul", lines, [y, *names])


def _chain_block(gen: Gen, k: int, rng: random.Random, y: str, product: str, nn: str, out: str,
                 first: list[tuple[int, Any]], names: list[str]) -> Block:
    """``y = matmul(act(product), e)``: the product a statement of its own, the vector work on it
    written into a local half the time (both arms of a branch on a loop-invariant integer, now and
    then), the second product a statement of its own; every op row-wise, so with row_interchange
    the statements run row block by row block as one mixed kernel."""
    from .gen import MAX_ROWS, Block

    e = gen.param(f"e{k}", f"T[{nn}, {nn}]", "in", "T", (nn, nn))
    names.append(e)
    if random.Random(f"chain_rows:{gen.seed}").random() < 0.3:
        # rows of several row blocks, so that with row_interchange several blocks run the chain at
        # once, each on its own intermediates (a buffer they shared raced on the cpu backend's
        # threads, where one block's rows never show it); its own stream keeps the other draws
        gen.need_rows = max(gen.need_rows, random.Random(f"chain_rows:{gen.seed}:n").randint(49, MAX_ROWS))
    acts = [f"tanh(h{k}) * 0.5 + h{k}", f"relu(h{k}) - h{k} * 0.25", f"exp(h{k} * 0.125)"]
    one, other = rng.sample(acts, 2)
    flags = f", out_dtype={out}" if out != "f32" or rng.random() < 0.3 else ""
    lines: list[tuple[int, Any]] = [*first, (0, f"h{k} = cast({product}, f32)")]
    if rng.random() < 0.5:
        lines.append((0, f"{y}[:] = matmul(cast({one}, T), {e}{flags})"))
        return Block("matmul", lines, [y, *names])
    lines.append((0, f"c{k} = tensor([M, {nn}], T)"))
    if rng.random() < 0.5:
        lines.append((0, f"c{k}[:] = cast({one}, T)"))
    else:
        lines += [(0, f"if {nn} % 2 == 0:"), (1, f"c{k}[:] = cast({one}, T)"),
                  (0, "else:"), (1, f"c{k}[:] = cast({other}, T)")]
    lines.append((0, f"{y}[:] = matmul(c{k}, {e}{flags})"))
    if rng.random() < 0.3:
        # a sum over the rows of the local after the product: not row-wise, it ends a statement
        # run, and its accumulator crosses every row block (fusion must not put it in the
        # product's grid loop, which partitioning splits by kind of core)
        z = gen.param(f"z{k}", f"out f32[1, {nn}]", "out", "f32", ("1", nn))
        lines.append((0, f"{z}[:] = sum(cast(c{k}, f32), dim=0, keepdim=True)"))
        names.append(z)
    return Block("matmul", lines, [y, *names])


def matmul_shapes(rng: random.Random, shapes: dict[str, int]) -> None:
    """Sizes of the symbols matmul blocks use besides M and N."""
    shapes.setdefault("K", rng.choice([rng.randint(1, 40), rng.randint(30, 140)]))
    shapes.setdefault("P", rng.randint(1, 70))
    shapes.setdefault("B", rng.randint(1, 3))
    shapes.setdefault("H", rng.randint(1, 3))


def cube_tile(gen: Gen, rng: random.Random) -> dict[str, Any]:
    """L0 / L1 extents every matmul dtype takes (k and n a whole cube fractal row for i8, the
    narrowest), and a split_k now and then."""
    out: dict[str, Any] = {}
    for axis, l0s in (("m", (16, 32)), ("k", (32, 64)), ("n", (32, 64))):
        l0 = rng.choice(l0s)
        out[axis] = [l0, l0 * rng.choice((1, 2))]
    if gen.has("mm_split") and rng.random() < 0.4:
        out["split_k"] = rng.choice((2, 3, 4))
    return out


__all__ = ["MATMUL_FEATURES", "cube_tile", "matmul_block", "matmul_shapes", "wants_matmul"]
