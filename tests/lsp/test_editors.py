"""The editor files stay in step with the compiler: the TextMate grammar's builtins, keywords and
dtypes are the op table's, the parser's and ptodsl.dtypes'."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ptodsl.dtypes import DTYPE_NAMES
from ptodsl.fmt import KEYWORDS
from ptodsl.frontend.grammar import get_parser
from ptodsl.ops import INDEXING, OPS, SCALAR_BUILTINS, STRUCTURE_BUILTINS

GRAMMAR = Path(__file__).resolve().parents[2] / "editors" / "pto.tmLanguage.json"


def _words(pattern: str) -> set[str]:
    m = re.search(r"\\b\(([A-Za-z0-9_|]+)\)\\b", pattern)
    assert m is not None, pattern
    return set(m.group(1).split("|"))


def _rules(node: dict) -> list[dict]:
    return node.get("patterns", [node])


def test_grammar_words_match_the_compiler() -> None:
    g = json.loads(GRAMMAR.read_text())
    repo = g["repository"]
    builtins = set(OPS) | set(STRUCTURE_BUILTINS) | set(SCALAR_BUILTINS) | set(INDEXING)
    assert _words(repo["builtin"]["match"]) == builtins
    assert _words(repo["dtype"]["match"]) == set(DTYPE_NAMES)
    highlighted = set().union(*(_words(r["match"]) for r in _rules(repo["keyword"])))
    assert repo["kernel"]["match"].startswith("\\b(kernel)\\s")
    highlighted.add("kernel")
    # the language's reserved words: the grammar's keyword terminals
    reserved = {t.pattern.value for t in get_parser().terminals
                if t.pattern.type == "str" and re.fullmatch(r"[A-Za-z]+", t.pattern.value)}
    assert "kernel" in reserved and reserved <= highlighted and KEYWORDS <= highlighted


def test_grammar_patterns_compile_and_match() -> None:
    g = json.loads(GRAMMAR.read_text())
    assert g["scopeName"] == "source.pto" and "pto" in g["fileTypes"]
    repo = g["repository"]
    line = 'kernel f(x: f32[N], y: out f32[N], eps: f32 = 1e-5):  # c'
    found = {}
    for key, node in repo.items():
        for rule in _rules(node):
            for m in re.finditer(rule["match"], line):
                found.setdefault(key, []).append(m.group())
    assert found["comment"] == ["# c"] and "1e-5" in found["number"] and "out" in "".join(found["mode"])
    assert re.search(repo["builtin"]["match"], "y = exp(x)") and not re.search(repo["builtin"]["match"], "exp = 1")
