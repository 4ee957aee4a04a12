"""What a call of a compiled operator needs, and nothing of the compiler: a :class:`Program`.

A program holds the op's interface (parameters, dtype variants, fixed symbols, the divisions its
dims must satisfy), the Tensor and Block IR of every variant, the target, the golden test cases,
and a way to get each variant's C++ for the cpu backend. The compiler builds one from a compiled
spec (``ptodsl.api``); a generated package reads one back from its files (:func:`load_program`)
without parsing or checking anything, so both run every call through the same code.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import sym
from ..cases import TestCase
from ..diagnostics import Span
from ..ir import Func, Module, TensorType
from ..ir.parser import parse
from ..targets import Target, load_target

FORMAT = 1  # version of op.json; a package written in another format is refused, not misread


@dataclass(frozen=True)
class ParamInfo:
    """A kernel parameter as declared in the .pto."""

    name: str
    dtype: str  # a dtype, or a dtype variable of the YAML
    dims: tuple[int | str, ...] | None  # None for a scalar
    mode: str = "in"  # in | out | inout
    default: Any = None  # a scalar's default value
    span: Span | None = None
    dim_spans: tuple[Span | None, ...] = ()

    @property
    def is_tensor(self) -> bool:
        return self.dims is not None


@dataclass(frozen=True)
class Division:
    """A division in an integer position whose validity depends on runtime dims: ``den`` must be
    non-zero and, for ``kind == "exact"``, divide ``num``; ``kind == "equal"``: a reshape's element
    counts, ``num == den``; ``kind == "whole"``: a valid extent that, clamped
    at 0, must equal the extent ``den``."""

    kind: str
    num: sym.Expr
    den: sym.Expr
    span: Span | None
    what: str


@dataclass(frozen=True)
class EntryParam:
    """A parameter of a variant's exported C++ entry, in call order."""

    name: str
    kind: str  # tensor | scalar | symbol | poison
    dtype: str


@dataclass(frozen=True)
class CpuVariant:
    """The C++ of one dtype variant and how to call its entry."""

    entry: str
    sources: dict[str, str]  # file name -> text, compute kernels first, then the control program
    params: tuple[EntryParam, ...]


@dataclass(frozen=True)
class Variant:
    dtypes: dict[str, str]  # dtype variable -> dtype
    name: str  # "T=f32", or "" for a spec without variables
    requires: tuple[Division, ...] = ()


@dataclass(frozen=True)
class Backward:
    """How a spec's backward op takes the forward's values (``backward:`` of the YAML)."""

    op: str  # the backward op's name
    inputs: tuple[tuple[str, str, str], ...]  # backward param, "saved" | "grad", forward tensor
    outputs: tuple[tuple[str, str], ...]  # backward output param, the forward input it is the gradient of
    scalars: tuple[str, ...]  # forward scalars passed through by name


