"""The spec model: ``NAME.yaml`` (docs/LANGUAGE.md §2) as frozen dataclasses, with positions.

:func:`parse_spec` turns text into a :class:`Spec` and reports every problem as a diagnostic;
:func:`load_spec` reads the file, checks that the ``.pto`` it belongs to exists and raises
:class:`CompileError` on errors. Each :class:`Spec` carries a :class:`SpanMap` so that later stages
(the checker, the schedule passes) can point their errors at the YAML key or value responsible.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import sym
from ..cases import TestCase
from ..diagnostics import CompileError, Diagnostics, Label, Span, register_source
from ..escape import BIDI_CONTROLS, unprintable
from ..schedule import PASS_OPTION_DEFAULTS, LoopSchedule, Schedule
from ..yamlio.nodes import YMap, YNode, YSeq, compose
from ..yamlio.schema import E_NAME, E_VALUE, Path, op_name_problem, validate
from .relations import definitions
from .schema import CUBE_AXES, DEFAULT_TARGET, spec_schema
from .text import MAX_SOURCE_BYTES, refuse_misleading, strip_bom

E_READ = "E0203"
E_EMPTY = "E0204"
E_NOT_MAPPING = "E0205"
E_MISSING_SOURCE = "E0215"
E_TEST_DTYPE_VAR = "E0216"
E_TEST_DTYPE_VARIANT = "E0217"
E_TEST_SHAPE = "E0218"
E_PATH = "E0219"
E_SUBMIT = "E0235"
MAX_SPEC_BYTES = MAX_SOURCE_BYTES  # the YAML and the .pto of a spec have one limit
ROOT_ENV = "PTODSL_SPEC_ROOT"



@dataclass(frozen=True)
class SpanMap:
    """Positions of every key and value of a spec, by key path.

    A path is a tuple of keys and list indices: ``("schedule", "loops", "b_loop", "unroll")``,
    ``("schedule", "vec_tile", 1)``, ``("tests", 0, "shapes", "B")``. The empty path is the whole
    document.
    """

    file: str
    entries: Mapping[Path, tuple[Span | None, Span]] = field(default_factory=dict)

    def key(self, path: Path) -> Span | None:
        """Where the key of ``path`` is written (None for list items and absent keys)."""
        entry = self.entries.get(tuple(path))
        return entry[0] if entry else None

    def value(self, path: Path) -> Span | None:
        """Where the value of ``path`` is written (None when absent)."""
        entry = self.entries.get(tuple(path))
        return entry[1] if entry else None

    def at(self, path: Path) -> Span:
        """The best place to report about ``path``: its value, its key, else its nearest parent."""
        path = tuple(path)
        while True:
            span = self.value(path) or self.key(path)
            if span is not None:
                return span
            if not path:
                return Span(self.file, 1, 1)
            path = path[:-1]

    def __contains__(self, path: object) -> bool:
        return path in self.entries

    @staticmethod
    def build(file: str, root: YNode) -> SpanMap:
        entries: dict[Path, tuple[Span | None, Span]] = {}

        def walk(node: YNode, path: Path, key: Span | None) -> None:
            entries[path] = (key, node.span)
            if isinstance(node, YMap):
                for pair in node.pairs:
                    walk(pair.value, (*path, pair.key.text), pair.key.span)
            elif isinstance(node, YSeq):
                for i, item in enumerate(node.items):
                    walk(item, (*path, i), None)

        walk(root, (), None)
        return SpanMap(file, entries)


@dataclass(frozen=True)
class Reference:
    file: str  # relative to the spec's folder, as written
    function: str


@dataclass(frozen=True)
class Backward:
    """``backward:``: the spec computing the op's gradients and the forward tensors it reads."""

    spec: str  # the backward YAML, relative to the forward spec's folder, as written
    saves: tuple[str, ...] = ()


