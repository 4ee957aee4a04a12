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
from . import interp_layout


class InterpError(Exception):
    """The interpreter met a construct it does not model (a fuzzer limitation, not a finding)."""


class Refused(Exception):
    """The inputs break a rule the call must check before any kernel runs (a valid extent read from
    a tensor outside ``[0, view size]``: E0711); the call is expected to refuse them."""


class Stopped(Exception):
    """An access leaves its tensor at run time (docs/LANGUAGE.md §3.7): a write storing outside the
    tensor, a view that starts before it or past its end, an element read outside it (E0730); or a
    loop whose trip count comes from values read from tensors would run more times than the largest
    dim of the call (E0870). The call is expected to stop there with ``code`` on every backend;
    outputs are not compared."""

    def __init__(self, reason: str, code: str = "E0730"):
        super().__init__(reason)
        self.code = code


@dataclass
class TV:
    """A tensor value: the array (a numpy view for views), its dtype name and valid shape."""

    a: np.ndarray
    dtype: str
    valid: tuple[int, ...]


@dataclass
class Target:
    """A region written: the tensor, the region's offsets and the shape the statement names. The
    region may reach outside the tensor as long as what is stored does not (§3.7)."""

    base: np.ndarray
    dtype: str
    offsets: tuple[int, ...]
    shape: tuple[int, ...]


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
    # rounding to integral values (round: to nearest, ties to even), powers, trigonometry
    "round": np.rint, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "sign": np.sign,
    "exp2": np.exp2, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
}
BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "maximum": np.maximum,
          "minimum": np.minimum, "pow": np.power}
