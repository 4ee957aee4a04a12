"""The ``inputs:`` entry of a test case (docs/LANGUAGE.md §2), as a schema combinator.

One entry takes three forms, told apart by their YAML shape: a nested list of numbers (the
values), a string (a ``.npy`` file of the spec's folder) or a mapping with one key (a generator
of :data:`ptodsl.cases.GENERATORS`). The value is normalised to ``{"values": [...]}``,
``{"file": PATH}`` or ``{GENERATOR: argument}``. What needs the kernel (the parameter, its shape
and dtype) is checked later, by ``ptodsl.check.cases``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cases import GENERATORS
from ..yamlio.nodes import YMap, YNode, YScalar, YSeq, describe
from ..yamlio.schema import (
    E_TYPE,
    INVALID,
    Bool,
    Ctx,
    Float,
    Int,
    ListOf,
    Obj,
    OneOf,
    Path,
    Schema,
    Str,
    path_str,
)

E_GENERATOR = "E0863"
E_FILE = "E0864"



def _count(desc: str) -> OneOf:
    """An integer or an expression over the case's dims (`V`, `2*H`)."""
    return OneOf(alts=(Int(min=0), Str(pattern=r"[A-Za-z0-9_ +\-*()]+", form="an integer or a dim expression",
                                       example="2*H", what="a dim expression")), desc=desc)


_NUMBER = OneOf(alts=(Bool(), Int(), Float()), what="a number or a boolean")

GENERATOR_SCHEMA = Obj(
    desc="a generator of the input's values, seeded by the case's seed and the parameter's name",
    fields={
        "permutation": _count("distinct integers below this count, in random order (a permutation "
                              "when it is the input's size)"),
        "arange": OneOf(alts=(_NUMBER, ListOf(item=OneOf(alts=(Int(), Float())), min_len=2, max_len=2)),
                        desc="START or [START, STEP]: START, START + STEP, ... in row-major order"),
        "full": OneOf(alts=(Bool(), Int(), Float()), what="a number or a boolean", desc="every element this value"),
        "randint": ListOf(item=Int(), min_len=2, max_len=2, desc="[LOW, HIGH]: uniform integers, both ends included"),
        "cumsum": Obj(desc="sorted offsets of segments, from 0 (a 1-D input of B + 1 elements for B segments)",
                      fields={"range": ListOf(item=Int(min=0), min_len=2, max_len=2,
                                              desc="[LOW, HIGH]: each segment's length"),
                              "total": _count("the last offset (the total length)")}),
    },
)
FILE_SCHEMA = Str(pattern=r"[^\s].*\.npy", form="a path ending in `.npy`", code=E_FILE, example="data/x.npy",
                  what="a .npy file", desc="a .npy file (numpy.save) inside the spec's folder")


@dataclass
class InputEntry(Schema):
    """One parameter's explicit input: values, a file or a generator."""

    def __post_init__(self) -> None:
        self.expected = "a nested list of numbers, a `.npy` file or a generator"

    def accepts(self, node: YNode) -> bool:
        return isinstance(node, YSeq | YMap) or (isinstance(node, YScalar) and isinstance(node.value, str))

    def check(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if isinstance(node, YSeq):
            values = self._values(node, path, ctx)
            return INVALID if values is INVALID else {"values": values}
        if isinstance(node, YMap):
            return self._generator(node, path, ctx)
        if isinstance(node, YScalar) and isinstance(node.value, str):
            file = FILE_SCHEMA.check(node, path, ctx)
            return INVALID if file is INVALID else {"file": file}
        return ctx.type_error(node, path, self.expected)

    def _values(self, node: YNode, path: Path, ctx: Ctx) -> Any:
        if isinstance(node, YSeq):
            out = [self._values(item, (*path, i), ctx) for i, item in enumerate(node.items)]
            return INVALID if any(v is INVALID for v in out) else out
        if isinstance(node, YScalar) and isinstance(node.value, bool | int | float) and node.value is not None:
            return _NUMBER.check(node, path, ctx)
        ctx.diags.error(E_TYPE, f"`{path_str(path)}` must be a number or a list, found {describe(node)}", node.span,
                        "expected a number (or a nested list of them)")
        return INVALID

    def _generator(self, node: YMap, path: Path, ctx: Ctx) -> Any:
        got = GENERATOR_SCHEMA.check(node, path, ctx)
        if got is INVALID:
            return INVALID
        keys = [p.key.text for p in node.pairs if p.key.text in GENERATORS]
        if len(keys) != len(node.pairs):  # an unknown key, reported with a did-you-mean already
            return INVALID
        if len(keys) != 1:
            ctx.diags.error(E_GENERATOR, f"`{path_str(path)}` must name exactly one generator, found "
                            f"{len(node.pairs)}", node.span, "one key: the generator",
                            help=f"write one of {', '.join(GENERATORS)}, e.g. `{{permutation: N}}`")
            return INVALID
        inner = node.pairs[0].value
        if keys[0] == "cumsum" and isinstance(inner, YMap) and len(inner.pairs) != 1:
            ctx.diags.error(E_GENERATOR, f"`{path_str((*path, 'cumsum'))}` takes `range:` or `total:`, "
                            f"found {len(inner.pairs)} keys", inner.span, "one of `range`, `total`",
                            help="`cumsum: {range: [0, 64]}` (random lengths) or `cumsum: {total: S}` "
                                 "(random cut points of S)")
            return INVALID
        if len(got) != 1 or (keys[0] == "cumsum" and len(got["cumsum"]) != 1):
            return INVALID  # the generator's argument was reported already
        return got

    def json(self) -> dict[str, Any]:
        literal = {"$ref": "#/$defs/nested_numbers"}
        return {"anyOf": [literal, FILE_SCHEMA.to_json(),
                          {**GENERATOR_SCHEMA.to_json(), "minProperties": 1, "maxProperties": 1}]}


NESTED_NUMBERS = {"anyOf": [{"type": ["number", "boolean"]},
                            {"type": "array", "items": {"$ref": "#/$defs/nested_numbers"}}],
                  "description": "a number, or a list of them, nested once per dim"}

__all__ = ["GENERATOR_SCHEMA", "NESTED_NUMBERS", "InputEntry"]
