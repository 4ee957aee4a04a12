"""Every registered diagnostic code has a golden test: a realistic mistake in, the exact text out.

Compile-time codes: each folder in fixtures/ holds NAME.pto, NAME.yaml and expected.txt, the text
that compiling the spec (from the repository root, by a relative path) renders. A folder named
after a code (``e0303_...``, ``w0330_...``) must report that code first, as in tests/check/golden.

Call-time, build and NPU codes have no spec of their own to compile: each case of ``CASES`` calls
the op of ops/scale_rows.yaml wrongly, or builds or runs it in a broken environment (a missing
compiler, a fake CANN tree), and its rendering must equal expected/NAME.expected. Temporary and
cache paths, cache keys and the machine's architecture are replaced by placeholders (``<tmp>``,
``<cache>``, ``<key>``, ``<arch>``) first, so the text does not depend on the machine.

``test_every_registered_code_has_a_golden_test`` then checks that each code of
ptodsl/diagnostics/codes/*.yaml is the first code of at least one golden expected file anywhere
under tests/. Set PTODSL_UPDATE_GOLDEN=1 to rewrite the expected files after an intended change,
then review the diff.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import shlex
import shutil
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

import ptodsl
from ptodsl.api import ArgumentError
from ptodsl.backends.cpp import build
from ptodsl.diagnostics import CompileError, Diagnostic, Diagnostics, code_registry
from ptodsl.diagnostics.render import render_all
from ptodsl.driver import compile_spec
from ptodsl.runtime import npu
from ptodsl.runtime.npu import NpuError
from ptodsl.runtime.package import PackagedOp

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FIXTURES = sorted(p for p in (HERE / "fixtures").iterdir() if p.is_dir())
EXPECTED = HERE / "expected"
OP_SPEC = "tests/golden_codes/ops/scale_rows.yaml"
UPDATE = os.environ.get("PTODSL_UPDATE_GOLDEN") == "1"
FIRST_CODE = re.compile(r"^(?:error|warning|note)\[([EWN]\d{4})\]", re.M)

# Registered codes that no golden test shows, each with the reason. Keep this list short: an
# entry is removed as soon as a fixture for the code exists (the coverage test insists on it).
NOT_EMITTED = {
    # Sync colours set/wait pairs with at most max_event_ids (8) ids per pipe pair. Memory
    # planning makes every load wait on the last reader of the buffer it reuses, so the pairs of
    # one compute kernel nest shallowly: the library's specs peak at 4 ids in flight and a random
    # search over about 1000 generated kernels (up to 30 statements, reductions, broadcasts) at 5.
    # No spec has been found that reaches 9; add a fixture here when one is.
    "E0612": "no spec found needs more than 5 of the 8 event ids of a pipe pair",
    # The ACL runtime reports an error only on a real device; nothing here can make it fail.
    "E0932": "needs an NPU whose runtime reports an error after the kernels ran",
}


# ------------------------------------------------------------------ compile-time fixtures


def render_fixture(folder: Path) -> str:
    diags = Diagnostics()
    # Relative to the repository root, so the expected text does not depend on the checkout's path.
    rel = (folder / f"{folder.name}.yaml").relative_to(REPO).as_posix()
    try:
        compile_spec(rel, diags)
    except CompileError as exc:
        return render_all(exc.diagnostics, color=False)
    return render_all(diags, color=False)


def check_golden(got: str, expected: Path) -> None:
    if UPDATE:
        expected.parent.mkdir(parents=True, exist_ok=True)
        expected.write_text(got, encoding="utf-8")
    assert expected.exists(), f"no {expected.relative_to(REPO)}; run with PTODSL_UPDATE_GOLDEN=1"
    assert got == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize("folder", FIXTURES, ids=[f.name for f in FIXTURES])
def test_compile_time_golden(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    check_golden(render_fixture(folder), folder / "expected.txt")


@pytest.mark.parametrize("folder", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixture_is_complete_and_named_after_its_first_code(folder: Path) -> None:
    for suffix in (".pto", ".yaml"):
        assert (folder / f"{folder.name}{suffix}").is_file()
    m = re.match(r"([ewn]\d{4})_", folder.name)
    assert m is not None, f"name a fixture `<code>_what`: {folder.name}"
    first = FIRST_CODE.search((folder / "expected.txt").read_text(encoding="utf-8"))
    assert first is not None and first.group(1) == m.group(1).upper(), folder.name


# ------------------------------------------------------------------ call-time, build and NPU cases


@dataclass
class Env:
    """What a case may use: a fresh temporary folder and a monkeypatch that undoes itself."""

    tmp: Path
    mp: pytest.MonkeyPatch

    @property
    def cache(self) -> Path:
        return self.tmp / "cache"


def x32(rows: int = 4, cols: int = 256) -> np.ndarray:
    return np.ones((rows, cols), np.float32)


def w32(cols: int = 256) -> np.ndarray:
    return np.full((1, cols), 0.5, np.float32)


def argument_error(call: Callable[[], object]) -> Diagnostic:
    with pytest.raises(ArgumentError) as info:
        call()
    return info.value.diagnostic


def compile_error(call: Callable[[], object]) -> list[Diagnostic]:
    with pytest.raises(CompileError) as info:
        call()
    return info.value.diagnostics


def npu_error(call: Callable[[], object]) -> Diagnostic:
    with pytest.raises(NpuError) as info:
        call()
    return info.value.diagnostic


def scale_rows() -> ptodsl.Operator:
    return ptodsl.load(OP_SPEC)


# ---- call time (E07xx)


def e0700_float64_input(env: Env) -> Diagnostic:
    # NumPy's default dtype is float64, which the op does not take.
    return argument_error(lambda: scale_rows()(np.ones((4, 256)), w32(), alpha=2.0))


def e0701_row_without_batch_dim(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()(np.ones(256, np.float32), w32(), alpha=2.0))


def e0702_weights_of_another_width(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()(x32(), w32(128), alpha=2.0))


def e0867_row_longer_than_max_dims(env: Env) -> Diagnostic:
    op = ptodsl.load("tests/golden_codes/ops/bounded_rows.yaml")
    return argument_error(lambda: op(x32(cols=300)))


def e0715_rows_not_a_multiple_of_the_block(env: Env) -> Diagnostic:
    op = ptodsl.load("tests/golden_codes/ops/row_blocks.yaml")
    return argument_error(lambda: op(x32(rows=20, cols=64)))


def e0833_heads_that_do_not_fill_the_hidden_dim(env: Env) -> Diagnostic:
    op = ptodsl.load("tests/golden_codes/ops/split_heads.yaml")
    return argument_error(lambda: op(np.ones((4, 100), np.float32), np.ones((4, 2, 64), np.float32)))


def e0839_rotate_by_more_columns_than_a_row_has(env: Env) -> Diagnostic:
    op = ptodsl.load("tests/golden_codes/ops/rotate_cols.yaml")
    return argument_error(lambda: op(np.ones((4, 2), np.float32)))


SCALE_PTO = "kernel scale(x: f32[M, N], y: out f32[M, N]):\n    y[:] = x * 2.0\n"


def case_error(env: Env, yaml_text: str, reference: str | None = None) -> list[Diagnostic]:
    """Run the first golden case of a small spec written to the temporary folder."""
    from ptodsl.golden import run_case

    (env.tmp / "scale.pto").write_text(SCALE_PTO)
    (env.tmp / "scale.yaml").write_text("op: scale\nschedule: {vec_tile: [1, 64]}\n" + yaml_text)
    if reference is not None:
        (env.tmp / "scale_ref.py").write_text(reference)
    op = ptodsl.load(str(env.tmp / "scale.yaml"))
    return compile_error(lambda: run_case(op, op.spec.tests[0]))


def e0230_reference_function_misspelt(env: Env) -> list[Diagnostic]:
    return case_error(env, "reference: scale_ref.py:scale\ntests:\n  - {shapes: {M: 2, N: 8}}\n",
                      "def scal(x):\n    return x * 2\n")


def e0231_cases_without_reference(env: Env) -> list[Diagnostic]:
    return case_error(env, "tests:\n  - {shapes: {M: 2, N: 8}}\n")


def e0232_reference_takes_too_many_arguments(env: Env) -> list[Diagnostic]:
    return case_error(env, "reference: scale_ref.py:scale\ntests:\n  - {shapes: {M: 2, N: 8}}\n",
                      "def scale(x, y):\n    return x * 2\n")


def e0232_reference_returns_too_few_outputs(env: Env) -> list[Diagnostic]:
    return case_error(env, "reference: scale_ref.py:scale\ntests:\n  - {shapes: {M: 2, N: 8}}\n",
                      "def scale(x):\n    return ()\n")


def e0233_case_misses_a_dim(env: Env) -> list[Diagnostic]:
    return case_error(env, "reference: scale_ref.py:scale\ntests:\n  - {shapes: {M: 2}}\n",
                      "def scale(x):\n    return x * 2\n")


def e0234_torch_function_misspelt(env: Env) -> list[Diagnostic]:
    """`ptodsl bench` looks up a spec's torch equivalent, misspelt in the YAML."""
    from ptodsl.golden import load_torch

    (env.tmp / "scale.pto").write_text(SCALE_PTO)
    (env.tmp / "scale.yaml").write_text("op: scale\nschedule: {vec_tile: [1, 64]}\n"
                                        "reference: scale_ref.py:scale\ntorch: torch_scal\n")
    (env.tmp / "scale_ref.py").write_text("def scale(x):\n    return x * 2\n\n\n"
                                          "def torch_scale(x):\n    return x * 2\n")
    op = ptodsl.load(str(env.tmp / "scale.yaml"))
    return compile_error(lambda: load_torch(op.spec) and None)


