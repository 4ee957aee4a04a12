"""The instruction set kernels are built for (PTODSL_CPU_ARCH, backends/cpp/arch.py): the probe's
choice reaches every compile command and with it the cache key, so a cache shared between machines
never hands a library built for AVX-512 to a machine without it."""

from __future__ import annotations

import json
import platform
import shutil
from pathlib import Path

import pytest

from ptodsl.backends.cpp import arch
from ptodsl.backends.cpp.build import STATS, build_shared, load_library
from ptodsl.diagnostics import CompileError

ANSWER = 'extern "C" int answer() { return 42; }\n'
X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("PTODSL_CACHE_DIR", str(root))
    monkeypatch.delenv("PTODSL_CPU_ARCH", raising=False)
    return root


def command_of(library: Path) -> list[str]:
    return json.loads((library.parent / "entry.json").read_text())["command"]


def marches(command: list[str]) -> list[str]:
    return [a for a in command if a.startswith("-march=")]


# A stand-in compiler: `--version` and the OpenMP probe as g++ answers them; a probe built with one
# of the -march flags in $FAKE_LACKS (the machine's CPU, as far as the probe can tell) is a program
# reporting a missing feature, any other probe one that runs; a library is a file saying which
# -march it was built with.
FAKE = """#!/bin/sh
case " $* " in
  *" --version "*) echo "g++ (GCC) 12.2.0"; exit 0 ;;
  *" -fopenmp "*) exit 1 ;;
esac
for a; do out="$a"; done
march=none
for a; do case "$a" in -march=*) march="$a" ;; esac; done
case "$out" in
  probe)
    case " $FAKE_LACKS " in
      *" $march "*) printf '#!/bin/sh\\necho avx512f\\nexit 3\\n' > "$out" ;;
      *) printf '#!/bin/sh\\nexit 0\\n' > "$out" ;;
    esac
    chmod +x "$out" ;;
  *) echo "$march" > "$out" ;;
esac
exit 0
"""


def fake_compiler(tmp: Path, mp: pytest.MonkeyPatch, lacks: tuple[str, ...]) -> Path:
    script = tmp / "bin" / "g++"
    if not script.exists():
        script.parent.mkdir()
        script.write_text(FAKE)
        script.chmod(0o755)
    mp.setenv("PTODSL_CXX", str(script))
    mp.setenv("FAKE_LACKS", " ".join(f"-march={level}" for level in lacks))
    return script


@pytest.mark.skipif(not X86, reason="the x86-64 levels are probed on x86-64 only")
def test_native_takes_the_newest_level_the_machine_runs(cache, tmp_path, monkeypatch):
    fake_compiler(tmp_path, monkeypatch, lacks=("x86-64-v4",))
    library = build_shared({"a.cpp": ANSWER}, "answer")
    assert marches(command_of(library)) == ["-march=x86-64-v3"]
    assert library.read_text().strip() == "-march=x86-64-v3"


@pytest.mark.skipif(not X86, reason="the x86-64 levels are probed on x86-64 only")
def test_machines_sharing_a_cache_get_libraries_of_their_own_level(cache, tmp_path, monkeypatch):
    """Two machines, one with AVX-512 and one without, share a build cache (the same compiler
    binary): each gets a library built for what it runs, under a key of its own."""
    fake_compiler(tmp_path, monkeypatch, lacks=())
    monkeypatch.setattr(arch, "cpu_identity", lambda: "machine-with-avx512")
    wide = build_shared({"a.cpp": ANSWER}, "answer")
    # the second machine: the same compiler binary and cache (a shared file system), another CPU
    fake_compiler(tmp_path, monkeypatch, lacks=("x86-64-v4",))
    monkeypatch.setattr(arch, "cpu_identity", lambda: "machine-without-avx512")
    narrow = build_shared({"a.cpp": ANSWER}, "answer")
    assert marches(command_of(wide)) == ["-march=x86-64-v4"]
    assert marches(command_of(narrow)) == ["-march=x86-64-v3"]
    assert wide != narrow and narrow.read_text().strip() == "-march=x86-64-v3"


def test_the_choice_is_in_the_command_and_the_key(cache, tmp_path, monkeypatch):
    fake_compiler(tmp_path, monkeypatch, lacks=())
    libraries = {}
    for value in ("portable", "x86-64-v2", "haswell"):
        monkeypatch.setenv("PTODSL_CPU_ARCH", value)
        libraries[value] = build_shared({"a.cpp": ANSWER}, "answer")
    assert marches(command_of(libraries["portable"])) == []
    assert marches(command_of(libraries["x86-64-v2"])) == ["-march=x86-64-v2"]
    assert marches(command_of(libraries["haswell"])) == ["-march=haswell"]
    assert len({p.parent for p in libraries.values()}) == 3  # three keys, three entries


def test_a_fresh_process_reads_the_choice_from_the_cache(cache, tmp_path, monkeypatch):
    fake_compiler(tmp_path, monkeypatch, lacks=())
    build_shared({"a.cpp": ANSWER}, "answer")
    records = list((cache / "cpp" / "toolchains").glob("arch-*.json"))
    assert len(records) == 1
    arch._choose.cache_clear()  # what a fresh process remembers: nothing but the record
    probes = STATS.probes
    build_shared({"a.cpp": ANSWER}, "answer")
    assert STATS.probes == probes


def test_a_level_this_machine_cannot_run_is_refused(cache, tmp_path, monkeypatch):
    fake_compiler(tmp_path, monkeypatch, lacks=("x86-64-v4",))
    monkeypatch.setenv("PTODSL_CPU_ARCH", "x86-64-v4")
    with pytest.raises(CompileError) as info:
        build_shared({"a.cpp": ANSWER}, "answer")
    (d,) = info.value.diagnostics
    assert d.code == "E0886" and "lacks avx512f" in d.notes[0]
    assert not list((cache / "cpp" / "kernels").glob("*/*"))  # nothing was built


@pytest.mark.parametrize("value", ["x86-64-v3 -O0", "-march=native", "v3;rm", "$(id)", "a" * 65])
def test_a_value_that_is_no_march_name_never_reaches_a_command(cache, tmp_path, monkeypatch, value):
    log = tmp_path / "calls"
    script = tmp_path / "g++"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit 1\n')
    script.chmod(0o755)
    monkeypatch.setenv("PTODSL_CXX", str(script))
    monkeypatch.setenv("PTODSL_CPU_ARCH", value)
    with pytest.raises(CompileError) as info:
        build_shared({"a.cpp": ANSWER}, "answer")
    assert [d.code for d in info.value.diagnostics] == ["E0885"]
    assert value not in (log.read_text() if log.exists() else "")


@pytest.mark.skipif(shutil.which("g++") is None or not X86, reason="needs g++ on x86-64")
def test_the_real_compiler_builds_for_a_level_this_machine_runs(cache, monkeypatch):
    monkeypatch.delenv("PTODSL_CXX", raising=False)
    library = build_shared({"a.cpp": ANSWER}, "answer")
    chosen = marches(command_of(library))
    assert chosen and chosen[0].removeprefix("-march=") in arch.X86_LEVELS
    assert load_library(library).answer() == 42