TERNARY = {"clip": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)}
# logic on bool tensors, by the operator and by the function spelling
LOGIC = {"and": np.logical_and, "or": np.logical_or, "not": np.logical_not,
         "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_not": np.logical_not}
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
                 valid_shapes: Mapping[str, tuple] | None = None, max_steps: int = 2_000_000,
                 stops: bool = True):
        self.kernel = kernel
        # stops=False: an access outside its tensor is recorded in ``stopped`` and skipped (a read
        # gives NaN or 0), and the run goes on, to see whether the call must be refused (E0711)
        # before any kernel runs rather than stopped at that access
        self.stops = stops
        self.stopped: str | None = None
        self.variant = dict(variant)
        self.symbols = dict(symbols)
        self.valid_shapes = dict(valid_shapes or {})
        self.steps = 0
        self.max_steps = max_steps
        self.from_data: set[str] = set()  # scalar locals computed from values read from tensors
        self.largest_dim = 1

    # ------------------------------------------------------------------ entry
    def run(self, arrays: dict[str, np.ndarray], scalars: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Execute the kernel; ``arrays`` hold every tensor parameter and are written in place."""
        env: dict[str, Any] = {}
        for p in self.kernel.params:
            if p.is_tensor:
                a = arrays[p.name]
                env[p.name] = TV(a, self.dtype(p.dtype), a.shape)
                self.largest_dim = max([self.largest_dim, *a.shape])
            else:
                if p.name in scalars and scalars[p.name] is not None:
                    env[p.name] = scalars[p.name]
                elif p.default is not None:
                    env[p.name] = self.eval(p.default, {})
                else:
                    raise InterpError(f"scalar `{p.name}` has no value")
        self.block(self.kernel.body, env)
        return arrays

    def stop(self, reason: str, code: str = "E0730") -> None:
        if self.stops:
            raise Stopped(reason, code)
        self.stopped = self.stopped or reason

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
                if not isinstance(value, TV) and self.reads_data(st.value, env):
                    self.from_data.add(name)
                else:
                    self.from_data.discard(name)
                if isinstance(value, TV) and name in self.valid_shapes:
                    vs = tuple(self.eval_dim(d, env) for d in self.valid_shapes[name])
                    value = TV(value.a, value.dtype, tuple(max(0, min(v, s, c)) for v, s, c in
                                                          zip(vs, value.a.shape, value.valid)))
                env[name] = value
                return
            if isinstance(st.target, ast.Subscript):
                target = self.eval(st.target.value, env)
                region = self.region(target, st.target.indices, env, write=True)
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
                unique = e.keyword("unique_indices")
                ix.scatter_update(dst, index, src, _round, self.stop,
                                  unique is not None and bool(self.eval(unique.value, env)))
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
                    self.write(Target(target.a, target.dtype, tuple(int(o) for o in offs), v.a.shape), v)
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
        trips = max(-(-(stop - start) // step), 0)
        if trips > self.largest_dim and any(self.reads_data(a, env) for a in call.args):
            self.stop(f"loop `{self.loop_name(st)}` of {trips} trips read from data, over the largest dim "
                      f"{self.largest_dim}", "E0870")
            return
        steps = list(range(start, stop, step))
        if not steps:
            return
        for i in steps:
            env[st.targets[0].id] = LoopVar(i, steps[0], steps[-1])
            if len(st.targets) > 1:
                env[st.targets[1].id] = 1
            self.block(st.body, env)

    def reads_data(self, e: ast.Expr, env: dict[str, Any]) -> bool:
        """Whether ``e`` depends on a value read from a tensor: an element read in it, or a scalar
        local computed from one."""
        for node in ast.walk(e):
            if isinstance(node, ast.Name) and node.id in self.from_data:
                return True
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                t = env.get(node.value.id)
                if isinstance(t, TV) and len(node.indices) == t.a.ndim and \
                        not any(isinstance(i, ast.Slice) for i in node.indices):
                    return True
        return False

    @staticmethod
    def loop_name(st: ast.For) -> str:
        kw = st.iter.keyword("name") if isinstance(st.iter, ast.Call) else None
        return kw.value.value if kw is not None and isinstance(kw.value, ast.Str) else f"{st.targets[0].id}_loop"

    @staticmethod
    def truth(v: Any) -> bool:
        if isinstance(v, TV):
            raise InterpError("a tensor as a condition")
        return bool(v)

    # ------------------------------------------------------------------ regions and writes
    def region(self, t: TV, indices: tuple[ast.Index, ...], env: dict[str, Any], write: bool = False) -> TV:
        """The sub-tensor ``t[indices]``: an integer index keeps its axis as a length-1 slice.

        A region written must lie inside the tensor; one read may start at its end (it then
        holds nothing valid) and reach past it, its valid extent clipped to the data (§3.2)."""
        if not isinstance(t, TV):
            raise InterpError("subscript of a non-tensor")
        sl = []
        valid = []
        offsets, shape = [], []
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
            if lo > hi:
                raise InterpError(f"slice {lo}:{hi} of negative size")
            if not write and (lo < 0 or lo > size):
                self.stop(f"read of [{lo}, {hi}) in a dim of {size}")
                lo, hi = 0, max(0, min(hi - lo, size))  # the run after a stop only looks for a refusal
            sl.append(slice(lo, hi))
            offsets.append(lo)
            shape.append(hi - lo)
            valid.append(max(0, min(t.valid[d] - lo, hi - lo)))
        if len(indices) > t.a.ndim:
            raise InterpError("too many indices")
        if write:
            return Target(t.a, t.dtype, tuple(offsets), tuple(shape))
        return self.sub(t, offsets, shape, valid)

    @staticmethod
    def sub(t: TV, offsets: list[int], shape: list[int], valid: list[int]) -> TV:
        """The region of ``t`` at ``offsets``: a numpy view, or, where it reaches past the tensor, a
        copy padded with NaN whose valid extent stops at the data (a read: the view is never
        written through)."""
        sl = tuple(slice(o, o + n) for o, n in zip(offsets, shape))
        part = t.a[sl]
        if part.shape == tuple(shape):
            return TV(part, t.dtype, tuple(valid))
        fill = np.nan if DTYPES[t.dtype].is_float else 0
        padded = np.full(shape, fill).astype(t.a.dtype)
        padded[tuple(slice(0, n) for n in part.shape)] = part
        clipped = tuple(min(v, n) for v, n in zip(valid, part.shape))
        return TV(padded, t.dtype, clipped)

    def write(self, region: TV | Target, value: Any) -> None:
        """Store the valid part of ``value`` (all of a scalar or of a broadcast dim) into ``region``;
        a stored part that reaches past the tensor's end stops the call (E0730)."""
        if isinstance(region, TV):
            region = Target(region.a, region.dtype, (0,) * region.a.ndim, region.a.shape)
        shape = region.shape
        if isinstance(value, TV):
            if value.a.ndim > len(shape):
                raise InterpError("value of higher rank than its target")
            data = np.broadcast_to(value.a, shape) if value.a.shape != shape else value.a
            valid = _bvalid([value], shape)
        else:
            data, valid = np.full(shape, value), tuple(shape)
        # each dim is checked on its own, as the guards do: a dim storing nothing is never outside
        if any(v > 0 and (o < 0 or o + v > n) for o, v, n in zip(region.offsets, valid, region.base.shape)):
            self.stop(f"write of {list(valid)} at {list(region.offsets)} into {list(region.base.shape)}")
            return
        if not all(v > 0 for v in valid):
            return  # stores nothing
        sl = tuple(slice(0, v) for v in valid)
        dst = tuple(slice(o, o + v) for o, v in zip(region.offsets, valid))
        region.base[dst] = _round(data[sl], region.dtype)

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
            if e.op == "not" and isinstance(v, TV):
                return self.elementwise(LOGIC["not"], [v], "bool", keep_bool=True)
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
            left = self.eval(e.left, env)
            if isinstance(left, TV):  # elementwise on masks: both sides, no short circuit
                return self.elementwise(LOGIC[e.op], [left, self.eval(e.right, env)], "bool", keep_bool=True)
            a = self.truth(left)
            if e.op == "and":
                return a and self.truth(self.eval(e.right, env))
            return a or self.truth(self.eval(e.right, env))
        if isinstance(e, ast.Subscript):
            t = self.eval(e.value, env)
            if isinstance(t, TV) and len(e.indices) == t.a.ndim and not any(isinstance(i, ast.Slice)
                                                                             for i in e.indices):
                ix = tuple(self.int(i, env, 0) for i in e.indices)
                if any(not 0 <= i < n for i, n in zip(ix, t.a.shape)):
                    self.stop(f"element read {list(ix)} of a tensor of shape {list(t.a.shape)}")
                    return 0
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
        if name in ("maximum", "minimum", "pow"):
            a, b = (self.eval(x, env) for x in e.args)
            return self.binop(name, a, b)
        if name in TERNARY:
            return self.elementwise(TERNARY[name], [self.eval(x, env) for x in e.args])
        if name in LOGIC:
            return self.elementwise(LOGIC[name], [self.eval(x, env) for x in e.args], "bool", keep_bool=True)
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
        if name in interp_layout.NAMES:
            return interp_layout.call(self, name, e, kw, env)
        if name in ("min", "max"):  # of scalars (tensors take minimum/maximum)
            values = [self.eval(x, env) for x in e.args]
            if any(isinstance(v, TV) for v in values):
                raise InterpError(f"{name} of a tensor")
            return min(values) if name == "min" else max(values)
        if name == "matmul":
            return self.matmul(e, kw, env)
        raise InterpError(f"builtin {name}")

    def matmul(self, e: ast.Call, kw: dict[str, ast.Expr], env: dict[str, Any]) -> TV:
        """torch.matmul's meaning (docs/LANGUAGE.md §1.4): the last two dims multiply, the dims
        before them broadcast; float products summed exactly here (f64) and int8 ones exactly in
        integers, plus the bias row, then rounded once to ``out_dtype`` (the accumulator's dtype,
        f32 or i32, by default)."""
        a = self.tensor(self.eval(e.args[0], env))
        b = self.tensor(self.eval(e.args[1], env))
        exact = a.dtype == "i8"

        def values(v: TV) -> np.ndarray:
            data = v.a.astype(np.int64) if exact else _f64(v.a)
            return data[tuple(slice(0, n) for n in v.valid)]

        aa, bb = values(a), values(b)
        if "trans_a" in kw and self.eval(kw["trans_a"], env):
            aa = np.swapaxes(aa, -1, -2)
        if "trans_b" in kw and self.eval(kw["trans_b"], env):
            bb = np.swapaxes(bb, -1, -2)
        # the sum runs over the k both operands hold: an operand with fewer valid k than the other
        # (a view of the last, partial block) leaves the rest out
        k = min(aa.shape[-1], bb.shape[-2])
        prod = np.matmul(aa[..., :k], bb[..., :k, :])
        if "bias" in kw:
            bias = self.tensor(self.eval(kw["bias"], env))
            prod = prod + values(bias)[: prod.shape[-1]]
        out_dt = self.dtype(kw["out_dtype"].id) if "out_dtype" in kw else ("i32" if exact else "f32")
        # the result has the broadcast static shape; what lies past the valid region is unwritten
        sa, sb = a.a.shape, b.a.shape
        if "trans_a" in kw and self.eval(kw["trans_a"], env):
            sa = sa[:-2] + (sa[-1], sa[-2])
        if "trans_b" in kw and self.eval(kw["trans_b"], env):
            sb = sb[:-2] + (sb[-1], sb[-2])
        shape = (*np.broadcast_shapes(sa[:-2], sb[:-2]), sa[-2], sb[-1])
        full = np.full(shape, np.nan if DTYPES[out_dt].is_float else 0).astype(numpy_dtype(out_dt))
        full[tuple(slice(0, n) for n in prod.shape)] = _round(prod, out_dt)
        return TV(full, out_dt, prod.shape)

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
                return ix.gather(x, index, TV, self.stop)
            return ix.index_select(x, axis, index, TV, self.stop)
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
        dims = self.eval(kw["dim"], env) if "dim" in kw else -1
        keep = bool(self.eval(kw["keepdim"], env)) if "keepdim" in kw else False
        nd = v.a.ndim
        axes = tuple(sorted(int(d) % nd for d in (dims if isinstance(dims, list) else [dims])))
        fn, ident = REDUCE[name]
        data = _f64(v.a)
        # the valid part along the reduced axes; the others keep their full extent (and valid shape)
        part = data[tuple(slice(0, v.valid[d]) if d in axes else slice(None) for d in range(nd))]
        if any(v.valid[d] == 0 for d in axes):
            out = np.full(tuple(1 if d in axes else n for d, n in enumerate(part.shape)), ident)
        else:
            out = fn(part, axis=axes, keepdims=True)
        valid = [1 if d in axes else n for d, n in enumerate(v.valid)]
        if not keep:
            out = out.reshape([n for d, n in enumerate(out.shape) if d not in axes] or [1])
            valid = [n for d, n in enumerate(valid) if d not in axes] or [1]
        return TV(_round(out, v.dtype), v.dtype, tuple(valid))

    def view(self, e: ast.Call, kw: dict[str, ast.Expr], env: dict[str, Any]) -> TV:
        t = self.tensor(self.eval(e.args[0], env))
        shape = [int(x) for x in self.eval(e.args[1], env)]
        offs = [int(x) for x in self.eval(e.args[2], env)] if len(e.args) > 2 else [0] * len(shape)
        if len(shape) != t.a.ndim or len(offs) != t.a.ndim:
            raise InterpError("view rank")
        if any(o < 0 or o > size for o, size in zip(offs, t.a.shape)):
            self.stop(f"view at {offs} of a tensor of shape {list(t.a.shape)}")
            offs = [0] * len(offs)
        inferred = [max(0, min(tv - o, s)) for tv, o, s in zip(t.valid, offs, shape)]
        if "valid_shape" in kw:
            given = [int(x) for x in self.eval(kw["valid_shape"], env)]
            if any(not 0 <= g <= size for g, size in zip(given, shape)):
                raise Refused(f"valid extents {given} for a view of {list(shape)}")
            # A valid extent never exceeds the view, nor the data its parent holds.
            inferred = [max(0, min(g, i)) for g, i in zip(given, inferred)]
        return self.sub(t, offs, shape, inferred)

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
    """Run ``kernel`` on ``arrays`` (every tensor parameter, outputs written in place).

    Raises :class:`Refused` when the call must refuse the inputs before running (E0711), and
    :class:`Stopped` when it must stop at an access outside a tensor (E0730). A refusal takes
    precedence wherever it arises, as the call checks every length before any kernel runs."""
    try:
        return Interpreter(kernel, variant, symbols, valid_shapes).run(arrays, scalars)
    except Stopped as stop:
        scratch = {k: v.copy() for k, v in arrays.items()}
        try:
            Interpreter(kernel, variant, symbols, valid_shapes, stops=False).run(scratch, scalars)
        except Refused:
            raise
        except Exception:  # noqa: BLE001 - values past a stop are meaningless; only a refusal counts
            pass
        raise stop from None


__all__ = ["LOGIC", "TERNARY", "TV", "InterpError", "Interpreter", "Refused", "Stopped", "interpret"]
