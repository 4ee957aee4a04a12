"""The raw text of spec files: a byte-order mark is accepted (positions as an editor shows them),
characters that make text read differently from what it is are refused (E0121), and the size of a
.pto is bounded at load (E0118) and in tokens while it is read (E0122)."""

from __future__ import annotations

import json
import time

import pytest

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.driver import compile_spec
from ptodsl.fmt import format_source
from ptodsl.frontend.grammar import MAX_TOKENS
from ptodsl.frontend.parser import parse_module
from ptodsl.frontend.text import MAX_SOURCE_BYTES
from ptodsl.lsp.analysis import diagnose

BOM = b"\xef\xbb\xbf"
KERNEL = "kernel k(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x + 1.0\n"
YAML = "op: k\nschedule: {vec_tile: [8, 256]}\n"
MISLEADING = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
              "\u2028", "\u2029"]


def _write(tmp_path, pto: bytes | str, yaml: bytes | str = YAML) -> str:
    for name, text in (("k.pto", pto), ("k.yaml", yaml)):
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(tmp_path / "k.yaml")


def _diags(path: str) -> list:
    try:
        compile_spec(path)
    except CompileError as exc:
        return exc.diagnostics
    return []


def test_a_byte_order_mark_is_accepted_in_the_pto_and_the_yaml(tmp_path):
    compiled = compile_spec(_write(tmp_path, BOM + KERNEL.encode(), BOM + YAML.encode()))
    assert compiled.module.kernels[0].name_span.col == 8  # "kernel k": k is in column 8, as shown


@pytest.mark.parametrize("bom", [b"", BOM], ids=["plain", "bom"])
def test_positions_on_the_first_line_do_not_count_the_mark(tmp_path, bom):
    pto = bom + b"kernel k(x: f32[M, N], y: outt f32[M, N]):\n    y[:] = x + 1.0\n"
    (d,) = _diags(_write(tmp_path, pto))
    assert (d.code, d.span.line, d.span.col) == ("E0110", 1, 27)
    yaml = bom + b"op: k\nschedule: {vec_tile: [8, 256]}\nbogus: 1\n"
    first = _diags(_write(tmp_path, KERNEL, yaml))[0]
    assert (first.span.line, first.span.col) == (3, 1)
    yaml = bom + b"op: 3k\nschedule: {vec_tile: [8, 256]}\n"
    first = _diags(_write(tmp_path, KERNEL, yaml))[0]
    assert (first.span.line, first.span.col) == (1, 5)


@pytest.mark.parametrize("char", MISLEADING, ids=[f"U+{ord(c):04X}" for c in MISLEADING])
@pytest.mark.parametrize("where", ["comment", "string", "code"])
def test_misleading_characters_are_refused_in_a_pto(tmp_path, char, where):
    line = {"comment": f"    y[:] = x + 1.0  # one {char} two\n",
            "string": f"    for i in loop(1, name=\"a{char}b\"):\n        y[:] = x + 1.0\n",
            "code": f"    y[:] = x {char}+ 1.0\n"}[where]
    pto = "kernel k(x: f32[M, N], y: out f32[M, N]):\n" + line
    (d,) = _diags(_write(tmp_path, pto))
    col = line.index(char) + 1
    assert (d.code, d.span.line, d.span.col) == ("E0121", 2, col)
    assert f"U+{ord(char):04X}" in d.message and d.help


@pytest.mark.parametrize("char", MISLEADING, ids=[f"U+{ord(c):04X}" for c in MISLEADING])
@pytest.mark.parametrize("where", ["comment", "doc"])
def test_misleading_characters_are_refused_in_a_yaml(tmp_path, char, where):
    line = f"# see {char}here\n" if where == "comment" else f"doc: \"a {char}b\"\n"
    (d,) = _diags(_write(tmp_path, KERNEL, "op: k\n" + line + "schedule: {vec_tile: [8, 256]}\n"))
    assert (d.code, d.span.line, d.span.col) == ("E0121", 2, line.index(char) + 1)


def test_an_escaped_bidi_control_in_a_yaml_string_is_refused(tmp_path):
    # written as an escape, the character is not in the text but reaches the value
    doc = json.dumps("a \u202e b")
    (d,) = _diags(_write(tmp_path, KERNEL, f"op: k\ndoc: {doc}\nschedule: {{vec_tile: [8, 256]}}\n"))
    assert d.code == "E0209" and "U+202E" in d.message


def test_many_misleading_characters_are_counted_not_listed(tmp_path):
    pto = KERNEL + "".join(f"    # \u202e {i}\n" for i in range(50))
    found = _diags(_write(tmp_path, pto))
    assert {d.code for d in found} == {"E0121"} and len(found) == 8
    assert any("42 more" in n for n in found[-1].notes)


def test_a_pto_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    filler = "    # " + "x" * 72 + "\n"
    pto = KERNEL + filler * (MAX_SOURCE_BYTES // len(filler) + 1)
    (d,) = _diags(_write(tmp_path, pto))
    assert d.code == "E0118" and "k.pto" in d.message and "larger than 1 MiB" in d.message
    diags = Diagnostics()  # an editor's buffer of that size
    assert parse_module(pto, "k.pto", diags) is None and diags.errors[0].code == "E0118"


def test_a_pto_of_too_many_tokens_is_refused_while_it_is_read(tmp_path):
    n = MAX_TOKENS // 6 + 10  # `tI = tJ * 0.5` and its line end are 6 tokens
    pto = ("kernel k(x: f32[M, N], y: out f32[M, N]):\n    t0 = x + 1.0\n"
           + "".join(f"    t{i} = t{i - 1} * 0.5\n" for i in range(1, n)) + f"    y[:] = t{n - 1}\n")
    start = time.process_time()
    (d,) = _diags(_write(tmp_path, pto))
    assert d.code == "E0122" and d.span.line < n
    # refused at lexing: no check, no pass ran (a generous bound, far below the seconds a compile takes)
    assert time.process_time() - start < 30


def test_fmt_keeps_a_byte_order_mark_and_adds_none(tmp_path):
    messy = "kernel k(x: f32[M, N], y: out f32[M, N]):\n    y[:]=x+1.0\n"
    assert format_source("\ufeff" + messy, "k.pto", Diagnostics()) == "\ufeff" + KERNEL
    assert format_source(messy, "k.pto", Diagnostics()) == KERNEL


def test_the_language_server_agrees_on_the_mark(tmp_path):
    path = _write(tmp_path, BOM + b"kernel k(x: f32[M, N], y: outt f32[M, N]):\n    y[:] = x + 1.0\n")
    pto = str(tmp_path / "k.pto")
    found = diagnose(pto, {})
    (d,) = found[pto]
    assert (d.code, d.span.line, d.span.col) == ("E0110", 1, 27)
    assert found.get(path, []) == []
