"""The pipeline as an ordered list of stages: parse -> check -> Tensor IR -> passes -> Tile IR.

``compile_spec`` runs every stage and keeps each stage's IR, so any of them can be printed
(``ptodsl ir --stage``/``--after``). Stages stop at the first stage that reports an error, after that
stage has reported all it found.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from math import prod
from typing import Any

from . import sym
from .cases import InputError, TestCase, build_input, case_seed
from .check import CheckedKernel, check
from .cost.choose import DEFAULT_DIM, Candidate, Case, choose, left_out
from .diagnostics import CompileError, Diagnostic, Diagnostics, Span, recording_sources, register_source
from .frontend import ast
from .frontend.parser import parse_module, read_source
from .frontend.spec import ROOT_ENV, Spec, load_spec, variant_name
from .ir import Func, IRSyntaxError, Module, TensorType, parse
from .ir.schedule import passes_applied, reschedule, with_pass
from .ir.verify import VerifyError, verify
from .passes import PIPELINE, check_pipeline, tensorize
from .passes.context import Pass, PassContext
from .schedule import PASS_OPTION_DEFAULTS, Schedule
from .targets import Target, load_target, target_names

E_IR_INPUT = "E0801"  # a printed module given to `ptodsl ir --from` that the passes cannot resume from

# The passes after tensorize, in order: one list, in ptodsl.passes, that every reader shares.
PASSES: list[Pass] = PIPELINE


@dataclass
class Compiled:
    spec: Spec
    target: Target
    module: ast.Module
    checked: list[CheckedKernel]
    stages: dict[str, Module] = field(default_factory=dict)  # level -> final IR of that level
    after: dict[str, Module] = field(default_factory=dict)  # pass name -> IR after it
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    verify_seconds: float = 0.0  # time spent verifying the IR after each pass (reported by bench)
    candidates: list[Candidate] = field(default_factory=list)  # schedules tried where the spec gave none

    def copy(self, diags: Diagnostics) -> Compiled:
        """A copy whose stage modules, the ones backends read, can be changed without touching this
        one's. The per-pass modules of ``after`` are shared: they are only printed."""
        return replace(self, stages={k: m.clone() for k, m in self.stages.items()}, after=dict(self.after),
                       diagnostics=diags, candidates=list(self.candidates))

    def kernel_for(self, variant: dict[str, str]) -> int:
        for i, ck in enumerate(self.checked):
            if ck.variant == variant:
                return i
        raise KeyError(variant)


def read_text(path: str, diags: Diagnostics) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        diags.error("E0118", f"cannot read `{path}`: no such file", None,
                    help="check the path; the .pto file sits beside its YAML unless `source:` says otherwise")
    except (OSError, UnicodeDecodeError) as exc:
        diags.error("E0118", f"cannot read `{path}`: {exc.__class__.__name__}", None, help="check the file")
    return None


def compile_spec(yaml_path: str, diags: Diagnostics | None = None, verify_ir: bool = True,
                 choose: bool = True, sources: Mapping[str, str] | None = None, lower: bool = True,
                 stop_after: str | None = None) -> Compiled:
    """Parse, check and lower one spec; raises CompileError with every diagnostic on failure.
    A spec compiled before in this process, from the same files and with the same arguments, is
    not compiled again: its result is copied (see ``_MEMO``).

    ``verify_ir=False`` skips the invariant checks after each pass; only for looking at the IR of
    a pass that breaks one (``ptodsl ir --after PASS --no-verify``). ``choose=False`` compiles the
    tiles a spec leaves out with the target's defaults instead of searching (``ptodsl tune`` does
    its own search). ``sources`` maps normalised paths to texts read instead of those files (the
    language server compiles an editor's unsaved buffers). ``lower=False`` stops at the Tensor IR
    (``ptodsl tune`` lowers each candidate schedule itself, so none is lowered with tiles nobody
    would compile with). ``stop_after`` names the last pass to run (``ptodsl ir --after PASS``):
    the passes after one that broke an invariant must not run on its IR, which they may not handle."""
    diags = diags if diags is not None else Diagnostics()
    sources = sources or {}
    # the path as given, and where it is relative to: diagnostics and the IR name the spec by it
    key = (yaml_path, os.getcwd(), verify_ir, choose, lower, stop_after, frozenset(sources.items()),
           os.environ.get(ROOT_ENV), tuple(map(id, PASSES)), tuple(sorted(PASS_OPTION_DEFAULTS.items())))
    found = _MEMO.get(key)
    if found is not None and all(_file_state(p) == state for p, state in found.files):
        _MEMO_RANK[key] = _MEMO_CLOCK[0] + found.seconds
        for d in found.diagnostics:
            diags.add(d)
        return found.compiled.copy(diags)
    start = len(diags.items)
    began = _clock()
    with recording_sources() as read:
        compiled = _compile(yaml_path, diags, verify_ir, choose, sources, lower, stop_after)
    seconds = _clock() - began
    files = tuple((p, _file_state(p)) for p in sorted(read) if p not in sources)
    if all(state is not None for _, state in files):
        _MEMO[key] = _Memo(files, tuple(diags.items[start:]), compiled.copy(Diagnostics()), seconds)
        _MEMO_RANK[key] = _MEMO_CLOCK[0] + seconds
        while len(_MEMO) > _MEMO_LIMIT:
            _evict()
    return compiled


