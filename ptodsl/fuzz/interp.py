"""An independent numpy interpreter of the ``.pto`` AST: the fuzzer's oracle.

It reads the parsed kernel (``ptodsl.frontend``) and executes it statement by statement on numpy
arrays, written from the language's documented meaning (docs/LANGUAGE.md), sharing nothing with
the checker, the IR, the passes or the backends: loops run every iteration, ``loop_unroll`` runs
one step per iteration (``k == 1``; a body handles k consecutive steps, so any factor must agree),
views are numpy views carrying a valid shape, and a write stores only the valid region of its
value. Tensor values are kept in their element type: every op computes in float64 and rounds its
result to the dtype, as a device computing in that dtype would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import DTYPES, numpy_dtype
from ..frontend import ast
from . import interp_index as ix
from .interp_index import Stopped


class InterpError(Exception):
    """The interpreter met a construct it does not model (a fuzzer limitation, not a finding)."""


class Refused(Exception):
    """The inputs break a rule the call must check before any kernel runs (a valid extent read from
    a tensor outside ``[0, view size]``: E0711); the call is expected to refuse them."""


@dataclass
class TV:
    """A tensor value: the array (a numpy view for views), its dtype name and valid shape."""

    a: np.ndarray
    dtype: str
    valid: tuple[int, ...]


@dataclass
class LoopVar:
    value: int
    first: int
    last: int


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(numpy_dtype(dtype))


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


INDEXING_CALLS = ("arange", "index_select", "gather", "triu", "tril", "argmax", "argmin", "argsort")
UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x, "abs": np.abs, "neg": np.negative, "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": _sigmoid, "tanh": np.tanh, "silu": lambda x: x * _sigmoid(x),
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
}
BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "maximum": np.maximum,
          "minimum": np.minimum}
COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
           "!=": np.not_equal}
REDUCE = {"sum": (np.sum, 0.0), "amax": (np.max, -np.inf), "amin": (np.min, np.inf), "mean": (np.mean, 0.0)}


def _bvalid(vals: list[TV], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The valid shape of a broadcast result: the smallest valid extent over the operands."""
    out = list(shape)
    for v in vals:
        off = len(shape) - len(v.a.shape)
        for d, (size, ext) in enumerate(zip(v.a.shape, v.valid)):
            dd = d + off
            if size == 1 and shape[dd] != 1:
                ext = shape[dd] if ext >= 1 else 0
            out[dd] = min(out[dd], ext)
    return tuple(out)