@dataclass
class Program:
    op: str
    doc: str
    dtypes: dict[str, tuple[str, ...]]
    symbols: dict[str, int]
    params: tuple[ParamInfo, ...]
    span: Span | None  # the kernel's declaration
    variants: tuple[Variant, ...]
    # variant index -> its Tensor IR kernel and a Block IR module holding its functions; a package
    # parses a variant's files when a call first needs them
    ir_source: Callable[[int], tuple[Func, Module]]
    target: Target
    cpu_source: Callable[[int], CpuVariant]
    tile: Module | None = None  # the compiler keeps it, for the simulator's level="tile"
    cases: tuple[TestCase, ...] = ()
    reference: tuple[str, str] | None = None  # (file path, function)
    torch_equivalent: str | None = None  # a function of the reference file
    tile_hint: tuple[int, ...] | None = None  # the first vec_tile, to place mismatches in tails
    backward: Backward | None = None
    data_dir: str | None = None  # the folder the cases' `.npy` inputs are named relative to
    defined: dict[str, sym.Expr] = field(default_factory=dict)  # dims defined by others (`D: 2*H`)
    max_dims: dict[str, int] = field(default_factory=dict)  # dims bounded by `max_dims:`: 1 <= dim <= max
    nondecreasing: tuple[str, ...] = ()  # inputs whose elements never decrease (`nondecreasing:`)

    def kernel_for(self, variant: Mapping[str, str]) -> int:
        for i, v in enumerate(self.variants):
            if v.dtypes == dict(variant):
                return i
        raise KeyError(dict(variant))

    def tensor_func(self, index: int) -> Func:
        return self.ir_source(index)[0]

    def block_module(self, index: int) -> Module:
        return self.ir_source(index)[1]

    def control(self, index: int) -> str:
        """The Block IR control program of a variant (named as its Tensor IR kernel)."""
        return self.tensor_func(index).name

    def param(self, name: str) -> ParamInfo | None:
        return next((p for p in self.params if p.name == name), None)

    def param_type(self, index: int, name: str) -> tuple[str, tuple[sym.Expr, ...] | None]:
        """The concrete dtype and (for tensors) the shape of a parameter in one variant."""
        for p in self.tensor_func(index).params:
            if p.name == name:
                if isinstance(p.type, TensorType):
                    return p.type.dtype, tuple(p.type.shape)
                return p.dtype, None
        raise KeyError(name)

    def variant_of_case(self, case: TestCase) -> dict[str, str]:
        """The dtype variant a test case runs: its own dtypes, the first of each list otherwise."""
        return {k: case.dtypes.get(k, v[0]) for k, v in self.dtypes.items()}


# ------------------------------------------------------------------ the package form
_LOC = re.compile(r'loc\(("(?:[^"\\]|\\.)*"):')


def map_locs(text: str, path: Callable[[str], str]) -> str:
    """Printed IR with the file of every ``loc("FILE":...)`` replaced by ``path(FILE)``."""
    return _LOC.sub(lambda m: f"loc({json.dumps(path(json.loads(m.group(1))))}:", text)


def reroot(text: str, root: str | os.PathLike[str]) -> str:
    """Make every relative ``loc("FILE":...)`` of printed IR name ``root/FILE``, so diagnostics
    show the package's copy of the spec wherever it is installed."""
    base = str(root)
    return map_locs(text, lambda path: path if os.path.isabs(path) else os.path.join(base, path))


def span_json(span: Span | None, rel: Callable[[str], str]) -> list[Any] | None:
    return None if span is None else [rel(span.file), span.line, span.col, span.end_line, span.end_col]


def span_of(data: Any, root: str) -> Span | None:
    if not data:
        return None
    file, line, col, end_line, end_col = data
    return Span(file if os.path.isabs(file) else os.path.join(root, file), int(line), int(col), int(end_line),
                int(end_col))


def program_json(p: Program, rel: Callable[[str], str], ir_files: Mapping[int, Mapping[str, str]],
                 cpu_files: Mapping[int, Mapping[str, str]]) -> dict[str, Any]:
    """The JSON form of a program; ``rel`` turns a source path into one relative to the package,
    ``ir_files[i]`` names the Tensor and Block IR files of variant i, ``cpu_files[i]`` its C++."""
    def sp(s: Span | None) -> list[Any] | None:
        return span_json(s, rel)

    variants = []
    for i, v in enumerate(p.variants):
        cpu = p.cpu_source(i)
        variants.append({
            "dtypes": v.dtypes, "name": v.name,
            "requires": [{"kind": d.kind, "num": sym.to_text(d.num), "den": sym.to_text(d.den), "span": sp(d.span),
                          "what": d.what} for d in v.requires],
            "ir": dict(ir_files[i]),
            "cpu": {"entry": cpu.entry, "sources": dict(cpu_files[i]),
                    "params": [[e.name, e.kind, e.dtype] for e in cpu.params]},
        })
    back = p.backward
    return {
        "format": FORMAT, "op": p.op, "doc": p.doc, "target": p.target.name,
        "dtypes": {k: list(v) for k, v in p.dtypes.items()}, "symbols": p.symbols,
        "params": [{"name": q.name, "dtype": q.dtype, "dims": list(q.dims) if q.dims is not None else None,
                    "mode": q.mode, "default": q.default, "span": sp(q.span),
                    "dim_spans": [sp(s) for s in q.dim_spans]} for q in p.params],
        "span": sp(p.span), "variants": variants,
        "cases": [c.to_json() for c in p.cases],
        **({"defined": {k: sym.to_text(v) for k, v in p.defined.items()}} if p.defined else {}),
        **({"max_dims": dict(sorted(p.max_dims.items()))} if p.max_dims else {}),
        **({"nondecreasing": list(p.nondecreasing)} if p.nondecreasing else {}),
        **({"data_dir": rel(p.data_dir)} if p.data_dir is not None and any(c.files() for c in p.cases) else {}),
        "reference": [rel(p.reference[0]), p.reference[1]] if p.reference else None,
        "torch": p.torch_equivalent, "tile_hint": list(p.tile_hint) if p.tile_hint else None,
        "backward": None if back is None else {"op": back.op, "inputs": [list(x) for x in back.inputs],
                                               "outputs": [list(x) for x in back.outputs],
                                               "scalars": list(back.scalars)},
    }