@dataclass(frozen=True)
class Spec:
    path: str  # the YAML file, as given
    folder: str  # its folder ("." for a bare file name)
    op: str
    source: str  # path of the .pto file
    doc: str
    dtypes: dict[str, tuple[str, ...]]
    symbols: dict[str, int]
    schedule: Schedule
    target: str
    reference: Reference | None
    tests: tuple[TestCase, ...]
    spans: SpanMap = field(compare=False, repr=False)
    bench: tuple[TestCase, ...] = ()  # chip-filling cases, modelled and timed only (never golden-tested)
    torch: str | None = None  # a function of the reference file: the op in eager torch, for bench
    # dims defined by other dims (`symbols: {D: 2*H}`), in terms of dims no definition defines
    defined: dict[str, sym.Expr] = field(default_factory=dict)
    backward: Backward | None = None  # the spec of the op's gradients (docs/LANGUAGE.md §2.1)

    @property
    def reference_path(self) -> str | None:
        """The reference file's path (relative paths are relative to the spec's folder)."""
        return None if self.reference is None else os.path.normpath(os.path.join(self.folder, self.reference.file))

    @property
    def backward_path(self) -> str | None:
        """The backward spec's YAML path (relative paths are relative to the spec's folder)."""
        return None if self.backward is None else os.path.normpath(os.path.join(self.folder, self.backward.spec))

    def variant_of(self, case: TestCase) -> dict[str, str]:
        """The dtype variant a test case runs: its own dtypes, the first of each list otherwise."""
        return {k: case.dtypes.get(k, v[0]) for k, v in self.dtypes.items()}

    @property
    def source_given(self) -> bool:
        """Whether ``source:`` is written in the file (rather than defaulted)."""
        return ("source",) in self.spans


# ------------------------------------------------------------------ cross-field checks


def variant_name(variant: Mapping[str, str]) -> str:
    """``T=f16,U=f32``: how a dtype variant is written in IR attributes and messages."""
    return ",".join(f"{k}={v}" for k, v in sorted(variant.items()))


def _check_loops(data: dict[str, Any], spans: SpanMap, diags: Diagnostics) -> None:
    loops = (data.get("schedule") or {}).get("loops") or {}
    for name, loop in loops.items():
        if isinstance(loop, dict) and loop.get("submit_before_loop") is True:
            path = ("schedule", "loops", name, "submit_before_loop")
            diags.error(
                E_SUBMIT, "`submit_before_loop: true` is not supported", spans.value(path) or spans.at(path),
                "ptodsl would ignore it", notes=["the control program launches each iteration's kernels as "
                                                 "it reaches them; there is no earlier submission point to move"],
                help="remove the key (`false`, the default, is what ptodsl does)",
            )


def _check_tests(data: dict[str, Any], spans: SpanMap, diags: Diagnostics, key: str = "tests") -> None:
    declared: dict[str, Any] = data.get("dtypes", {})
    symbols: dict[str, int] = data.get("symbols", {})
    what = "test" if key == "tests" else "bench case"
    for i, test in enumerate(data.get(key) or []):
        if not isinstance(test, dict):  # reported already
            continue
        for var, dtype in test.get("dtypes", {}).items():
            path = (key, i, "dtypes", var)
            if var not in declared:
                if ("dtypes", var) in spans:  # declared, with a value reported as invalid already
                    continue
                diags.error(
                    E_TEST_DTYPE_VAR, f"{what} {i} binds `{var}`, which `dtypes:` does not declare",
                    spans.key(path), "not a declared dtype variable",
                    help=(f"declared dtype variables: {', '.join(declared)}" if declared else
                          f"declare it, e.g. `dtypes: {{{var}: [{dtype}]}}`"),
                )
                continue
            variants = declared[var] if isinstance(declared[var], list) else [declared[var]]
            if dtype not in variants:
                diags.error(
                    E_TEST_DTYPE_VARIANT, f"{what} {i} uses `{var} = {dtype}`, which is not a declared variant",
                    spans.value(path), f"`{var}` is one of {', '.join(variants)}",
                    secondary=[Label(spans.at(("dtypes", var)), f"variants of `{var}` declared here")],
                    help=f"add `{dtype}` to the variants of `{var}`, or test one of them",
                )
        for dim, value in test.get("shapes", {}).items():
            if dim in symbols and symbols[dim] != value:
                path = (key, i, "shapes", dim)
                diags.error(
                    E_TEST_SHAPE, f"{what} {i} sets `{dim} = {value}`, but `symbols:` fixes `{dim} = {symbols[dim]}`",
                    spans.value(path), "conflicts with the fixed value",
                    secondary=[Label(spans.at(("symbols", dim)), "fixed here")],
                    help=f"remove `{dim}` from the test's shapes",
                )
        low_high = test.get("data_range")
        if low_high is not None and not low_high[0] < low_high[1]:
            diags.error(
                E_VALUE, f"`{key}[{i}].data_range` must be [low, high] with low < high, found {low_high}",
                spans.value((key, i, "data_range")), "low must be below high",
            )


