"""Kernels defined inside another function of the file (a test, or a factory that returns the
kernel): the names the kernel reads from that function (``dtype = pypto.DT_FP32``, ``shape =
(b, n)``, the function's own parameters) take the values one call of it gives them.

The enclosing function is walked as :mod:`callsite` walks any function, with its parameters
bound from a call of it in the file (or their defaults), up to the kernel's ``def``: what is
known there is the kernel's trace environment. Calls of the kernel after the ``def`` are its
call sites. Calls of the enclosing function that give the kernel different values of the names
it reads would make different kernels: the first call's kernel is ported, with the call sites
of every call that gives it the same values.
"""

from __future__ import annotations

import ast
from typing import Any

from .callsite import UNKNOWN, Arg, Evaluator
from .sites import _calls_in, call_sites


def enclosing(tree: ast.Module, fn: ast.FunctionDef) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function whose body holds ``fn``'s ``def``, if any."""
    parent: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
    up = parent.get(id(fn))
    while up is not None and not isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        up = parent.get(id(up))
    return up if isinstance(up, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _reads(fn: ast.FunctionDef) -> set[str]:
    """The names ``fn`` reads that it does not bind as parameters."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - params


def _bind(outer: ast.FunctionDef | ast.AsyncFunctionDef, site: list[Any], ev: Evaluator) -> None:
    positional = [v for v in site if not (isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str))]
    keywords = dict(v for v in site if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str))
    args = outer.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(outer.args.defaults):]], outer.args.defaults,
                        strict=True))
    defaults.update({a.arg: d for a, d in zip(outer.args.kwonlyargs, outer.args.kw_defaults, strict=True)
                     if d is not None})
    for i, a in enumerate(args + outer.args.kwonlyargs):
        if i < len(positional) and i < len(args):
            ev.env[a.arg] = positional[i]
        elif a.arg in keywords:
            ev.env[a.arg] = keywords[a.arg]
        elif a.arg in defaults:
            ev.env[a.arg] = ev.ev(defaults[a.arg])
        else:
            ev.env[a.arg] = UNKNOWN


def kernel_env(tree: ast.Module, fn: ast.FunctionDef, env: dict[str, Any]) -> tuple[dict[str, Any], list[list[Any]]]:
    """The trace environment of ``fn`` (module constants, and the enclosing function's names
    when it has one) and the evaluated call sites of ``fn``."""
    outer = enclosing(tree, fn)
    if outer is None:
        return env, call_sites(tree, fn.name, env)
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    reads = _reads(fn)
    chosen: dict[str, Any] | None = None
    key: dict[str, Any] = {}
    sites: list[list[Any]] = []
    for site in call_sites(tree, outer.name, env) or [[]]:
        ev = Evaluator(env, classes)
        _bind(outer, site, ev)
        snap: dict[str, Any] = {}
        found: list[list[Any]] = []
        _calls_in(outer.body, fn.name, ev, found, at=fn, snap=snap)
        known = {k: v for k, v in snap.items() if v is not UNKNOWN and not isinstance(v, Arg)}
        mine = {n: known.get(n, UNKNOWN) for n in reads}
        if chosen is None:
            chosen, key = known, mine
        elif mine != key:
            continue
        sites += found
    return {**env, **(chosen or {})}, sites
