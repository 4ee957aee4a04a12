"""YAML text to a small tree of located nodes, so every key and value keeps its line and column.

PyYAML's ``yaml.load`` throws the positions away, so we compose the node graph with the safe loader
and convert it ourselves. Along the way we turn everything the spec format does not want into
diagnostics instead of silently accepting it: syntax errors, duplicate keys (PyYAML keeps the last
one without a word), anchors and aliases (they hide where a value came from and can blow up
exponentially) and explicit tags.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from ..diagnostics import Diagnostics, Label, Span, register_source

E_SYNTAX = "E0200"
E_UNSUPPORTED = "E0201"
E_DUPLICATE_KEY = "E0202"

_TAG = "tag:yaml.org,2002:"

# YAML 1.1 (what PyYAML implements) needs a dot and a signed exponent in a float, so `1e-2` and
# `1.0e5` would come out as strings. YAML 1.2 and every user reading the file take them as numbers.
_FLOAT_12 = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+")

# YAML 1.1 reads `010` as octal 8; YAML 1.2 and readers take it as ten.
_LEADING_ZERO_INT = re.compile(r"[-+]?0[0-7_]+")

# Deeper nesting than any spec needs; the limit keeps the recursive conversion and validation far
# from Python's recursion limit.
MAX_DEPTH = 64

_CONSTRUCTOR = SafeConstructor()


@dataclass(eq=False)
class YScalar:
    span: Span
    value: Any  # str, int, float, bool or None
    text: str  # the scalar as written, without quotes
    style: str | None  # None for plain scalars, else one of ' " | >


@dataclass(eq=False)
class YSeq:
    span: Span
    items: list[YNode]


@dataclass(eq=False)
class YPair:
    key: YScalar
    value: YNode


@dataclass(eq=False)
class YMap:
    span: Span
    pairs: list[YPair]

    def get(self, key: str) -> YPair | None:
        for pair in self.pairs:
            if pair.key.text == key:
                return pair
        return None

    def __iter__(self) -> Iterator[YPair]:
        return iter(self.pairs)


YNode = YScalar | YSeq | YMap


def describe(node: YNode) -> str:
    """What a node is, for messages: "a string `abc`", "an integer `3`", "a list", ..."""
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    v = node.value
    text = node.text if len(node.text) <= 40 else node.text[:37] + "..."
    if v is None:
        return "nothing" if node.text in ("", "~") else f"null `{text}`"
    if isinstance(v, bool):
        return f"a boolean `{text}`"
    if isinstance(v, int):
        return f"an integer `{text}`"
    if isinstance(v, float):
        return f"a number `{text}`"
    return f"a string `{text}`"


def to_python(node: YNode | None) -> Any:
    """Plain dicts, lists and scalars, the way ``yaml.safe_load`` would give them (keys as written)."""
    if node is None:
        return None
    if isinstance(node, YMap):
        return {p.key.text: to_python(p.value) for p in node.pairs}
    if isinstance(node, YSeq):
        return [to_python(i) for i in node.items]
    return node.value


def span_of_mark(file: str, mark: Any, end: Any = None) -> Span:
    """A PyYAML mark (0-based line and column) as a 1-based span."""
    if mark is None:
        return Span(file, 1, 1)
    if end is None:
        return Span(file, mark.line + 1, mark.column + 1)
    return Span(file, mark.line + 1, mark.column + 1, end.line + 1, end.column + 1)


def _position_span(file: str, text: str, position: int) -> Span:
    before = text[:position]
    line = before.count("\n") + 1
    col = position - (before.rfind("\n") + 1) + 1
    return Span(file, line, col)


def _scalar_value(node: yaml.ScalarNode) -> Any:
    tag = node.tag
    if tag in (_TAG + "int", _TAG + "float") and ":" in node.value:
        # YAML 1.1 base-60 numbers (`1:30` is 90) surprise everyone; keep the text.
        return node.value
    try:
        if tag == _TAG + "int" and _LEADING_ZERO_INT.fullmatch(node.value):
            return int(node.value.replace("_", ""), 10)
        if tag == _TAG + "int":
            return _CONSTRUCTOR.construct_yaml_int(node)
        if tag == _TAG + "float":
            return _CONSTRUCTOR.construct_yaml_float(node)
        if tag == _TAG + "bool":
            return _CONSTRUCTOR.construct_yaml_bool(node)
    except (ValueError, OverflowError):
        # The 1.1 resolver accepts a few spellings its constructor cannot convert (`0b_`, `._`);
        # such a scalar is just text.
        return node.value
    if tag == _TAG + "null":
        return None
    if node.style is None and _FLOAT_12.fullmatch(node.value):
        value = float(node.value)
        if not math.isinf(value):
            return value
    # Strings, and timestamps and the like, which the spec has no use for: keep them as text.
    return node.value


class _TooDeep(Exception):
    def __init__(self, span: Span):
        self.span = span


class _Converter:
    def __init__(self, file: str, diags: Diagnostics):
        self.file = file
        self.diags = diags

    def span(self, node: yaml.Node) -> Span:
        return span_of_mark(self.file, node.start_mark, node.end_mark)

    def convert(self, node: yaml.Node, depth: int = 0) -> YNode:
        if depth > MAX_DEPTH and isinstance(node, yaml.CollectionNode):
            raise _TooDeep(self.span(node))
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, depth)
        if isinstance(node, yaml.SequenceNode):
            return YSeq(self.span(node), [self.convert(n, depth + 1) for n in node.value])
        return YScalar(self.span(node), _scalar_value(node), node.value, node.style)

    def mapping(self, node: yaml.MappingNode, depth: int) -> YMap:
        pairs: list[YPair] = []
        seen: dict[str, YScalar] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.diags.error(
                    E_UNSUPPORTED, "a mapping key must be a plain name", self.span(key_node),
                    "this key is a " + ("list" if isinstance(key_node, yaml.SequenceNode) else "mapping"),
                    help="write keys as plain names, e.g. `unroll: [4, 2, 1]`",
                )
                continue
            key = YScalar(self.span(key_node), key_node.value, key_node.value, key_node.style)
            first = seen.get(key.text)
            if first is not None:
                self.diags.error(
                    E_DUPLICATE_KEY, f"duplicate key `{key.text}`", key.span, "defined again here",
                    secondary=[Label(first.span, "first defined here")],
                    help=f"remove one of the two `{key.text}` entries, or merge them",
                )
                continue
            seen[key.text] = key
            pairs.append(YPair(key, self.convert(value_node, depth + 1)))
        return YMap(self.span(node), pairs)


def _check_events(text: str, file: str, diags: Diagnostics) -> bool:
    """Report anchors, aliases and explicit tags; True when an alias was found.

    Aliases make the composed graph share nodes, and converting such a graph into a tree can grow
    exponentially, so the caller stops when there is one.
    """
    anchors: dict[str, Span] = {}
    found_alias = False
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        span = span_of_mark(file, event.start_mark, event.end_mark)
        if isinstance(event, yaml.AliasEvent):
            found_alias = True
            first = anchors.get(event.anchor)
            diags.error(
                E_UNSUPPORTED, f"YAML aliases are not supported (`*{event.anchor}`)", span, "alias used here",
                secondary=[Label(first, "anchor defined here")] if first else [],
                help="write the value out in full at each place it is needed",
            )
            continue
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            first = span_of_mark(file, event.start_mark)
            anchors.setdefault(anchor, Span(file, first.line, first.col, first.line, first.col + len(anchor) + 1))
            diags.error(
                E_UNSUPPORTED, f"YAML anchors are not supported (`&{anchor}`)", anchors[anchor],
                "anchor defined here", help=f"remove `&{anchor}`; a spec states each value where it applies",
            )
        tag = getattr(event, "tag", None)
        if tag is not None:
            shown = "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag
            diags.error(
                E_UNSUPPORTED, f"explicit YAML tags are not supported (`{shown}`)", span, "tagged value",
                help="remove the tag; quote the value if it must stay a string",
            )
    return found_alias


def compose(text: str, file: str, diags: Diagnostics) -> YNode | None:
    """Parse one YAML document into located nodes, reporting problems into ``diags``.

    Returns None on a syntax error, on unsupported aliases, and for an empty document (a file with
    nothing but comments, or a bare ``---``); the caller tells them apart by whether an error was
    added.
    """
    register_source(file, text)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        span = span_of_mark(file, exc.problem_mark)
        problem = exc.problem or "invalid YAML"
        secondary = []
        if exc.context and exc.context_mark is not None:
            ctx = span_of_mark(file, exc.context_mark)
            if (ctx.line, ctx.col) != (span.line, span.col):
                secondary.append(Label(ctx, exc.context))
        message = f"invalid YAML: {problem}"
        if exc.context and not secondary:
            message += f" ({exc.context})"
        diags.error(E_SYNTAX, message, span, problem, secondary=secondary,
                    help="check indentation, colons and brackets near this point")
        return None
    except yaml.reader.ReaderError as exc:
        diags.error(E_SYNTAX, f"invalid YAML: unacceptable character #x{exc.character:04x}",
                    _position_span(file, text, exc.position), exc.reason,
                    help="remove the character, or quote the value that contains it")
        return None
    except yaml.YAMLError as exc:  # any other PyYAML failure still is the user's input
        diags.error(E_SYNTAX, f"invalid YAML: {exc}", Span(file, 1, 1))
        return None
    except RecursionError:  # PyYAML composes recursively; thousands of `[` exhaust the stack
        diags.error(E_SYNTAX, "invalid YAML: lists or mappings nested too deeply", Span(file, 1, 1),
                    help=f"a spec nests at most {MAX_DEPTH} levels")
        return None
    if root is None:
        return None
    if _check_events(text, file, diags):
        return None
    if isinstance(root, yaml.ScalarNode) and root.tag == _TAG + "null" and root.value in ("", "~"):
        return None
    try:
        return _Converter(file, diags).convert(root)
    except _TooDeep as exc:
        diags.error(E_SYNTAX, "invalid YAML: lists or mappings nested too deeply", exc.span,
                    f"more than {MAX_DEPTH} levels deep", help=f"a spec nests at most {MAX_DEPTH} levels")
        return None


__all__ = [
    "E_DUPLICATE_KEY",
    "E_SYNTAX",
    "E_UNSUPPORTED",
    "YMap",
    "YNode",
    "YPair",
    "YScalar",
    "YSeq",
    "compose",
    "describe",
    "span_of_mark",
    "to_python",
]
