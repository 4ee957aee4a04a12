"""The .pto parser: the documented examples, AST shapes and spans, fragments, and fuzzing."""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path

import pytest
from lark import Lark, logger

from ptodsl.diagnostics import CompileError, Diagnostics, Span, code_registry, source_line
from ptodsl.diagnostics.render import render_all
from ptodsl.frontend import ast
from ptodsl.frontend import grammar as grammar_mod
from ptodsl.frontend.grammar import (
    START_RULES,
    PtoIndenter,
    describe_terminal,
    get_parser,
    grammar_text,
    regex_terminals,
    terminal_info,
)
from ptodsl.frontend.parser import (
    MAX_EXPECTED,
    expected_phrase,
    parse_expr,
    parse_file,
    parse_module,
    parse_stmt,
)

ROOT = Path(__file__).resolve().parents[2]
_NOWHERE = Span("<test>", 1, 1)


def mk(cls, *args, **kwargs):
    """Build an expected AST node; spans are excluded from node equality."""
    return cls(*args, span=_NOWHERE, **kwargs)


# ------------------------------------------------------------------ the documented examples


def _doc_examples() -> dict[str, str]:
    """Every fenced block of LANGUAGE.md section 1 that starts with ``# specs/NAME.pto``."""
    doc = (ROOT / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")
    section = doc.split("\n## 1.", 1)[1].split("\n## 2.", 1)[0]
    examples = {}
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", section, re.S | re.M):
        m = re.match(r"# specs/(\w+)\.pto", block)
        if m:
            examples[m.group(1)] = block
    return examples


EXAMPLES = _doc_examples()


def _parse_ok(text: str, path: str = "t.pto") -> ast.Module:
    diags = Diagnostics()
    module = parse_module(text, path, diags)
    assert module is not None, render_all(diags)
    assert not diags.items
    return module


def _text(src: str, span: Span) -> str:
    """The source text a span covers."""
    lines = src.splitlines()
    if span.line == span.end_line:
        return lines[span.line - 1][span.col - 1: span.end_col - 1]
    parts = [lines[span.line - 1][span.col - 1:]]
    parts += lines[span.line: span.end_line - 1]
    parts.append(lines[span.end_line - 1][: span.end_col - 1])
    return "\n".join(parts)


def _where(src: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the first occurrence of needle."""
    offset = src.index(needle)
    line = src.count("\n", 0, offset) + 1
    return line, offset - (src.rfind("\n", 0, offset) + 1) + 1


def test_doc_has_the_six_examples():
    assert set(EXAMPLES) == {"add_one", "softmax", "seq_add", "rmsnorm", "matmul", "online_softmax_attn"}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_doc_example_parses(name):
    module = _parse_ok(EXAMPLES[name], f"{name}.pto")
    assert len(module.kernels) == 1
    kernel = module.kernels[0]
    assert kernel.body
    assert any(p.mode == "out" for p in kernel.params)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_doc_example_spans_cover_their_text(name):
    """Every node's span covers exactly the text that node was parsed from."""
    src = EXAMPLES[name]
    module = _parse_ok(src, f"{name}.pto")
    for node in ast.walk(module):
        text = _text(src, node.span)
        if isinstance(node, ast.Name):
            assert text == node.id
        elif isinstance(node, ast.Num):
            assert text == node.text
        elif isinstance(node, ast.Str):
            assert text[0] in "\"'" and text[1:-1] == node.value
        elif isinstance(node, ast.Keyword):
            assert text.startswith(node.name + "=") and text.endswith(_text(src, node.value.span))
        elif isinstance(node, ast.Call):
            assert text.endswith(")") and text.startswith(_text(src, node.func.span))
        elif isinstance(node, ast.Subscript):
            assert text.endswith("]")
        elif isinstance(node, ast.Kernel):
            assert text.startswith("kernel ") and _text(src, node.name_span) == node.name
        elif isinstance(node, ast.Param):
            assert text.startswith(node.name + ":") and _text(src, node.dtype_span) == node.dtype
        elif isinstance(node, ast.For):
            assert text.startswith("for ")
        elif isinstance(node, ast.If):
            assert text.startswith(("if ", "elif "))
        elif isinstance(node, ast.Assign):
            assert text.startswith(_text(src, node.target.span)) and text.endswith(_text(src, node.value.span))
        elif isinstance(node, ast.Dim):
            assert text == str(node.value)


def test_softmax_shape_and_spans():
    src = EXAMPLES["softmax"]
    kernel = _parse_ok(src).kernel("softmax")
    assert [(p.name, p.dtype, p.mode) for p in kernel.params] == [("x", "T", "in"), ("y", "T", "out")]
    assert [d.value for d in kernel.param("x").dims] == ["B", "N"]
    assert (kernel.name_span.line, kernel.name_span.col) == _where(src, "softmax(")
    loop = kernel.body[0]
    assert isinstance(loop, ast.For)
    assert (loop.span.line, loop.span.col) == (3, 5)
    assert loop.span.end_line == 6  # the block ends with its last statement
    assert [t.id for t in loop.targets] == ["b"]
    assert loop.iter.func_name == "loop" and loop.iter.keyword("name").value == mk(ast.Str, "b_loop")
    row = loop.body[0]
    assert isinstance(row, ast.Assign) and row.target == mk(ast.Name, "row")
    assert row.value.indices == (mk(ast.Name, "b"), mk(ast.Slice))
    write = loop.body[2]
    assert isinstance(write.target, ast.Subscript) and write.span.line == 6
    assert _sexp(write.value) == "(/ e sum(e, dim=(- 1), keepdim=True))"
    assert write.value.right.keyword("keepdim").value == mk(ast.Bool, True)


def test_attn_if_statements_and_locals():
    src = EXAMPLES["online_softmax_attn"]
    kernel = _parse_ok(src).kernel("attn")
    assert kernel.param("scale").dims is None and kernel.param("scale").dtype == "f32"
    loop = next(s for s in kernel.body if isinstance(s, ast.For))
    ifs = [s for s in loop.body if isinstance(s, ast.If)]
    assert len(ifs) == 2
    begin, end = ifs
    assert (begin.span.line, begin.span.col) == _where(src, "if is_loop_begin")
    assert begin.cond.func_name == "is_loop_begin"
    assert len(begin.body) == 4 and len(begin.orelse) == 6
    assert begin.span.end_line == _where(src, "m[:] = m_new")[0]
    assert (end.span.line, end.span.col) == _where(src, "if is_loop_end")
    assert end.orelse == ()
    # loop(cdiv(L, BL), ...): the bound is a call of the ceiling-division builtin
    (bound,) = loop.iter.args
    assert bound.func_name == "cdiv" and bound.args == (mk(ast.Name, "L"), mk(ast.Name, "BL"))


def test_rmsnorm_default_and_dtype_span():
    src = EXAMPLES["rmsnorm"]
    eps = _parse_ok(src).kernel("rmsnorm").param("eps")
    assert eps.default == mk(ast.Num, 1e-6, "1e-6") and eps.default.is_float
    assert _text(src, eps.default.span) == "1e-6"
    assert (eps.dtype_span.line, eps.dtype_span.col) == _where(src, "f32 = 1e-6")
    assert (eps.span.line, eps.span.col) == _where(src, "eps:")


def test_seq_add_out_is_a_param_name():
    kernel = _parse_ok(EXAMPLES["seq_add"]).kernel("seq_add")
    out = kernel.param("out")
    assert out.mode == "out" and out.dtype == "f32" and [d.value for d in out.dims] == ["B", "S", "H"]
    a0 = kernel.body[0].body[1]
    assert a0.value.keyword("valid_shape").value == mk(ast.ListExpr, (mk(ast.Num, 1, "1"), mk(ast.Name, "cur_seq"), mk(ast.Name, "H")))


def test_matmul_and_add_one():
    matmul = _parse_ok(EXAMPLES["matmul"]).kernel("matmul")
    assert matmul.body[0].value.keyword("out_dtype").value == mk(ast.Name, "f32")
    add_one = _parse_ok(EXAMPLES["add_one"]).kernel("add_one")
    assert add_one.body[0].value == mk(ast.BinOp, "+", mk(ast.Name, "x"), mk(ast.Num, 1.0, "1.0"))


@pytest.mark.parametrize("path", sorted((ROOT / "specs").glob("*.pto")), ids=lambda p: p.name)
def test_shipped_specs_parse(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert parse_file(str(path.relative_to(ROOT))).kernels


# ------------------------------------------------------------------ expressions


def _sexp(node) -> str:
    """A compact rendering of an expression tree, to state precedence and structure in tests."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Num):
        return node.text
    if isinstance(node, ast.Str):
        return repr(node.value)
    if isinstance(node, ast.Bool):
        return str(node.value)
    if isinstance(node, (ast.BinOp, ast.Compare, ast.BoolOp)):
        return f"({node.op} {_sexp(node.left)} {_sexp(node.right)})"
    if isinstance(node, ast.UnaryOp):
        return f"({node.op} {_sexp(node.operand)})"
    if isinstance(node, ast.Call):
        parts = [_sexp(a) for a in node.args] + [f"{k.name}={_sexp(k.value)}" for k in node.keywords]
        return f"{_sexp(node.func)}({', '.join(parts)})"
    if isinstance(node, ast.Attribute):
        return f"{_sexp(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return f"{_sexp(node.value)}[{', '.join(_sexp(i) for i in node.indices)}]"
    if isinstance(node, ast.Slice):
        text = ":".join("" if x is None else _sexp(x) for x in (node.lo, node.hi))
        return text + ("" if node.step is None else ":" + _sexp(node.step))
    if isinstance(node, ast.ListExpr):
        return f"[{', '.join(_sexp(i) for i in node.items)}]"
    raise AssertionError(type(node))


@pytest.mark.parametrize("text, expected", [
    ("a + b * c", "(+ a (* b c))"),
    ("a * b + c", "(+ (* a b) c)"),
    ("a - b - c", "(- (- a b) c)"),
    ("a / b / c", "(/ (/ a b) c)"),
    ("a // b % c * d", "(* (% (// a b) c) d)"),
    ("(a + b) * c", "(* (+ a b) c)"),
    ("-a * b", "(* (- a) b)"),
    ("- -a", "(- (- a))"),
    ("+a - -b", "(- (+ a) (- b))"),
    ("-x[0]", "(- x[0])"),
    ("a < b + 1", "(< a (+ b 1))"),
    ("a + 1 >= b * 2", "(>= (+ a 1) (* b 2))"),
    ("a == b != c", None),  # chains are rejected, see test_chained_comparison_is_rejected
    ("not a == b", "(not (== a b))"),
    ("a and b or c and d", "(or (and a b) (and c d))"),
    ("a or b or c", "(or (or a b) c)"),
    ("not a and not b", "(and (not a) (not b))"),
    ("a < b and b <= c or not d", "(or (and (< a b) (<= b c)) (not d))"),
    ("(a < b) == c", "(== (< a b) c)"),
    ("f(a)(b)", "f(a)(b)"),
    ("t.move(x + 1)", "t.move((+ x 1))"),
    ("x.y.z(1)[2]", "x.y.z(1)[2]"),
    ("sum(e, dim=-1, keepdim=True)", "sum(e, dim=(- 1), keepdim=True)"),
    ("f()", "f()"),
    ("f(a,)", "f(a)"),
    ("f(a, b=1,)", "f(a, b=1)"),
    ("[1, 2.5, x]", "[1, 2.5, x]"),
    ("[]", "[]"),
    ("[a,]", "[a]"),
    ('print("x = {}", a, b)', "print('x = {}', a, b)"),
    ("'single'", "'single'"),
    ("True or False", "(or True False)"),
    ("1e-6 + .5 + 1. + 2E+3 + 10", "(+ (+ (+ (+ 1e-6 .5) 1.) 2E+3) 10)"),
    ("f(\n  a,\n  b\n)", "f(a, b)"),
])
def test_expression_structure(text, expected):
    if expected is None:
        with pytest.raises(CompileError):
            parse_expr(text)
        return
    assert _sexp(parse_expr(text)) == expected


@pytest.mark.parametrize("text, expected", [
    ("t[:]", "t[:]"),
    ("t[b, :]", "t[b, :]"),
    ("t[1:3, :]", "t[1:3, :]"),
    ("t[a:]", "t[a:]"),
    ("t[:b]", "t[:b]"),
    ("t[a:b:c]", "t[a:b:c]"),
    ("t[::2]", "t[::2]"),
    ("t[i + 1:n - 1, j]", "t[(+ i 1):(- n 1), j]"),
    ("t[0, :, :,]", "t[0, :, :]"),
])
def test_subscripts_and_slices(text, expected):
    assert _sexp(parse_expr(text)) == expected


def test_slice_fields_and_spans():
    sub = parse_expr("t[1:3, :, ::2]", "s.pto")
    first, full, stepped = sub.indices
    assert first == mk(ast.Slice, mk(ast.Num, 1, "1"), mk(ast.Num, 3, "3"))
    assert (first.span.col, first.span.end_col) == (3, 6)
    assert full == mk(ast.Slice) and (full.span.col, full.span.end_col) == (8, 9)
    assert stepped == mk(ast.Slice, step=mk(ast.Num, 2, "2"))
    assert (sub.span.col, sub.span.end_col) == (1, 15)


def test_numbers_and_strings():
    assert parse_expr("42") == mk(ast.Num, 42, "42") and not parse_expr("42").is_float
    assert parse_expr("1.0").value == 1.0 and parse_expr("1.0").is_float
    assert parse_expr("1e-6").value == 1e-6
    assert parse_expr(".5").value == 0.5
    assert parse_expr(r'"a\"b\n\\"').value == 'a"b\n\\'
    assert parse_expr(r"'it\'s'").value == "it's"


def test_parenthesised_span_of_enclosing_node():
    node = parse_expr("(a + b) * c")
    assert (node.span.col, node.span.end_col) == (1, 12)  # includes the parenthesis
    assert (node.left.span.col, node.left.span.end_col) == (2, 7)  # the sum itself does not


def test_keyword_arguments():
    call = parse_expr("view(inp, [1, S, H], [b, 0, 0], valid_shape=[1, cur, H])")
    assert call.func_name == "view" and len(call.args) == 3
    assert call.keyword("valid_shape").value == mk(ast.ListExpr, (mk(ast.Num, 1, "1"), mk(ast.Name, "cur"), mk(ast.Name, "H")))
    assert call.keyword("missing") is None


# ------------------------------------------------------------------ statements and kernels


def test_assignment_forms():
    assert parse_stmt("y[:] = e\n") == mk(ast.Assign, mk(ast.Subscript, mk(ast.Name, "y"), (mk(ast.Slice),)), mk(ast.Name, "e"))
    stmt = parse_stmt("y[b, :] = e\n")
    assert stmt.target.indices == (mk(ast.Name, "b"), mk(ast.Slice))
    stmt = parse_stmt("t[1:3, :] = e\n")
    assert stmt.target.indices[0] == mk(ast.Slice, mk(ast.Num, 1, "1"), mk(ast.Num, 3, "3"))
    assert parse_stmt("v = 1\n") == mk(ast.Assign, mk(ast.Name, "v"), mk(ast.Num, 1, "1"))


def test_expression_statements():
    stmt = parse_stmt("t.move(e)\n")
    assert isinstance(stmt, ast.ExprStmt) and _sexp(stmt.expr) == "t.move(e)"
    assert _sexp(parse_stmt("t.assemble(e, [0, 0])\n").expr) == "t.assemble(e, [0, 0])"
    assert _sexp(parse_stmt('print("fmt", a, b)\n').expr) == "print('fmt', a, b)"
    assert parse_stmt("pass\n") == mk(ast.Pass)


def test_loop_unroll_two_targets():
    loop = parse_stmt('for i, k in loop_unroll(0, N, 1, name="u"):\n    pass\n')
    assert [t.id for t in loop.targets] == ["i", "k"]
    assert loop.targets[1].span.col == 8
    assert _sexp(loop.iter) == "loop_unroll(0, N, 1, name='u')"


def test_elif_chain_nests_in_orelse():
    src = (
        "if a:\n"
        "    x = 1\n"
        "elif b:\n"
        "    x = 2\n"
        "elif c:\n"
        "    x = 3\n"
        "else:\n"
        "    x = 4\n"
    )
    top = parse_stmt(src)
    assert top.cond == mk(ast.Name, "a") and (top.span.line, top.span.end_line) == (1, 8)
    (second,) = top.orelse
    assert isinstance(second, ast.If) and second.cond == mk(ast.Name, "b")
    assert (second.span.line, second.span.col, second.span.end_line) == (3, 1, 8)
    (third,) = second.orelse
    assert third.cond == mk(ast.Name, "c") and third.span.line == 5
    assert third.orelse == (mk(ast.Assign, mk(ast.Name, "x"), mk(ast.Num, 4, "4")),)


def test_if_without_else_and_elif_without_else():
    stmt = parse_stmt("if a:\n    pass\nelif b:\n    pass\n")
    assert stmt.orelse[0].orelse == ()
    assert parse_stmt("if a:\n    pass\n").orelse == ()


def test_params_modes_defaults_and_trailing_commas():
    src = (
        "kernel k(\n"
        "    a: f32[M, 4,],\n"
        "    b: inout bf16[M],\n"
        "    c: out T[2, N],\n"
        "    n: i32,\n"
        "    eps: f32 = 1e-6,\n"
        "    flag: bool = True,\n"
        "):\n"
        "    pass\n"
    )
    kernel = _parse_ok(src).kernel("k")
    got = [(p.name, p.mode, p.dtype, None if p.dims is None else [d.value for d in p.dims]) for p in kernel.params]
    assert got == [
        ("a", "in", "f32", ["M", 4]),
        ("b", "inout", "bf16", ["M"]),
        ("c", "out", "T", [2, "N"]),
        ("n", "in", "i32", None),
        ("eps", "in", "f32", None),
        ("flag", "in", "bool", None),
    ]
    assert kernel.param("eps").default == mk(ast.Num, 1e-6, "1e-6")
    assert kernel.param("flag").default == mk(ast.Bool, True)
    assert not kernel.param("n").is_tensor and kernel.param("a").is_tensor
    assert kernel.param("c").dims[0].span.line == 4


def test_kernel_without_params():
    kernel = _parse_ok("kernel k():\n    pass\n").kernels[0]
    assert kernel.params == ()


def test_several_kernels_comments_and_blank_lines():
    src = (
        "# leading comment\n"
        "\n"
        "kernel first(x: f32[M], y: out f32[M]):   # trailing comment\n"
        "    # a comment inside the body\n"
        "\n"
        "    y[:] = x  # after code\n"
        "        # a deeper comment does not indent\n"
        "  # nor does a shallower one\n"
        "    y[:] = y + 1.0\n"
        "\n"
        "\n"
        "kernel second(x: f32[M], y: out f32[M]):\n"
        "    for i in loop(M):\n"
        "        if i == 0:\n"
        "            pass\n"
        "    y.move(x)\n"
        "# trailing comment at the end, without a newline"
    )
    module = _parse_ok(src)
    assert [k.name for k in module.kernels] == ["first", "second"]
    first, second = module.kernels
    assert len(first.body) == 2 and first.body[1].span.line == 9
    assert (first.span.line, first.span.end_line) == (3, 9)
    assert isinstance(second.body[0], ast.For) and isinstance(second.body[1], ast.ExprStmt)
    assert module.span.line == 3 and module.span.end_line == 16


def test_line_endings_and_missing_final_newline():
    lf = "kernel k(x: f32[M], y: out f32[M]):\n    y[:] = x\n"
    want = _parse_ok(lf)
    assert _parse_ok(lf.replace("\n", "\r\n")) == want
    assert _parse_ok(lf.rstrip("\n")) == want
    assert _parse_ok(lf.replace("\n", "\r\n"), "crlf.pto").kernels[0].body[0].span.end_col == 13


def test_newlines_inside_brackets_are_ignored():
    src = "kernel k(x: f32[M],\n         y: out f32[M]):\n    y[:] = f(x,\n  1.0,\n        dim=-1)\n    pass\n"
    kernel = _parse_ok(src).kernels[0]
    assert len(kernel.body) == 2
    assert (kernel.body[0].span.line, kernel.body[0].span.end_line) == (3, 5)


def test_parse_module_reports_instead_of_raising():
    diags = Diagnostics()
    assert parse_module("kernel k(:\n", "bad.pto", diags) is None
    assert diags.has_errors and diags.errors[0].code.startswith("E01")


def test_parse_file_reads_and_raises(tmp_path):
    good = tmp_path / "good.pto"
    good.write_text("kernel k(x: f32[M], y: out f32[M]):\n    y[:] = x\n", encoding="utf-8")
    assert parse_file(str(good)).kernels[0].name == "k"
    bad = tmp_path / "bad.pto"
    bad.write_text("kernel k(x: f32[M]):\n    y = (\n", encoding="utf-8")
    with pytest.raises(CompileError) as err:
        parse_file(str(bad))
    assert err.value.diagnostics[0].code == "E0102"


def test_parse_file_tolerates_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.pto"
    path.write_bytes(b"\xef\xbb\xbfkernel k(x: f32[M], y: out f32[M]):\n    y[:] = x\n")
    assert parse_file(str(path)).kernels[0].name_span.col == 8


@pytest.mark.parametrize("make", ["missing", "directory", "not_utf8"])
def test_parse_file_unreadable(tmp_path, make):
    path = tmp_path / "k.pto"
    if make == "directory":
        path.mkdir()
    elif make == "not_utf8":
        path.write_bytes(b"kernel k():\n    x = 1 \xff\n")
    with pytest.raises(CompileError) as err:
        parse_file(str(path))
    (diag,) = err.value.diagnostics
    assert diag.code == "E0118" and str(path) in diag.message and diag.help
    if make == "not_utf8":
        assert (diag.span.line, diag.span.col) == (2, 11)
    else:
        assert diag.span is None


def test_fragments_raise_compile_error():
    with pytest.raises(CompileError):
        parse_expr("a +")
    with pytest.raises(CompileError):
        parse_stmt("for i in x\n")


def test_builder_errors_are_all_reported():
    src = "kernel k(a: outt f32[M], a: out f32, t: f32[M] = 1):\n    f(x) = g(k=1, 2, k=3)\n    y = a < b < c\n"
    diags = Diagnostics()
    assert parse_module(src, "many.pto", diags) is None
    assert [d.code for d in diags] == ["E0110", "E0113", "E0111", "E0112", "E0114", "E0115", "E0116", "E0117"]


def test_parenthesised_comparison_is_not_a_chain():
    assert _sexp(parse_expr("(a < b) < c")) == "(< (< a b) c)"
    with pytest.raises(CompileError) as err:
        parse_expr("a < b < c")
    assert err.value.diagnostics[0].code == "E0117"


def test_deep_nesting_is_a_diagnostic_not_a_crash():
    with pytest.raises(CompileError) as err:
        parse_expr("(" * 500 + "x" + ")" * 500)
    assert err.value.diagnostics[0].code == "E0119"
    with pytest.raises(CompileError) as err:
        parse_expr(" + ".join(["x"] * 1000))
    assert err.value.diagnostics[0].code == "E0119"
    assert _sexp(parse_expr("(" * 150 + "x" + ")" * 150)) == "x"


def test_repeated_errors_are_stable():
    """The shared post-lexer is reset between parses: the same input gives the same diagnostics."""
    outputs = set()
    for _ in range(3):
        diags = Diagnostics()
        parse_module("kernel k(x: f32[M]):\n    y = f(x\n    z = 1\n", "again.pto", diags)
        outputs.add(render_all(diags))
        assert _parse_ok(EXAMPLES["softmax"])
    assert len(outputs) == 1


# ------------------------------------------------------------------ grammar and terminals


def test_grammar_has_no_lalr_conflicts(caplog):
    # Lark resolves shift/reduce conflicts silently unless debug is on; then it logs them.
    old = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="lark"):
            Lark(grammar_text(), parser="lalr", lexer="basic", postlex=PtoIndenter(), debug=True,
                 maybe_placeholders=True, start=list(START_RULES))
    finally:
        logger.setLevel(old)
    assert not [r for r in caplog.records if "conflict" in r.getMessage().lower()]


def test_grammar_source_fallback_and_packaged(tmp_path, monkeypatch):
    assert grammar_text() == (ROOT / "grammar" / "pto.lark").read_text(encoding="utf-8")
    (tmp_path / "_grammar").mkdir()
    (tmp_path / "_grammar" / "pto.lark").write_text("// packaged copy\n", encoding="utf-8")
    monkeypatch.setattr(grammar_mod.resources, "files", lambda package: tmp_path)
    assert grammar_text() == "// packaged copy\n"


def test_parser_is_cached():
    assert get_parser() is get_parser()


def test_every_terminal_has_a_user_facing_description():
    for name in regex_terminals():
        assert describe_terminal(name) in {"identifier", "number", "string", "newline"}, name
    for name, literal in terminal_info().literals.items():
        assert describe_terminal(name) == f'"{literal}"'
    assert describe_terminal("RPAR") == '")"'
    assert describe_terminal("$END") == "end of file"
    assert describe_terminal("_INDENT") == "indent"


def test_expected_phrase_is_sorted_capped_and_folded():
    info = terminal_info()
    by_literal = {lit: name for name, lit in info.literals.items()}
    assert expected_phrase([by_literal[":"]]) == 'expected ":"'
    assert expected_phrase([by_literal[","], by_literal[")"]]) == 'expected ")" or ","'
    assert expected_phrase(info.expression_starts) == "expected an expression"
    assert expected_phrase(set(info.operators) | {by_literal[")"]}) == 'expected ")" or an operator'
    many = [name for name, lit in info.literals.items() if lit.isidentifier() and name not in info.operators]
    phrase = expected_phrase(many)
    assert phrase.endswith(f"or {len(many) - MAX_EXPECTED} more")
    assert phrase == expected_phrase(reversed(many))
    assert expected_phrase([]) == ""


# ------------------------------------------------------------------ fuzzing

_TOKEN = re.compile(r"\s+|#[^\n]*|\"[^\"\n]*\"|\w+|\d*\.\d+|//|<=|>=|==|!=|.", re.S)
_JUNK = list("()[]{}:,.=+-*/%<>!@$&|;\\\"'#\t\n ") + ["\n    ", "\n  ", "kernel", "for", "in", "if", "else", "elif",
                                                    "pass", "out", "x", "1", "1.0", "\u2014", "\x0c", "\u2028", "\r"]


def _mutate(rng: random.Random, src: str) -> str:
    kind = rng.randrange(8)
    if kind == 0:  # delete one token
        toks = [m.group(0) for m in _TOKEN.finditer(src)]
        i = rng.randrange(len(toks))
        return "".join(toks[:i] + toks[i + 1:])
    if kind == 1:  # delete one character
        i = rng.randrange(len(src))
        return src[:i] + src[i + 1:]
    if kind == 2:  # insert junk
        i = rng.randrange(len(src) + 1)
        return src[:i] + rng.choice(_JUNK) + src[i:]
    if kind == 3:  # swap two lines
        lines = src.split("\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    if kind == 4:  # re-indent a line
        lines = src.split("\n")
        i = rng.randrange(len(lines))
        lines[i] = " " * rng.choice([0, 1, 2, 3, 5, 8, 12]) + lines[i].lstrip()
        return "\n".join(lines)
    if kind == 5:  # truncate
        return src[: rng.randrange(len(src) + 1)]
    if kind == 6:  # replace a token by another token of the same file
        toks = [m.group(0) for m in _TOKEN.finditer(src)]
        toks[rng.randrange(len(toks))] = rng.choice(toks)
        return "".join(toks)
    return "".join(rng.choice(_JUNK) for _ in range(rng.randrange(1, 60)))  # pure garbage


def _check_outcome(text: str, path: str) -> bool:
    diags = Diagnostics()
    module = parse_module(text, path, diags)
    if module is not None:
        assert not diags.has_errors
        return True
    assert diags.has_errors
    registry = code_registry()
    rendered = render_all(diags)
    for d in diags:
        assert d.code in registry and "E0100" <= d.code <= "E0122"
        assert d.help, d
        if d.span is not None:
            assert source_line(d.span.file, d.span.line) is not None, (d, text)
    for leak in ("Token(", "__ANON", "_NL", "_INDENT", "_DEDENT", "$END", "RPAR", "LSQB", "Traceback"):
        assert leak not in rendered, rendered
    return False


def test_fuzz_mutations_only_produce_diagnostics():
    rng = random.Random(20240611)
    sources = [EXAMPLES[name] for name in sorted(EXAMPLES)]
    outcomes = []
    for i in range(300):
        text = rng.choice(sources)
        for _ in range(rng.randrange(1, 4)):
            text = _mutate(rng, text) or text
        outcomes.append(_check_outcome(text, f"fuzz{i}.pto"))
    # The mutations must exercise the error paths, not just produce valid programs.
    assert outcomes.count(False) > 150


def test_fuzz_random_bytes_as_text():
    rng = random.Random(7)
    for i in range(40):
        text = bytes(rng.randrange(256) for _ in range(rng.randrange(80))).decode("latin-1")
        _check_outcome(text, f"bytes{i}.pto")
