"""Hostile text: no spec string, name or file name becomes code in the generated C++ or Python.

An adversarial generator makes strings out of every character class that can end a comment, a
string literal or a docstring (line breaks of all kinds, quotes, backslashes, ``*/``, trigraphs,
NUL, surrogates). The escaping functions are proved on them by compiling the results with g++ and
Python and reading the strings back; then whole specs carrying such text are compiled, emitted,
built and generated as packages that must import.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.cxx_names import cxx_reserved
from ptodsl.diagnostics import CompileError
from ptodsl.escape import cpp_comment, cpp_string, py_comment, py_docstring, py_string, unprintable
from ptodsl.gen import build_package
from ptodsl.gen.writer import write_tree

ROOT = Path(__file__).resolve().parents[1]
PIECES = ["\r", "\n", "\r\n", "\\", "\\\n", '"', '"""', "'''", "*/", "/*", "//", "??/", "??=", "\x00", "\t",
          "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\ud800", "é", "\U0001f600",
          "#include <cstdlib>", "std::system(\"false\");", "import os; os.system('false')", "%s%n", "{}", "x"]


def adversarial(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = ["", "\\", 'a"', 'Adds one"', "x\\", "\r#include <cstdlib>\nstatic int v = std::system(\"false\");\n//"]
    for _ in range(count):
        out.append("".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 8))))
    return out


STRINGS = adversarial(300)
CXX = shutil.which(os.environ.get("PTODSL_CXX", "g++"))


# ------------------------------------------------------------------ escaping, proved by the compilers


def test_python_escapes_round_trip_through_the_parser():
    lines = []
    for i, s in enumerate(STRINGS):
        lines += [f"# {py_comment(s)}", f'def f{i}():', f'    """{py_docstring(s)}"""', f"    return {py_string(s)}"]
    tree = ast.parse("\n".join(lines) + "\n")  # one module: an escape failure breaks the parse
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert len(funcs) == len(STRINGS)
    for s, f in zip(STRINGS, funcs):
        doc = f.body[0].value.value  # the raw docstring, without inspect's cleaning
        assert doc == s and f.body[1].value.value == s


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_cpp_escapes_round_trip_through_gxx(tmp_path: Path):
    body = ["#include <cstdio>", "int main() {"]
    for s in STRINGS:
        body += [f"    // {cpp_comment(s)}", f"    /* {cpp_comment(s)} */",
                 f'    std::fputs("{cpp_string(s)}", stdout); std::fputc(0, stdout);']
    body += ["    return 0;", "}"]
    src = tmp_path / "t.cpp"
    src.write_text("\n".join(body) + "\n", encoding="utf-8")
    subprocess.run([CXX, "-std=c++17", "-trigraphs", "-Werror=comment", "-o", str(tmp_path / "t"), str(src)],
                   check=True, capture_output=True)
    out = subprocess.run([str(tmp_path / "t")], check=True, capture_output=True).stdout
    want = b"".join(s.encode("utf-8", errors="surrogatepass").split(b"\0")[0] + b"\0" for s in STRINGS)
    assert out == want  # the literal holds exactly the text (a printf-style %n is not interpreted)


def test_unprintable_flags_every_line_break_and_control():
    for c in "\r\n\x00\x0b\x0c\x1b\x7f\x85\u2028\u2029\ud800":
        assert unprintable(f"a{c}b") == c
    assert unprintable("a\nb", allow_newline=True) is None
    assert unprintable("tab\tand é 😀") is None


# ------------------------------------------------------------------ specs carrying hostile text


