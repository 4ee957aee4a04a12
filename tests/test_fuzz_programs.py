"""Differential random-program testing: a fixed seed set, the shrinker and the oracle itself.

The seed set: 200 one-block programs run on the interpreter and the simulator (poison on), spread
over two processes, plus 60 two-block programs that also run on the CPU backend. The CPU side is a
subset because each build costs compiler time: the 60 programs are built as two shared libraries
(one per core, many programs per translation unit, at -O0), about ten seconds in all, where one
library per program would take a minute. ``ptodsl fuzz --count N`` runs more, with every feature.

The seed set runs every generator feature (``SAFE_FEATURES`` is all of them while
ptodsl.fuzz.gen.KNOWN_BUG_FEATURES and FOUND_BUG_FEATURES are empty), including those that found
the bugs this suite guards: stale loop indices in unrolled copies, flooring `/`, one-row broadcast
writes, valid extents outside their view (refused at the call, E0711), loop_unroll bodies ignoring
k, lower-rank writes, `where` under vec tiles whose row is not a whole number of bool blocks,
views and element reads at row indices read from a tensor (refused as lengths when inside the
tensor; read outside it by the cpu backend when not; the call must stop there, E0730), and control
driven by data: trip counts, extents and conditions from values read from tensors, at another loop
depth than the read (an integer written into an i32 output wrapped on the cpu backend and
saturated on the simulator; a corrupt length must stop the call, E0870).
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing as mp
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from ptodsl import ops
from ptodsl.fuzz import interp
from ptodsl.fuzz.cli import features_text
from ptodsl.fuzz.gen import ALL_FEATURES, FOUND_BUG_FEATURES, KNOWN_BUG_FEATURES, SAFE_FEATURES, generate
from ptodsl.fuzz.interp import interpret
from ptodsl.fuzz.run import Outcome, Prepared, compare, prepare, run_programs
from ptodsl.fuzz.shrink import shrink

ROOT = Path(__file__).resolve().parents[1]
# one block each: interpreter vs simulator; the seeds past 200 hold constructs the first 200 miss (a
# matmul of computed operands, a zeros accumulator, loops from 1 and of a clamped trip count, a branch
# on a tensor element)
SIM_SEEDS = (*range(0, 200), 226, 248, 303, 556, 1018, 1540)
CPU_SEEDS = range(100_000, 100_060)  # two blocks each: interpreter vs simulator vs CPU
FEATURES = SAFE_FEATURES
# the regression seeds' programs as the generator drew them when they were found: a feature added
# since draws from a stream of its own, but changes the programs of the seeds it applies to
AS_FOUND = ALL_FEATURES - {"kernel_budget", "mm_end", "ub_pressure"}


def _sim_chunk(seeds: list[int]) -> tuple[list[dict], int]:
    """The outcomes, and how many launches the simulator ran as one batched evaluation of their blocks."""
    from ptodsl.backends.sim import batch

    programs = [generate(s, FEATURES, max_blocks=1) for s in seeds]
    before = batch.STATS.launches
    outcomes = [dataclasses.asdict(o) for o in run_programs(programs, ("sim",))]
    return outcomes, batch.STATS.launches - before


def _explain(failures: list[Outcome], backends: tuple[str, ...], max_blocks: int) -> str:
    """Each distinct failure, shrunk (for at most a minute in all), with a command that repeats it."""
    import time

    deadline = time.monotonic() + 60
    seen: dict = {}
    for o in failures:
        seen.setdefault(o.signature(), o)
    parts = []
    for sig, o in seen.items():
        def fails(p, sig=sig) -> bool:
            return time.monotonic() < deadline and run_programs([p], backends)[0].signature() == sig

        small = shrink(generate(o.seed, FEATURES, max_blocks), fails)
        be = "both" if "cpu" in backends else "sim"
        parts.append(f"--- {o.kind} ({o.backend}), seed {o.seed}:\n{o.detail[-1500:]}\n--- shrunk:\n"
                     f"{small.pto()}{small.yaml()}repro: ptodsl fuzz --count 1 --seed {o.seed} --features safe "
                     f"--backend {be} --max-blocks {max_blocks}")
    return "\n".join(parts)


# the everyday suite runs the first part of each seed set (and the seeds past 200); `-m slow` the rest
SIM_HALVES = {"everyday": [s for s in SIM_SEEDS if not 60 <= s < 200], "rest": list(range(60, 200))}
CPU_HALVES = {"everyday": list(CPU_SEEDS[:18]), "rest": list(CPU_SEEDS[18:])}
HALVES = ["everyday", pytest.param("rest", marks=pytest.mark.slow)]


@pytest.mark.parametrize("half", HALVES)
def test_seed_set_interpreter_vs_simulator(half: str):
    seeds = SIM_HALVES[half]
    chunks = [seeds[0::2], seeds[1::2]]
    with mp.get_context("fork").Pool(2) as pool:
        done = pool.map(_sim_chunk, chunks)
    results = [Outcome(**d) for chunk, _ in done for d in chunk]
    assert len(results) == len(seeds)
    failures = [o for o in results if o.kind != "ok"]
    assert not failures, _explain(failures, ("sim",), 1)
    # row loops run as blocks of one launch, which the simulator evaluates batched: the oracle
    # checks that path too
    assert sum(n for _, n in done) >= 4


@pytest.mark.cpu
@pytest.mark.parametrize("half", HALVES)
def test_seed_set_interpreter_vs_simulator_vs_cpu(tmp_path_factory, monkeypatch, half: str):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-cache")))
    results = run_programs([generate(s, FEATURES, max_blocks=2) for s in CPU_HALVES[half]], ("sim", "cpu"))
    failures = [o for o in results if o.kind != "ok"]
    assert not failures, _explain(failures, ("sim", "cpu"), 2)


def test_the_seed_set_covers_the_language():
    """The fixed seeds exercise every safe feature's constructs, so a feature cannot silently vanish."""
    text = "\n".join(generate(s, FEATURES, max_blocks=1).pto() + generate(s, FEATURES, max_blocks=1).yaml()
                     for s in SIM_SEEDS)
    text += "\n".join(generate(s, FEATURES, max_blocks=2).pto() for s in CPU_SEEDS)
    for construct in ("for r in loop(", "is_loop_begin(r)", "is_loop_end(r)", "tensor([1, N], f32)",
                      "valid_shape=[1, n", "valid_shapes:", "for i, k in loop_unroll(", "unroll: [",
                      "cast(", "where(", "keepdim=True", "dim=0)", "dim=-1)", "T: [f16]", "T: [bf16]",
                      "T: [f32]", "for b in loop(B", "elif ", "rv", "cv[", ", s", ":N - ", ".move(", ".assemble(",
                      "zeros([1, N], f32)", "loop(1, M", "= x1[r, ", "view(x0, [1, N], [g", "= x0[g",
                      " = x1[g", "* x1[g",
                      # the cube: batches, transposes, out_dtype, bias, int8, split-K, a computed operand
                      "= matmul(", "T[B, H, ", "T[B, 1, ", "trans_a=True", "trans_b=True", "out_dtype=T",
                      "bias=v", "i8[", "out i32[", "split_k: ", "matmul(cast(", "matmul(where(",
                      # epilogues the cube takes over (passes/epilogue.py) and forms it must leave
                      "relu(matmul(", ") + u", "+ matmul(",
                      # scatters whose positions are declared unique
                      "unique_indices=True",
                      # bounded dims: tiles span them, loops' accumulators stay on chip (passes/promote.py)
                      "max_dims: {N: ", "max_dims: {M: ",
                      # data-driven control: trip counts, extents, conditions and fills from reads
                      "for j in loop(cdiv(n", "for j in loop(cdiv(lens[r]", "loop(cdiv(min(", "= min(n",
                      "[r, 0] = n", "if x1[r, 0] > 0.0:", "for q in loop(cdiv(cu[sg + 1] - st",
                      "valid_shape=[min(cu[sg + 1]",
                      # a later loop reading a top-level local only through a view of it
                      "= permute(z",
                      # loops carrying only accumulations, split into partials (passes/splitred.py)
                      "[:] = maximum(acc", "[:] = minimum(row",
                      # compiler switches that must not change results
                      "multiply_add: true", "double_buffer: false", "fused_ops: false", "row_interchange: true",
                      # a product in a loop carrying an f32 state (mixed kernels with row_interchange)
                      'name="S1"'):
        assert construct in text, construct


