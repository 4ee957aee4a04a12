"""build_shared: the kernel cache, its keys and its robustness, and the build diagnostics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import ptodsl
from ptodsl.backends.cpp import build
from ptodsl.backends.cpp.build import STATS, build_shared, load_library
from ptodsl.diagnostics import CompileError
from ptodsl.diagnostics.render import render_all

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

ANSWER = 'extern "C" int answer() { return 42; }\n'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty cache for one test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(root))
    return root


def entries(cache: Path) -> list[Path]:
    return sorted((cache / "cpp" / "kernels").glob("*/*"))


def compile_error(sources: dict[str, str], name: str = "bad", **kwargs) -> CompileError:
    with pytest.raises(CompileError) as info:
        build_shared(sources, name, **kwargs)
    return info.value


# ---------------------------------------------------------------------------------- the cache


def test_build_load_and_cache_location(cache):
    path = build_shared({"answer.cpp": ANSWER}, "answer")
    assert path.name == "libanswer.so" and path.is_relative_to(cache / "cpp" / "kernels")
    assert load_library(path).answer() == 42
    manifest = json.loads((path.parent / "entry.json").read_text())
    assert manifest["library"] == "libanswer.so" and build.opt_flag() in manifest["command"]
    assert (path.parent / "answer.cpp").read_text() == ANSWER  # the sources stay beside the library


def test_the_optimisation_level_is_the_environments_and_part_of_the_key(cache, monkeypatch):
    monkeypatch.delenv("PTODSL_CPU_OPT", raising=False)
    default = build_shared({"answer.cpp": ANSWER}, "answer")
    monkeypatch.setenv("PTODSL_CPU_OPT", " 1 ")
    low = build_shared({"answer.cpp": ANSWER}, "answer")
    commands = [json.loads((p.parent / "entry.json").read_text())["command"] for p in (default, low)]
    assert [[f for f in c if f.startswith("-O")] for c in commands] == [["-O3"], ["-O1"]]
    assert default.parent != low.parent and load_library(low).answer() == 42
    for bad in ("4", "fast", "3 -DX"):
        monkeypatch.setenv("PTODSL_CPU_OPT", bad)
        with pytest.raises(CompileError) as info:
            build_shared({"answer.cpp": ANSWER}, "answer")
        assert [d.code for d in info.value.diagnostics] == ["E0887"]


def test_cache_hit_runs_no_compiler(cache, monkeypatch):
    first = build_shared({"answer.cpp": ANSWER}, "answer")
    compiles, hits = STATS.compiles, STATS.hits

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a cache hit ran {args[0]}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert build_shared({"answer.cpp": ANSWER}, "answer") == first
    assert (STATS.compiles, STATS.hits) == (compiles, hits + 1)


def test_cache_hit_in_a_fresh_process_runs_no_compiler(cache):
    build_shared({"answer.cpp": ANSWER}, "answer")
    script = textwrap.dedent(f"""
        import subprocess
        def refuse(*a, **k):
            raise SystemExit("compiler called: " + repr(a[0]))
        subprocess.run = refuse
        from ptodsl.backends.cpp.build import STATS, build_shared
        build_shared({{"answer.cpp": {ANSWER!r}}}, "answer")
        print(STATS.compiles, STATS.hits, STATS.probes)
    """)
    # the child must import the same ptodsl (and so the same header folder) as this process, whether
    # that is the source tree or an installed copy
    here = str(Path(ptodsl.__file__).resolve().parents[1])
    env = {**os.environ, "PTODSL_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    # (run it outside the checkout too: `python -c` puts the working folder first on sys.path)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env,
                            cwd=cache)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "1", "0"]  # toolchain facts come from the cache too


@pytest.mark.parametrize("change", [
    {"sources": {"answer.cpp": ANSWER.replace("42", "43")}},
    {"sources": {"other.cpp": ANSWER}},
    {"name": "answer2"},
    {"flags": ("-DEXTRA",)},
    {"defines": {"PTO_CPU_UB_BYTES": 4096}},
])
def test_any_change_rebuilds(cache, change):
    base = {"sources": {"answer.cpp": ANSWER}, "name": "answer", "flags": (), "defines": None}
    first = build_shared(base["sources"], base["name"], flags=base["flags"], defines=base["defines"])
    compiles = STATS.compiles
    changed = {**base, **change}
    second = build_shared(changed["sources"], changed["name"], flags=changed["flags"], defines=changed["defines"])
    assert second != first and STATS.compiles == compiles + 1
    assert len(entries(cache)) == 2


def test_key_covers_compiler_version_and_every_header(tmp_path):
    headers = tmp_path / "include" / "pto"
    shutil.copytree(build.HEADER_DIR / "pto", headers)
    mode = build.IncludeMode("ptodsl", tmp_path / "include", ("-std=c++17",), "")
    chain = build.Toolchain("/usr/bin/g++", "g++ 12.2.0", True)
    sources = {"k.cpp": ANSWER}
    key = build.cache_key(sources, "k", ["-O3"], chain, mode)
    assert key == build.cache_key(sources, "k", ["-O3"], chain, mode)
    assert key != build.cache_key(sources, "k", ["-O3"], build.Toolchain("/usr/bin/g++", "g++ 13.1.0", True), mode)
    assert key != build.cache_key(sources, "k", ["-O2"], chain, mode)  # every flag of the command
    time.sleep(0.01)  # a new mtime, so the per-file digest memo cannot hide the edits
    seen = {key}
    for header in sorted(headers.rglob("*.hpp")):  # the top header and the nested ones alike
        header.write_text(header.read_text() + "\n// edited\n")
        key = build.cache_key(sources, "k", ["-O3"], chain, mode)
        assert key not in seen, f"editing {header.relative_to(headers)} left the cache key as it was"
        seen.add(key)
    assert len(seen) > 2


def test_defines_and_flags_reach_the_compiler(cache):
    source = 'extern "C" int value() { return VALUE + (FLAG ? 100 : 0) + EXTRA; }\n'
    path = build_shared({"v.cpp": source}, "value", flags=("-DEXTRA=1000",), defines={"VALUE": 7, "FLAG": True})
    assert load_library(path).value() == 1107


@pytest.mark.parametrize("damage", ["truncate", "garbage", "no_manifest", "bad_manifest", "no_library"])
def test_damaged_entry_is_rebuilt(cache, damage):
    path = build_shared({"answer.cpp": ANSWER}, "answer")
    manifest = path.parent / "entry.json"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "no_manifest":
        manifest.unlink()
    elif damage == "bad_manifest":
        manifest.write_text("{not json")
    else:
        path.unlink()
    compiles, discarded = STATS.compiles, STATS.discarded
    again = build_shared({"answer.cpp": ANSWER}, "answer")
    assert again == path and STATS.compiles == compiles + 1 and STATS.discarded == discarded + 1
    assert load_library(again).answer() == 42
    assert not list((cache / "cpp" / "tmp").iterdir())


def test_concurrent_builds_of_one_kernel(cache):
    # Long enough to compile that the two processes overlap; both must end with the same entry.
    source = '#include <pto/pto-inst.hpp>\n' + ANSWER
    script = textwrap.dedent(f"""
        import sys, time
        from ptodsl.backends.cpp.build import build_shared, load_library
        start = float(sys.argv[1])
        time.sleep(max(0.0, start - time.time()))
        path = build_shared({{"race.cpp": {source!r}}}, "race")
        assert load_library(path).answer() == 42
        print(path)
    """)
    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", script, str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PTODSL_CACHE_DIR": str(cache)})
             for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    paths = {out.strip() for out, _ in outputs}
    assert len(paths) == 1 and len(entries(cache)) == 1
    assert not [p for p in (cache / "cpp" / "tmp").iterdir()], "no half-built directories are left behind"


def test_builds_without_openmp_when_the_compiler_lacks_it(cache, monkeypatch, tmp_path):
    fake = tmp_path / "gxx-without-openmp"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && { echo "no OpenMP" >&2; exit 1; }; done\n'
                    f'exec {shutil.which("g++")} "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PTODSL_CXX", str(fake))
    assert build.find_toolchain().openmp is False
    path = build_shared({"answer.cpp": ANSWER}, "answer")
    assert load_library(path).answer() == 42
    assert "-fopenmp" not in json.loads((path.parent / "entry.json").read_text())["command"]


def test_cache_directory_selection(monkeypatch, tmp_path):
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(tmp_path / "explicit"))
    assert build.cache_root() == tmp_path / "explicit"
    monkeypatch.delenv("PTODSL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_root() == tmp_path / "xdg" / "ptodsl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert build.cache_root() == tmp_path / "home" / ".cache" / "ptodsl"


def test_unwritable_cache_is_a_diagnostic(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(blocker / "cache"))
    assert compile_error({"answer.cpp": ANSWER}).diagnostics[0].code == "E0904"


def test_input_validation(cache):
    with pytest.raises(ValueError, match="library name"):
        build_shared({"a.cpp": ANSWER}, "../evil")
    with pytest.raises(ValueError, match="no translation unit"):
        build_shared({"a.hpp": ANSWER}, "x")
    with pytest.raises(ValueError, match="plain file name"):
        build_shared({"sub/a.cpp": ANSWER}, "x")
    with pytest.raises(ValueError, match="macro name"):
        build_shared({"a.cpp": ANSWER}, "x", defines={"1BAD": 1})


# ---------------------------------------------------------------------------------- diagnostics


def test_missing_compiler(cache, monkeypatch):
    monkeypatch.setenv("PTODSL_CXX", "no-such-compiler-xyz")
    err = compile_error({"answer.cpp": ANSWER})
    diag = err.diagnostics[0]
    assert diag.code == "E0900" and "`no-such-compiler-xyz` was not found" in diag.message
    assert "PTODSL_CXX" in diag.help


def test_syntax_error_points_at_the_generated_line(cache):
    source = "// generated\n#include <cstdint>\nextern \"C\" int f() {\n    return undefined_name + 1;\n}\n"
    err = compile_error({"kernel.cpp": source}, "broken")
    diag = err.diagnostics[0]
    assert diag.code == "E0901"
    assert "'undefined_name' was not declared" in diag.message
    assert diag.span is not None and (diag.span.line, diag.span.col) == (4, 12)
    kept = Path(diag.span.file)
    assert kept.parent.parent == cache / "cpp" / "failed" and kept.read_text() == source
    assert (kept.parent / "compiler.log").is_file()
    rendered = render_all(err.diagnostics)
    assert "return undefined_name + 1;" in rendered  # the renderer shows the kept file's line
    assert "compiler output:" in rendered
    # The one-line repro command fails the same way.
    repro = diag.help.removeprefix("repeat the build with: ")
    rerun = subprocess.run(repro, shell=True, capture_output=True, text=True, timeout=120)
    assert rerun.returncode != 0 and "undefined_name" in rerun.stderr


STATIC_CHECKS = {
    "row_major_alignment": ("Tile<TileType::Vec, float, 16, 7> t;",
                            "unboxed RowMajor tile needs Cols * sizeof(DType) to be a multiple of 32 bytes"),
    "col_major_alignment": ("Tile<TileType::Vec, half, 8, 1, BLayout::ColMajor, 8, 1> t;",
                            "unboxed ColMajor tile needs Rows * sizeof(DType) to be a multiple of 32 bytes"),
    "valid_larger_than_shape": ("Tile<TileType::Vec, float, 16, 32, BLayout::RowMajor, 17, 32> t;",
                                "static valid row count must be in [1, Rows]"),
    "matmul_types": ("TileLeft<half, 16, 16> a; TileRight<float, 16, 16> b; TileAcc<float, 16, 16> c; "
                     "TMATMUL(c, a, b);", "TMATMUL: (C, A, B) element types must be"),
    "vec_load_layout": ("Tile<TileType::Vec, float, 8, 8, BLayout::ColMajor> t; float* p = nullptr; "
                        "GlobalTensor<float, Shape<1, 1, 1, 8, 8>, Stride<1, 1, 1, 8, 1>> g(p); TLOAD(t, g);",
                        "a Vec tile takes ND data into an unboxed RowMajor tile"),
}


@pytest.mark.parametrize("case", sorted(STATIC_CHECKS))
def test_api_static_checks_fail_the_build(cache, case):
    statement, expected = STATIC_CHECKS[case]
    source = ("#include <pto/pto-inst.hpp>\nusing namespace pto;\n\n"
              f"extern \"C\" void kernel() {{\n    {statement}\n}}\n")
    diag = compile_error({"kernel.cpp": source}, case).diagnostics[0]
    assert diag.code == "E0901"
    assert expected in diag.message
    # A failed check inside the header is reported at the kernel line that instantiated it.
    assert diag.span is not None and Path(diag.span.file).name == "kernel.cpp" and diag.span.line == 5
    assert diag.help.startswith("repeat the build with: cd ") and " -o lib" in diag.help


def test_library_that_does_not_load(cache):
    source = 'extern "C" int missing_symbol();\nextern "C" int f() { return missing_symbol(); }\n'
    path = build_shared({"u.cpp": source}, "undefined")
    with pytest.raises(CompileError) as info:
        load_library(path)
    assert info.value.diagnostics[0].code == "E0905" and "missing_symbol" in info.value.diagnostics[0].message


def test_build_codes_are_registered_with_explanations():
    from ptodsl.diagnostics import code_registry

    codes = [c for c in code_registry() if "E0900" <= c <= "E0919"]
    assert codes == ["E0900", "E0901", "E0902", "E0903", "E0904", "E0905", "E0906", "E0907", "E0908"]
    assert all(len(code_registry()[c].explain) > 80 for c in codes)


# ---------------------------------------------------------------------------------- PTO_ISA_ROOT


def fake_pto_isa(root: Path, body: str) -> Path:
    """A stand-in checkout: enough to show which flags and prelude that path compiles with."""
    header = root / "include" / "pto" / "pto-inst.hpp"
    header.parent.mkdir(parents=True)
    header.write_text(body)
    return root


def test_pto_isa_root_builds_with_cpu_sim_and_cstdint(cache, monkeypatch, tmp_path):
    # The real library needs <cstdint> before its header and -D__CPU_SIM for the CPU.
    root = fake_pto_isa(tmp_path / "pto-isa", "#ifndef __CPU_SIM\n#error no CPU sim\n#endif\n"
                                              "inline uint32_t real_library() { return 7; }\n")
    monkeypatch.setenv("PTO_ISA_ROOT", str(root))
    source = '#include <pto/pto-inst.hpp>\nextern "C" int f() { return real_library(); }\n'
    path = build_shared({"k.cpp": source}, "real")
    assert load_library(path).f() == 7
    monkeypatch.delenv("PTO_ISA_ROOT")
    with pytest.raises(CompileError):  # ptodsl's own header has no real_library()
        build_shared({"k.cpp": source}, "real")


def test_pto_isa_root_failure_is_reported_as_optional(cache, monkeypatch, tmp_path):
    root = fake_pto_isa(tmp_path / "pto-isa", "// nothing\n")
    monkeypatch.setenv("PTO_ISA_ROOT", str(root))
    source = '#include <pto/pto-inst.hpp>\n\nextern "C" int f() { return not_there(); }\n'
    diag = compile_error({"k.cpp": source}).diagnostics[0]
    assert diag.code == "E0902" and "PTO_ISA_ROOT" in " ".join(diag.notes)
    # Lines are those of the generated text, not of the copy with the <cstdint> prelude.
    assert diag.span is not None and diag.span.line == 3
    assert Path(diag.span.file).read_text() == source


def test_pto_isa_root_without_the_header(cache, monkeypatch, tmp_path):
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path))
    diag = compile_error({"k.cpp": ANSWER}).diagnostics[0]
    assert diag.code == "E0903" and "include/pto/pto-inst.hpp" in diag.message


def stand_in_compiler(folder: Path, bf16: bool) -> Path:
    """A g++ stand-in whose only answer is to the std::bfloat16_t probe (`-fsyntax-only`)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "g++"
    script.write_text('#!/bin/sh\ncase " $* " in\n'
                      f'  *" -fsyntax-only "*) exit {0 if bf16 else 1} ;;\n'
                      '  *" --version "*) echo "g++ (stand-in) 1.0"; exit 0 ;;\n'
                      "esac\nexit 1\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("bf16", [True, False])
def test_pto_isa_bf16_needs_std_bfloat16(cache, monkeypatch, tmp_path, bf16):
    # pto-isa's CPU simulation has a real bf16 only as C++23 std::bfloat16_t; without it ptodsl says why.
    monkeypatch.setenv("PTODSL_CXX", str(stand_in_compiler(tmp_path / f"bin{bf16}", bf16)))
    monkeypatch.delenv("PTO_ISA_ROOT", raising=False)
    assert build.pto_isa_bf16_gap() is None  # ptodsl's own header has its own bfloat16_t
    monkeypatch.setenv("PTO_ISA_ROOT", str(fake_pto_isa(tmp_path / "pto-isa", "#pragma once\n")))
    gap = build.pto_isa_bf16_gap()
    flags = build.include_mode().flags
    if bf16:
        assert gap is None and "-std=c++23" in flags and "-DPTO_CPU_SIM_ENABLE_BF16" in flags
    else:
        assert gap is not None and "std::bfloat16_t" in gap and "-std=c++20" in flags


def test_processes_sharing_a_cache_build_a_library_once(cache):
    """Three processes asking for the same library at once (pytest workers, parallel `ptodsl test`
    runs): one compiles, the others wait for the entry's lock and find it built."""
    slow = ANSWER + "".join(f"template <int N> struct S{i} {{ static const int v = S{i}<N - 1>::v + 1; }};\n"
                            f"template <> struct S{i}<0> {{ static const int v = 0; }};\n"
                            f"int use{i}() {{ return S{i}<300>::v; }}\n" for i in range(20))
    script = textwrap.dedent(f"""
        from ptodsl.backends.cpp.build import STATS, build_shared
        build_shared({{"answer.cpp": {slow!r}}}, "answer")
        print(STATS.compiles, STATS.hits)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=os.environ | {"PTODSL_CACHE_DIR": str(cache)}) for _ in range(3)]
    counts = [tuple(map(int, p.communicate(timeout=300)[0].split())) for p in procs]
    assert sorted(c for c, _ in counts) == [0, 0, 1], counts
    assert len(entries(cache)) == 1