def e0234_torch_without_reference(env: Env) -> list[Diagnostic]:
    from ptodsl.golden import load_torch

    (env.tmp / "scale.pto").write_text(SCALE_PTO)
    (env.tmp / "scale.yaml").write_text("op: scale\nschedule: {vec_tile: [1, 64]}\ntorch: torch_scale\n")
    op = ptodsl.load(str(env.tmp / "scale.yaml"))
    return compile_error(lambda: load_torch(op.spec) and None)


def e0990_pass_breaks_an_invariant(env: Env) -> list[Diagnostic]:
    """A pass that loses a loop's name: the verifier after it stops the compile."""
    from ptodsl import driver
    from ptodsl.ir import parse

    def lose_a_loop_name(module, ctx):
        broken = parse(str(module))
        next(op for op in broken.walk() if op.name == "loop").attrs.pop("name")
        return broken

    passes = [dataclasses.replace(p, run=lose_a_loop_name) if p.name == "fuse" else p for p in driver.PASSES]
    env.mp.setattr(driver, "PASSES", passes)
    return compile_error(lambda: compile_spec(OP_SPEC))


def e0801_ir_file_with_a_typo(env: Env) -> list[Diagnostic]:
    """A printed tile module hand-edited with a missing comma: `ptodsl ir --from` points at it."""
    from ptodsl.driver import lower_ir

    text = str(compile_spec(OP_SPEC).stages["tile"]).replace('"tile", "fuse"', '"tile" "fuse"')
    assert '"tile" "fuse"' in text  # the typo is planted
    (env.tmp / "scale_rows.tile.ir").write_text(text)
    return compile_error(lambda: lower_ir(str(env.tmp / "scale_rows.tile.ir")))