def test_data_driven_programs_run_and_stop_where_they_must(tmp_path):
    """The data-driven blocks run, stop at an access outside a tensor (E0730), stop before a loop
    of a corrupt trip count (E0870) and, with segment offsets declared nondecreasing, refuse ones
    that go down before any kernel runs (E0732), each on some seed, and the simulator agrees every
    time."""
    from ptodsl.fuzz.run import Prepared, prepare, run_sim

    feats = frozenset({"data_trips", "data_conds", "data_cu", "tails"})
    seen, failures = set(), []
    for seed in range(300, 320):
        prep = prepare(generate(seed, feats, max_blocks=1), str(tmp_path))
        if not isinstance(prep, Prepared):
            assert prep.kind == "ok" and prep.backend == "call" and "nondecreasing" in prep.detail, prep
            seen.add("E0732")
            continue
        seen.add(prep.stop_code if prep.stop is not None else "runs")
        outcome = run_sim(prep)
        if outcome is not None and outcome.kind != "ok":
            failures.append(outcome)
    assert seen == {"runs", "E0730", "E0870", "E0732"}
    assert not failures, "\n".join(f"{o.seed}: {o.kind} {o.detail}" for o in failures)


# Programs the fuzzer found refused on the cpu backend after every pass had accepted them, each with
# its fix: a bounded dim's one-tile op at a valid extent read at run time that may be 0 (pto-isa
# takes no tile of no columns: tiling keeps the loop of 0 or 1 trips), and a kernel whose held tile
# left no room for an instruction's scratch above the plan (the trial counts the scratch)
REFUSED_ON_CPU = (7550268, 7550543)


