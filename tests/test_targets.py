"""The hardware target files and their loader."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from ptodsl.diagnostics import CompileError, Diagnostics
from ptodsl.dtypes import DTYPE_NAMES
from ptodsl.targets import (
    TARGET_SCHEMA,
    Target,
    load_target,
    load_target_file,
    parse_target,
    target_json_schema,
    target_names,
)

TARGETS_DIR = Path(__file__).resolve().parents[1] / "ptodsl" / "targets"
KIB = 1024


def test_target_names_come_from_the_files() -> None:
    assert target_names() == sorted(p.stem for p in TARGETS_DIR.glob("*.yaml"))
    assert {"ascend910b", "ascend950"} <= set(target_names())


def test_ascend910b_numbers() -> None:
    t = load_target("ascend910b")
    assert t.name == "ascend910b"
    assert (t.ub_bytes, t.l1_bytes) == (192 * KIB, 512 * KIB)
    assert (t.l0a_bytes, t.l0b_bytes, t.l0c_bytes) == (64 * KIB, 64 * KIB, 128 * KIB)
    assert t.ub_block_bytes == 32
    assert t.max_event_ids == 8
    assert t.max_mkn == 4095
    assert t.cube_dtypes == (("f32", "f16", "f16"), ("f32", "bf16", "bf16"), ("f32", "f32", "f32"),
                             ("i32", "i8", "i8"))
    assert t.supports_matmul("f32", "bf16", "bf16") and not t.supports_matmul("f16", "f16", "f16")
    # the fixpipe narrows an f32 accumulator on its way to GM; an i32 one leaves as it is
    assert t.stores_from_acc("f32", "bf16") and t.stores_from_acc("i32", "i32")
    assert not t.stores_from_acc("i32", "f16") and not t.stores_from_acc("f32", "i8")
    # the A2/A3 bias table takes f16 rows widened to f32, but has no conversion for bf16
    assert (t.bias_bytes, t.bias_row_bytes) == (KIB, 64)
    assert t.moves_bias("f32", "f16") and not t.moves_bias("f32", "bf16") and not t.moves_bias("f16", "f16")


def test_ascend950_differs_in_ub_l0c_and_the_chip() -> None:
    a, b = load_target("ascend910b"), load_target("ascend950")
    assert (b.ub_bytes, b.l0c_bytes) == (248 * KIB, 256 * KIB)
    assert (a.npu_vector_arch, a.npu_cube_arch) == ("dav-c220-vec", "dav-c220-cube")
    assert (b.npu_vector_arch, b.npu_cube_arch, b.npu_mixed_arch) == ("", "", "")  # no NPU build recipe for the 950 yet
    assert a.npu_mixed_arch == "dav-c220"
    # A5's bias table is 4 KiB and widens bf16 rows too
    assert b.bias_bytes == 4 * KIB and b.moves_bias("f32", "bf16")
    same = [f.name for f in fields(Target)
            if f.name not in ("name", "description", "ub_bytes", "l0c_bytes", "npu_vector_arch", "npu_cube_arch", "npu_mixed_arch",
                           "vector_instructions", "bias_bytes", "bias_moves", "chip")]
    assert all(getattr(a, n) == getattr(b, n) for n in same)


def test_the_chip_of_each_target() -> None:
    """Core counts from pto-isa's own kernels (910B: 24 AIC, 48 AIV; 950PR: 32 AIC, 64 AIV, from
    CANN's platform_config as pto-isa's a5 gemm_ar README quotes it), one AIC to two AIV."""
    a, b = load_target("ascend910b").chip, load_target("ascend950").chip
    assert (a.aic_cores, a.aiv_cores) == (24, 48) and (b.aic_cores, b.aiv_cores) == (32, 64)
    assert a.cores("cube") == 24 and a.cores("vector") == 48
    for c in (a, b):
        assert c.aiv_cores == 2 * c.aic_cores
        assert c.hbm_gib_per_s == pytest.approx(1.6e12 / 2**30, rel=1e-4)  # 1.6 TB/s
        assert c.launch_us > 0 and c.cross_core_flag_cycles > 0


def test_a_chip_without_bandwidth_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(_good_text().replace("hbm_gib_per_s: 1490.1", "hbm_gib_per_s: 0"))
    with pytest.raises(CompileError) as err:
        load_target_file(str(path))
    (d,) = err.value.diagnostics
    assert d.code == "E0209" and "hbm_gib_per_s" in d.message and d.span is not None


@pytest.mark.parametrize("name", target_names())
def test_every_shipped_target_is_consistent(name: str) -> None:
    t = load_target(name)
    assert load_target(name) is t  # cached
    for c, a, b in t.cube_dtypes:
        assert {c, a, b} <= set(DTYPE_NAMES)
    # Buffers are whole numbers of alignment blocks.
    for acc, gm in t.cube_stores:
        assert any(c == acc for c, _, _ in t.cube_dtypes) and gm in DTYPE_NAMES
    for to, src in t.bias_moves:
        assert any(c == to for c, _, _ in t.cube_dtypes) and src in DTYPE_NAMES
    assert t.bias_row_bytes % t.ub_block_bytes == 0
    for size in (t.ub_bytes, t.l1_bytes, t.l0a_bytes, t.l0b_bytes, t.l0c_bytes, t.bias_bytes):
        assert size % t.ub_block_bytes == 0
    assert t.vector_repeat_bytes % t.ub_block_bytes == 0


def test_unknown_target() -> None:
    with pytest.raises(CompileError) as err:
        load_target("ascend91b")
    (d,) = err.value.diagnostics
    assert d.code == "E0214" and d.help == "did you mean `ascend910b`?" and "ascend950" in d.notes[0]


def _good_text() -> str:
    return (TARGETS_DIR / "ascend910b.yaml").read_text(encoding="utf-8")


def test_custom_target_file(tmp_path: Path) -> None:
    path = tmp_path / "mychip.yaml"
    path.write_text(_good_text().replace("ub_bytes: 196608", "ub_bytes: 65536"))
    t = load_target_file(str(path))
    assert t.name == "mychip" and t.ub_bytes == 65536


@pytest.mark.parametrize(
    ("edit", "code", "words"),
    [
        (lambda s: s.replace("ub_bytes: 196608", "ub_byte: 196608"), "E0206", "unknown key `ub_byte`"),
        (lambda s: s.replace("l1_bytes: 524288", "l1_bytes: lots"), "E0207", "must be an integer"),
        (lambda s: s.replace("max_event_ids: 8", "max_event_ids: 0"), "E0209", "must be positive"),
        (lambda s: s.replace("[i32, i8, i8]", "[i32, int8, i8]"), "E0212", "unknown dtype `int8`"),
        (lambda s: s.replace("[i32, i8, i8]", "[i32, i8]"), "E0209", "exactly 3 items"),
        (lambda s: "\n".join(ln for ln in s.splitlines() if not ln.startswith("max_mkn")), "E0208",
         "missing the required key `max_mkn`"),
        (lambda s: s + "max_mkn: 1\n", "E0202", "duplicate key `max_mkn`"),
        (lambda s: s.replace("max_mkn: 4095", "max_mkn: [4095"), "E0200", "invalid YAML"),
        (lambda s: s.replace("warn_bytes: 24576", "warn_bytes: 40000"), "E0209",
         "`stack.warn_bytes` is above `stack.limit_bytes`"),
        (lambda s: s.replace("  tile_bytes: 24\n", ""), "E0208", "missing the required key `tile_bytes`"),
    ],
)
def test_bad_target_file_is_reported_at_its_line(tmp_path: Path, edit, code: str, words: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(edit(_good_text()))
    with pytest.raises(CompileError) as err:
        load_target_file(str(path))
    d = err.value.diagnostics[0]
    assert d.code == code and words in d.message, err.value.render()
    assert d.span is not None and d.span.file == str(path)


def test_empty_and_unreadable_target_files(tmp_path: Path) -> None:
    diags = Diagnostics()
    assert parse_target("# nothing\n", "x", "x.yaml", diags) is None
    assert [d.code for d in diags] == ["E0204"]
    with pytest.raises(CompileError) as err:
        load_target_file(str(tmp_path / "missing.yaml"))
    assert err.value.diagnostics[0].code == "E0203"


def test_target_schema_matches_dataclass_and_is_closed() -> None:
    assert ["name", *TARGET_SCHEMA.fields] == [f.name for f in fields(Target)]
    schema = target_json_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(TARGET_SCHEMA.fields)


def test_target_files_validate_with_jsonschema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    validator = jsonschema.Draft202012Validator(target_json_schema())
    for path in TARGETS_DIR.glob("*.yaml"):
        assert list(validator.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8")))) == [], path


# Names and numbers that were once hardware facts written in code; they belong to targets/*.yaml.
HARDWARE_LITERALS = [
    r"\bALIGN\s*=", r"\bFRACTAL_ROWS\b", r"\bMAX_TILE_RANK\b", r"\bACC_BYTES\b", r"\bNPU_ARCH\b",
    r"\bDEFAULT_VEC_TILE\b", r"\bDEFAULT_CUBE_TILE\b", r"max_events: int = \d", r"dav-\d{4}",
    r"\b(196608|524288|131072|65536)\b", r"SLayout::\w+, 512\b", r"\b(32768|24576)\b",
    # the chip: core counts, the HBM bandwidth, a launch's cost
    r"\b(aic|aiv|cube|vector|cores?)\w*\s*[=:]\s*(20|24|32|40|48|64)\b", r"\b1490(\.1)?\b", r"\b1\.6e12\b",
    r"\b(launch|flag)\w*\s*[=:]\s*\d",
]


def test_no_hardware_literal_outside_the_targets():
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "ptodsl"
    found = []
    for path in package.rglob("*.py"):
        if "targets" in path.relative_to(package).parts:
            continue
        text = path.read_text(encoding="utf-8")
        for pattern in HARDWARE_LITERALS:
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(package)}:{line}: {m.group()}")
    assert not found, "hardware facts outside ptodsl/targets:\n" + "\n".join(found)


def test_stack_model_of_the_shipped_targets() -> None:
    for name in target_names():
        s = load_target(name).stack
        assert (s.limit_bytes, s.warn_bytes) == (32 * KIB, 24 * KIB)
        # pto-isa's Tile: two unsigned valid extents, a bool, a pointer; GlobalTensor: a pointer and
        # a Shape and a Stride of five int64_t each
        assert (s.tile_bytes, s.shape_bytes, s.stride_bytes) == (24, 40, 40)
        assert s.global_tensor_bytes == s.pointer_bytes + s.shape_bytes + s.stride_bytes


def test_vector_instruction_rules_come_from_the_headers() -> None:
    a2, a5 = load_target("ascend910b"), load_target("ascend950")
    # The A2/A3 vector unit has no bf16 arithmetic, unary, compare or reduction instruction.
    for instr in ("TADD", "TMUL", "TEXP", "TCMP", "TROWSUM", "TCOLMAX", "TDIV"):
        assert a2.computes(instr, "f32") and not a2.computes(instr, "bf16"), instr
    assert not a2.computes("TABS", "i32") and a2.computes("TABS", "f16")  # TABS is float-only
    assert a2.computes("TROWEXPAND", "bf16") and a2.computes("TSEL", "bf16")  # moves of 16-bit data
    assert a2.converts("f32", "bf16") and a2.converts("bf16", "f32") and not a2.converts("f16", "bf16")
    assert a5.computes("TADD", "bf16") and not a5.computes("TDIV", "bf16")
    assert a2.vector_rule("TROWSUM").layouts_of(0) == ("row", "col1")
    assert a2.vector_rule("TROWSUM").layouts_of(5) == ("row",)
    assert a2.vector_rule("TADDS").layouts_of(0) is None
    assert a2.vector_rule("TADD").header == "TAdd.hpp"


def test_a_rule_gives_dtypes_or_casts(tmp_path: Path) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(_good_text().replace("TDIV:  {header: TDiv.hpp,  dtypes: [f16, f32]",
                                         "TDIV:  {header: TDiv.hpp,  dtypes: [f16, f32], casts: [[f16, f32]]"))
    with pytest.raises(CompileError) as err:
        load_target_file(str(path))
    (d,) = err.value.diagnostics
    assert d.code == "E0209" and "exactly one of `dtypes` and `casts`" in d.message
    assert d.span is not None and d.span.line > 20
