"""The emitted C++ of a few kernels, kept as golden files so that its readable form stays stable,
and the determinism of the emitter.

``golden/<variant>/`` holds every file of the variant (the kernels and the control program). Set
PTODSL_UPDATE_GOLDEN=1 to rewrite them after an intended change, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ptodsl.backends.cpp.emit import emit_spec, emit_variant
from ptodsl.driver import compile_spec, forget_compiled

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("PTODSL_UPDATE_GOLDEN") == "1"
SNAPSHOTS = [("specs/softmax.yaml", "T=f32"), ("specs/rmsnorm.yaml", "T=f32"), ("specs/matmul.yaml", "T=f32")]


def _variant(path: str, variant: str):
    compiled = compile_spec(path)
    index = next(i for i, ck in enumerate(compiled.checked) if ck.variant_name == variant)
    return emit_variant(compiled, index)


@pytest.mark.parametrize(("path", "variant"), SNAPSHOTS, ids=[f"{Path(p).stem}-{v}" for p, v in SNAPSHOTS])
def test_emitted_sources_match_golden(path: str, variant: str):
    emitted = _variant(path, variant)
    folder = GOLDEN / emitted.entry
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.cpp"):
            if stale.name not in emitted.sources:
                stale.unlink()
        for name, text in emitted.sources.items():
            (folder / name).write_text(text, encoding="utf-8")
    assert folder.is_dir(), f"missing {folder.name}; run with PTODSL_UPDATE_GOLDEN=1 to create it"
    assert sorted(p.name for p in folder.glob("*.cpp")) == sorted(emitted.sources)
    for name, text in emitted.sources.items():
        assert text == (folder / name).read_text(encoding="utf-8"), (
            f"{name} differs from its golden file; if the change is intended, rerun with PTODSL_UPDATE_GOLDEN=1")


def test_emitting_twice_gives_identical_bytes():
    first = {v.entry: v.sources for v in emit_spec(compile_spec("specs/online_softmax_attn.yaml"))}
    forget_compiled("specs/online_softmax_attn.yaml")  # compiled again, not copied from the first
    second = {v.entry: v.sources for v in emit_spec(compile_spec("specs/online_softmax_attn.yaml"))}
    assert first == second


def test_generated_files_name_no_machine_paths():
    emitted = _variant("specs/softmax.yaml", "T=f32")
    for text in emitted.sources.values():
        assert str(Path.cwd()) not in text and "/specs/" not in text
        assert "// softmax.pto:" in text


def test_kernel_reads_like_pto_isa():
    kernel = _variant("specs/softmax.yaml", "T=f32").sources["softmax_f32_k0.cpp"]
    assert "#include <pto/pto-inst.hpp>" in kernel and "using namespace pto;" in kernel
    assert "using TileT1 = Tile<TileType::Vec, float, 1, 1024, BLayout::RowMajor, 1, 1024>;" in kernel
    assert "TASSIGN(t1, 32);" in kernel
    assert "TROWMAX(t0, t1, tmp0);" in kernel
    # exp(x - max) in one instruction, the row max read in place through a one-column view
    assert "TROWEXPANDEXPDIF(t7, t1, view1, tmp2);" in kernel and "TROWEXPAND(" not in kernel
    assert "set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);" in kernel and "pipe_barrier(PIPE_V);" in kernel
