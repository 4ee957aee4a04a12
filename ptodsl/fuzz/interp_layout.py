"""The interpreter's layout builtins, written from docs/LANGUAGE.md §1.5 with numpy.

Each gives a new array (a copy, never a numpy view): a layout op's value is the data as of its
statement, so later writes into the source do not show through. Valid regions go through as a
boolean mask of the source's valid box, moved the way the data moves; a result whose mask is no
box is a program the checker refuses (E0832, E0836), which the generator does not write.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import ast

NAMES = ("reshape", "squeeze", "unsqueeze", "transpose", "permute", "concat", "expand", "clone")


def _mask(shape: tuple[int, ...], valid: tuple[int, ...]) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[tuple(slice(0, v) for v in valid)] = True
    return m


def _box(mask: np.ndarray, what: str, error: type) -> tuple[int, ...]:
    """The extents of the box ``mask`` is, from index 0 in every dim."""
    ext = []
    for d in range(mask.ndim):
        other = tuple(i for i in range(mask.ndim) if i != d)
        along = mask.any(axis=other) if other else mask
        ext.append(int(along.sum()))
    if not np.array_equal(mask, _mask(mask.shape, tuple(ext))):
        raise error(f"{what}: the valid elements form no box")
    return tuple(ext)


def call(it: Any, name: str, e: ast.Call, kw: dict[str, ast.Expr], env: dict[str, Any]) -> Any:
    """``name(...)`` for the interpreter ``it`` (a :class:`ptodsl.fuzz.interp.Interpreter`)."""
    from .interp import TV, InterpError

    if name == "concat":
        parts = [it.tensor(it.eval(x, env)) for x in e.args[0].items]
        dim = int(it.eval(kw["dim"], env)) if "dim" in kw else 0
        axis = dim % parts[0].a.ndim
        data = np.concatenate([p.a for p in parts], axis=axis)
        valid = list(parts[0].valid)
        for k in range(data.ndim):
            valid[k] = min(p.valid[k] for p in parts)
        valid[axis] = sum(p.a.shape[axis] for p in parts[:-1]) + parts[-1].valid[axis]
        return TV(data, parts[0].dtype, tuple(valid))
    t = it.tensor(it.eval(e.args[0], env))
    args = [it.eval(x, env) for x in e.args[1:]]
    mask = _mask(t.a.shape, t.valid)
    if name in ("reshape", "squeeze", "unsqueeze"):
        if name == "reshape":
            shape = tuple(int(x) for x in args[0])
        elif name == "squeeze":
            shape = tuple(np.squeeze(t.a, axis=int(args[0]) % t.a.ndim).shape)
        else:
            shape = tuple(np.expand_dims(t.a, int(args[0]) % (t.a.ndim + 1)).shape)
        if int(np.prod(shape)) != t.a.size:
            raise InterpError(f"reshape of {t.a.shape} to {shape}")
        return TV(t.a.reshape(shape).copy(), t.dtype, _box(mask.reshape(shape), name, InterpError))
    if name in ("transpose", "permute"):
        if name == "transpose":
            perm = list(range(t.a.ndim))
            d0, d1 = (int(a) % t.a.ndim for a in args)
            perm[d0], perm[d1] = perm[d1], perm[d0]
        else:
            perm = [int(p) % t.a.ndim for p in args[0]]
        return TV(np.transpose(t.a, perm).copy(), t.dtype, tuple(t.valid[p] for p in perm))
    if name == "expand":
        given = [int(x) for x in args[0]]
        pad = len(given) - t.a.ndim
        shape = tuple(t.a.shape[k - pad] if g == -1 else g for k, g in enumerate(given))
        data = np.broadcast_to(t.a, shape).copy()
        valid = []
        for k, size in enumerate(shape):
            if k < pad:
                valid.append(size)
                continue
            src, v = t.a.shape[k - pad], t.valid[k - pad]
            valid.append(v if src == size else (size if v >= 1 else 0))
        return TV(data, t.dtype, tuple(valid))
    if name == "clone":
        return TV(t.a.copy(), t.dtype, t.valid)
    raise InterpError(f"builtin {name}")


__all__ = ["NAMES", "call"]
