"""Reduce a failing program to a small one that fails the same way.

Greedy: try simpler variants one at a time (drop a block, drop an ``elif`` arm, hoist a subexpression
over its parent, drop loop settings, shrink the shapes and tiles, switch the dtype to f32) and keep
any that still fails with the same signature (kind, side and error class), until none does. Every
variant is a program the generator could have written, so it stays well-typed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .gen import Ex, Program


def _replace(root: Ex, target: Ex, new: Ex) -> Ex:
    if root is target:
        return new
    if not root.kids:
        return root
    kids = tuple(_replace(k, target, new) for k in root.kids)
    if all(a is b for a, b in zip(kids, root.kids)):
        return root
    return Ex(root.form, kids, root.dtype, root.cls, root.bound)


def _hoists(root: Ex) -> Iterator[Ex]:
    """Trees with one node replaced by a smaller node under it of the same type."""
    nodes = list(root.nodes())
    for n in nodes:
        for d in n.nodes():
            if d is n or d.dtype != n.dtype or d.cls != n.cls:
                continue
            yield _replace(root, n, d)


def candidates(p: Program) -> Iterator[Program]:
    # whole blocks first: the biggest steps
    if len(p.blocks) > 1:
        for i in range(len(p.blocks)):
            q = p.copy()
            del q.blocks[i]
            yield q
    # if/elif arms: an `elif` header and the one statement under it
    for bi, b in enumerate(p.blocks):
        for li, (_indent, item) in enumerate(b.lines):
            if isinstance(item, str) and item.startswith("elif ") and li + 1 < len(b.lines):
                q = p.copy()
                del q.blocks[bi].lines[li:li + 2]
                yield q
            if isinstance(item, str) and item.startswith("if ") and li + 2 < len(b.lines):
                nxt = b.lines[li + 2][1]
                if isinstance(nxt, str) and nxt.startswith("elif "):
                    q = p.copy()
                    lines = q.blocks[bi].lines
                    lines[li + 2] = (lines[li + 2][0], "if " + nxt[len("elif "):])
                    del lines[li:li + 2]
                    yield q
    # expressions
    for bi, b in enumerate(p.blocks):
        for li, ex in b.exprs():
            for new in _hoists(ex):
                q = p.copy()
                indent, (pre, _, post) = q.blocks[bi].lines[li]
                q.blocks[bi].lines[li] = (indent, [pre, new, post])
                yield q
    # schedule
    for bi, b in enumerate(p.blocks):
        for loop, settings in b.loops.items():
            for key in list(settings):
                if key == "unroll" and settings[key] == [1]:
                    continue
                q = p.copy()
                q.blocks[bi].loops[loop].pop(key)
                if key == "unroll" and any("loop_unroll" in str(it) for _, it in b.lines):
                    q.blocks[bi].loops[loop]["unroll"] = [1]
                yield q
    # sizes
    for name in ("B", "H", "M", "N", "K", "P"):
        v = p.shapes.get(name)
        if not v or name in p.fixed:
            continue
        for smaller in sorted({1, 2, 3, v // 2, v - 1}):
            if 1 <= smaller < v and not (name == "N" and smaller < 4):
                q = p.copy()
                q.shapes[name] = smaller
                yield q
    if p.vec_tile[-2] != 1:
        q = p.copy()
        q.vec_tile[-2] = 1
        yield q
    if p.dtype != "f32":
        q = p.copy()
        q.dtype = "f32"
        yield q


def shrink(program: Program, still_fails: Callable[[Program], bool], max_tries: int = 400) -> Program:
    """The smallest variant of ``program`` found for which ``still_fails`` holds."""
    best = program
    tries = 0
    progress = True
    while progress and tries < max_tries:
        progress = False
        for cand in candidates(best):
            tries += 1
            if tries > max_tries:
                break
            if cand.pto() == best.pto() and cand.yaml() == best.yaml() and cand.shapes == best.shapes \
                    and cand.dtype == best.dtype:
                continue
            if still_fails(cand):
                best = cand
                progress = True
                break
    return best


__all__ = ["candidates", "shrink"]
