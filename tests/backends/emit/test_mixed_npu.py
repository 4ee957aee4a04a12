"""A mixed kernel's NPU form: a cube part and a vector part over one skeleton, the hand-overs between
them behind cross-core flags that the sync checker proves."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import pytest

import ptodsl
from ptodsl.backends.cpp.build import HEADER_DIR
from ptodsl.backends.cpp.emit import emit_npu_variant
from ptodsl.passes import syncheck
from ptodsl.targets import load_target

# cube -> vector (the first product), vector -> cube (its exp feeds the second)
TARGET = load_target("ascend910b")
MIX_PTO = ("kernel mix(x: f32[S, K], w: f32[K, N], u: f32[N, N], y: out f32[S, N]):\n"
           "    for j in loop(3, name=\"steps\"):\n"
           "        y[:] = matmul(exp(matmul(x, w)), u)\n")
MIX_YAML = ("op: mix\nschedule: {vec_tile: [16, 64], cube_tile: {m: [16, 16], k: [16, 16], n: [16, 64]}, "
            "pass_options: {row_interchange: true}}\n")
# stand-ins for the NPU intrinsics the parts call, so that g++ can read the NPU branch
STUBS = """#define __DAV_CUBE__
#define __DAV_VEC__
inline void set_ffts_base_addr(uint64_t) {}
inline void ffts_cross_core_sync(pipe_t, uint64_t) {}
inline void wait_flag_dev(int) {}
inline int64_t get_block_idx() { return 0; }
inline int64_t get_block_num() { return 1; }
inline int64_t get_subblockid() { return 0; }
"""
CUBE_ONLY = ("TMATMUL", "PIPE_M,", "PIPE_M)", "PIPE_FIX, PIPE_", "PIPE_MTE1")
VECTOR_ONLY = ("TEXP", "PIPE_V", "PIPE_MTE3")


@pytest.fixture
def mix(tmp_path):
    (tmp_path / "mix.pto").write_text(MIX_PTO)
    (tmp_path / "mix.yaml").write_text(MIX_YAML)
    return ptodsl.load(str(tmp_path / "mix.yaml"))


def _parts(text: str) -> tuple[str, str]:
    npu = text.split("#else", 2)[2]  # the signature's #if, then the body's
    cube = npu.split("#if defined(__DAV_CUBE__)")[1].split("#endif")[0]
    vec = npu.split("#if defined(__DAV_VEC__)")[1].split("#endif")[0]
    return cube, vec


def _mixed_units(variant) -> dict[str, str]:
    return {k: text for k, (kind, text) in variant.kernels.items() if kind == "mixed"}


def test_a_mixed_kernel_splits_into_a_cube_part_and_a_vector_part(mix):
    variant = emit_npu_variant(mix.compiled, 0)
    mixed = _mixed_units(variant)
    assert mixed
    for text in mixed.values():
        cube, vec = _parts(text)
        assert "TMATMUL" in cube and not any(s in vec for s in CUBE_ONLY)
        assert "TEXP" in vec and not any(s in cube for s in VECTOR_ONLY)
        # each cross-core flag id the cube sets, the vector part waits for, and the other way
        sent = {c: set(re.findall(r"ffts_cross_core_sync\(PIPE_\w+, \(.*?<< 8\)\)\)", p)) for c, p in
                (("cube", cube), ("vec", vec))}
        ids = {c: {int(m) for m in re.findall(r"\(uint64_t\)\((\d+)\) << 8", " ".join(s))} for c, s in sent.items()}
        waited = {c: {int(m) for m in re.findall(r"wait_flag_dev\((\d+)\)", p)} for c, p in
                  (("cube", cube), ("vec", vec))}
        assert ids["cube"] and ids["vec"]
        assert ids["cube"] <= waited["vec"] and ids["vec"] <= waited["cube"]
        # only sub-block 0 of the two vector cores moves data; both run every flag
        assert "get_subblockid() == 0" in vec and "if (ptodsl_aiv0) {" in vec
        assert "set_ffts_base_addr((uint64_t)ptodsl_ffts)" in text
    assert "ptodsl_c2c_ctrl()" in variant.host


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("spec", ["mix", pytest.param("specs/paged_attention.yaml", marks=pytest.mark.slow),
                                  pytest.param("specs/varlen_attention.yaml", marks=pytest.mark.slow)])
def test_the_npu_parts_of_a_mixed_kernel_are_valid_cpp(mix, spec: str, tmp_path):
    """g++ reads both parts against ptodsl's header, the NPU intrinsics stubbed: every name a part
    uses is declared in it (a tile, a view, a loop index). The paged and varlen attentions' kernels
    hold their whole loop nests: element reads, bounds guards and loops of 0 or 1 trips."""
    op = mix if spec == "mix" else ptodsl.load(spec)
    units = _mixed_units(emit_npu_variant(op.compiled, 0))
    assert units
    for name, text in units.items():
        src = text.split("extern \"C\" void")[0]  # the kernel, without its host launcher
        src = src.replace("#if defined(PTO_CPU_SUBSET) || defined(__CPU_SIM)", "#if 0")
        src = src.replace("#include <pto/pto-inst.hpp>", "#include <pto/pto-inst.hpp>\n" + STUBS, 1)
        path = tmp_path / f"{name}.cpp"
        path.write_text(src)
        run = subprocess.run(["g++", "-std=c++20", "-fsyntax-only", f"-I{HEADER_DIR}", str(path)],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-3000:]


def _mixed_kernels(mix):
    block = copy.deepcopy(mix.compiled.stages["block"])  # the tests below cut flags out of it
    return block, [f for f in block.funcs if f.kind == "mixed"]


def _is_cross(op) -> bool:
    return op.name in ("sync.set", "sync.wait") and op.attrs["src"].split(".")[0] != op.attrs["dst"].split(".")[0]


def _regions(ops):
    yield ops
    for op in ops:
        for r in op.regions:
            yield from _regions(r)


def test_every_hand_over_between_the_cores_is_proved(mix):
    block, kernels = _mixed_kernels(mix)
    assert kernels and syncheck.check(block, TARGET.max_event_ids, TARGET.cross_core_flags) == []
    for kernel in kernels:
        waits = [(r, op) for r in _regions(kernel.body) for op in r if _is_cross(op) and op.name == "sync.wait"]
        assert waits  # the cube's results reach the vector core and back through flags
        for region, wait in waits:  # dropping any one leaves a hand-over unordered or a set unconsumed
            k = next(i for i, x in enumerate(region) if x is wait)
            del region[k]
            assert syncheck.check_kernel(kernel, TARGET.max_event_ids, None, TARGET.cross_core_flags), "a dropped cross-core wait went unnoticed"
            region.insert(k, wait)


def test_a_producer_core_running_ahead_of_its_consumer_is_refused(mix):
    """A cross-core flag counts: the credits the sync pass adds keep each producer at most one
    hand-over ahead. Take away every flag into the cube core (sets and waits alike, so the rest
    still balances): nothing then holds the cube back, and the checker says so."""
    _block, kernels = _mixed_kernels(mix)
    kernel = kernels[0]
    for region in _regions(kernel.body):
        region[:] = [op for op in region if not (_is_cross(op) and op.attrs["dst"].startswith("cube."))]
    problems = [str(p) for p in syncheck.check_kernel(kernel, TARGET.max_event_ids, None, TARGET.cross_core_flags)]
    assert any("set again before the producer knows" in p for p in problems), problems