def e0801_ir_file_from_another_pipeline(env: Env) -> list[Diagnostic]:
    """A module whose `passes` attribute names a pass the pipeline does not have at that place."""
    from ptodsl.driver import lower_ir

    text = str(compile_spec(OP_SPEC).stages["tile"]).replace('"unroll", "epilogue", "tile"', '"epilogue", "tile"')
    (env.tmp / "scale_rows.tile.ir").write_text(text)
    return compile_error(lambda: lower_ir(str(env.tmp / "scale_rows.tile.ir")))


def e0703_scalar_not_passed(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()(x32(), w32()))


def e0703_output_size_unknown(env: Env) -> Diagnostic:
    # M is bound by no input: y's height is known only from a buffer the caller passes.
    op = ptodsl.load("tests/golden_codes/ops/tile_rows.yaml")
    return argument_error(lambda: op(np.ones((1, 256), np.float32)))


def e0704_output_passed_by_position(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()(x32(), w32(), np.empty((4, 256), np.float32), alpha=2.0))


def e0705_python_list_input(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()([[1.0] * 256] * 4, w32(), alpha=2.0))


def e0706_scalar_beyond_f32(env: Env) -> Diagnostic:
    # 1e39 would become infinity as the kernel's f32.
    return argument_error(lambda: scale_rows()(x32(), w32(), alpha=1e39))


def e0706_scalar_given_as_text(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()(x32(), w32(), alpha="2.0"))


def e0707_unknown_backend(env: Env) -> Diagnostic:
    return argument_error(lambda: scale_rows()(x32(), w32(), alpha=2.0, backend="gpu"))


def e0707_npu_from_a_loaded_spec(env: Env) -> Diagnostic:
    # backend="npu" runs through a generated package; an op loaded from its YAML cannot use it.
    return argument_error(lambda: scale_rows()(x32(), w32(), alpha=2.0, backend="npu"))


def e0708_tensor_not_on_the_cpu(env: Env) -> Diagnostic:
    torch = pytest.importorskip("torch")
    on_device = torch.ones((4, 256), device="meta")  # stands for a tensor in accelerator memory
    return argument_error(lambda: scale_rows()(on_device, torch.ones((1, 256)), alpha=2.0))


def e0716_backward_through_an_op_without_one(env: Env) -> Diagnostic:
    torch = pytest.importorskip("torch")
    from ptodsl.runtime.torch_support import NoBackwardError, register_autograd

    # scale_rows as a torch custom op of its own, registered as a generated package registers it
    op = scale_rows()
    packaged = type("Packaged", (), {"package": "golden_ops", "name": "scale_rows", "operator": op})()

    @torch.library.custom_op("ptodsl_golden::scale_rows", mutates_args=(),
                             schema="(Tensor x, Tensor w, *, float alpha) -> Tensor")
    def custom(x: torch.Tensor, w: torch.Tensor, *, alpha: float) -> torch.Tensor:
        return op(x, w, alpha=alpha)

    @custom.register_fake
    def _(x: torch.Tensor, w: torch.Tensor, *, alpha: float) -> torch.Tensor:
        return torch.empty_like(x)

    register_autograd(custom, packaged, None)
    y = custom(torch.ones((4, 256), requires_grad=True), torch.ones((1, 256)), alpha=2.0)
    with pytest.raises(NoBackwardError) as info:
        y.sum().backward()
    return info.value.diagnostic


def e0709_transposed_output_buffer(env: Env) -> Diagnostic:
    y = np.empty((256, 4), np.float32).T  # the right shape, but a strided view
    return argument_error(lambda: scale_rows()(x32(), w32(), y=y, alpha=2.0))


def e0730_row_index_past_the_end(env: Env) -> Diagnostic:
    # The third row goes to row 5 of a 5-row output: the guard stops the call before that write.
    op = ptodsl.load("tests/golden_codes/ops/scatter_rows.yaml")
    y = np.zeros((5, 256), np.float32)
    with pytest.raises(ptodsl.GuardError) as info:
        op(x32(3), np.array([0, 2, 5], np.int32), y=y)
    return info.value.diagnostic


def e0717_two_outputs_in_one_buffer(env: Env) -> Diagnostic:
    # dgamma and dbeta one element apart in one buffer: what they hold would depend on store order.
    op = ptodsl.load("specs/layernorm_bwd.yaml")
    buf = np.zeros(257, np.float32)
    return argument_error(lambda: op(x32(), np.ones(256, np.float32), x32(), dgamma=buf[0:256], dbeta=buf[1:257]))


def e0718_output_of_a_broadcast_input(env: Env) -> Diagnostic:
    # A broadcast view of 4 bytes stands for 2**30 x 2**30 rows: the output would be 4 EiB.
    from ptodsl import inputs

    env.mp.setattr(inputs, "memory_limit", lambda: 64 << 30)  # the same text on every machine
    big = np.broadcast_to(np.float32(1.0), (2**30, 2**30))
    with pytest.raises(MemoryError) as info:
        scale_rows()(big, np.broadcast_to(np.float32(0.5), (1, 2**30)), alpha=2.0)
    return info.value.diagnostic


def e0730_gathered_row_past_the_end(env: Env) -> Diagnostic:
    # Row 6 of a 5-row input: the view would start past the tensor, on every backend.
    op = ptodsl.load("tests/golden_codes/ops/gather_rows.yaml")
    with pytest.raises(ptodsl.GuardError) as info:
        op(x32(5), np.array([1, 6], np.int32))
    return info.value.diagnostic


def e0731_slot_named_twice(env: Env) -> Diagnostic:
    # Slot 5 twice in a slot mapping declared unique: the call stops before either row is written,
    # on the cpu backend as on the simulator.
    op = ptodsl.load("specs/kv_cache_update.yaml")
    cache = np.zeros((16, 2, 64), np.float32)
    rows = np.ones((4, 2, 64), np.float32)
    with pytest.raises(ptodsl.GuardError) as info:
        op(cache, cache.copy(), np.array([5, 9, 5, 2], np.int32), rows, rows,
           backend="cpu" if shutil.which("g++") else "sim")
    assert not cache.any()
    return info.value.diagnostic