# ------------------------------------------------------------------ model building


def _tuple(value: Any) -> tuple | None:
    return None if value is None else tuple(value)


def _build(data: dict[str, Any], path: str, op: str, spans: SpanMap, defined: dict[str, sym.Expr]) -> Spec:
    folder = os.path.dirname(path) or "."
    source = os.path.normpath(os.path.join(folder, data.get("source", f"{op}.pto")))
    sched = data.get("schedule", {})
    cube = sched.get("cube_tile")
    schedule = Schedule(
        vec_tile=_tuple(sched.get("vec_tile")),
        cube_tile=None if cube is None else {axis: (v[0], v[1]) for axis, v in cube.items() if axis in CUBE_AXES},
        split_k=1 if cube is None else cube.get("split_k", 1),
        loops={
            name: LoopSchedule(_tuple(loop.get("unroll")), _tuple(loop.get("vec_tile")), loop.get("submit_before_loop"))
            for name, loop in sched.get("loops", {}).items()
        },
        valid_shapes={name: tuple(dims) for name, dims in sched.get("valid_shapes", {}).items()},
        # booleans become 0/1: the options travel as integers in the IR's attributes
        pass_options={**PASS_OPTION_DEFAULTS, **{k: int(v) for k, v in sched.get("pass_options", {}).items()}},
        max_dims=dict(data.get("max_dims", {})),
        nondecreasing=tuple(data.get("nondecreasing", ())),
    )
    reference = None
    if "reference" in data:
        file, function = data["reference"].rsplit(":", 1)
        reference = Reference(file, function)
    tests, bench = (tuple(
        TestCase(
            index=i,
            shapes=dict(t.get("shapes", {})),
            dtypes=dict(t.get("dtypes", {})),
            scalars=dict(t.get("scalars", {})),
            rtol=t.get("rtol"),
            atol=t.get("atol"),
            seed=t.get("seed"),
            data_range=_tuple(t.get("data_range")),
            ranges={k: tuple(v) for k, v in t.get("ranges", {}).items()},
            name=t.get("name"),
            inputs=dict(t.get("inputs", {})),
            refuses=t.get("refuses"),
        )
        for i, t in enumerate(data.get(key, []))
    ) for key in ("tests", "bench"))
    backward = None
    if "backward" in data:
        backward = Backward(data["backward"]["spec"], tuple(data["backward"].get("saves", ())))
    return Spec(
        path=path,
        folder=folder,
        op=op,
        source=source,
        doc=data.get("doc", ""),
        dtypes={k: tuple(v) if isinstance(v, list) else (v,) for k, v in data.get("dtypes", {}).items()},
        symbols=dict(data.get("symbols", {})),
        defined=defined,
        schedule=schedule,
        target=data.get("target", DEFAULT_TARGET),
        reference=reference,
        tests=tests,
        bench=bench,
        spans=spans,
        torch=data.get("torch"),
        backward=backward,
    )


def _stem(path: str) -> str:
    base = os.path.basename(path)
    return base.rsplit(".", 1)[0] if "." in base else base