@pytest.mark.cpu
@pytest.mark.slow
def test_programs_once_refused_on_cpu_run_everywhere(tmp_path_factory, monkeypatch):
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-cache")))
    results = run_programs([generate(s, AS_FOUND) for s in REFUSED_ON_CPU], ("sim", "cpu"))
    failures = [o for o in results if o.kind != "ok"]
    assert not failures, _explain(failures, ("sim", "cpu"), 3)


def test_known_bug_features_are_off_in_the_seed_set():
    assert not set(KNOWN_BUG_FEATURES) & FEATURES
    assert not set(FOUND_BUG_FEATURES) & FEATURES
    assert set(KNOWN_BUG_FEATURES) | set(FOUND_BUG_FEATURES) | FEATURES == ALL_FEATURES


def test_generation_is_reproducible():
    for s in (1, 77, 4242):
        a, b = generate(s, ALL_FEATURES), generate(s, ALL_FEATURES)
        assert (a.pto(), a.yaml(), a.shapes) == (b.pto(), b.yaml(), b.shapes)


def _planted_exp_bug(monkeypatch) -> None:
    """The simulator's exp off by 5%: a wrong answer that only an independent oracle can see."""
    od = ops.OPS["exp"]
    monkeypatch.setitem(ops.OPS, "exp", dataclasses.replace(od, sim=lambda x: np.exp(x) * 1.05))


def _through_exp(name: str) -> bool:
    """Whether op ``name`` is exp or is lowered (its ``expand``, recursively) into one."""
    def tree(node) -> bool:
        if isinstance(node, tuple):
            return any(tree(n) for n in node)
        return isinstance(node, str) and node in ops.OPS and _through_exp(node)
    od = ops.OPS.get(name)
    return name == "exp" or (od is not None and od.expand is not None and tree(od.expand))


def _computes_exp(text: str) -> bool:
    """Whether a program calls exp or an op the compiler lowers through it (gelu, sigmoid, ...)."""
    return any(f"{n}(" in text for n in ops.OPS if _through_exp(n))