def e0732_segment_starts_that_go_back(env: Env) -> Diagnostic:
    # starts 0, 40, 24, 64: the third segment would begin inside the second; the call stops before
    # any kernel runs, on every backend, and y keeps its values
    op = ptodsl.load("tests/golden_codes/ops/segments.yaml")
    y = np.zeros((64, 64), np.float32)
    with pytest.raises(ArgumentError) as info:
        op(np.ones((64, 64), np.float32), np.array([0, 40, 24, 64], np.int32), y)
    assert not y.any()
    return info.value.diagnostic


def e0870_length_read_as_unsigned(env: Env) -> Diagnostic:
    # -1 written as unsigned 32-bit data and read back as i32 gives 2**31 - 1 columns: 33554432
    # blocks of 64 where the call's largest dim is 256; the call stops before the loop.
    op = ptodsl.load("tests/golden_codes/ops/ragged_rows.yaml")
    lens = np.array([100, 2**31 - 1], np.int32)
    with pytest.raises(ptodsl.GuardError) as info:
        op(x32(2), lens, y=np.zeros((2, 256), np.float32), backend="cpu" if shutil.which("g++") else "sim")
    return info.value.diagnostic


def e0730_element_read_at_a_negative_index(env: Env) -> Diagnostic:
    op = ptodsl.load("tests/golden_codes/ops/pick_elements.yaml")
    with pytest.raises(ptodsl.GuardError) as info:
        op(x32(3, 8), np.array([0, -1], np.int32), backend="cpu" if shutil.which("g++") else "sim")
    return info.value.diagnostic


def e0730_gathered_row_outside_the_table(env: Env) -> Diagnostic:
    # An embedding id of -1 (a padding id, say): the guard over the ids stops the call before the
    # gather reads anything, on the cpu backend as on the simulator.
    op = ptodsl.load("specs/gather_rows.yaml")
    table = np.arange(40, dtype=np.float32).reshape(10, 4).repeat(16, axis=1)
    with pytest.raises(ptodsl.GuardError) as info:
        op(table, np.array([3, -1, 2], np.int32), backend="cpu")
    return info.value.diagnostic


def e0710_rows_of_zero_width(env: Env) -> Diagnostic:
    # K = 0: the 16 x 16 product is a sum over nothing, which ptodsl refuses to guess.
    matmul = ptodsl.load("specs/matmul.yaml")
    return argument_error(lambda: matmul(np.ones((16, 0), np.float32), np.ones((0, 16), np.float32)))


def e0711_length_beyond_its_dim(env: Env) -> Diagnostic:
    seq_add = ptodsl.load("specs/seq_add.yaml")
    out = np.zeros((2, 16, 64), np.float32)
    lengths = np.array([3, 17], np.int32)  # 17 rows of a 16-row batch would write into the next one
    return argument_error(lambda: seq_add(np.ones((2, 16, 64), np.float32), lengths, out=out))


def e0712_check_fails_inside_a_kernel(env: Env) -> Diagnostic:
    # Past the call-time checks (which refuse K = 0 as E0710), the CPU header's own check of the
    # tile's valid extent fails; the library reports it instead of aborting the process.
    from ptodsl.backends.cpp.run import KernelFailure, run_variant

    matmul = ptodsl.load("specs/matmul.yaml")
    arrays = {"a": np.ones((16, 0), np.float32), "b": np.ones((0, 16), np.float32), "c": np.zeros((16, 16), np.float32)}
    with pytest.raises(KernelFailure) as info:
        run_variant(matmul.compiled, matmul.compiled.kernel_for({"T": "f32"}), arrays, {}, {"M": 16, "N": 16, "K": 0})
    return info.value.diagnostic


# ---- building the CPU backend's C++ (E09xx)

# A plain kernel, for the cases that fail before (or regardless of) what the C++ says.
KERNEL = textwrap.dedent("""\
    extern "C" void scale_rows(float* y, const float* x, float alpha, int n) {
        for (int i = 0; i < n; ++i) {
            y[i] = x[i] * alpha;
        }
    }
""")


def fake_cxx(env: Env, on_compile: str) -> Path:
    """A stand-in for g++ that answers the toolchain probes, then runs ``on_compile`` (shell)."""
    folder = env.tmp / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "g++"
    script.write_text(
        "#!/bin/sh\n"
        'case " $* " in\n'
        '  *" --version "*) echo "g++ (GCC) 12.2.0"; exit 0 ;;\n'
        '  *" -fopenmp "*) exit 1 ;;\n'
        "esac\n" + on_compile
    )
    script.chmod(0o755)
    env.mp.setenv("PTODSL_CXX", str(script))
    return script


def gcc_says(*lines: str) -> str:
    """Shell that prints a recorded compiler message on stderr and fails (builtins only: the NPU
    cases run with a PATH that holds nothing but the fake tools)."""
    return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines) + " >&2\nexit 1\n"


def fresh_cpu_call(env: Env) -> list[Diagnostic]:
    """The diagnostics of a cpu call that builds its library afresh: a library an earlier test of
    this process built or loaded is not reused."""
    from ptodsl.backends.cpp import load

    env.mp.setattr(load, "_loaded", {})
    env.mp.setattr(load, "_built", {})
    return compile_error(lambda: scale_rows()(x32(), w32(), alpha=2.0, backend="cpu"))


def e0885_arch_with_a_blank(env: Env) -> list[Diagnostic]:
    env.mp.setenv("PTODSL_CPU_ARCH", "x86-64-v3 -O0")  # two options where one -march name goes
    return fresh_cpu_call(env)