def _evict() -> None:
    """Drop the entry of least rank, and age the rest by it (GreedyDual: an entry's rank is its
    compile time plus the clock at its last use). A spec that took seconds to compile outlives
    many that took milliseconds, yet one nobody asks for again ages out."""
    key = min(_MEMO_RANK, key=_MEMO_RANK.__getitem__)
    _MEMO_CLOCK[0] = _MEMO_RANK.pop(key)
    del _MEMO[key]


# The specs this process compiled, keyed by path, arguments and the pipeline, each with the state of
# every file its compile read: tests, the language server and `ptodsl gen` then `test` in one
# process compile the same specs many times, and a compile (a whole library: seconds) depends on
# nothing else. Edited files, another pass list or other pass defaults compile afresh.
_MEMO: dict[tuple, _Memo] = {}
_MEMO_RANK: dict[tuple, float] = {}
_MEMO_CLOCK = [0.0]
_clock = time.perf_counter
_MEMO_LIMIT = 200  # the library is 75 specs (about 300 MB with every pass's IR); a test process
# compiles a thousand small specs of its own between uses of the library, hence the ranks


def forget_compiled(*paths: str) -> None:
    """Compile the specs at ``paths`` (as given to compile_spec), or every spec, afresh from here
    on (a test of reproducibility compiles twice)."""
    for key in [k for k in _MEMO if not paths or k[0] in paths]:
        del _MEMO[key]
        del _MEMO_RANK[key]


@dataclass(frozen=True)
class _Memo:
    files: tuple[tuple[str, tuple | None], ...]
    diagnostics: tuple[Diagnostic, ...]
    compiled: Compiled
    seconds: float  # what compiling it took: what dropping it would cost


def _file_state(path: str) -> tuple | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return (len(data), hashlib.sha256(data).digest())


def _compile(yaml_path: str, diags: Diagnostics, verify_ir: bool, choose: bool, sources: Mapping[str, str],
             lower: bool, stop_after: str | None = None) -> Compiled:
    spec = load_spec(yaml_path, diags, sources)
    text = sources[spec.source] if spec.source in sources else read_source(spec.source, diags)
    module = parse_module(text, spec.source, diags) if text is not None else None
    if module is None:
        raise CompileError(diags.items)
    checked = check(module, spec, diags, sources)
    if diags.has_errors or not checked:
        raise CompileError(diags.items)
    target = load_target(spec.target)
    name = _module_name(spec, yaml_path)
    ir = tensorize.run(checked, name, target.name, spec.schedule)
    compiled = Compiled(spec, target, module, checked, diagnostics=diags)
    if choose and left_out(ir):
        ir, compiled.candidates = _chosen_schedule(ir, target, spec)
    ctx = PassContext(target, diags, spec.spans.value)
    repro = f"ptodsl ir {shlex.quote(spec.path)} --after {{pass_name}} --no-verify"
    compiled.stages["tensor"] = compiled.after["tensorize"] = ir
    if verify_ir:
        _verified(compiled, diags, "tensorize", ir, target, None, repro)
    if lower:
        _run_passes(compiled, ir, ctx, verify_ir, repro, _until(PASSES, stop_after))
    return compiled


def _until(passes: list[Pass], last: str | None) -> list[Pass]:
    """``passes`` up to and with the one called ``last`` (all of them if none is)."""
    names = [p.name for p in passes]
    return passes[:names.index(last) + 1] if last in names else passes


def with_schedule(compiled: Compiled, schedule: Schedule) -> Compiled:
    """``compiled`` lowered again from its Tensor IR with another schedule (``ptodsl tune``)."""
    ir = compiled.stages["tensor"].clone()
    reschedule(ir, schedule)
    diags = Diagnostics()
    again = Compiled(compiled.spec, compiled.target, compiled.module, compiled.checked, diagnostics=diags)
    again.stages["tensor"] = again.after["tensorize"] = ir
    repro = f"ptodsl ir {shlex.quote(compiled.spec.path)} --after {{pass_name}} --no-verify"
    _run_passes(again, ir, PassContext(compiled.target, diags, compiled.spec.spans.value), True, repro, PASSES)
    return again