@functools.cache
def _exp_seed() -> int:
    """An f32 program of several blocks computing exp whose outputs show its error (a clip or a
    rounding op can hide it: clip(exp(x), lo, hi) with hi below exp(x) does not depend on exp; a
    half-float tolerance can swallow it; a loop the case's shapes run zero times never computes
    it). The last is asked of the interpreter: with its own exp off by 5%, its outputs change. And
    the program runs to the end: no data-dependent valid extent or index tensor, which the call
    could refuse (E0711, E0730) for the shapes and data of a shrunk copy."""
    def fits(p) -> bool:
        text = p.pto()
        return (p.dtype == "f32" and len(p.blocks) >= 2 and "exp(" in text and "valid_shape=[1, n" not in text
                and not any(q.index_of for q in p.params.values())
                and not any(f"{op}(" in text for op in ("clip", "sign", "round", "floor", "ceil", "trunc")))

    def shows_exp(p) -> bool:
        with tempfile.TemporaryDirectory() as d:
            base = prepare(p, d)
        with mock.patch.dict(interp.UNARY, {"exp": lambda x: np.exp(x) * 1.05}), \
                tempfile.TemporaryDirectory() as d:
            bent = prepare(p, d)
        if not isinstance(base, Prepared) or not isinstance(bent, Prepared) or base.stop or bent.stop:
            return False
        return any(compare(bent.expected[o], base.expected[o], base.dtypes[o]) for o in base.outputs)

    return next(s for s in range(1000) if fits(p := generate(s, FEATURES, max_blocks=3)) and shows_exp(p))


def test_a_planted_wrong_answer_is_a_mismatch(monkeypatch):
    seed = _exp_seed()
    program = generate(seed, FEATURES, max_blocks=3)
    assert run_programs([program], ("sim",))[0].kind == "ok"
    _planted_exp_bug(monkeypatch)
    outcome = run_programs([program], ("sim",))[0]
    assert outcome.kind == "mismatch" and outcome.backend == "sim", outcome.detail


def test_the_shrinker_keeps_the_failure_and_drops_the_rest(monkeypatch):
    _planted_exp_bug(monkeypatch)
    program = generate(_exp_seed(), FEATURES, max_blocks=3)
    signature = run_programs([program], ("sim",))[0].signature()
    tries = []

    def fails(p) -> bool:
        tries.append(p)
        return run_programs([p], ("sim",))[0].signature() == signature

    small = shrink(program, fails, max_tries=150)
    assert _computes_exp(small.pto())
    assert run_programs([small], ("sim",))[0].signature() == signature
    assert len(small.blocks) == 1 < len(program.blocks)
    assert len(small.pto()) < len(program.pto())
    assert small.shapes["M"] <= program.shapes["M"]


# ------------------------------------------------------------------ the oracle against the library


def _spec_case(name: str, shapes: dict[str, int], variant: dict[str, str], data: dict[str, np.ndarray],
               scalars: dict | None = None) -> dict[str, np.ndarray]:
    from ptodsl.frontend.parser import parse_file
    from ptodsl.frontend.spec import load_spec

    spec = load_spec(str(ROOT / "specs" / f"{name}.yaml"))
    kernel = parse_file(spec.source).kernel(spec.op)
    arrays = dict(data)
    env = {**spec.symbols, **shapes}
    for p in kernel.params:
        if p.is_tensor and p.name not in arrays:
            dims = tuple(d.value if isinstance(d.value, int) else env[d.value] for d in p.dims)
            arrays[p.name] = np.full(dims, np.nan, np.float32)
    interpret(kernel, variant, env, arrays, scalars or {}, spec.schedule.valid_shapes)
    return arrays