def e0887_opt_level_with_an_option(env: Env) -> list[Diagnostic]:
    env.mp.setenv("PTODSL_CPU_OPT", "3 -fno-inline")  # an option where a level goes
    return fresh_cpu_call(env)


# The probe of a -march compiled by a stand-in: a script that reports the feature it misses, as the
# real probe does on a CPU without AVX-512.
PROBE_MISSES_AVX512 = (
    'for a; do out="$a"; done\n'
    "printf '#!/bin/sh\\necho avx512f\\nexit 3\\n' > \"$out\"\n"
    'chmod +x "$out"\nexit 0\n'
)


def e0886_cpu_without_avx512(env: Env) -> list[Diagnostic]:
    fake_cxx(env, PROBE_MISSES_AVX512)
    env.mp.setenv("PTODSL_CPU_ARCH", "x86-64-v4")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0886_compiler_rejects_the_name(env: Env) -> list[Diagnostic]:
    fake_cxx(env, gcc_says("cc1plus: error: bad value 'znver9' for '-march=' switch"))
    env.mp.setenv("PTODSL_CPU_ARCH", "znver9")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0900_no_compiler_installed(env: Env) -> list[Diagnostic]:
    env.mp.delenv("PTODSL_CXX", raising=False)
    (env.tmp / "empty").mkdir()
    env.mp.setenv("PATH", str(env.tmp / "empty"))
    return fresh_cpu_call(env)


# A tile whose row is 12 bytes: pto-isa's static check wants a multiple of 32 (ptodsl's CPU header
# makes the same check), the usual reason generated C++ does not compile.
ROW_TILE_KERNEL = textwrap.dedent("""\
    #include <pto/pto-inst.hpp>

    using namespace pto;
    using Row = Tile<TileType::Vec, float, 1, 3>;

    extern "C" void scale_rows(float* y) {
        Row row;
        (void)y;
    }
""")


def e0901_tile_row_not_32_byte_aligned(env: Env) -> list[Diagnostic]:
    header = build.HEADER_DIR / "pto"
    fake_cxx(env, gcc_says(  # what g++ 12 prints for ROW_TILE_KERNEL
        f"In file included from {header}/pto-inst.hpp:66,",
        "                 from kernel.cpp:1:",
        f"{header}/cpu_subset/tile.hpp: In instantiation of 'struct pto::Tile<pto::TileType::Vec, float, 1, 3>':",
        "kernel.cpp:7:9:   required from here",
        f"{header}/cpu_subset/tile.hpp:89:48: error: static assertion failed: Tile: an unboxed RowMajor tile "
        "needs Cols * sizeof(DType) to be a multiple of 32 bytes",
        "   89 |     static_assert(isBoxedLayout || !isRowMajor || (Cols * sizeof(DType)) % "
        "TileConfig::alignedSize == 0,",
        "      |                   ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~",
    ))
    return compile_error(lambda: build.build_shared({"kernel.cpp": ROW_TILE_KERNEL}, "scale_rows"))


# An instruction the pto-isa checkout in PTO_ISA_ROOT spells differently (an older release).
OLD_API_KERNEL = textwrap.dedent("""\
    #include <pto/pto-inst.hpp>

    using namespace pto;
    using Row = Tile<TileType::Vec, float, 1, 8>;

    extern "C" void fill_row() {
        Row row;
        TASSIGN(row, 0);
        TEXPANDS(row, 0.0f);
    }
""")


def e0902_pto_isa_checkout_lacks_an_instruction(env: Env) -> list[Diagnostic]:
    root = env.tmp / "pto-isa"
    (root / "include" / "pto").mkdir(parents=True)
    (root / "include" / "pto" / "pto-inst.hpp").write_text("#pragma once\n")
    env.mp.setenv("PTO_ISA_ROOT", str(root))
    # The prelude `#include <cstdint>` puts the generated text one line down in the compiled file.
    fake_cxx(env, gcc_says(
        "kernel.cpp: In function 'void fill_row()':",
        "kernel.cpp:10:5: error: 'TEXPANDS' was not declared in this scope; did you mean 'TEXPAND'?",
        "   10 |     TEXPANDS(row, 0.0f);",
        "      |     ^~~~~~~~",
        "      |     TEXPAND",
    ))
    return compile_error(lambda: build.build_shared({"kernel.cpp": OLD_API_KERNEL}, "fill_row"))


def e0903_pto_isa_root_is_the_include_folder(env: Env) -> list[Diagnostic]:
    checkout = env.tmp / "pto-isa"
    (checkout / "include" / "pto").mkdir(parents=True)
    (checkout / "include" / "pto" / "pto-inst.hpp").write_text("#pragma once\n")
    env.mp.setenv("PTO_ISA_ROOT", str(checkout / "include"))  # one level too deep
    fake_cxx(env, "exit 0\n")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0904_cache_dir_is_a_file(env: Env) -> list[Diagnostic]:
    env.cache.write_text("not a folder\n")
    fake_cxx(env, "exit 0\n")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0905_undefined_helper(env: Env) -> list[Diagnostic]:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    env.mp.delenv("PTODSL_CXX", raising=False)
    # A helper declared but defined in no source: the library links, then the loader refuses it.
    source = ('extern "C" void ptodsl_missing_helper(float* y);\n'
              'extern "C" void scale_rows(float* y) { ptodsl_missing_helper(y); }\n')
    library = build.build_shared({"kernel.cpp": source}, "scale_rows")
    return compile_error(lambda: build.load_library(library))


