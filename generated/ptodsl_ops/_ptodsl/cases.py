"""A golden test case of a spec, as the YAML's ``tests:`` gives it, and the explicit inputs it names.

A leaf: the front end builds cases, the checker validates their ``inputs:``, the golden harness
and the standalone runtime of generated packages make them, and none may import the others.

An input is given three ways (docs/LANGUAGE.md §2): a literal nested list, one of the closed set
of :data:`GENERATORS` (seeded by the case's seed and the parameter's name, so one input's values
do not depend on the others), or a ``.npy`` file of the spec's folder. :func:`build_input` makes
the array and raises :class:`InputError` at the entry (or the part of it) that is wrong.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GENERATORS: tuple[str, ...] = ("permutation", "arange", "full", "randint", "cumsum")
MAX_INPUT_FILE_BYTES = 16 << 20  # a .npy file of a golden case: small data that matters, not a data set


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # keeps pytest from collecting this class when a test module imports it

    index: int
    shapes: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    scalars: dict[str, float | int | bool] = field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    seed: int | None = None
    data_range: tuple[float, float] | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    name: str | None = None
    # parameter -> {"values": nested list} | {"file": "data/x.npy"} | {GENERATOR: argument}
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the code of the diagnostic the call must stop with (index data outside the tensor it indexes)
    refuses: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "shapes": self.shapes, "dtypes": self.dtypes, "scalars": self.scalars,
               "rtol": self.rtol, "atol": self.atol, "seed": self.seed,
               "data_range": list(self.data_range) if self.data_range else None,
               "ranges": {k: list(v) for k, v in self.ranges.items()}, "name": self.name}
        # written only when given, so the cases of specs that use neither keep their form
        if self.inputs:
            out["inputs"] = self.inputs
        if self.refuses is not None:
            out["refuses"] = self.refuses
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestCase:
        rng = data.get("data_range")
        return cls(int(data["index"]), dict(data.get("shapes", {})), dict(data.get("dtypes", {})),
                   dict(data.get("scalars", {})), data.get("rtol"), data.get("atol"), data.get("seed"),
                   tuple(rng) if rng else None, {k: tuple(v) for k, v in data.get("ranges", {}).items()},
                   data.get("name"), dict(data.get("inputs", {})), data.get("refuses"))

    def files(self) -> list[str]:
        """The ``.npy`` files the case's inputs name, relative to the spec's folder."""
        return [e["file"] for e in self.inputs.values() if "file" in e]


def case_seed(op: str, case: TestCase) -> int:
    """The seed of a case's random inputs: its own, else one derived from the op and its index."""
    return case.seed if case.seed is not None else zlib.crc32(f"{op}:{case.index}".encode())


class InputError(ValueError):
    """An ``inputs:`` entry that cannot make the parameter's array. ``where`` is the path below
    the entry (a generator's key, a list index) of the part to point at."""

    def __init__(self, code: str, message: str, label: str, help: str, where: tuple = ()):
        super().__init__(message)
        self.code, self.message, self.label, self.help, self.where = code, message, label, help, where


E_SHAPE = "E0861"
E_RANGE = "E0862"
E_GENERATOR = "E0863"
E_FILE = "E0864"


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def literal_shape(values: Any, where: tuple = ()) -> tuple[int, ...]:
    """The shape of a nested list of numbers; a ragged list raises InputError at the odd item."""
    if not isinstance(values, list):
        return ()
    if not values:
        return (0,)
    inner = [literal_shape(v, (*where, i)) for i, v in enumerate(values)]
    for i, s in enumerate(inner):
        if s != inner[0]:
            raise InputError(E_SHAPE, f"the nested list is ragged: item {i} has shape {_shape_text(s)}, "
                             f"item 0 has {_shape_text(inner[0])}", "not the shape of item 0",
                             "give every row the same length", (*where, i))
    return (len(values), *inner[0])


