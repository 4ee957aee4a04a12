"""Building the emitted C++: the cache (nothing is compiled twice) and the build-error path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptodsl.backends.cpp.build import STATS, build_shared
from ptodsl.backends.cpp.emit import emit_variant
from ptodsl.backends.cpp.run import build_defines, build_many, build_spec
from ptodsl.diagnostics import CompileError
from ptodsl.driver import compile_spec

pytestmark = pytest.mark.cpu


def test_second_build_of_the_library_compiles_nothing(library, request):
    """The session fixture built the variants of the selected golden cases; asking the cache again
    (not this process's memory of it) answers every one without running the compiler."""
    variants = request.session.ptodsl_library_variants
    assert variants or not any("test_case_on_cpu" in item.nodeid for item in request.session.items)
    compiles, hits = STATS.compiles, STATS.hits
    paths = build_many(variants, reuse=False)
    assert STATS.compiles == compiles, "a cached library was compiled again"
    assert STATS.hits - hits == len(variants) == len(paths)
    # one library per variant, named after its entry (the control program)
    assert sorted(p.name for p in paths) == sorted(
        f"lib{compiled.stages['tensor'].funcs[i].name}.so" for compiled, i in variants)


def test_cold_then_cached_build(gxx, tmp_path, monkeypatch):
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path / "cold"))
    compiled = compile_spec("specs/add_one.yaml")
    compiles = STATS.compiles
    first = build_spec(compiled, reuse=False)
    assert STATS.compiles - compiles == len(compiled.checked)
    second = build_spec(compiled, reuse=False)
    assert second == first and STATS.compiles - compiles == len(compiled.checked)
    # the library is named after the variant, beside the generated sources it was built from
    assert first[0].name == "libadd_one.so" and (first[0].parent / "add_one_k0.cpp").is_file()


def test_a_broken_kernel_reports_its_file_and_a_repro_command(gxx):
    compiled = compile_spec("specs/softmax.yaml")
    emitted = emit_variant(compiled, 0)
    sources = dict(emitted.sources)
    sources["softmax_f32_k0.cpp"] = sources["softmax_f32_k0.cpp"].replace("TROWMAX(", "TROWMAXX(")
    with pytest.raises(CompileError) as info:
        build_shared(sources, emitted.library, defines=build_defines(compiled))
    (diag,) = info.value.diagnostics
    assert diag.code == "E0901"
    assert diag.span is not None and diag.span.file.endswith("softmax_f32_k0.cpp")
    broken = next(n for n, line in enumerate(sources["softmax_f32_k0.cpp"].splitlines(), 1) if "TROWMAXX" in line)
    assert diag.span.line == broken
    # the variant's units build as one translation unit that includes each of them (build.unity_source)
    assert diag.help.startswith("repeat the build with: cd ") and "ptodsl_unity.cpp" in diag.help
    kept = Path(diag.help.split("cd ", 1)[1].split(" && ", 1)[0])
    assert (kept / "softmax_f32_k0.cpp").read_text() == sources["softmax_f32_k0.cpp"]
    assert '#include "softmax_f32_k0.cpp"' in (kept / "ptodsl_unity.cpp").read_text()
    assert any("TROWMAXX" in note for note in diag.notes)