def e0906_compiler_hangs(env: Env) -> list[Diagnostic]:
    fake_cxx(env, "exec sleep 30\n")
    env.mp.setenv("PTODSL_BUILD_TIMEOUT", "0.5")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0906_compiler_probe_hangs(env: Env) -> list[Diagnostic]:
    # `g++ --version` never answers: the probe obeys PTODSL_BUILD_TIMEOUT too, and its process group
    # is stopped (the `sleep` child would otherwise outlive it).
    script = fake_cxx(env, "exit 0\n")
    script.write_text("#!/bin/sh\nsleep 30 &\nwait\n")
    env.mp.setenv("PTODSL_BUILD_TIMEOUT", "0.5")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0907_compiler_writes_nothing(env: Env) -> list[Diagnostic]:
    fake_cxx(env, "exit 0\n")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0905_library_without_its_entry(env: Env) -> list[Diagnostic]:
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    env.mp.delenv("PTODSL_CXX", raising=False)
    library = build.build_shared({"kernel.cpp": 'extern "C" void other(void) {}\n'}, "scale_rows")
    return compile_error(lambda: build.library_function(build.load_library(library), library, "scale_rows_f32"))


def e0904_cache_shard_is_read_only(env: Env) -> list[Diagnostic]:
    if os.geteuid() == 0:
        # root writes through permissions; a shard replaced by a file under a file stands in.
        (env.cache / "cpp").mkdir(parents=True)
        (env.cache / "cpp" / "tmp").write_text("a file where the folder was\n")
    else:
        (env.cache / "cpp" / "tmp").mkdir(parents=True)
        (env.cache / "cpp" / "tmp").chmod(0o500)
    fake_cxx(env, "exit 0\n")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


def e0901_compiler_output_not_utf8(env: Env) -> list[Diagnostic]:
    fake_cxx(env, "printf 'kernel.cpp:1:1: error: caf\\351 \\377\\n' >&2\nexit 1\n")
    return compile_error(lambda: build.build_shared({"kernel.cpp": KERNEL}, "scale_rows"))


# ---- running on the NPU (E092x-E093x), against fake toolkit, driver and device trees


def packaged(env: Env, kernel: str | None = KERNEL, target: str | None = None) -> PackagedOp:
    """scale_rows as a generated package holds it, with (or without) a C++ kernel for f32."""
    from ptodsl.gen.kernels import kernel_files

    specs = env.tmp / "specs"
    specs.mkdir(parents=True)
    shutil.copy(REPO / "tests/golden_codes/ops/scale_rows.pto", specs)
    spec = (REPO / OP_SPEC).read_text(encoding="utf-8")
    if target is not None:
        spec += f"target: {target}\n"
    (specs / "scale_rows.yaml").write_text(spec, encoding="utf-8")
    root = env.tmp / "pkg"
    shutil.copytree(specs, root / "specs")
    for rel, text in kernel_files(compile_spec(str(specs / "scale_rows.yaml")), str(specs)).items():
        (root / "kernels" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "kernels" / rel).write_text(text, encoding="utf-8")
    shutil.rmtree(root / "kernels" / "scale_rows" / "npu")
    if kernel is not None:  # the NPU build of the f32 variant: one vector kernel and the host program
        folder = root / "kernels" / "scale_rows" / "npu" / "f32"
        folder.mkdir(parents=True)
        (folder / "scale_rows_f32_k0.cpp").write_text(kernel, encoding="utf-8")
        (folder / "host.cpp").write_text("// the host program\n", encoding="utf-8")
        build = {"entry": "scale_rows_f32", "host": "host.cpp", "params": [],
                 "kernels": [{"name": "scale_rows_f32_k0", "core": "vector", "source": "scale_rows_f32_k0.cpp"}]}
        (folder / "build.json").write_text(json.dumps(build), encoding="utf-8")
    op = PackagedOp("golden_ops", "scale_rows")
    op.__dict__["root"] = root
    return op


def no_npu_environment(env: Env) -> None:
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_DRIVER_PATH", "TILE_FWK_DEVICE_ID", "PTO_ISA_ROOT"):
        env.mp.delenv(var, raising=False)
    (env.tmp / "bin").mkdir(exist_ok=True)
    env.mp.setenv("PATH", str(env.tmp / "bin"))
    env.mp.setenv("XDG_CACHE_HOME", str(env.cache))
    env.mp.setattr(npu, "DEFAULT_TOOLKIT", str(env.tmp / "Ascend" / "ascend-toolkit" / "latest"))
    env.mp.setattr(npu, "DEFAULT_DRIVER", str(env.tmp / "Ascend" / "driver"))
    env.mp.setattr(npu, "DEV_ROOT", env.tmp / "dev")


def cann(env: Env, version: str) -> None:
    info = env.tmp / "cann" / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text(f"package_name=Ascend-cann-toolkit\nversion={version}\n")
    env.mp.setenv("ASCEND_HOME_PATH", str(env.tmp / "cann"))


def driver(env: Env, version: str) -> None:
    folder = env.tmp / "driver"
    folder.mkdir()
    (folder / "version.info").write_text(f"Version={version}\npackage_version={version}\n")
    env.mp.setenv("ASCEND_DRIVER_PATH", str(folder))


def bisheng(env: Env, on_compile: str) -> None:
    script = env.tmp / "bin" / "bisheng"
    script.write_text("#!/bin/sh\n" + on_compile)
    script.chmod(0o755)


WRITES_OUTPUT = 'while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then echo built > "$2"; fi; shift; done\n'


def ready(env: Env) -> None:
    """Everything in place up to the device: device 0, CANN 8.5.0, driver 25.2.0, bisheng, pto-isa."""
    no_npu_environment(env)
    env.mp.setenv("TILE_FWK_DEVICE_ID", "0")
    cann(env, "8.5.0")
    driver(env, "25.2.0")
    bisheng(env, WRITES_OUTPUT)
    header = env.tmp / "pto-isa" / "include" / "pto" / "pto-inst.hpp"
    header.parent.mkdir(parents=True)
    header.write_text("// pto-isa\n")
    env.mp.setenv("PTO_ISA_ROOT", str(env.tmp / "pto-isa"))


