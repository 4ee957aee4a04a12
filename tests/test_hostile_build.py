"""Toolchain and cache faults end as E09xx diagnostics, never as internal errors or orphans.

The golden cases of tests/golden_codes show the texts (E0904 a cache folder replaced by a file,
E0905 a library without its entry, E0906 a hanging compile or probe, E0907 a compiler that writes
nothing, E0901 non-UTF-8 compiler output); these check the behaviour around them with fake
compilers, so no real build runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ptodsl import staging
from ptodsl.backends.cpp import build, buildcache, toolchain
from ptodsl.diagnostics import CompileError

KERNEL = 'extern "C" void f(float* y) { y[0] = 1.0f; }\n'


def fake_cxx(tmp: Path, mp: pytest.MonkeyPatch, on_compile: str, on_version: str = 'echo "g++ (GCC) 12.2.0"') -> Path:
    folder = tmp / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "g++"
    # it rejects the instruction set probes (-march=...) as it does the OpenMP one, so that only
    # the build itself reaches `on_compile`
    script.write_text("#!/bin/sh\n"
                      f'case " $* " in\n  *" --version "*) {on_version}; exit 0 ;;\n  *" -fopenmp "*) exit 1 ;;\n'
                      '  *" -march="*) exit 1 ;;\nesac\n'
                      + on_compile)
    script.chmod(0o755)
    mp.setenv("PTODSL_CXX", str(script))
    mp.setenv("PTODSL_CACHE_DIR", str(tmp / "cache"))
    mp.delenv("PTO_ISA_ROOT", raising=False)
    toolchain._identify.cache_clear()
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
        buildcache.discard(entry)
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


DEAD_PID = 4_000_000  # above Linux's default pid_max: no process has it


def test_stale_staging_is_cleaned_and_live_staging_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The rules of ptodsl.staging, in the cache's tmp folder: a folder of a dead process of this
    machine goes at once; one of a live process, or of another machine, stays until it is older
    than a day; so does one named without an owner (by older versions)."""
    fake_cxx(tmp_path, monkeypatch, WRITES_LIBRARY)
    tmp = tmp_path / "cache" / "cpp" / "tmp"
    tmp.mkdir(parents=True)
    here, elsewhere = staging.host(), "0123abcd" if staging.host() != "0123abcd" else "fedc0987"
    day = 24 * 3600
    folders = {  # name -> (age in seconds, kept)
        f"build-{DEAD_PID}@{here}-0a1b-x": (0, False),
        f"probe-{DEAD_PID}@{here}-y": (0, False),
        f"discard-{DEAD_PID}@{here}-z": (0, False),
        f"build-{os.getppid()}@{here}-live": (0, True),  # the process that runs the tests
        f"build-{os.getppid()}@{here}-reused": (day + 60, False),  # its pid can only have been reused
        f"build-{DEAD_PID}@{elsewhere}-running": (0, True),  # no pid of another machine is known here
        f"build-{DEAD_PID}@{elsewhere}-old": (day + 60, False),
        "0123456789abcdef-legacy": (0, True),
        "0123456789abcdef-legacy-old": (day + 60, False),
    }
    for name, (age, _kept) in folders.items():
        (tmp / name).mkdir()
        (tmp / name / "k.cpp").write_text(KERNEL)
        os.utime(tmp / name, (time.time() - age, time.time() - age))
    monkeypatch.setattr(build, "_CLEANED", set())
    build.build_shared({"k.cpp": KERNEL}, "k")
    assert sorted(p.name for p in tmp.iterdir()) == sorted(n for n, (_a, kept) in folders.items() if kept)


def test_a_long_build_timeout_keeps_staging_longer(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PTODSL_BUILD_TIMEOUT", str(3 * 24 * 3600))
    assert build.stale_age() == 6 * 24 * 3600


KILLED_BUILD = """
import sys
from ptodsl.backends.cpp import build
build.build_shared({"k.cpp": sys.argv[1]}, "k")
"""


def test_a_build_killed_mid_way_is_cleaned_by_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """kill -9 of a process in the middle of a compile: its staging folder stays while it runs,
    and the next build (even one the cache answers) removes it."""
    started, pids = tmp_path / "started", tmp_path / "pids"
    fake_cxx(tmp_path, monkeypatch, f"echo $$ > {pids}\ntouch {started}\nsleep 30\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, KERNEL],
                            env={**os.environ, "PYTHONPATH": str(root)}, stderr=subprocess.PIPE)
    compiler = None
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the build never reached the compiler"
            time.sleep(0.05)
        compiler = int(pids.read_text())
        tmp = tmp_path / "cache" / "cpp" / "tmp"
        building = [p.name for p in tmp.iterdir() if p.name.startswith(f"build-{proc.pid}@")]
        assert len(building) == 1
        monkeypatch.setattr(build, "_CLEANED", set())
        fake_cxx(tmp_path, monkeypatch, WRITES_LIBRARY)
        build.build_shared({"k.cpp": KERNEL + "// another\n"}, "k")
        assert (tmp / building[0]).is_dir(), "the folder of a running build was removed"
        proc.kill()
        proc.wait()
        build.build_shared({"k.cpp": KERNEL + "// another\n"}, "k")  # a cache hit: cleans once per process
        assert (tmp / building[0]).is_dir()
        monkeypatch.setattr(build, "_CLEANED", set())  # as in the next process
        build.build_shared({"k.cpp": KERNEL + "// another\n"}, "k")
        assert list(tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if compiler is not None:  # the compiler runs in a session of its own: the kill did not reach it
            try:
                os.kill(compiler, signal.SIGKILL)
            except ProcessLookupError:
                pass