def _limits(dtype: str) -> tuple[float, float]:
    import numpy as np

    from .dtypes import DTYPES, numpy_dtype

    if dtype == "bool":
        return (0, 1)
    if DTYPES[dtype].is_float:
        top = float(np.finfo(numpy_dtype(dtype)).max)
        return (-top, top)
    info = np.iinfo(numpy_dtype(dtype))
    return (int(info.min), int(info.max))


def fits(value: Any, dtype: str) -> str | None:
    """Why ``value`` is no value of ``dtype`` (out of range, not an integer, not finite), or None."""
    import math

    from .dtypes import DTYPES

    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int | float):
        return f"`{value!r}` is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    if dtype == "bool" and value not in (0, 1):
        return f"{value} is not a boolean (true, false, 0 or 1)"
    if not DTYPES[dtype].is_float and dtype != "bool" and value != int(value):
        return f"{value} is not an integer, and `{dtype}` holds integers"
    lo, hi = _limits(dtype)
    if not lo <= value <= hi:
        return f"{value} is outside the range of `{dtype}`, [{_num(lo)}, {_num(hi)}]"
    return None


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**63 else f"{v:g}"


def convert(a: Any, dtype: str, where: tuple = ()) -> Any:
    """``a`` (an array of numbers) as ``dtype``; an element outside its range raises InputError
    at that element's index (below ``where``)."""
    import numpy as np

    from .dtypes import DTYPES, numpy_dtype

    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise InputError(E_RANGE, f"the values are of numpy dtype {a.dtype}, not numbers", "not numbers",
                         "give numbers (booleans, integers or floats)", where)
    if a.size:
        wide = a.astype(np.float64) if a.dtype.kind == "f" or DTYPES[dtype].is_float else a.astype(object)
        bad = None
        if a.dtype.kind == "f" and not np.isfinite(wide).all():
            bad = int(np.flatnonzero(~np.isfinite(wide))[0])
        else:
            lo, hi = _limits(dtype)
            flat = wide.reshape(-1)
            ok = [(lo <= v <= hi) and (DTYPES[dtype].is_float or v == int(v)) for v in flat.tolist()]
            if dtype == "bool":
                ok = [v in (0, 1) for v in flat.tolist()]
            if not all(ok):
                bad = ok.index(False)
        if bad is not None:
            index = tuple(int(i) for i in np.unravel_index(bad, a.shape))
            value = a.reshape(-1)[bad].item()
            raise InputError(E_RANGE, f"element {list(index)} cannot be a `{dtype}`: {fits(value, dtype)}",
                             f"not a `{dtype}` value", f"give values `{dtype}` holds", (*where, *index))
    return a.astype(numpy_dtype(dtype))


def _dim(value: Any, env: Mapping[str, int], key: tuple) -> int:
    """A generator's count: an integer or an expression over the case's dims (``V``, ``2*H``)."""
    if isinstance(value, int):
        return value
    from . import sym

    try:
        got = sym.evaluate(sym.parse(str(value)), env)
    except KeyError as exc:
        raise InputError(E_GENERATOR, f"`{value}` uses the dim `{exc.args[0]}`, which the case does not give",
                         "unknown dim", f"add `{exc.args[0]}` to the case's `shapes:`", key) from None
    except (ValueError, TypeError, ZeroDivisionError):
        raise InputError(E_GENERATOR, f"`{value}` is not an integer expression over dims", "not a dim expression",
                         "write an integer or an expression such as `2*H`", key) from None
    if got != int(got):
        raise InputError(E_GENERATOR, f"`{value}` is {got}, not an integer", "not an integer",
                         "write an expression with an integer value", key)
    return int(got)


def _int_pair(value: Any, key: tuple, what: str) -> tuple[int, int]:
    lo, hi = value
    if lo > hi:
        raise InputError(E_GENERATOR, f"`{what}: [{lo}, {hi}]` has its low end above its high end", "low > high",
                         "write `[low, high]` with low <= high (both ends included)", key)
    return int(lo), int(hi)