def run_on_npu(op: PackagedOp, device: object = None) -> Callable[[], object]:
    return lambda: op((x32(), w32()), {}, {"alpha": 2.0}, backend="npu", device=device)


def e0908_bf16_against_a_checkout_without_bfloat16(env: Env) -> list[Diagnostic]:
    """PTO_ISA_ROOT set and a compiler without C++23's std::bfloat16_t: pto-isa's bf16 would be
    _Float16, so a bf16 kernel would compute in half precision; the call stops before any build."""
    import ml_dtypes

    from ptodsl.backends.cpp import toolchain

    checkout = env.tmp / "pto-isa"
    (checkout / "include" / "pto").mkdir(parents=True)
    (checkout / "include" / "pto" / "pto-inst.hpp").write_text("#pragma once\n")
    env.mp.setenv("PTO_ISA_ROOT", str(checkout))
    env.mp.setattr(toolchain, "native_bf16", lambda: False)
    (env.tmp / "halve.pto").write_text("kernel halve(x: bf16[M, N], y: out bf16[M, N]):\n    y[:] = x * 0.5\n")
    (env.tmp / "halve.yaml").write_text("op: halve\nschedule: {vec_tile: [1, 64]}\n")
    op = ptodsl.load(str(env.tmp / "halve.yaml"))
    return compile_error(lambda: op(np.ones((2, 64), ml_dtypes.bfloat16), backend="cpu"))


def e0920_no_device_chosen(env: Env) -> Diagnostic:
    no_npu_environment(env)
    return npu_error(run_on_npu(packaged(env)))


def e0921_cuda_device_string(env: Env) -> Diagnostic:
    no_npu_environment(env)
    return npu_error(run_on_npu(packaged(env), device="cuda:0"))


def e0922_set_env_not_sourced(env: Env) -> Diagnostic:
    no_npu_environment(env)
    return npu_error(run_on_npu(packaged(env), device=0))


def e0923_cann_release_candidate(env: Env) -> Diagnostic:
    no_npu_environment(env)
    cann(env, "8.5.RC1")
    return npu_error(run_on_npu(packaged(env), device=0))


def e0924_driver_not_mounted(env: Env) -> Diagnostic:
    no_npu_environment(env)
    cann(env, "8.5.0")
    return npu_error(run_on_npu(packaged(env), device=0))


def e0925_old_driver(env: Env) -> Diagnostic:
    no_npu_environment(env)
    cann(env, "8.5.0")
    driver(env, "24.1.rc3")
    return npu_error(run_on_npu(packaged(env), device=0))


def e0926_bisheng_not_on_path(env: Env) -> Diagnostic:
    ready(env)
    (env.tmp / "bin" / "bisheng").unlink()
    return npu_error(run_on_npu(packaged(env)))


def e0927_package_without_kernels(env: Env) -> Diagnostic:
    ready(env)
    return npu_error(run_on_npu(packaged(env, kernel=None)))


def e0928_bisheng_rejects_the_kernel(env: Env) -> Diagnostic:
    ready(env)
    op = packaged(env, kernel=ROW_TILE_KERNEL)
    source = op.root / "kernels" / "scale_rows" / "npu" / "f32" / "scale_rows_f32_k0.cpp"
    header = env.tmp / "pto-isa" / "include" / "pto" / "common" / "pto_tile.hpp"
    bisheng(env, gcc_says(  # bisheng is clang based
        f"In file included from {source}:1:",
        f"{header}:89:5: error: static assertion failed due to requirement '(3UL * sizeof(float)) % 32 == 0': "
        "Tile: an unboxed RowMajor tile needs Cols * sizeof(DType) to be a multiple of 32 bytes",
        f"{source}:7:9: note: in instantiation of template class "
        "'pto::Tile<pto::TileType::Vec, float, 1, 3>' requested here",
        "1 error generated.",
    ))
    return npu_error(run_on_npu(op))


def e0928_target_without_npu_arch(env: Env) -> Diagnostic:
    ready(env)
    return npu_error(run_on_npu(packaged(env, target="ascend950")))


def e0929_device_not_in_container(env: Env) -> Diagnostic:
    ready(env)
    return npu_error(run_on_npu(packaged(env)))


def e0930_torch_npu_not_installed(env: Env) -> Diagnostic:
    ready(env)
    (env.tmp / "dev").mkdir()
    (env.tmp / "dev" / "davinci0").write_text("")
    # neither is importable, whatever this machine has (with or without torch: the same report)
    env.mp.setitem(sys.modules, "torch", None)
    env.mp.setitem(sys.modules, "torch_npu", None)
    return npu_error(run_on_npu(packaged(env)))


def e0931_pto_isa_root_not_set(env: Env) -> Diagnostic:
    ready(env)
    env.mp.delenv("PTO_ISA_ROOT")
    return npu_error(run_on_npu(packaged(env)))


