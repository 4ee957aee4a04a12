"""Toolchain and cache faults end as E09xx diagnostics, never as internal errors or orphans.

The golden cases of tests/golden_codes show the texts (E0904 a cache folder replaced by a file,
E0905 a library without its entry, E0906 a hanging compile or probe, E0907 a compiler that writes
nothing, E0901 non-UTF-8 compiler output); these check the behaviour around them with fake
compilers, so no real build runs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ptodsl.backends.cpp import build
from ptodsl.diagnostics import CompileError

KERNEL = 'extern "C" void f(float* y) { y[0] = 1.0f; }\n'


def fake_cxx(tmp: Path, mp: pytest.MonkeyPatch, on_compile: str, on_version: str = 'echo "g++ (GCC) 12.2.0"') -> Path:
    folder = tmp / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "g++"
    script.write_text("#!/bin/sh\n"
                      f'case " $* " in\n  *" --version "*) {on_version}; exit 0 ;;\n  *" -fopenmp "*) exit 1 ;;\nesac\n'
                      + on_compile)
    script.chmod(0o755)
    mp.setenv("PTODSL_CXX", str(script))
    mp.setenv("PTODSL_CACHE_DIR", str(tmp / "cache"))
    mp.delenv("PTO_ISA_ROOT", raising=False)
    build._identify.cache_clear()
    return script


WRITES_LIBRARY = 'for a; do out="$a"; done\nprintf "lib" > "$out"\nexit 0\n'  # the last argument is -o's


def codes(call) -> list[str]:
    with pytest.raises(CompileError) as info:
        call()
    return [d.code for d in info.value.diagnostics]


def test_a_cache_shard_replaced_by_a_file_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_cxx(tmp_path, monkeypatch, WRITES_LIBRARY)
    first = build.build_shared({"k.cpp": KERNEL}, "k")
    shard = first.parent.parent
    for entry in shard.iterdir():
        build._discard(entry)
    shard.rmdir()
    shard.write_text("not a folder\n")
    again = build.build_shared({"k.cpp": KERNEL}, "k")
    assert again == first and again.read_text() == "lib"


def test_a_damaged_library_in_the_cache_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_cxx(tmp_path, monkeypatch, WRITES_LIBRARY)
    first = build.build_shared({"k.cpp": KERNEL}, "k")
    first.write_text("truncated")
    assert build.build_shared({"k.cpp": KERNEL}, "k").read_text() == "lib"


def test_a_hanging_compiler_leaves_no_process_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pids = tmp_path / "pids"
    fake_cxx(tmp_path, monkeypatch, f"sleep 30 &\necho $! > {pids}\nwait\n")
    monkeypatch.setenv("PTODSL_BUILD_TIMEOUT", "0.5")
    assert codes(lambda: build.build_shared({"k.cpp": KERNEL}, "k")) == ["E0906"]
    child = int(pids.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # A zombie still answers kill(0); it is gone once its status shows Z or it is reaped.
        status = Path(f"/proc/{child}/stat")
        if status.exists() and status.read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the compiler's child outlived the timeout")


def test_a_hanging_probe_obeys_the_build_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_cxx(tmp_path, monkeypatch, WRITES_LIBRARY, on_version="sleep 30")
    monkeypatch.setenv("PTODSL_BUILD_TIMEOUT", "0.5")
    start = time.monotonic()
    assert codes(lambda: build.build_shared({"k.cpp": KERNEL}, "k")) == ["E0906"]
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("value", ["abc", "-1", "0", ""])
def test_a_malformed_timeout_falls_back_to_the_default(monkeypatch: pytest.MonkeyPatch, value: str):
    monkeypatch.setenv("PTODSL_BUILD_TIMEOUT", value)
    assert build.build_timeout() == build.DEFAULT_TIMEOUT_S


def test_compiler_output_in_any_encoding_is_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_cxx(tmp_path, monkeypatch, "printf 'k.cpp:1:1: error: \\377\\376 bad\\n' >&2\nexit 1\n")
    with pytest.raises(CompileError) as info:
        build.build_shared({"k.cpp": KERNEL}, "k")
    assert info.value.diagnostics[0].code == "E0901" and "bad" in info.value.diagnostics[0].message


def test_a_compiler_that_writes_nothing_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_cxx(tmp_path, monkeypatch, "exit 0\n")
    assert codes(lambda: build.build_shared({"k.cpp": KERNEL}, "k")) == ["E0907"]


def test_a_read_only_cache_with_the_entry_still_serves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake_cxx(tmp_path, monkeypatch, WRITES_LIBRARY)
    first = build.build_shared({"k.cpp": KERNEL}, "k")
    (tmp_path / "cache" / "cpp" / "tmp").rmdir()
    (tmp_path / "cache" / "cpp" / "tmp").write_text("in the way\n")
    assert build.build_shared({"k.cpp": KERNEL}, "k") == first  # a hit needs no writing
    assert codes(lambda: build.build_shared({"k.cpp": KERNEL + "// other\n"}, "k")) == ["E0904"]