def generate(kind: str, arg: Any, shape: tuple[int, ...], dtype: str, rng: Any,
             env: Mapping[str, int]) -> Any:
    """The values of generator ``kind`` for a parameter of ``shape`` (before the dtype check)."""
    import numpy as np

    size = int(np.prod(shape, dtype=np.int64))
    key = (kind,)
    if kind == "full":
        problem = fits(arg, dtype)
        if problem is not None:
            raise InputError(E_GENERATOR, f"`full: {arg}`: {problem}", "out of range", f"give a `{dtype}` value", key)
        return np.full(shape, arg, dtype=np.float64 if isinstance(arg, float) else np.int64)
    if kind == "arange":
        start, step = (arg, 1) if not isinstance(arg, list) else arg
        kind_of = np.float64 if any(isinstance(v, float) for v in (start, step)) else np.int64
        last = start + step * max(size - 1, 0)
        problem = fits(last, dtype) or fits(start, dtype)
        if problem is not None:
            raise InputError(E_GENERATOR, f"`arange` from {start} by {step} over {size} elements reaches {last}: "
                             f"{problem}", "values out of range", f"start lower, or a smaller step for `{dtype}`", key)
        return (start + step * np.arange(size, dtype=kind_of)).reshape(shape)
    if kind == "randint":
        lo, hi = _int_pair(arg, key, "randint")
        for v in (lo, hi):
            problem = fits(v, dtype)
            if problem is not None:
                raise InputError(E_GENERATOR, f"`randint` bound {problem}", "out of range", f"keep both ends in "
                                 f"the range of `{dtype}`", key)
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    if kind == "permutation":
        n = _dim(arg, env, key)
        if n < size:
            raise InputError(E_GENERATOR, f"`permutation: {arg}` draws {size} distinct values below {n}: not "
                             "enough values", f"{n} < {size} elements", f"give at least the parameter's size, {size} "
                             "(a permutation of the whole range is `permutation` of its size)", key)
        if size and fits(n - 1, dtype) is not None:
            raise InputError(E_GENERATOR, f"`permutation: {arg}` makes values up to {n - 1}: {fits(n - 1, dtype)}",
                             "out of range", f"keep the range within `{dtype}`", key)
        return rng.choice(n, size=size, replace=False).reshape(shape)
    if kind == "cumsum":
        if len(shape) != 1 or size < 1:
            raise InputError(E_GENERATOR, f"`cumsum` makes offsets of a 1-D tensor of at least one element, "
                             f"the parameter has shape {_shape_text(shape)}", "not a 1-D tensor",
                             "use it for offsets such as `cu_seqlens: i32[B1]` (B segments give B + 1 offsets)", key)
        if "total" in arg:
            total = _dim(arg["total"], env, (*key, "total"))
            if total < 0 or (size == 1 and total != 0):
                raise InputError(E_GENERATOR, f"`cumsum` cannot end at {total} with {size - 1} segments",
                                 "impossible total", "give a total >= 0 (0 when the tensor has one element)",
                                 (*key, "total"))
            cuts = np.sort(rng.integers(0, total, size=max(size - 2, 0), endpoint=True))
            out = np.concatenate([[0], cuts, [total]]) if size > 1 else np.zeros(1, np.int64)
        else:
            lo, hi = _int_pair(arg["range"], (*key, "range"), "range")
            if lo < 0:
                raise InputError(E_GENERATOR, "`cumsum` lengths are at least 0", "negative length",
                                 "give `range: [low, high]` with 0 <= low", (*key, "range"))
            out = np.concatenate([[0], np.cumsum(rng.integers(lo, hi, size=size - 1, endpoint=True))])
        problem = fits(int(out[-1]), dtype)
        if problem is not None:
            raise InputError(E_GENERATOR, f"`cumsum` reaches {int(out[-1])}: {problem}", "out of range",
                             f"smaller lengths for `{dtype}`", key)
        return out.astype(np.int64)
    raise InputError(E_GENERATOR, f"unknown generator `{kind}`", "unknown", f"use one of {', '.join(GENERATORS)}")