class ProgramError(ValueError):
    """A package's op.json that this runtime cannot read (another format, a missing file)."""


def load_program(path: str | os.PathLike[str]) -> Program:
    """Read a program written by ``ptodsl gen`` (``kernels/<op>/op.json``); file names inside it
    are relative to the package folder (the one holding ``kernels/``)."""
    path = Path(path)
    root = str(path.parent.parent.parent)
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ProgramError(f"{path}: op.json format {data.get('format')!r}, this runtime reads {FORMAT}; "
                           "regenerate the package with the ptodsl it was made by")

    def read(rel: str) -> str:
        return (Path(root) / rel).read_text(encoding="utf-8")

    files = data["variants"]

    @functools.cache
    def ir_source(index: int) -> tuple[Func, Module]:
        tensor = parse(reroot(read(files[index]["ir"]["tensor"]), root))
        block = parse(reroot(read(files[index]["ir"]["block"]), root))
        return tensor.funcs[0], block

    @functools.cache
    def cpu_source(index: int) -> CpuVariant:
        c = files[index]["cpu"]
        return CpuVariant(c["entry"], {name: read(f) for name, f in c["sources"].items()},
                          tuple(EntryParam(*e) for e in c["params"]))

    variants = tuple(
        Variant(dict(v["dtypes"]), v["name"],
                tuple(Division(d["kind"], sym.parse(d["num"]), sym.parse(d["den"]), span_of(d["span"], root),
                               d["what"]) for d in v["requires"]))
        for v in files)
    params = tuple(ParamInfo(q["name"], q["dtype"], tuple(q["dims"]) if q["dims"] is not None else None, q["mode"],
                             q["default"], span_of(q["span"], root),
                             tuple(span_of(s, root) for s in q["dim_spans"])) for q in data["params"])
    back = data.get("backward")
    ref = data.get("reference")
    return Program(
        op=data["op"], doc=data["doc"], dtypes={k: tuple(v) for k, v in data["dtypes"].items()},
        symbols=dict(data["symbols"]), params=params, span=span_of(data["span"], root), variants=variants,
        ir_source=ir_source, target=load_target(data["target"]), cpu_source=cpu_source,
        cases=tuple(TestCase.from_json(c) for c in data["cases"]),
        data_dir=os.path.join(root, data["data_dir"]) if data.get("data_dir") else None,
        defined={k: sym.parse(v) for k, v in data.get("defined", {}).items()},
        max_dims={k: int(v) for k, v in data.get("max_dims", {}).items()},
        nondecreasing=tuple(str(x) for x in data.get("nondecreasing", ())),
        reference=(os.path.join(root, ref[0]), ref[1]) if ref else None, torch_equivalent=data.get("torch"),
        tile_hint=tuple(data["tile_hint"]) if data.get("tile_hint") else None,
        backward=None if back is None else Backward(back["op"], tuple(tuple(x) for x in back["inputs"]),
                                                    tuple(tuple(x) for x in back["outputs"]),
                                                    tuple(back["scalars"])),
    )


__all__ = ["Backward", "CpuVariant", "Division", "EntryParam", "ParamInfo", "Program", "ProgramError", "Variant",
           "load_program", "map_locs", "program_json", "reroot"]