def make_spec(folder: Path, op: str = "add_one", doc: str | None = None, extra: str = "", pto: str | None = None,
               yaml_name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{op}.pto").write_text(pto or f"kernel {op}(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x + 1.0\n")
    lines = [f"op: {op}", "schedule: {vec_tile: [8, 256]}"]
    if doc is not None:
        lines.append(f"doc: {json.dumps(doc)}")
    path = folder / (yaml_name or f"{op}.yaml")
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def codes(path: Path) -> list[str]:
    with pytest.raises(CompileError) as info:
        ptodsl.load(str(path))
    return [d.code for d in info.value.diagnostics]


@pytest.mark.parametrize("doc", ["one\rtwo", "nul\x00", "esc\x1b[2J", "sep\u2028x", "a\x85b"])
def test_control_characters_in_a_doc_are_refused(tmp_path: Path, doc: str):
    assert codes(make_spec(tmp_path, doc=doc)) == ["E0209"]


@pytest.mark.parametrize("name", ["a\rb", "line\nbreak", "\x00"])
def test_control_characters_in_a_test_name_are_refused(tmp_path: Path, name: str):
    extra = f"tests:\n  - {{shapes: {{M: 8, N: 256}}, name: {json.dumps(name)}}}\n"
    assert codes(make_spec(tmp_path, extra=extra)) == ["E0209"]


@pytest.mark.parametrize("stem", ["add\none", "add\rone", "add\x1bone"])
def test_spec_file_names_with_control_characters_are_refused(tmp_path: Path, stem: str):
    path = make_spec(tmp_path, yaml_name=f"{stem}.yaml")
    assert codes(path) == ["E0219"]


def test_source_names_with_control_characters_are_refused(tmp_path: Path):
    (tmp_path / "k\r.pto").write_text("kernel k(x: f32[M], y: out f32[M]):\n    y[:] = x\n")
    (tmp_path / "k.yaml").write_text('op: k\nsource: "k\\r.pto"\nschedule: {vec_tile: [64]}\n')
    assert codes(tmp_path / "k.yaml") == ["E0209"]  # the YAML string itself is refused first


def test_a_file_name_reaching_cpp_comments_cannot_inject(tmp_path: Path):
    """The .pto name lands in `//` comments of every emitted file; its text is escaped there."""
    from ptodsl.backends.cpp.emit import emit_variant

    name = 'evil * ?? \\ #include "x" \u00e9 \t.pto'
    make_spec(tmp_path, extra=f"source: {json.dumps(name)}\n")
    (tmp_path / name).write_text("kernel add_one(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x + 1.0\n")
    compiled = ptodsl.load(str(tmp_path / "add_one.yaml")).compiled
    for text in emit_variant(compiled, 0).sources.values():
        for line in text.splitlines():
            if "evil" in line:
                comment = line[line.index("//"):]
                assert comment.isascii() and "\t" not in comment and "??" not in comment
                assert "\\" not in comment.replace("\\x", "")


@pytest.mark.parametrize("doc", ['Adds one"', 'ends in a backslash\\', 'three """ quotes', "two lines\nof doc",
                                 "'''single''' and \\N{BULLET} and {{ jinja }}"])
def test_generated_packages_import_whatever_the_doc(tmp_path: Path, doc: str, monkeypatch: pytest.MonkeyPatch):
    specs = tmp_path / "specs"
    make_spec(specs, doc=doc, extra="tests:\n  - {shapes: {M: 8, N: 256}, name: 'a \"quoted\" \\\\ name'}\n")
    package = build_package(str(specs), "hostile_pkg")
    out = tmp_path / "out"
    write_tree(package.files, out)
    for rel, text in package.files.items():
        if rel.endswith(".py"):
            compile(text, rel, "exec")  # every generated module parses
    monkeypatch.syspath_prepend(str(out))
    for name in [m for m in sys.modules if m.startswith("hostile_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("hostile_pkg.ops.add_one")
    assert doc.strip() in (inspect.getdoc(module.add_one) or "")
    y = module.add_one(np.zeros((8, 256), np.float32))
    assert float(y[0, 0]) == 1.0


# ------------------------------------------------------------------ names that collide with the C++ side


HOSTILE_NAMES = ["NAN", "INFINITY", "M_PI", "HUGE_VAL", "EVENT_ID0", "PIPE_V", "TASSIGN", "Tile", "set_flag", "EOF",
                 "stdin", "DYNAMIC", "pto", "std"]


def test_reserved_names_cover_the_headers_macros():
    assert all(cxx_reserved(n) for n in HOSTILE_NAMES if n not in ("std",))
    assert not any(cxx_reserved(n) for n in ("x", "y", "M", "N", "B", "alpha", "row", "b_loop"))


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_reserved_names_list_every_macro_of_the_kernel_includes(tmp_path: Path):
    from ptodsl.backends.cpp.build import HEADER_DIR

    probe = tmp_path / "probe.cpp"
    probe.write_text("#include <pto/pto-inst.hpp>\n#include <algorithm>\n#include <cmath>\n#include <cstdint>\n"
                     "#include <cstdio>\n#include <limits>\n#include <vector>\n")
    out = subprocess.run([CXX, "-std=c++17", "-fopenmp", "-dM", "-E", f"-I{HEADER_DIR}", str(probe)],
                         check=True, capture_output=True, text=True).stdout
    macros = {line.split()[1].split("(")[0] for line in out.splitlines() if line.startswith("#define")}
    missing = sorted(m for m in macros if not m.startswith("_") and not cxx_reserved(m))
    assert not missing, f"add these to ptodsl/frontend/cxx_names.py: {missing}"


@pytest.mark.parametrize("op", ["NAN", "TASSIGN", "set_flag", "PIPE_V", "M_PI"])
def test_an_op_named_like_a_macro_or_api_name_is_refused(tmp_path: Path, op: str):
    assert codes(make_spec(tmp_path, op=op)) == ["E0211"]


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_variables_named_like_macros_and_api_names_build_and_run(tmp_path: Path):
    scalars = ", ".join(f"{n}: f32" for n in HOSTILE_NAMES)
    body = "\n".join(f"    {n}_{i} = x * {n}" if i == 0 else f"    t{i} = x + {n}" for i, n in enumerate(HOSTILE_NAMES))
    total = " + ".join([f"{HOSTILE_NAMES[0]}_0"] + [f"t{i}" for i in range(1, len(HOSTILE_NAMES))])
    pto = (f"kernel names(x: f32[M, N], {scalars}, y: out f32[M, N]):\n"
           f"    for Tile2 in loop(M, name=\"EVENT_ID1\"):\n        x_row = x[Tile2, :]\n"
           + body.replace("    ", "        ").replace("x ", "x_row ")
           + f"\n        y[Tile2, :] = {total}\n")
    op = ptodsl.load(str(make_spec(tmp_path, op="names", pto=pto)))
    values = {n: float(i + 1) for i, n in enumerate(HOSTILE_NAMES)}
    x = np.full((8, 256), 2.0, np.float32)
    want = op(x, **values, backend="sim")
    got = op(x, **values, backend="cpu")
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ------------------------------------------------------------------ sizes


def test_integer_literals_beyond_64_bits_are_diagnostics(tmp_path: Path):
    for literal in ["9" * 25, "9" * 5000, "1e309", "1" + "0" * 400 + ".0"]:
        pto = f"kernel add_one(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x + {literal}\n"
        assert codes(make_spec(tmp_path, pto=pto)) == ["E0120"]


def test_defaults_that_do_not_fit_their_dtype_are_refused(tmp_path: Path):
    pto = ("kernel add_one(x: f32[M, N], a: i32 = 2147483648, b: f32 = 3.5e38, c: u8 = -1, "
           "y: out f32[M, N]):\n    y[:] = x + 1.0\n")
    assert codes(make_spec(tmp_path, pto=pto)) == ["E0317"] * 3


def test_a_huge_yaml_is_refused_quickly(tmp_path: Path):
    path = make_spec(tmp_path, extra="# " + "x" * (10 << 20) + "\n")
    start = time.monotonic()
    assert codes(path) == ["E0203"]
    assert time.monotonic() - start < 2


def test_a_long_string_is_refused(tmp_path: Path):
    assert codes(make_spec(tmp_path, doc="x" * 20000)) == ["E0209"]


def test_print_fields_other_than_braces_are_refused(tmp_path: Path):
    """`str.format` would follow `{0.__class__}` into Python objects or pad to a billion characters:
    a format with fields other than `{}` never reaches a backend."""
    pto = ("kernel rows(x: f32[R, N], y: out f32[R, N]):\n"
           "    for r in loop(R, name=\"rows\"):\n"
           "        print(\"{0.__class__} {:>999999999} {{}} {}\", r)\n"
           "        y[r, :] = x[r, :] * 2.0\n")
    with pytest.raises(CompileError) as info:
        ptodsl.load(str(make_spec(tmp_path, op="rows", pto=pto)))
    assert [d.code for d in info.value.diagnostics] == ["E0343"]