def test_the_interpreter_agrees_with_the_library_references():
    import importlib.util

    loader = importlib.util.spec_from_file_location("fuzz_refs", ROOT / "specs" / "refs.py")
    refs = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(refs)
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (5, 1024)).astype(np.float32)
    got = _spec_case("softmax", {"B": 5}, {"T": "f32"}, {"x": x})["y"]
    np.testing.assert_allclose(got, refs.softmax(x), rtol=1e-5, atol=1e-6)
    x = rng.uniform(-1, 1, (6, 70)).astype(np.float32)
    got = _spec_case("tensor_sum", {"B": 6, "N": 70}, {"T": "f32"}, {"x": x})["y"]
    np.testing.assert_allclose(got, refs.sum_cols(x), rtol=1e-5, atol=1e-6)
    inp = rng.uniform(-1, 1, (3, 13, 100)).astype(np.float32)
    act = np.array([0, 5, 13], np.int32)
    out = rng.uniform(-1, 1, (3, 13, 100)).astype(np.float32)
    got = _spec_case("seq_add", {"B": 3, "S": 13, "H": 100}, {}, {"inp": inp, "act_seqs": act, "out": out.copy()})
    np.testing.assert_allclose(got["out"], refs.seq_add(inp, act, out), rtol=1e-6)
    q, k, v = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((17, 32), (128, 32), (128, 32)))
    got = _spec_case("online_softmax_attn", {"S": 17, "D": 32, "L": 128}, {"T": "f32"},
                     {"q": q, "k": k, "v": v}, {"scale": 0.17})["o"]
    np.testing.assert_allclose(got, refs.attention(q, k, v, scale=0.17), rtol=1e-4, atol=1e-5)
    # the cube's forms: batch broadcast, both outputs of bmm, a bias, int8 exact, multi-head attention
    a, b = rng.uniform(-1, 1, (2, 3, 9, 20)).astype(np.float32), rng.uniform(-1, 1, (3, 20, 11)).astype(np.float32)
    got = _spec_case("bmm", {"B": 2, "H": 3, "M": 9, "K": 20, "N": 11}, {"T": "f32"}, {"a": a, "b": b})
    np.testing.assert_allclose(got["c"], refs.bmm(a, b)[0], rtol=1e-5, atol=1e-5)
    x, w, bias = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((7, 30), (12, 30), (12,)))
    got = _spec_case("matmul_bias", {"M": 7, "K": 30, "N": 12}, {"T": "f32"}, {"x": x, "w": w, "bias": bias})["y"]
    np.testing.assert_allclose(got, refs.matmul_bias(x, w, bias), rtol=1e-5, atol=1e-5)
    a8, b8 = (rng.integers(-128, 128, s).astype(np.int8) for s in ((6, 200), (5, 200)))
    got = _spec_case("matmul_i8", {"M": 6, "K": 200, "N": 5}, {}, {"a": a8, "b": b8, "c": np.zeros((6, 5), np.int32)})
    np.testing.assert_array_equal(got["c"], refs.matmul_i8(a8, b8))
    q, k, v = (rng.uniform(-1, 1, (2, 2, n, 16)).astype(np.float32) for n in (5, 9, 9))
    got = _spec_case("mha_sdpa", {"B": 2, "H": 2, "S": 5, "L": 9, "D": 16}, {"T": "f32"},
                     {"q": q, "k": k, "v": v}, {"scale": 0.25})["o"]
    np.testing.assert_allclose(got, refs.mha_sdpa(q, k, v, scale=0.25), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ the command


def test_fuzz_command_summary_line(capsys):
    from ptodsl.cli import main

    code = main(["fuzz", "--count", "4", "--seed", "7", "--features", "safe", "--backend", "sim",
                 "--max-blocks", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "fuzz: 4 programs, 0 mismatches, 0 crashes, 0 hangs, 0 rejected" in out


def test_fuzz_command_reports_a_shrunk_failure_and_fails(monkeypatch, capsys, tmp_path):
    from ptodsl.fuzz.cli import fuzz

    _planted_exp_bug(monkeypatch)  # the worker process is forked: it inherits the planted bug
    code = fuzz(1, _exp_seed(), FEATURES, ("sim",), str(tmp_path), shrink_seconds=20)
    out = capsys.readouterr().out
    assert code == 1
    assert "fuzz: 1 programs, 1 mismatches" in out
    assert "--- shrunk" in out and _computes_exp(out.split("--- shrunk", 1)[1])
    assert f"repro: ptodsl fuzz --count 1 --seed {_exp_seed()} --features {features_text(FEATURES)} --backend sim" in out
    assert list((tmp_path / "shrunk").glob("*.pto"))


def test_fuzz_command_classifies_a_hang(monkeypatch, capsys, tmp_path):
    import time

    from ptodsl.backends import sim
    from ptodsl.fuzz.cli import fuzz

    monkeypatch.setattr(sim, "run_block", lambda *a, **k: time.sleep(30))
    code = fuzz(1, 3, FEATURES, ("sim",), str(tmp_path), timeout=1.0, max_blocks=1)
    out = capsys.readouterr().out
    assert code == 1
    assert "1 hangs" in out and "=== hang (sim)" in out


def test_fuzz_mutate_flag_without_the_module(monkeypatch, capsys):
    """A ptodsl built without ptodsl.fuzz.mutate answers `--mutate` with E0250, not a traceback.

    The module ships with ptodsl, so its absence is made here: a None entry in sys.modules makes
    the import raise ModuleNotFoundError naming it, as a missing file would."""
    import json
    import sys

    from ptodsl.cli import main

    monkeypatch.setitem(sys.modules, "ptodsl.fuzz.mutate", None)
    assert main(["fuzz", "--mutate", "--count", "1"]) == 1
    err = capsys.readouterr().err
    assert "error[E0250]: the mutation fuzzer (ptodsl.fuzz.mutate) is not installed" in err
    assert "help: install a ptodsl that ships it, or drop `--mutate`" in err
    assert main(["fuzz", "--mutate", "--count", "1", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 1
    assert [(d["code"], d["message"]) for d in doc["diagnostics"]] == [
        ("E0250", "the mutation fuzzer (ptodsl.fuzz.mutate) is not installed in this ptodsl")]


def test_fuzz_mutate_flag_does_not_hide_a_missing_dependency(monkeypatch, capsys):
    """Only the mutation module's own absence is a usage error; a module it needs that is missing
    is a broken install and must surface as itself (an internal error naming it), not as E0250."""
    import importlib

    from ptodsl.cli import main

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "ptodsl.fuzz.mutate":
            raise ModuleNotFoundError("No module named 'some_dependency'", name="some_dependency")
        return real(name, *a, **k)

    monkeypatch.setattr(importlib, "import_module", fake)
    assert main(["fuzz", "--mutate", "--count", "1"]) != 0
    err = capsys.readouterr().err
    assert "No module named 'some_dependency'" in err and "E0250" not in err


def test_a_split_k_never_outnumbers_the_k_tiles_of_a_fixed_k(tmp_path):
    """Seed 425721 fixed K = 24 in its YAML and drew split_k 4 over k tiles of 32: a schedule the
    checker rightly refuses (E0822), counted as a rejected program. The generator now keeps a
    split to at most one partial product per k tile of a fixed K."""
    program = generate(425721, AS_FOUND, max_blocks=3)
    assert program.fixed and program.cube is not None
    assert isinstance(prepare(program, str(tmp_path)), Prepared)


def test_two_top_k_blocks_draw_k_within_the_one_row_length(write_spec):
    """Seed 5291583 (of `ptodsl fuzz --count 2000 --seed 5290000`) drew a second top-k block whose row
    length replaced the first's, leaving the first block's k beyond it: a program the checker rightly
    refused (E0853). Every k must fit the row length the program fixes."""
    from ptodsl.driver import compile_spec

    program = generate(5291583, AS_FOUND)
    compile_spec(write_spec(program.op, program.pto(), program.yaml()))


@pytest.mark.parametrize("seed, backends", [
    (7450028, ("sim", "cpu")), (7450052, ("sim", "cpu")), (7460201, ("sim",)), (7974019, ("sim",)),
    # (an internal compiler error: compiling for the simulator finds it; the cpu build, 16 s, under -m slow)
    pytest.param(7460201, ("sim", "cpu"), marks=pytest.mark.slow),
])
def test_programs_the_fuzzer_found_this_round(seed, backends):
    """7450028: a grid loading a view of what the grid before it stores ran in its iterations (a
    wrong answer). 7450052: a check of an index's repeats moved above a guard that stops earlier
    (another diagnostic). 7460201: the loads a one-pass row loop hoisted out of it stayed behind
    when the loop had to launch a kernel per iteration (an internal compiler error). 7974019: the
    generator took a select of an element read of T and a literal for f32 (a program the compiler
    rightly refused: arms of f16 and f32)."""
    outcome = run_programs([generate(seed, AS_FOUND)], backends)[0]
    assert outcome.kind == "ok", outcome


@pytest.mark.parametrize("seed", [7979610, 7984462])
def test_a_chain_over_many_row_blocks_gives_each_block_its_intermediates(seed):
    """A product, vector work into a local and a second product over 49 or more rows, run as one
    mixed kernel over row blocks: with a buffer of one row block's rows shared by every block,
    both seeds computed wrong on the cpu backend's threads (the generator's rows fitted one block
    before)."""
    program = generate(seed, SAFE_FEATURES)
    assert program.shapes["M"] >= 49 and program.options.get("row_interchange")
    outcome = run_programs([program], ("sim", "cpu"))[0]
    assert outcome.kind == "ok", outcome


@pytest.mark.parametrize("seed", [7991401, pytest.param(7992875, marks=pytest.mark.slow)])
def test_a_step_loop_pipelined_by_stages_hands_each_step_its_own_values(seed):
    """A loop of steps carrying an f32 state whose second product reads what this step's vector
    work made (attention's form as written): the skew pass pipelines it by stages, and stage 2 of
    one step must read that step's values. With one buffer for the values handed over instead of
    a pair, both seeds computed wrong."""
    program = generate(seed, AS_FOUND)
    prep = prepare(program, tempfile.mkdtemp(), 60)
    assert not isinstance(prep, Outcome)
    assert any(o.attrs.get("skewed") and not o.attrs.get("rows_interchanged")
               for f in prep.op.compiled.stages["block"].funcs for o in f.walk() if o.name == "loop")
    outcome = run_programs([program], ("sim",))[0]
    assert outcome.kind == "ok", outcome


def test_a_select_of_two_scalars_has_arms_of_one_dtype(tmp_path):
    """Seed 7530220 drew `where(c, a1, s)` with a1 a bf16 element read and s the f32 scalar, which the
    checker rightly refuses (E0303); the generator now gives the two arms one dtype."""
    program = generate(7530220, AS_FOUND, max_blocks=3)
    assert "where(x1[r, :] > -0.25, a1, " in program.pto()
    assert isinstance(prepare(program, str(tmp_path)), Prepared)


@pytest.mark.parametrize("backends", [("sim",), pytest.param(("sim", "cpu"), marks=pytest.mark.slow)])
@pytest.mark.parametrize("seed", [7620484, 7620960])
def test_data_sized_steps_in_a_loop_of_rounds_run_in_one_mixed_kernel(seed, backends, tmp_path):
    """The generator's matmul steps whose count the call decides (``cdiv(K, ...)``), inside a loop of
    rounds: their peeled first and last steps are branches inside a loop of the user's, which run
    as loops of 0 or 1 trips in one mixed kernel (passes/branches.py), and compute as the
    interpreter says."""
    from ptodsl.driver import compile_spec
    from ptodsl.fuzz.run import write_program

    program = generate(seed, AS_FOUND)
    assert "in loop(cdiv(K, " in program.pto() and 'name="R' in program.pto()
    block = compile_spec(write_program(program, str(tmp_path))).stages["block"]
    (kernel,) = [f for f in block.funcs if f.kind == "mixed"]
    assert any(o.name == "loop" and o.attrs["index"].startswith("_br") for o in kernel.walk())
    outcome = run_programs([program], backends)[0]
    assert outcome.kind == "ok", outcome


@pytest.mark.parametrize("backends", [("sim",), pytest.param(("sim", "cpu"), marks=pytest.mark.slow)])
@pytest.mark.parametrize("seed", [7700011, 7700079])
def test_a_mixed_kernels_vector_rows_shared_by_its_two_vector_cores(seed, backends, tmp_path):
    """Generated matmul steps whose mixed kernel has its vector work split between the block's two
    vector cores, each on half of every tile's rows, some rows of the last block's second half
    empty (passes/aivsplit.py): both halves together compute what the interpreter says."""
    from ptodsl.driver import compile_spec
    from ptodsl.fuzz.run import write_program

    program = generate(seed, AS_FOUND)
    block = compile_spec(write_program(program, str(tmp_path))).stages["block"]
    (kernel,) = [f for f in block.funcs if f.kind == "mixed"]
    assert {o.attrs.get("aiv") for o in kernel.walk() if o.name.startswith("tile.") and o.name != "tile.alloc"
            and "aiv" in o.attrs} == {0, 1}
    outcome = run_programs([program], backends)[0]
    assert outcome.kind == "ok", outcome


SIM_EVERYDAY = [("sim",), pytest.param(("sim", "cpu"), marks=pytest.mark.slow)]


@pytest.mark.parametrize("backends", SIM_EVERYDAY)
@pytest.mark.parametrize("seed", [7820145, 7820163])
def test_a_concat_part_of_no_column_shared_out_as_blocks(seed, backends):
    """Seeds 7820145 and 7820163 (of `ptodsl fuzz --count 200 --seed 7820000 --features
    concat,elementwise,scalars`) split a row at `N // 16` with N < 16: the second part has no
    column, and its nest, shared out as blocks of rows and columns, divided by its column loop's
    zero trips when the launch counted its blocks (a crash in the simulator, a division by zero in
    the C++ control program; passes/blocks.py, _inner_splits)."""
    program = generate(seed, frozenset({"concat", "elementwise", "scalars"}))
    assert "N // 16:N]" in program.pto()
    outcome = run_programs([program], backends)[0]
    assert outcome.kind == "ok", outcome


@pytest.mark.parametrize("backends", SIM_EVERYDAY)
def test_a_tensor_rotated_in_place_from_a_clone_of_it(backends):
    """Seed 7810000 (features concat, elementwise, scalars) rotates y3's columns from a clone of
    y3: the fit version drops the clone and reads each row block whole before writing it
    (passes/tile_fit.py, rewrite_of); both versions compute what the interpreter says."""
    program = generate(7810000, frozenset({"concat", "elementwise", "scalars"}))
    assert "o3 = clone(y3)" in program.pto()
    outcome = run_programs([program], backends)[0]
    assert outcome.kind == "ok", outcome


@pytest.mark.parametrize("backends", SIM_EVERYDAY)
def test_loops_in_turn_reuse_the_event_ids_the_loop_before_let_go(backends):
    """Seed 7831732 (of `ptodsl fuzz --count 2000 --seed 7830000`) was refused with E0612: a split
    accumulation unrolled by 4 then by 2 needed 9 MTE2 -> MTE3 event ids, since the colouring
    counted a loop's flags live up to and including the op after its drain (the next loop's
    prime) and gave the second loop fresh ids. Its intervals are half-open now."""
    outcome = run_programs([generate(7831732, AS_FOUND)], backends)[0]
    assert outcome.kind == "ok", outcome


@pytest.mark.parametrize("backends", SIM_EVERYDAY)
def test_a_workspace_the_row_blocks_fill_for_a_later_statement_is_one_tensor(backends):
    """Seed 8100458 (of `ptodsl fuzz --count 1500 --seed 8100000 --features
    f16,matmul,mm_chain,mm_out,mm_steps,pass_options`): a chain over row blocks whose last
    statement casts the local for a sum over its rows after the chain. The cast's workspace was
    recorded as one per row block (``alloc {within}``), so each block filled a copy of its own and
    the sum read the first block's copy only: NaN (poison) on sim, garbage on cpu."""
    program = generate(8100458, frozenset({"f16", "matmul", "mm_chain", "mm_out", "mm_steps", "pass_options"}))
    assert "sum(cast(c1, f32), dim=0" in program.pto() and program.options.get("row_interchange")
    outcome = run_programs([program], backends)[0]
    assert outcome.kind == "ok", outcome