@dataclass
class Lowered:
    """The IR that one run of the passes produced, from a spec or from a printed module."""

    stages: dict[str, Module] = field(default_factory=dict)  # level -> final IR of that level
    after: dict[str, Module] = field(default_factory=dict)  # pass name -> IR after it
    verify_seconds: float = 0.0  # time spent verifying the IR after each pass (reported by bench)


def lower_ir(path: str, diags: Diagnostics | None = None, verify_ir: bool = True,
             stop_after: str | None = None) -> Lowered:
    """Run the passes a printed module has not been through yet (``ptodsl ir --from``), the last
    of them ``stop_after`` if given. The module names its target, its schedule and the passes
    already applied, so nothing else is needed."""
    diags = diags if diags is not None else Diagnostics()
    text = read_text(path, diags)
    if text is None:
        raise CompileError(diags.items)
    register_source(path, text)
    try:
        ir = parse(text)
    except IRSyntaxError as exc:
        line, col = (exc.line or 1), (exc.col or 1)
        diags.error(E_IR_INPUT, f"not a printed ptodsl module: {exc.message}", Span(path, line, col, line, col + 1),
                    "here", help="give a file written by `ptodsl ir SPEC --stage tensor|tile|block` or `--after PASS`")
        raise CompileError(diags.items) from None
    done = passes_applied(ir)
    problem = _resume_problem(ir, done)
    if problem is None:
        try:
            verify(ir)
        except VerifyError as exc:
            problem = f"it breaks an IR invariant: {exc}"
    if problem is not None:
        diags.error(E_IR_INPUT, f"cannot resume compilation from this module: {problem}", Span(path, 1, 1, 1, 2),
                    "this module", help="give a file written by `ptodsl ir SPEC --stage ...` or `--after PASS`, "
                    "unedited")
        raise CompileError(diags.items)
    target = load_target(ir.attrs["target"])
    lowered = Lowered()
    lowered.after[done[-1]] = lowered.stages[ir.level] = ir
    rest = PASSES[len(done) - 1:]  # done is a prefix of tensorize + PASSES
    have = [prop for p in PASSES[:len(done) - 1] for prop in p.establishes]
    repro = f"ptodsl ir --from {shlex.quote(path)} --after {{pass_name}} --no-verify"
    _run_passes(lowered, ir, PassContext(target, diags), verify_ir, repro, _until(rest, stop_after), have)
    return lowered


def _resume_problem(ir: Module, done: tuple[str, ...]) -> str | None:
    """Why the passes cannot pick up ``ir`` where its ``passes`` attribute says it stopped, if so."""
    names = pass_names()
    if not done or list(done) != names[:len(done)]:
        return f"its `passes` attribute {list(done)} is not a prefix of the pipeline {names}"
    level = "tensor" if len(done) == 1 else PASSES[len(done) - 2].gives
    if ir.level != level:
        return f"it is {ir.level} IR, but after `{done[-1]}` the pipeline has {level} IR"
    if not isinstance(ir.attrs.get("target"), str) or ir.attrs["target"] not in target_names():
        return f"its `target` attribute names no known target (targets: {', '.join(target_names())})"
    return None


def _run_passes(into: Lowered | Compiled, ir: Module, ctx: PassContext, verify_ir: bool, repro: str,
                passes: list[Pass], have: list[str] | None = None) -> None:
    """Run ``passes`` from ``ir``, recording every pass's IR in ``into`` and verifying it, and stop at
    the first pass that reports an error."""
    try:
        check_pipeline(passes, ir.level, have or ())  # once more here: the list may have been edited (tests do)
    except ValueError as exc:
        ctx.diags.add(Diagnostic("E0990", f"internal compiler error: {exc}", None, "", (), (),
                                 "this is a bug in ptodsl: please report it with the spec"))
        raise CompileError(ctx.diags.items) from None
    for p in passes:
        ir = with_pass(p.run(ir, ctx), p.name)
        if ctx.diags.has_errors:
            raise CompileError(ctx.diags.items)
        into.after[p.name] = ir
        into.stages[p.gives] = ir
        if verify_ir:
            _verified(into, ctx.diags, p.name, ir, ctx.target, p.check, repro)