def parse_spec(text: str, path: str, diags: Diagnostics) -> Spec | None:
    """Parse the text of a spec file; every problem goes to ``diags``; None when there were errors.

    Never raises on user input. Does not look at other files (see :func:`load_spec`).
    """
    before = len(diags.errors)
    text = strip_bom(text)  # PyYAML would skip it too, but count it in the columns of line 1
    if len(text) > MAX_SPEC_BYTES:
        diags.error(E_READ, f"spec file `{path}` is larger than {MAX_SPEC_BYTES >> 20} MiB", Span(path, 1, 1),
                    "far too long for a spec", help="a spec is a short YAML file; check that this is the right file")
        return None
    if not refuse_misleading(text, path, diags):
        # shown with those characters blanked: a terminal would reorder the line, or break it
        register_source(path, "".join(" " if c in BIDI_CONTROLS or c in "\u2028\u2029" else c for c in text))
        return None
    root = compose(text, path, diags)
    if root is None:
        if len(diags.errors) == before:
            diags.error(E_EMPTY, f"spec file `{path}` is empty", Span(path, 1, 1), "no YAML document here",
                        help=f"write at least `op: {_stem(path)}`; see docs/LANGUAGE.md §2")
        return None
    if not isinstance(root, YMap):
        found = "a list" if isinstance(root, YSeq) else "a single value"
        diags.error(E_NOT_MAPPING, f"a spec file must be a mapping of keys, found {found}", root.span,
                    "expected `key: value` lines here",
                    help="write the keys (`op:`, `dtypes:`, `schedule:`, ...) at the top level, without `-`")
        return None
    spans = SpanMap.build(path, root)
    data = validate(spec_schema(), root, diags)
    op = data.get("op")
    if op is None and ("op",) not in spans:
        op = _stem(path)
        problem = op_name_problem(op)
        if problem is not None:
            diags.error(E_NAME, f"the op name defaults to the file stem `{op}`, which is not a valid name",
                        Span(path, 1, 1), problem, help="add an `op:` key with a valid name")
    symbols = data.get("symbols", {})
    fixed = {k: v for k, v in symbols.items() if isinstance(v, int)}
    defined = definitions({k: v for k, v in symbols.items() if isinstance(v, str)}, fixed, spans, diags)
    data["symbols"] = fixed  # the cross-field checks compare test shapes with the fixed values
    _check_tests(data, spans, diags)
    _check_tests(data, spans, diags, "bench")
    _check_loops(data, spans, diags)
    if len(diags.errors) > before or op is None:
        return None
    return _build(data, path, op, spans, defined)


def spec_root(spec_path: str) -> str:
    """The folder files named by a spec must lie in: $PTODSL_SPEC_ROOT, else the spec's own folder."""
    return os.environ.get(ROOT_ENV) or os.path.dirname(spec_path) or "."