class Interpreter:
    def __init__(self, kernel: ast.Kernel, variant: Mapping[str, str], symbols: Mapping[str, int],
                 valid_shapes: Mapping[str, tuple] | None = None, max_steps: int = 2_000_000):
        self.kernel = kernel
        self.variant = dict(variant)
        self.symbols = dict(symbols)
        self.valid_shapes = dict(valid_shapes or {})
        self.steps = 0
        self.max_steps = max_steps

    # ------------------------------------------------------------------ entry
    def run(self, arrays: dict[str, np.ndarray], scalars: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Execute the kernel; ``arrays`` hold every tensor parameter and are written in place."""
        env: dict[str, Any] = {}
        for p in self.kernel.params:
            if p.is_tensor:
                a = arrays[p.name]
                env[p.name] = TV(a, self.dtype(p.dtype), a.shape)
            else:
                if p.name in scalars and scalars[p.name] is not None:
                    env[p.name] = scalars[p.name]
                elif p.default is not None:
                    env[p.name] = self.eval(p.default, {})
                else:
                    raise InterpError(f"scalar `{p.name}` has no value")
        self.block(self.kernel.body, env)
        return arrays

    def dtype(self, name: str) -> str:
        return self.variant.get(name, name)

    # ------------------------------------------------------------------ statements
    def block(self, body: tuple[ast.Stmt, ...], env: dict[str, Any]) -> None:
        for st in body:
            self.stmt(st, env)

    def stmt(self, st: ast.Stmt, env: dict[str, Any]) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise InterpError("step limit exceeded")
        if isinstance(st, ast.Pass):
            return
        if isinstance(st, ast.Assign):
            if isinstance(st.target, ast.Name):
                value = self.eval(st.value, env)
                name = st.target.id
                if isinstance(value, TV) and name in self.valid_shapes:
                    vs = tuple(self.eval_dim(d, env) for d in self.valid_shapes[name])
                    value = TV(value.a, value.dtype, tuple(max(0, min(v, s, c)) for v, s, c in
                                                          zip(vs, value.a.shape, value.valid)))
                env[name] = value
                return
            if isinstance(st.target, ast.Subscript):
                target = self.eval(st.target.value, env)
                region = self.region(target, st.target.indices, env)
                self.write(region, self.eval(st.value, env))
                return
            raise InterpError("assignment target")
        if isinstance(st, ast.ExprStmt):
            e = st.expr
            if isinstance(e, ast.Call) and e.func_name == "print":
                for a in e.args:  # evaluated for their errors; what a print shows is not compared
                    self.eval(a, env)
                return
            if isinstance(e, ast.Call) and e.func_name == "scatter_update":
                dst = self.tensor(self.eval(e.args[0], env))
                if int(self.eval(e.args[1], env)) % dst.a.ndim != 0:
                    raise InterpError("scatter_update along another dim than 0")
                index, src = self.tensor(self.eval(e.args[2], env)), self.tensor(self.eval(e.args[3], env))
                ix.scatter_update(dst, index, src, _round)
                return
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
                target = self.eval(e.func.value, env)
                if e.func.attr == "move":
                    self.write(target, self.eval(e.args[0], env))
                    return
                if e.func.attr == "assemble":
                    value = self.eval(e.args[0], env)
                    offs = [self.eval(o, env) for o in e.args[1].items]
                    v = self.tensor(value)
                    sl = tuple(slice(o, o + s) for o, s in zip(offs, v.a.shape))
                    self.write(TV(target.a[sl], target.dtype, target.a[sl].shape), v)
                    return
            raise InterpError("expression statement")
        if isinstance(st, ast.Unpack):
            e = st.value
            if not (isinstance(e, ast.Call) and e.func_name == "topk"):
                raise InterpError("a tuple binding of something else than topk")
            kw = {k.name: k.value for k in e.keywords}
            x = self.tensor(self.eval(e.args[0], env))
            largest = bool(self.eval(kw["largest"], env)) if "largest" in kw else True
            values, indices = ix.topk(x, int(self.eval(e.args[1], env)), largest, TV)
            env[st.targets[0].id], env[st.targets[1].id] = values, indices
            return
        if isinstance(st, ast.For):
            self.loop(st, env)
            return
        if isinstance(st, ast.If):
            if self.truth(self.eval(st.cond, env)):
                self.block(st.body, env)
            else:
                self.block(st.orelse, env)
            return
        raise InterpError(f"statement {type(st).__name__}")

    def loop(self, st: ast.For, env: dict[str, Any]) -> None:
        call = st.iter
        if not isinstance(call, ast.Call) or call.func_name not in ("loop", "loop_unroll"):
            raise InterpError("loop form")
        args = [self.eval(a, env) for a in call.args]
        for n, a in enumerate(args):
            # `/` divides exactly (Python semantics): a bound such as L / BL must come out whole.
            if isinstance(a, float) and a.is_integer():
                args[n] = int(a)
            elif not isinstance(a, (int, np.integer)) or isinstance(a, bool):
                raise InterpError(f"loop bound {a!r} is not an integer")
        args = [int(a) for a in args]
        if call.func_name == "loop" and len(args) == 1:
            start, stop, step = 0, args[0], 1
        else:
            start, stop = args[0], args[1]
            step = args[2] if len(args) > 2 else 1
        steps = list(range(start, stop, step))
        if not steps:
            return
        for i in steps:
            env[st.targets[0].id] = LoopVar(i, steps[0], steps[-1])
            if len(st.targets) > 1:
                env[st.targets[1].id] = 1
            self.block(st.body, env)

    @staticmethod
    def truth(v: Any) -> bool:
        if isinstance(v, TV):
            raise InterpError("a tensor as a condition")
        return bool(v)

    # ------------------------------------------------------------------ regions and writes
    def region(self, t: TV, indices: tuple[ast.Index, ...], env: dict[str, Any]) -> TV:
        """The sub-tensor ``t[indices]``: an integer index keeps its axis as a length-1 slice."""
        if not isinstance(t, TV):
            raise InterpError("subscript of a non-tensor")
        sl = []
        valid = []
        for d in range(t.a.ndim):
            size = t.a.shape[d]
            if d < len(indices):
                ix = indices[d]
                if isinstance(ix, ast.Slice):
                    if ix.step is not None:
                        raise InterpError("slice step")
                    lo = self.int(ix.lo, env, 0)
                    hi = self.int(ix.hi, env, size)
                else:
                    lo = self.int(ix, env, 0)
                    hi = lo + 1
            else:
                lo, hi = 0, size
            if lo < 0 or hi > size or lo > hi:
                raise InterpError(f"slice {lo}:{hi} out of bounds of {size}")
            sl.append(slice(lo, hi))
            valid.append(max(0, min(t.valid[d] - lo, hi - lo)))
        if len(indices) > t.a.ndim:
            raise InterpError("too many indices")
        sub = t.a[tuple(sl)]
        return TV(sub, t.dtype, tuple(valid))

    def write(self, region: TV, value: Any) -> None:
        shape = region.a.shape
        if isinstance(value, TV):
            if value.a.ndim > len(shape):
                raise InterpError("value of higher rank than its target")
            data = np.broadcast_to(value.a, shape) if value.a.shape != shape else value.a
            valid = _bvalid([value], shape)
            valid = tuple(min(v, r) for v, r in zip(valid, region.valid))
            sl = tuple(slice(0, v) for v in valid)
            region.a[sl] = _round(data[sl], region.dtype)
        else:
            region.a[...] = _round(np.full(shape, value), region.dtype)

    # ------------------------------------------------------------------ expressions
    def int(self, e: ast.Expr | None, env: dict[str, Any], default: int) -> int:
        if e is None:
            return default
        v = self.eval(e, env)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise InterpError(f"index {v!r} is not an integer")
        return int(v)

    def eval_dim(self, d: Any, env: dict[str, Any]) -> int:
        if isinstance(d, int):
            return d
        from ..frontend.parser import parse_expr

        return int(self.eval(parse_expr(str(d)), env))

    def tensor(self, v: Any) -> TV:
        if not isinstance(v, TV):
            raise InterpError("expected a tensor")
        return v

    def eval(self, e: ast.Expr, env: dict[str, Any]) -> Any:
        if isinstance(e, ast.Num):
            return e.value
        if isinstance(e, ast.Bool):
            return e.value
        if isinstance(e, ast.Str):
            return e.value
        if isinstance(e, ast.Name):
            if e.id in env:
                v = env[e.id]
                return v.value if isinstance(v, LoopVar) else v
            if e.id in self.symbols:
                return self.symbols[e.id]
            raise InterpError(f"unbound name `{e.id}`")
        if isinstance(e, ast.ListExpr):
            return [self.eval(x, env) for x in e.items]
        if isinstance(e, ast.UnaryOp):
            v = self.eval(e.operand, env)
            if e.op == "not":
                return not self.truth(v)
            if e.op == "+":
                return v
            if isinstance(v, TV):
                return self.unary("neg", v)
            return -v
        if isinstance(e, ast.BinOp):
            return self.binop(e.op, self.eval(e.left, env), self.eval(e.right, env))
        if isinstance(e, ast.Compare):
            a, b = self.eval(e.left, env), self.eval(e.right, env)
            if isinstance(a, TV) or isinstance(b, TV):
                return self.elementwise(COMPARE[e.op], [a, b], "bool", keep_bool=True)
            return bool(COMPARE[e.op](a, b))
        if isinstance(e, ast.BoolOp):
            a = self.truth(self.eval(e.left, env))
            if e.op == "and":
                return a and self.truth(self.eval(e.right, env))
            return a or self.truth(self.eval(e.right, env))
        if isinstance(e, ast.Subscript):
            t = self.eval(e.value, env)
            if isinstance(t, TV) and len(e.indices) == t.a.ndim and not any(isinstance(i, ast.Slice)
                                                                             for i in e.indices):
                ix = tuple(self.int(i, env, 0) for i in e.indices)
                v = t.a[ix]
                return int(v) if np.issubdtype(v.dtype, np.integer) else float(v)
            return self.region(t, e.indices, env)
        if isinstance(e, ast.Call):
            return self.call(e, env)
        if isinstance(e, ast.Attribute):
            raise InterpError("attribute")
        raise InterpError(f"expression {type(e).__name__}")

    def binop(self, op: str, a: Any, b: Any) -> Any:
        if isinstance(a, TV) or isinstance(b, TV):
            if op not in BINARY:
                raise InterpError(f"tensor operator {op}")
            return self.elementwise(BINARY[op], [a, b])
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b  # Python semantics: true division, also on integers
        if op == "//":
            return a // b
        if op == "%":
            return a % b
        raise InterpError(f"operator {op}")

    def elementwise(self, fn, operands: list[Any], dtype: str | None = None, keep_bool: bool = False) -> TV:
        tensors = [v for v in operands if isinstance(v, TV)]
        if dtype is None:
            dtype = tensors[0].dtype
        shape = np.broadcast_shapes(*(t.a.shape for t in tensors))
        args = [_f64(v.a) if isinstance(v, TV) and v.dtype != "bool" else (v.a if isinstance(v, TV) else v)
                for v in operands]
        with np.errstate(all="ignore"):
            out = fn(*args)
        out = np.broadcast_to(out, shape)
        out = np.array(out, dtype=bool) if keep_bool else _round(out, dtype)
        return TV(out, dtype, _bvalid(tensors, shape))

    def unary(self, name: str, v: Any) -> Any:
        if not isinstance(v, TV):
            with np.errstate(all="ignore"):
                return float(UNARY[name](float(v)))
        return self.elementwise(UNARY[name], [v])

    def call(self, e: ast.Call, env: dict[str, Any]) -> Any:
        name = e.func_name
        if name is None:
            raise InterpError("method call in an expression")
        kw = {k.name: k.value for k in e.keywords}
        if name in UNARY:
            return self.unary(name, self.eval(e.args[0], env))
        if name in ("maximum", "minimum"):
            a, b = (self.eval(x, env) for x in e.args)
            return self.binop(name, a, b)
        if name == "where":
            c, a, b = (self.eval(x, env) for x in e.args)
            tensors = [v for v in (a, b) if isinstance(v, TV)]
            dtype = tensors[0].dtype if tensors else "f32"
            return self.elementwise(lambda cc, x, y: np.where(cc, x, y), [c, a, b], dtype)
        if name == "cast":
            v = self.tensor(self.eval(e.args[0], env))
            target = e.args[1] if len(e.args) > 1 else kw.get("dtype")
            if not isinstance(target, ast.Name):
                raise InterpError("cast target")
            dt = self.dtype(target.id)
            src = _f64(v.a) if v.dtype != "bool" else v.a
            return TV(_round(src, dt), dt, v.valid)
        if name in REDUCE:
            return self.reduce(name, self.tensor(self.eval(e.args[0], env)), kw, env)
        if name == "view":
            return self.view(e, kw, env)
        if name in ("tensor", "zeros", "ones", "full"):
            return self.local(name, e, kw, env)
        if name in ("is_loop_begin", "is_loop_end"):
            arg = e.args[0]
            if not isinstance(arg, ast.Name) or not isinstance(env.get(arg.id), LoopVar):
                raise InterpError(f"{name} of a non-index")
            lv = env[arg.id]
            return lv.value == (lv.first if name == "is_loop_begin" else lv.last)
        if name == "cdiv":
            a, b = (self.eval(x, env) for x in e.args)
            return -(-a // b)
        if name in INDEXING_CALLS:
            return self.indexing(name, e, kw, env)
        if name == "transpose":
            v = self.tensor(self.eval(e.args[0], env))
            return TV(np.swapaxes(v.a, -1, -2), v.dtype, v.valid[:-2] + (v.valid[-1], v.valid[-2]))
        if name == "matmul":
            a = self.tensor(self.eval(e.args[0], env))
            b = self.tensor(self.eval(e.args[1], env))
            aa = _f64(a.a)[tuple(slice(0, v) for v in a.valid)]
            bb = _f64(b.a)[tuple(slice(0, v) for v in b.valid)]
            if "trans_a" in kw and self.eval(kw["trans_a"], env):
                aa = np.swapaxes(aa, -1, -2)
            if "trans_b" in kw and self.eval(kw["trans_b"], env):
                bb = np.swapaxes(bb, -1, -2)
            out_dt = self.dtype(kw["out_dtype"].id) if "out_dtype" in kw else a.dtype
            r = _round(aa @ bb, out_dt)
            return TV(r, out_dt, r.shape)
        raise InterpError(f"builtin {name}")

    def indexing(self, name: str, e: ast.Call, kw: dict[str, ast.Expr], env: dict[str, Any]) -> TV:
        args = list(e.args)
        if name == "arange":
            dtype = "i32"
            if args and isinstance(args[-1], ast.Name) and self.dtype(args[-1].id) in DTYPES:
                dtype = self.dtype(args.pop().id)
            bounds = [int(self.eval(a, env)) for a in args]
            start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds
            return ix.arange(start, stop, dtype, TV)
        x = self.tensor(self.eval(args[0], env))
        if name in ("index_select", "gather"):
            axis = int(self.eval(args[1], env))
            index = self.tensor(self.eval(args[2], env))
            if name == "gather":
                if axis % x.a.ndim != x.a.ndim - 1:
                    raise InterpError("gather along another dim than the last")
                return ix.gather(x, index, TV)
            return ix.index_select(x, axis, index, TV)
        if name in ("triu", "tril"):
            d = args[1] if len(args) > 1 else kw.get("diagonal")
            return ix.triangle(x, name == "tril", 0 if d is None else int(self.eval(d, env)), TV)
        if name in ("argmax", "argmin"):
            keep = bool(self.eval(kw["keepdim"], env)) if "keepdim" in kw else False
            return ix.argreduce(x, name == "argmax", keep, TV)
        if name == "argsort":
            desc = bool(self.eval(kw["descending"], env)) if "descending" in kw else False
            return ix.argsort(x, desc, TV)
        raise InterpError(f"builtin {name}")

    def reduce(self, name: str, v: TV, kw: dict[str, ast.Expr], env: dict[str, Any]) -> TV:
        dim = int(self.eval(kw["dim"], env)) if "dim" in kw else -1
        keep = bool(self.eval(kw["keepdim"], env)) if "keepdim" in kw else False
        nd = v.a.ndim
        axis = dim % nd
        fn, ident = REDUCE[name]
        ext = v.valid[axis]
        data = _f64(v.a)
        sl = [slice(None)] * nd
        sl[axis] = slice(0, ext)
        part = data[tuple(sl)]
        if ext == 0:
            out = np.full(part.shape[:axis] + (1,) + part.shape[axis + 1:], ident)
        else:
            out = fn(part, axis=axis, keepdims=True)
        valid = list(v.valid)
        valid[axis] = 1
        if not keep:
            out = np.squeeze(out, axis=axis)
            del valid[axis]
        return TV(_round(out, v.dtype), v.dtype, tuple(valid))

    def view(self, e: ast.Call, kw: dict[str, ast.Expr], env: dict[str, Any]) -> TV:
        t = self.tensor(self.eval(e.args[0], env))
        shape = [int(x) for x in self.eval(e.args[1], env)]
        offs = [int(x) for x in self.eval(e.args[2], env)] if len(e.args) > 2 else [0] * len(shape)
        if len(shape) != t.a.ndim or len(offs) != t.a.ndim:
            raise InterpError("view rank")
        sl = []
        for o, s, size in zip(offs, shape, t.a.shape):
            if o < 0 or o + s > size:
                raise InterpError(f"view [{o}, {o + s}) outside a dim of {size}")
            sl.append(slice(o, o + s))
        sub = t.a[tuple(sl)]
        inferred = [max(0, min(tv - o, s)) for tv, o, s in zip(t.valid, offs, shape)]
        if "valid_shape" in kw:
            given = [int(x) for x in self.eval(kw["valid_shape"], env)]
            if any(not 0 <= g <= size for g, size in zip(given, shape)):
                raise Refused(f"valid extents {given} for a view of {list(shape)}")
            # A valid extent never exceeds the view, nor the data its parent holds.
            inferred = [max(0, min(g, i)) for g, i in zip(given, inferred)]
        return TV(sub, t.dtype, tuple(inferred))

    def local(self, name: str, e: ast.Call, kw: dict[str, ast.Expr], env: dict[str, Any]) -> TV:
        args = list(e.args)
        fill: Any = None
        if name == "full":
            fill = self.eval(args.pop(0), env)
        dims = [int(x) for x in self.eval(args[0], env)]
        dt_expr = args[1] if len(args) > 1 else kw.get("dtype")
        dt = self.dtype(dt_expr.id) if isinstance(dt_expr, ast.Name) else "f32"
        if name == "tensor":
            # Uninitialised: NaN, so that a read before any write shows in the output.
            fill = np.nan if DTYPES[dt].is_float else 0
        elif name == "zeros":
            fill = 0
        elif name == "ones":
            fill = 1
        a = np.full(dims, fill).astype(numpy_dtype(dt))
        return TV(a, dt, tuple(dims))


def interpret(kernel: ast.Kernel, variant: Mapping[str, str], symbols: Mapping[str, int],
              arrays: dict[str, np.ndarray], scalars: Mapping[str, Any],
              valid_shapes: Mapping[str, tuple] | None = None) -> dict[str, np.ndarray]:
    """Run ``kernel`` on ``arrays`` (every tensor parameter, outputs written in place)."""
    return Interpreter(kernel, variant, symbols, valid_shapes).run(arrays, scalars)


__all__ = ["TV", "InterpError", "Interpreter", "Stopped", "interpret"]