def _verified(into: Lowered | Compiled, diags: Diagnostics, pass_name: str, ir: Module, target: Target,
              proof: Callable | None, repro: str) -> None:
    """Every user spec gets the checks the tests run: the IR verifier after each pass and the pass's
    own proof (the sync checker after sync). A broken invariant is the compiler's bug, reported as
    one (E0990) with a command that shows the IR it broke, rather than a kernel that computes garbage."""
    start = time.perf_counter()
    span = None
    try:
        verify(ir)
        problem = None
        found = proof(ir, target) if proof is not None else []
        problem = str(found[0]) if found else None
    except VerifyError as exc:
        problem, span = str(exc), exc.span
    finally:
        into.verify_seconds += time.perf_counter() - start
    if problem is None:
        return
    diags.add(Diagnostic(
        "E0990", f"internal compiler error: the IR after `{pass_name}` breaks an invariant: {problem}", span,
        "the broken op was compiled from here" if span is not None else "", (),
        (f"repro: {repro.format(pass_name=pass_name)}",),
        "this is a bug in ptodsl, not in the spec: please report it with the spec and the repro command"))
    raise CompileError(diags.items)


_CHOSEN: dict[tuple, tuple[Schedule, list[Candidate]]] = {}  # one search per distinct kernel and cases


def _chosen_schedule(ir: Module, target: Target, spec: Spec) -> tuple[Module, list[Candidate]]:
    """``ir`` with the tiles the spec leaves out chosen by the cost model (``cost/choose.py``)."""
    cases = search_cases(ir, spec)
    key = (str(ir), target.name, repr(cases))
    if key not in _CHOSEN:
        _CHOSEN[key] = choose(ir, target, cases)
    chosen, tried = _CHOSEN[key]
    reschedule(ir, chosen, chosen=left_out(ir))
    return ir, tried


def search_cases(ir: Module, spec: Spec) -> list[Case]:
    """What schedules are compared on: per variant, its largest test shape (without one: every dim
    ``DEFAULT_DIM``)."""
    cases = []
    for f in ir.funcs:
        dims = {str(s) for p in f.params if p.is_tensor for d in p.type.shape for s in sym.free_symbols(d)}
        mine = [c for c in spec.tests if c.refuses is None
                and dims <= set(_case_dims(spec, c)) and variant_name(spec.variant_of(c)) == f.attrs.get("variant", "")]
        case = max(mine, key=lambda c: prod(c.shapes.values()), default=None)
        if case is None:
            cases.append(Case(f.name, dict.fromkeys(dims, DEFAULT_DIM), {}))
            continue
        reads: dict[str, Any] = {p.name: int((case.ranges.get(p.name) or case.data_range or (0, 1))[1])
                                 for p in f.params if p.is_tensor and (case.ranges.get(p.name) or case.data_range)}
        reads |= explicit_inputs(f, spec, case)
        cases.append(Case(f.name, _case_dims(spec, case), dict(case.scalars), reads))
    return cases


def case_symbols(spec: Spec, case: TestCase) -> dict[str, Any]:
    """The spec's symbols as a case binds them, with the dims the spec defines by others
    (``symbols: {D: 2*H}``); a symbol the case leaves unsized keeps the spec's entry."""
    full: dict[str, Any] = dict(spec.symbols) | dict(case.shapes)
    sym.bind_defined(spec.defined, full)
    return full


def _case_dims(spec: Spec, case: TestCase) -> dict[str, int]:
    """A case's shapes with the dims the spec defines by them."""
    full = case_symbols(spec, case)
    return {k: int(v) for k, v in full.items() if k not in spec.symbols or k in case.shapes}


def explicit_inputs(f: Func, spec: Spec, case: TestCase) -> dict[str, Any]:
    """The arrays a case's ``inputs:`` gives, as the golden harness makes them, so that the cost
    model reads the values that matter (segment offsets, indices) rather than a bound."""
    out: dict[str, Any] = {}
    env = _case_dims(spec, case)
    for p in f.params:
        entry = case.inputs.get(p.name)
        if entry is None or not isinstance(p.type, TensorType):
            continue
        try:
            shape = tuple(int(sym.evaluate(d, env)) for d in p.type.shape)
            out[p.name] = build_input(p.name, entry, shape, p.type.dtype, case_seed(spec.op, case), env, spec.folder)
        except (KeyError, InputError):
            continue  # the checker reported it; the model keeps its bound
    return out


def pass_names() -> list[str]:
    return ["tensorize"] + [p.name for p in PASSES]


def _module_name(spec: Spec, path: str) -> str:
    return spec.op or os.path.splitext(os.path.basename(path))[0]
