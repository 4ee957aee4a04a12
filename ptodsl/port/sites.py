"""Where a kernel is called in the file, and the tensors the file makes: every function is
walked in order with :class:`callsite.Evaluator`, and each call of the kernel is evaluated where
it stands (a loop of the test over literal cases gives the calls of its first iterations)."""

from __future__ import annotations

import ast
from typing import Any

from .callsite import UNKNOWN, Arg, Evaluator, _plain

MAX_ITERATIONS = 8  # a loop of the test over literal cases: the calls of its first iterations


_LIST_METHODS = {"pop", "append", "insert", "extend"}


def _list_method(stmt: ast.stmt, ev: Evaluator) -> None:
    """``shape.pop(dim)`` and the like on a list of the trace, as a statement."""
    c = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in _LIST_METHODS
            and isinstance(c.func.value, ast.Name)):
        return
    base = ev.env.get(c.func.value.id)
    if not isinstance(base, list):
        return
    base = list(base)  # a copy: the list may be a module constant that other kernels read
    ev.env[c.func.value.id] = base
    args = [ev.ev(a) for a in c.args]
    try:
        if c.keywords or any(a is UNKNOWN for a in args):
            raise TypeError
        getattr(base, c.func.attr)(*args)
    except (TypeError, IndexError, AttributeError):
        ev.env[c.func.value.id] = UNKNOWN


def _head_calls(head: ast.AST, name: str, ev: Evaluator, found: list[list[Any]]) -> None:
    for node in ast.walk(head):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            found.append([ev.ev(a) if not isinstance(a, ast.Starred) else UNKNOWN for a in node.args]
                         + [(k.arg, ev.ev(k.value)) for k in node.keywords if k.arg])


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except (TypeError, ValueError, RecursionError):
        return False


def _calls_in(body: list[ast.stmt], name: str, ev: Evaluator, found: list[list[Any]],
              at: ast.stmt | None = None, snap: dict[str, Any] | None = None) -> None:
    """Walks ``body`` in order: assignments update ``ev``, calls of ``name`` are evaluated where
    they stand. A branch whose condition is known takes its arm; otherwise both arms are walked,
    each from the state before the branch. Where the statement ``at`` stands, ``snap`` gets the names' values."""
    for stmt in body:
        if stmt is at and snap is not None:
            snap.update(ev.env)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If):
            test = ev.ev(stmt.test)
            if _plain(test):
                _calls_in(stmt.body if test else stmt.orelse, name, ev, found, at, snap)
                continue
            _head_calls(stmt.test, name, ev, found)
            # either arm may run: each is walked from the same state, and a name they leave
            # with different values is unknown after the branch
            before = dict(ev.env)
            _calls_in(stmt.body, name, ev, found, at, snap)
            taken, ev.env = ev.env, before
            _calls_in(stmt.orelse, name, ev, found, at, snap)
            for k in set(taken) | set(ev.env):
                if k not in taken or k not in ev.env or not _same(taken[k], ev.env[k]):
                    ev.env[k] = UNKNOWN
            continue
        _list_method(stmt, ev)
        nested = [getattr(stmt, part, None) or [] for part in ("body", "orelse", "finalbody")]
        heads = [stmt] if not any(nested) else [getattr(stmt, f) for f in ("test", "iter") if hasattr(stmt, f)]
        heads += [i.context_expr for i in getattr(stmt, "items", [])]
        for head in heads:
            _head_calls(head, name, ev, found)
        if isinstance(stmt, ast.Assign):
            v = ev.ev(stmt.value)
            for t in stmt.targets:
                ev.assign(t, v)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            ev.assign(stmt.target, ev.ev(stmt.value))
        if isinstance(stmt, ast.For) and isinstance(stmt.target, (ast.Name, ast.Tuple)):
            values = ev.ev(stmt.iter)
            if isinstance(values, (list, tuple)) and values:
                for v in list(values)[:MAX_ITERATIONS]:
                    ev.assign(stmt.target, v)
                    _calls_in(stmt.body, name, ev, found, at, snap)
                continue
            ev.assign(stmt.target, UNKNOWN)
        for sub in nested:
            _calls_in(sub, name, ev, found, at, snap)
        for h in getattr(stmt, "handlers", []):
            _calls_in(h.body, name, ev, found, at, snap)


class _Maker(Evaluator):
    """An evaluator that also keeps every tensor assigned to a name, with the line it is made at."""

    def __init__(self, module_env: dict[str, Any], classes: dict[str, ast.ClassDef], made: list[tuple[Arg, int]]):
        super().__init__(module_env, classes)
        self.made = made
        self.line = 0

    def ev(self, node: ast.expr) -> Any:
        self.line = getattr(node, "lineno", self.line)
        return super().ev(node)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name) and isinstance(value, Arg) and value.is_tensor:
            self.made.append((value, self.line))
        super().assign(target, value)


def _walk_functions(tree: ast.Module, name: str, env: dict[str, Any], found: list[list[Any]],
                    made: list[tuple[Arg, int]]) -> None:
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ev = _Maker(env, classes, made)
            for a in node.args.args + node.args.kwonlyargs:
                ev.env.pop(a.arg, None)
            defaults = node.args.defaults
            for a, d in zip(node.args.args[len(node.args.args) - len(defaults):], defaults, strict=True):
                ev.env[a.arg] = ev.ev(d)
            _calls_in(node.body, name, ev, found)


def call_sites(tree: ast.Module, name: str, env: dict[str, Any]) -> list[list[Any]]:
    """The evaluated arguments of each call of ``name`` in the file's functions, in file order.
    Each is a list: positional values, then ``(keyword, value)`` pairs."""
    found: list[list[Any]] = []
    _walk_functions(tree, name, env, found, [])
    return found


def made_tensors(tree: ast.Module, env: dict[str, Any]) -> list[tuple[Arg, int]]:
    """Every tensor a function of the file makes and names (``x = torch.rand(shape)``), with its
    line: where a kernel is reached only through wrappers the port cannot follow (a
    ``torch.compile``d module), these are the data the file runs it on."""
    made: list[tuple[Arg, int]] = []
    _walk_functions(tree, "", env, [], made)
    return made