def npy_problem(path: str) -> str | None:
    """Why ``path`` is no usable ``.npy`` file (missing, too large, not .npy), or None."""
    if not path.endswith(".npy"):
        return "it is not a `.npy` file"
    if not os.path.isfile(path):
        return "no such file"
    if os.path.getsize(path) > MAX_INPUT_FILE_BYTES:
        return f"it is larger than {MAX_INPUT_FILE_BYTES >> 20} MiB"
    return None


def load_npy(path: str, shown: str | None = None) -> Any:
    """The array of a ``.npy`` file, never unpickling anything; raises InputError when unusable."""
    import numpy as np

    problem = npy_problem(path)
    if problem is None:
        try:
            a = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            problem = f"it is not a readable .npy file ({exc})"
        else:
            if not isinstance(a, np.ndarray):
                problem = "it holds no single array"
            elif a.dtype.kind not in "biuf":
                problem = f"it holds {a.dtype} values, not numbers"
    if problem is not None:
        raise InputError(E_FILE, f"cannot use `{shown or path}` as an input: {problem}", problem,
                         "name a .npy file (numpy.save) of numbers in the spec's folder, at most "
                         f"{MAX_INPUT_FILE_BYTES >> 20} MiB")
    return a


def build_input(name: str, entry: Mapping[str, Any], shape: tuple[int, ...], dtype: str, seed: int,
                env: Mapping[str, int], folder: str) -> Any:
    """The array of input ``name`` from its ``inputs:`` entry, as ``dtype``, of ``shape``."""
    import numpy as np

    if "values" in entry:
        values = entry["values"]
        got = literal_shape(values)
        if got != tuple(shape) and not (got == () and not shape):
            raise InputError(E_SHAPE, f"`{name}` has shape {_shape_text(tuple(shape))} in this case, the list "
                             f"has shape {_shape_text(got)}", f"shape {_shape_text(got)}",
                             f"give {_shape_text(tuple(shape))} values (nested, one list per dim)")
        flat = np.asarray(values, dtype=object if any(isinstance(v, int) for v in _leaves(values)) else np.float64)
        if flat.dtype == object:  # integers beyond 2**63 must be reported, not wrapped
            return convert(_exact(flat), dtype, ())
        return convert(flat, dtype, ())
    if "file" in entry:
        a = load_npy(os.path.join(folder, entry["file"]), entry["file"])
        if tuple(a.shape) != tuple(shape):
            raise InputError(E_SHAPE, f"`{name}` has shape {_shape_text(tuple(shape))} in this case, "
                             f"`{entry['file']}` holds {_shape_text(tuple(a.shape))}",
                             f"shape {_shape_text(tuple(a.shape))}", f"save an array of shape {_shape_text(tuple(shape))}")
        return convert(a, dtype, ())
    (kind, arg), = entry.items()
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    made = generate(kind, arg, tuple(shape), dtype, rng, env)
    try:
        return convert(made, dtype)
    except InputError as exc:  # the element is the generator's, not written in the YAML: point at it
        exc.where = (kind,)
        raise


def _leaves(values: Any) -> list:
    return [x for v in values for x in _leaves(v)] if isinstance(values, list) else [values]


def _exact(a: Any) -> Any:
    """An object array of Python numbers as int64 when every value fits it, else as float64 (then
    the range check reports the value that does not fit)."""
    import numpy as np

    vals = a.reshape(-1).tolist()
    if all(isinstance(v, bool | int) and -(2**63) <= v < 2**63 for v in vals):
        return a.astype(np.int64)
    for i, v in enumerate(vals):
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
            index = tuple(int(x) for x in np.unravel_index(i, a.shape))
            raise InputError(E_RANGE, f"element {list(index)} is {v}, beyond any dtype", "too large",
                             "give values the parameter's dtype holds", index)
    return a.astype(np.float64)


__all__ = ["GENERATORS", "MAX_INPUT_FILE_BYTES", "InputError", "TestCase", "build_input", "case_seed", "convert",
           "fits", "generate", "literal_shape", "load_npy", "npy_problem"]