def outside_root(path: str, root: str) -> bool:
    """Whether ``path`` (after resolving ``..`` and symbolic links) lies outside ``root``."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, base]) != base


def path_problem(path: str) -> str | None:
    """Why a file name cannot be used (it reaches generated code and reports), or None."""
    bad = unprintable(path)
    if bad is not None:
        return f"the path contains the control character U+{ord(bad):04X}"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "the path is not valid UTF-8"
    return None


def check_spec_files(spec: Spec, diags: Diagnostics) -> None:
    """Every file a spec names (its source, reference, backward spec and the .npy inputs of its
    cases) lies inside its root; reported as E0219."""
    root = spec_root(spec.path)
    named = [(spec.source, ("source",), "`source:`")]
    if spec.reference_path is not None:
        named.append((spec.reference_path, ("reference",), "`reference:`"))
    if spec.backward_path is not None:
        named.append((spec.backward_path, ("backward", "spec"), "`backward.spec:`"))
    for case in spec.tests:
        for name, entry in case.inputs.items():
            if "file" in entry:
                named.append((os.path.normpath(os.path.join(spec.folder, entry["file"])),
                              ("tests", case.index, "inputs", name), f"`tests[{case.index}].inputs.{name}`"))
    for path, key, what in named:
        problem = path_problem(path)
        if problem is None and outside_root(path, root):
            problem = f"`{path}` lies outside `{root}`"
        if problem is None:
            continue
        span = spec.spans.at(key) if key in spec.spans else (spec.spans.key(("op",)) or Span(spec.path, 1, 1))
        diags.error(E_PATH, f"{what} of op `{spec.op}` names a file that is not allowed: {problem}", span,
                    "outside the spec's folder" if "outside" in problem else "not a usable file name",
                    help=f"keep the file in the spec's folder (or a sub-folder), or set {ROOT_ENV} to a folder "
                         "that holds it")


def _read(path: str, diags: Diagnostics) -> str | None:
    problem = path_problem(path)
    if problem is not None:
        diags.error(E_PATH, f"cannot use the spec file `{path!r}`: {problem}", None,
                    help="rename the file: spec paths appear in generated code and in reports")
        return None
    try:
        if os.path.getsize(path) > MAX_SPEC_BYTES:
            diags.error(E_READ, f"spec file `{path}` is larger than {MAX_SPEC_BYTES >> 20} MiB", None,
                        help="a spec is a short YAML file; check that this is the right file")
            return None
        with open(path, "rb") as f:
            raw = f.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        diags.error(E_READ, f"cannot read spec file `{path}`: {exc.strerror or exc}", None,
                    help="check the path and the file's permissions")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("utf-8", errors="replace")
        register_source(path, shown)
        line = raw[: exc.start].count(b"\n") + 1
        col = len(raw[raw.rfind(b"\n", 0, exc.start) + 1 : exc.start].decode("utf-8", errors="replace")) + 1
        diags.error(E_READ, f"spec file `{path}` is not UTF-8 text", Span(path, line, col),
                    f"byte 0x{raw[exc.start]:02x} is not valid UTF-8", help="save the file as UTF-8")
        return None


def load_spec(path: str, diags: Diagnostics | None = None, sources: Mapping[str, str] | None = None) -> Spec:
    """Read and parse a spec file and check that its ``.pto`` exists.

    Raises :class:`CompileError` with every diagnostic when there is an error; warnings and notes go
    to ``diags`` when given. ``sources`` maps normalised paths to texts that stand in for the files
    (an editor's unsaved buffers).
    """
    diags = diags if diags is not None else Diagnostics()
    sources = sources or {}
    before = len(diags.errors)
    algorithm = None
    if path.endswith(".pto") and path not in sources:
        # `ptodsl ir NAME.pto` is what a user types first: take the spec beside it
        algorithm, path = path, path[:-len(".pto")] + ".yaml"
        if not os.path.isfile(path) and path not in sources:
            diags.error(E_READ, f"`{algorithm}` is an algorithm file, and no spec `{path}` sits beside it", None,
                        help="pass the spec (NAME.yaml) whose `source:` names this file")
            raise CompileError(diags.items)
    text = sources[path] if path in sources else _read(path, diags)
    spec = parse_spec(text, path, diags) if text is not None else None
    if spec is not None:
        check_spec_files(spec, diags)
    if spec is not None and algorithm is not None and os.path.normpath(spec.source) != os.path.normpath(algorithm):
        diags.error(E_READ, f"`{algorithm}` is an algorithm file, and the spec beside it, `{path}`, compiles "
                            f"`{spec.source}` instead", None,
                    help="pass the spec (NAME.yaml) whose `source:` names this file")
    if (spec is not None and not diags.errors[before:] and not os.path.isfile(spec.source)
            and spec.source not in sources):
        if spec.source_given:
            span = spec.spans.at(("source",))
            label = "no such file"
            help = f"expected `{spec.source}` (relative to the spec's folder); create it or fix `source:`"
        else:
            span = spec.spans.key(("op",)) or Span(path, 1, 1)
            label = "the algorithm file is named after this op" if ("op",) in spec.spans else "no such file"
            help = f"expected `{spec.source}` beside the spec; create it, or name another file with `source:`"
        diags.error(E_MISSING_SOURCE, f"the .pto file of op `{spec.op}` does not exist: `{spec.source}`",
                    span, label, help=help)
    if len(diags.errors) > before or spec is None:
        raise CompileError(diags.items)
    return spec


__all__ = [
    "PASS_OPTION_DEFAULTS",
    "Backward",
    "LoopSchedule",
    "Reference",
    "Schedule",
    "Spec",
    "SpanMap",
    "TestCase",
    "check_spec_files",
    "load_spec",
    "outside_root",
    "parse_spec",
    "spec_root",
    "variant_name",
]