CASES: list[Callable[[Env], Diagnostic | list[Diagnostic]]] = [
    e0230_reference_function_misspelt,
    e0231_cases_without_reference,
    e0232_reference_takes_too_many_arguments,
    e0232_reference_returns_too_few_outputs,
    e0233_case_misses_a_dim,
    e0234_torch_function_misspelt,
    e0234_torch_without_reference,
    e0700_float64_input,
    e0701_row_without_batch_dim,
    e0702_weights_of_another_width,
    e0867_row_longer_than_max_dims,
    e0732_segment_starts_that_go_back,
    e0703_scalar_not_passed,
    e0703_output_size_unknown,
    e0704_output_passed_by_position,
    e0705_python_list_input,
    e0706_scalar_beyond_f32,
    e0706_scalar_given_as_text,
    e0707_unknown_backend,
    e0707_npu_from_a_loaded_spec,
    e0708_tensor_not_on_the_cpu,
    e0709_transposed_output_buffer,
    e0710_rows_of_zero_width,
    e0711_length_beyond_its_dim,
    e0712_check_fails_inside_a_kernel,
    e0715_rows_not_a_multiple_of_the_block,
    e0716_backward_through_an_op_without_one,
    e0717_two_outputs_in_one_buffer,
    e0718_output_of_a_broadcast_input,
    e0730_row_index_past_the_end,
    e0730_gathered_row_past_the_end,
    e0730_gathered_row_outside_the_table,
    e0730_element_read_at_a_negative_index,
    e0731_slot_named_twice,
    e0833_heads_that_do_not_fill_the_hidden_dim,
    e0839_rotate_by_more_columns_than_a_row_has,
    e0870_length_read_as_unsigned,
    e0885_arch_with_a_blank,
    e0886_cpu_without_avx512,
    e0886_compiler_rejects_the_name,
    e0887_opt_level_with_an_option,
    e0900_no_compiler_installed,
    e0901_tile_row_not_32_byte_aligned,
    e0902_pto_isa_checkout_lacks_an_instruction,
    e0903_pto_isa_root_is_the_include_folder,
    e0904_cache_dir_is_a_file,
    e0905_undefined_helper,
    e0906_compiler_hangs,
    e0906_compiler_probe_hangs,
    e0907_compiler_writes_nothing,
    e0905_library_without_its_entry,
    e0904_cache_shard_is_read_only,
    e0901_compiler_output_not_utf8,
    e0908_bf16_against_a_checkout_without_bfloat16,
    e0920_no_device_chosen,
    e0921_cuda_device_string,
    e0922_set_env_not_sourced,
    e0923_cann_release_candidate,
    e0924_driver_not_mounted,
    e0925_old_driver,
    e0926_bisheng_not_on_path,
    e0927_package_without_kernels,
    e0928_bisheng_rejects_the_kernel,
    e0928_target_without_npu_arch,
    e0929_device_not_in_container,
    e0930_torch_npu_not_installed,
    e0931_pto_isa_root_not_set,
    e0990_pass_breaks_an_invariant,
    e0801_ir_file_with_a_typo,
    e0801_ir_file_from_another_pipeline,
]


def normalise(text: str, env: Env) -> str:
    """Machine-dependent parts of a rendering replaced by placeholders."""
    for path, placeholder in ((env.cache, "<cache>"), (env.tmp, "<tmp>"), (build.HEADER_DIR, "<cpu-header>"),
                              (REPO, "<repo>")):
        for spelling in dict.fromkeys((str(path.resolve()), str(path))):
            text = text.replace(spelling, placeholder)
    text = re.sub(r"\b[0-9a-f]{2}/[0-9a-f]{64}\b", "<key>", text)  # a cache entry: kernels/ab/abcd...
    text = re.sub(r"\b[0-9a-f]{64}\b", "<key>", text)
    # A library this process built earlier, under another test's cache folder.
    text = re.sub(r"\S*/cpp/kernels/<key>", "<cache>/cpp/kernels/<key>", text)
    text = re.sub(r"\.\d+\.tmp\b", ".<pid>.tmp", text)  # a build's partial output, named after its process
    return text.replace(f"/{platform.machine()}-linux/", "/<arch>-linux/")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("PTO_ISA_ROOT", "PTODSL_CXX", "PTODSL_BUILD_TIMEOUT", "PTODSL_CPU_ARCH", "PTODSL_CPU_OPT"):
        monkeypatch.delenv(var, raising=False)
    return Env(tmp_path, monkeypatch)


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_call_build_and_npu_golden(case: Callable[[Env], Diagnostic | list[Diagnostic]], env: Env) -> None:
    got = case(env)
    diags = got if isinstance(got, list) else [got]
    text = normalise(render_all(diags, color=False), env)
    code = FIRST_CODE.search(text)
    assert code is not None and code.group(1) == case.__name__[:5].upper(), text
    check_golden(text, EXPECTED / f"{case.__name__}.expected")


def test_every_case_has_its_expected_file_and_no_file_is_stale() -> None:
    names = {c.__name__ for c in CASES}
    files = {p.stem for p in EXPECTED.glob("*.expected")}
    assert files == names


# ------------------------------------------------------------------ coverage of the registry


def registered_codes() -> set[str]:
    codes: set[str] = set()
    for path in sorted((REPO / "ptodsl" / "diagnostics" / "codes").glob("*.yaml")):
        codes |= set(yaml.safe_load(path.read_text(encoding="utf-8")))
    return codes


def golden_first_codes() -> dict[str, list[str]]:
    """code -> the golden expected files under tests/ whose first reported code it is."""
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("*")):
        if not (path.suffix == ".expected" or path.name == "expected.txt") or not path.is_file():
            continue
        first = FIRST_CODE.search(path.read_text(encoding="utf-8", errors="replace"))
        if first is not None:
            found.setdefault(first.group(1), []).append(path.relative_to(REPO).as_posix())
    return found


def test_every_registered_code_has_a_golden_test() -> None:
    retired = {c for c, info in code_registry().items() if info.retired}
    registered = registered_codes() - retired
    covered = golden_first_codes()
    assert not retired & set(covered), f"retired codes are still reported: {', '.join(sorted(retired & set(covered)))}"
    missing = sorted(registered - set(covered) - set(NOT_EMITTED))
    assert not missing, "codes without a golden test (the first code of an expected file): " + ", ".join(missing)
    stale = sorted(set(NOT_EMITTED) & set(covered))
    assert not stale, f"remove from NOT_EMITTED, they have golden tests now: {', '.join(stale)}"
    assert set(NOT_EMITTED) <= registered, "NOT_EMITTED names codes that are not registered"
