"""The op table is complete: every language op is implemented everywhere it must be.

Adding an op is one row of ``ptodsl/ops.py`` plus what these tests ask for, and each of them fails
while a piece is missing: a C++ function for each instruction the row names (in ptodsl's CPU subset
of pto-isa), a composite's template built only from known ops, a library spec that uses the op
(whose golden cases then run it on sim and cpu against an independent numpy reference), a line in
LANGUAGE.md, and a torch equivalent of that spec for ``ptodsl bench``."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.api import to_torch
from ptodsl.backends.cpp.build import HEADER_DIR
from ptodsl.diagnostics import CompileError
from ptodsl.driver import compile_spec
from ptodsl.frontend.spec import load_spec
from ptodsl.golden import as_ref_input, compare, load_reference, load_torch, make_inputs, tolerance
from ptodsl.ops import ANY, BINARY_SPELLING, COMPARE_SIM, OPS, TEMPLATE_COMPARES, OpDef, check_table

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
HEADER = "\n".join(p.read_text(encoding="utf-8") for p in sorted((HEADER_DIR / "pto").rglob("*.hpp")))
LANGUAGE = (ROOT / "docs" / "LANGUAGE.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def library_ops() -> dict[str, str]:
    """Language op -> a library spec whose Tensor IR uses it."""
    used: dict[str, str] = {}
    for path in SPECS:
        for op in compile_spec(path.relative_to(ROOT).as_posix()).after["tensorize"].walk():
            used.setdefault(op.name, path.name)
    return used


def template_ops(node) -> set[str]:
    if not isinstance(node, tuple):
        return set()
    name, *args = node
    if name == "let":
        return template_ops(args[1]) | template_ops(args[2])
    name = "cmp" if name in TEMPLATE_COMPARES else name  # a comparison node is a `cmp` in that mode
    return {name}.union(*(template_ops(a) for a in args))


@pytest.mark.parametrize("od", OPS.values(), ids=list(OPS))
def test_every_instruction_has_a_cpu_implementation(od: OpDef):
    for ins in (od.pto, od.pto_scalar, od.row_pto, od.col_pto, od.acc_pto):
        if ins is not None:
            assert re.search(rf"\b{ins}\s*\(", HEADER), f"`{od.name}` emits {ins}, which the CPU subset lacks"


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.expand is not None], ids=lambda o: o.name)
def test_every_composite_expands_into_known_ops(od: OpDef):
    unknown = template_ops(od.expand) - set(OPS)
    assert not unknown, f"`{od.name}` expands into unknown ops {unknown}"


def evaluate_template(node, names: dict):
    """A composite's template on numpy values, with the primitives' own ``sim``."""
    if isinstance(node, str):
        return names[node]
    if isinstance(node, float):
        return np.float64(node)
    name, *args = node
    if name == "let":
        var, value, body = args
        return evaluate_template(body, names | {var: evaluate_template(value, names)})
    vals = [evaluate_template(a, names) for a in args]
    if name in TEMPLATE_COMPARES:
        return COMPARE_SIM[name](*vals)
    od = OPS[name]
    return od.sim(*vals) if od.expand is None else evaluate_template(od.expand, dict(zip("xyz", vals)))


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.expand is not None], ids=lambda o: o.name)
def test_every_composite_template_computes_its_meaning(od: OpDef):
    x = np.linspace(-6.0, 6.0, 241)
    names = {"x": x, "y": x[::-1].copy(), "z": np.cos(x) + 1.0}
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(evaluate_template(od.expand, names),
                                   od.sim(*[names[n] for n in "xyz"[:od.arity]]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(OPS))
def test_every_op_is_used_by_a_library_spec(library_ops, name):
    assert name in library_ops, f"no spec in specs/ uses `{name}`: add one with a reference and test cases"


@pytest.mark.parametrize("od", OPS.values(), ids=list(OPS))
def test_every_op_has_a_line_in_the_language_doc(od: OpDef):
    spelling = {v: k for k, v in BINARY_SPELLING.items()}.get(od.name)
    if od.name == "cmp":
        assert "comparisons" in LANGUAGE
    elif spelling is not None:
        assert f"`{spelling}" in LANGUAGE or f" {spelling} " in LANGUAGE
    else:
        assert re.search(rf"[` ]{od.name}[` (]", LANGUAGE), f"LANGUAGE.md does not mention `{od.name}`"


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_library_spec_has_a_torch_equivalent_for_bench(path):
    spec = load_spec(str(path))
    assert spec.torch is not None, f"{path.name} names no torch equivalent (`torch:`) for `ptodsl bench`"
    assert callable(load_torch(spec))  # found without importing torch


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_torch_equivalent_computes_what_the_reference_does(path):
    """On the spec's first case, to the case's tolerance widened for torch's own rounding (torch
    computes half floats in their dtype, where the reference computes in f64)."""
    torch = pytest.importorskip("torch")
    op = ptodsl.load(str(path))
    case = op.spec.tests[0]
    inputs, scalars = make_inputs(op, case)
    want = load_reference(op.spec)(*[as_ref_input(inputs[p.name]) for p in op.inputs], **scalars)
    got = load_torch(op.spec)(*[to_torch(np.ascontiguousarray(inputs[p.name])) for p in op.inputs], **scalars)
    want = list(want) if isinstance(want, (tuple, list)) else [want]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(want), f"torch gives {len(got)} outputs, the reference {len(want)}"
    names = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}
    for i, (g, w) in enumerate(zip(got, want)):
        rtol, atol = tolerance(case, names.get(g.dtype, "i32"))
        g = g.to(torch.float64).numpy() if g.dtype.is_floating_point else g.numpy()
        report = compare(f"output {i}", g, np.asarray(w), 4 * rtol + 1e-6, 4 * atol + 1e-6)
        assert not report, report


def test_an_inconsistent_row_is_rejected():
    with pytest.raises(ValueError, match="reduction needs"):
        OpDef("prod", "reduce", 1, "product over one axis")
    with pytest.raises(ValueError, match="takes 2 operands"):
        OpDef("hypot", "binary", 1, "sqrt(x^2 + y^2)", "THYPOT")


def test_a_row_naming_unknown_or_inconsistent_ops_is_rejected():
    with pytest.raises(ValueError, match="only binary ops are commutative"):
        OpDef("exp2", "unary", 1, "2 ** x", "TEXP2", sim=np.exp2, commutative=True)
    with pytest.raises(ValueError, match="are not ptodsl dtypes"):
        OpDef("exp2", "unary", 1, "2 ** x", "TEXP2", sim=np.exp2, dtypes=("f64",))
    with pytest.raises(ValueError, match="needs `sim`"):
        OpDef("exp2", "unary", 1, "2 ** x", "TEXP2")
    with pytest.raises(ValueError, match="runs the instructions of the reduction"):
        OpDef("rms", "reduce", 1, "mean of squares", sim=np.mean, identity=0.0, combine="add",
              row_pto="TROWSUM", col_pto="TCOLSUM", mean_of="sum")
    prod = OpDef("prod", "reduce", 1, "product", sim=np.prod, identity=1.0, combine="mul",
                 row_pto="TROWPROD", col_pto="TCOLPROD")
    with pytest.raises(ValueError, match="combine 'sub' is not a commutative binary op"):
        check_table(OPS | {"prod": dataclasses.replace(prod, combine="sub")})
    with pytest.raises(ValueError, match="merges partials as sum does"):
        check_table(OPS | {"avg": OpDef("avg", "reduce", 1, "mean", sim=np.mean, identity=1.0, combine="add",
                                        mean_of="sum")})
    check_table(OPS | {"prod": prod})


RNG = np.random.default_rng(12)
SAMPLES = {"f32": RNG.uniform(-3, 3, 64).astype(np.float32), "i32": RNG.integers(-1000, 1000, 64, dtype=np.int32)}


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.kind == "binary"], ids=lambda o: o.name)
def test_commutative_is_true_of_the_ops_meaning(od: OpDef):
    # the emitter and the tiler put a commutative op's left scalar on the right: that must not
    # change the value
    x, y = SAMPLES["f32"], SAMPLES["f32"][::-1].copy()
    with np.errstate(invalid="ignore"):  # pow of a negative base
        assert od.commutative == bool(np.array_equal(od.sim(x, y), od.sim(y, x)))


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.kind == "reduce"], ids=lambda o: o.name)
@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_a_reductions_identity_is_neutral_for_its_combine(od: OpDef, dtype: str):
    if not od.takes(dtype):
        pytest.skip(f"{od.name} does not take {dtype}")
    x = SAMPLES[dtype]
    e = np.full_like(x, od.identity_for(dtype))
    assert np.array_equal(OPS[od.combine].sim(e, x), x)
    assert np.asarray(od.identity_for(dtype)).astype(x.dtype) == od.identity_for(dtype)  # fits the dtype


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.mean_of is not None], ids=lambda o: o.name)
def test_a_mean_is_its_reduction_over_the_extent(od: OpDef):
    x = SAMPLES["f32"].reshape(8, 8).astype(np.float64)
    assert np.allclose(od.sim(x, axis=1), OPS[od.mean_of].sim(x, axis=1) / 8)


@pytest.mark.parametrize("od", [o for o in OPS.values() if o.kind in ("unary", "binary") and o.dtypes != ANY],
                         ids=lambda o: o.name)
def test_the_checker_refuses_a_dtype_the_row_excludes(od: OpDef, tmp_path):
    wrong = next(d for d in ("i32", "f32", "bool") if not od.takes(d))
    args = ", ".join(["x"] * od.arity)
    (tmp_path / "k.pto").write_text(f"kernel k(x: {wrong}[M, N], y: out {wrong}[M, N]):\n    y[:] = {od.name}({args})\n")
    (tmp_path / "k.yaml").write_text("op: k\nschedule: {vec_tile: [8, 64]}\n")
    with pytest.raises(CompileError) as info:
        compile_spec(str(tmp_path / "k.yaml"))
    d = info.value.diagnostics[0]
    assert (d.code, d.message.split(",")[-1].strip()) == ("E0307", f"got {wrong}")


def test_explain_shows_an_ops_row(capsys):
    from ptodsl.cli import main

    assert main(["explain", "mean"]) == 0
    out = capsys.readouterr().out
    assert OPS["mean"].doc in out and "computed as `sum`" in out and "float dtypes only" in out


# Ops the fuzzer does not generate, each with the reason; a new op lands here or in the fuzzer.
NOT_FUZZED = {
    "erf": "the fuzzer's independent interpreter has no erf of its own yet",
    "bitwise_not": "integer only; the fuzzer generates float programs",
    "cmp": "generated as the comparisons inside `where`, not as a call",
}


def test_the_fuzzer_generates_every_op_or_says_why_not():
    from ptodsl.fuzz import gen, interp

    for name in gen.UNARY_SAFE + gen.UNARY_GUARDED + gen.ROUNDING + gen.MATH_OPS:
        od = OPS[name]
        assert name in {"unary": interp.UNARY, "binary": interp.BINARY, "ternary": interp.TERNARY}[od.kind], name
    for name in gen.LOGIC:
        assert OPS[name].dtypes == ("bool",) and name in interp.LOGIC, name
    for name in gen.REDUCERS:
        assert OPS[name].kind == "reduce" and name in interp.REDUCE, name
        # the interpreter is an independent oracle, but an empty reduction means the same in both
        assert interp.REDUCE[name][1] == OPS[name].identity, name
    spelled = {BINARY_SPELLING.get(k, k) for k in interp.BINARY}
    assert spelled | set(gen.LOGIC) >= {n for n, od in OPS.items() if od.kind == "binary"}
    covered = set(gen.UNARY_SAFE + gen.UNARY_GUARDED + gen.REDUCERS + gen.ROUNDING + gen.MATH_OPS + gen.LOGIC)
    covered |= spelled | {"cast", "where"}
    if gen.MATMUL_FEATURES <= gen.ALL_FEATURES:
        covered.add("matmul")  # ptodsl/fuzz/gen_matmul.py
    assert not set(NOT_FUZZED) & covered, "remove from NOT_FUZZED what the fuzzer generates now"
    missing = set(OPS) - covered - set(NOT_FUZZED)
    assert not missing, f"the fuzzer never generates {sorted(missing)}: add them to it, or to NOT_FUZZED with a reason"
