"""backend="npu" without an NPU: fake version trees, compilers and environments.

Each guard is driven through a generated wrapper, the way a user meets it, and each must raise an
NpuError (a RuntimeError) whose diagnostic says what was found and what is required.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ptodsl.cli import main
from ptodsl.diagnostics import code_registry

ENV_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_DRIVER_PATH", "TILE_FWK_DEVICE_ID", "PTO_ISA_ROOT")


def cann_tree(root: Path, version: str) -> Path:
    """A toolkit folder as the CANN installer leaves it: <arch>-linux/ascend_toolkit_install.info."""
    info = root / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"
    info.parent.mkdir(parents=True)
    info.write_text(f"package_name=Ascend-cann-toolkit\nversion={version}\ninnerversion=V100R001C25B001\n"
                    f"arch={platform.machine()}\nos=linux\npath={root}\n")
    return root


def driver_tree(root: Path, version: str) -> Path:
    root.mkdir(parents=True)
    (root / "version.info").write_text(f"Version={version}\nascendhal_version=7.35.23\n"
                                       "Innerversion=V100R001C25SPC001B220\n"
                                       f"compatible_version=[V100R001C15],[V100R001C18]\npackage_version={version}\n")
    return root


def fake_compiler(folder: Path, exit_code: int = 0, version: str = "bisheng 1.0 (fake)") -> Path:
    """A `bisheng` that logs its calls and writes its -o output (or fails with a message)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bisheng"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{folder}/calls.log"\n'
        f'if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        f"if [ {exit_code} -ne 0 ]; then echo 'error: unknown type name TADD' >&2; exit {exit_code}; fi\n"
        'while [ "$#" -gt 0 ]; do if [ "$1" = "-o" ]; then echo built > "$2"; fi; shift; done\n'
    )
    script.chmod(0o755)
    return script


@pytest.fixture(scope="module")
def npu(pkg: ModuleType) -> ModuleType:
    """The package's own copy of the runtime's NPU module: the generated ops run on it."""
    return importlib.import_module(f"{pkg.__name__}._ptodsl.runtime.npu")


def packaged_op(pkg: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{pkg.__name__}._ptodsl.runtime.package").PackagedOp(pkg.__name__, name)


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, npu: ModuleType) -> Path:
    """A clean environment: no Ascend variables, an empty PATH, defaults pointing at nothing."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(npu, "DEFAULT_TOOLKIT", str(tmp_path / "no-toolkit"))
    monkeypatch.setattr(npu, "DEFAULT_DRIVER", str(tmp_path / "no-driver"))
    monkeypatch.setattr(npu, "DEV_ROOT", tmp_path / "dev")
    return tmp_path


@pytest.fixture
def ready(fake_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Everything in place: device id, CANN 8.5.0, driver 25.2.0, pto-isa headers and a compiler on PATH."""
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "0")
    header = fake_env / "pto-isa" / "include" / "pto" / "pto-inst.hpp"
    header.parent.mkdir(parents=True)
    header.write_text("// pto-isa\n")
    monkeypatch.setenv("PTO_ISA_ROOT", str(fake_env / "pto-isa"))
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "8.5.0")))
    monkeypatch.setenv("ASCEND_DRIVER_PATH", str(driver_tree(fake_env / "driver", "25.2.0")))
    fake_compiler(fake_env / "bin")
    return fake_env


def npu_error(call) -> Any:
    with pytest.raises(RuntimeError) as exc:
        call()
    assert type(exc.value).__name__ == "NpuError", exc.value
    return exc.value


def x() -> np.ndarray:
    return np.ones((4, 1024), np.float32)


# ------------------------------------------------------------------ the guards, in order


def test_no_device_id(pkg: ModuleType, fake_env: Path):
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0920"
    assert "pass `device=N` or set TILE_FWK_DEVICE_ID" in str(err)


@pytest.mark.parametrize("value", ["abc", "-1", "1.5"])
def test_invalid_device_id(pkg: ModuleType, fake_env: Path, monkeypatch, value: str):
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", value)
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0921" and repr(value) in str(err)


def test_device_argument_wins_over_the_environment(fake_env: Path, npu: ModuleType):
    assert npu.device_id(3, {"TILE_FWK_DEVICE_ID": "1"}) == 3
    assert npu.device_id("npu:2", {}) == 2
    assert npu.device_id(None, {"TILE_FWK_DEVICE_ID": " 5 "}) == 5


def test_no_cann(pkg: ModuleType, fake_env: Path, monkeypatch):
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0922"
    assert "no-toolkit (the default location), which does not exist" in str(err)
    assert "ascend_toolkit_install.info" in str(err)


def test_old_cann(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("TILE_FWK_DEVICE_ID", "0")
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(cann_tree(fake_env / "cann", "8.0.RC3")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0923"
    assert "CANN 8.0.RC3 is too old: the NPU backend requires CANN >= 8.5.0" in str(err)
    assert "ascend_toolkit_install.info ($ASCEND_TOOLKIT_HOME)" in str(err)


def test_cann_release_candidate_is_older_than_the_release(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "8.5.RC1")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0923" and "CANN 8.5.RC1 is too old" in str(err)


def test_cann_version_from_the_compiler_folder(fake_env: Path, npu: ModuleType):
    info = fake_env / "cann" / "compiler" / "version.info"
    info.parent.mkdir(parents=True)
    info.write_text("Version=8.5.0\nversion_dir=8.5.0\n")
    found = npu.cann_version({"ASCEND_HOME_PATH": str(fake_env / "cann")})
    assert found.version == "8.5.0" and found.path == info


def test_no_driver(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "8.5.0")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0924"
    assert "no-driver/version.info (the default location) cannot be read" in str(err)


def test_old_driver(pkg: ModuleType, fake_env: Path, monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(cann_tree(fake_env / "cann", "9.0.0")))
    monkeypatch.setenv("ASCEND_DRIVER_PATH", str(driver_tree(fake_env / "driver", "24.1.rc3")))
    err = npu_error(lambda: pkg.softmax(x(), backend="npu", device=0))
    assert err.diagnostic.code == "E0925"
    assert "NPU driver 24.1.rc3 is too old: the NPU backend requires driver >= 25.2.0" in str(err)
    assert "version.info ($ASCEND_DRIVER_PATH)" in str(err)


def test_missing_compiler(pkg: ModuleType, ready: Path):
    (ready / "bin" / "bisheng").unlink()
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code == "E0926"
    assert "the CANN kernel compiler (bisheng or ccec) was not found" in str(err)


def test_compiler_in_the_toolkit_folder(ready: Path, npu: ModuleType):
    (ready / "bin" / "bisheng").unlink()
    fake_compiler(ready / "cann" / "compiler" / "ccec_compiler" / "bin")
    env = npu.check_environment(None, dict(os.environ))
    assert env.compiler.endswith("ccec_compiler/bin/bisheng")
    assert (env.device, env.cann.version, env.driver.version) == (0, "8.5.0", "25.2.0")


def test_all_ok_then_the_packaged_kernel_is_built_and_needs_a_device(pkg: ModuleType, ready: Path):
    # the package carries the NPU build of every variant, so the guard gets past the source
    # check; with no NPU device here the run stops at the device check
    assert (Path(pkg.__file__).parent / "kernels" / "softmax" / "npu" / "f32" / "build.json").is_file()
    err = npu_error(lambda: pkg.softmax(x(), backend="npu"))
    assert err.diagnostic.code in ("E0929", "E0930"), str(err)


# ------------------------------------------------------------------ build and launch, with a kernel


def _copy_op(pkg: ModuleType, tmp_path: Path, name: str) -> Any:
    root = Path(pkg.__file__).parent
    copy = tmp_path / "pkg"
    shutil.copytree(root / "specs", copy / "specs", dirs_exist_ok=True)
    shutil.copytree(root / "kernels" / name, copy / "kernels" / name)
    op = packaged_op(pkg, name)
    op.__dict__["root"] = copy
    return op


@pytest.fixture
def with_kernel(pkg: ModuleType, tmp_path: Path) -> Any:
    """softmax from a copy of the package, whose NPU sources the tests may change."""
    return _copy_op(pkg, tmp_path, "softmax")


def builds(ready: Path) -> list[str]:
    """The compiler runs so far, without the version probes."""
    log = ready / "bin" / "calls.log"
    return [c for c in log.read_text().splitlines() if c != "--version"] if log.is_file() else []


def test_build_then_no_device(with_kernel: Any, ready: Path):
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0929"
    assert "NPU device 0 is not present" in str(err) and "davinci0 does not exist" in str(err)
    # as pto-isa's NPU tests build: the kernel compiled as CCE for its core and linked into a kernel
    # library of its own, the host program compiled as host C++ and linked against it and ACL
    kernel, kernels, host, link = builds(ready)
    assert kernel.startswith("-c -xcce") and "--cce-aicore-arch=dav-c220-vec" in kernel
    assert "-DMEMORY_BASE" in kernel and f"-I{ready / 'pto-isa' / 'include'}" in kernel
    assert kernel.split()[-3].endswith("npu/f32/softmax_f32_k0.cpp")
    assert kernels.startswith("-shared --cce-fatobj-link ") and kernels.split()[2].endswith("/softmax_f32_k0.o")
    assert kernels.endswith("/libsoftmax_f32_vector.so") and "-lascendcl" not in kernels
    assert host.startswith("-c -xc++ ") and "-include stdint.h -include stddef.h" in host
    # (flags, not the text: a temporary path may hold the letters "cce")
    assert not any("cce" in a for a in host.split() if a.startswith("-") and "/" not in a)
    assert "-DMEMORY_BASE" not in host and str(ready / "pto-isa") not in host
    assert host.split()[-3].endswith("npu/f32/host.cpp") and "/host_include " in host
    assert link.startswith("-shared ") and link.split()[1].endswith("/host.o") and "--cce-fatobj-link" not in link
    assert "-l:libsoftmax_f32_vector.so -Wl,-rpath,$ORIGIN" in link and "-lascendcl" in link and "-lruntime" in link
    # the cache entry holds the two libraries, the host one finding the kernel one beside it
    built = next((ready / "cache").rglob("libsoftmax_f32.so"))
    assert sorted(p.name for p in built.parent.iterdir()) == ["libsoftmax_f32.so", "libsoftmax_f32_vector.so"]
    # the build is cached: a second call runs no compiler, not even its version probe
    calls = (ready / "bin" / "calls.log").read_text()
    (ready / "dev").mkdir()
    (ready / "dev" / "davinci0").write_text("")
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0930" and "torch_npu" in str(err)
    assert (ready / "bin" / "calls.log").read_text() == calls
    # an entry missing one of its libraries is built again
    (built.parent / "libsoftmax_f32_vector.so").unlink()
    npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert len(builds(ready)) == 8 and (built.parent / "libsoftmax_f32_vector.so").is_file()


def test_the_host_view_of_the_pto_header_compiles_the_host_program(pkg: ModuleType, npu: ModuleType,
                                                                   tmp_path: Path):
    """The host program as the NPU build compiles it, with g++ standing in for bisheng -xc++ and a
    declaration-only acl/acl.h: host programs compile without pto-isa's header (f32 and bf16
    pointers, a device workspace, index reads from device memory)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    npu_build = importlib.import_module(npu.__name__ + "_build")
    (tmp_path / "pto").mkdir()
    (tmp_path / "pto" / "pto-inst.hpp").write_text(npu_build.HOST_HEADER)
    (tmp_path / "acl").mkdir()
    (tmp_path / "acl" / "acl.h").write_text(ACL_DECLARATIONS)
    root = Path(pkg.__file__).parent / "kernels"
    # workspaces, blocks, bf16, kernels that read, a control program that reads, guards, attention
    hosts = [root / "tensor_sum" / "npu" / "f32" / "host.cpp", root / "softmax" / "npu" / "bf16" / "host.cpp",
             root / "seq_add" / "npu" / "default" / "host.cpp", root / "gather_rows" / "npu" / "i32_f32" / "host.cpp",
             root / "kv_cache_update" / "npu" / "f16" / "host.cpp", root / "flash_attn" / "npu" / "f32" / "host.cpp",
             root / "varlen_attention" / "npu" / "bf16" / "host.cpp"]
    for host in hosts:
        options = [o for o in npu_build.HOST_OPTIONS if o != "-xc++"]
        proc = subprocess.run(["g++", "-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-function", *options,
                               f"-I{tmp_path}", str(host)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{host}:\n{proc.stderr[-3000:]}"


# What the host programs may use of ACL, declared as acl/acl.h declares it (the test compiles, never
# links): a use of anything else, the synchronous aclrtMemset among them, fails the compile.
ACL_DECLARATIONS = """\
#include <cstddef>
#include <cstdint>
typedef int aclError;
typedef void* aclrtStream;
enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST = 0 };
enum aclrtMemcpyKind { ACL_MEMCPY_HOST_TO_DEVICE = 1, ACL_MEMCPY_DEVICE_TO_HOST = 2 };
enum aclrtLastErrLevel { ACL_RT_THREAD_LEVEL = 0 };
static const aclError ACL_SUCCESS = 0;
extern "C" aclError aclrtSetDevice(int32_t deviceId);
extern "C" aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy);
extern "C" aclError aclrtFree(void* devPtr);
extern "C" aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);
extern "C" aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind);
extern "C" aclError aclrtSynchronizeStream(aclrtStream stream);
extern "C" aclError aclrtGetLastError(aclrtLastErrLevel level);
"""


def test_cube_kernels_are_built_for_the_cube_core(pkg: ModuleType, tmp_path: Path, ready: Path):
    op = _copy_op(pkg, tmp_path, "matmul_bwd")
    a, b, dc = np.ones((64, 32), np.float32), np.ones((32, 48), np.float32), np.ones((64, 48), np.float32)
    npu_error(lambda: op((a, b, dc), {}, {}, backend="npu"))
    calls = builds(ready)
    archs = {c.split()[-3].rsplit("/", 1)[1]: c.split("--cce-aicore-arch=")[1].split()[0]
             for c in calls if c.startswith("-c -xcce ")}
    cube, vector = ["matmul_bwd_f32_k1", "matmul_bwd_f32_k3"], ["matmul_bwd_f32_k0", "matmul_bwd_f32_k2",
                                                                 "matmul_bwd_f32_k4"]
    assert archs == {**{f"{k}.cpp": "dav-c220-cube" for k in cube}, **{f"{k}.cpp": "dav-c220-vec" for k in vector}}
    # cube and vector kernels go to separate libraries, both linked into the host library
    libraries = {c.rsplit("/", 1)[1]: sorted(a.rsplit("/", 1)[1] for a in c.split() if a.endswith(".o"))
                 for c in calls if c.startswith("-shared --cce-fatobj-link ")}
    assert libraries == {"libmatmul_bwd_f32_vector.so": [f"{k}.o" for k in vector],
                         "libmatmul_bwd_f32_cube.so": [f"{k}.o" for k in cube]}
    link = calls[-1]
    assert "-l:libmatmul_bwd_f32_vector.so -l:libmatmul_bwd_f32_cube.so" in link
    assert [c.split()[:2] for c in calls if "host.cpp" in c] == [["-c", "-xc++"]]


def test_the_build_key_covers_headers_compiler_and_flags(with_kernel: Any, ready: Path, npu: ModuleType,
                                                         monkeypatch: pytest.MonkeyPatch):
    """Anything the libraries depend on rebuilds them: a header of pto-isa or of the toolkit (not
    only pto-inst.hpp), the CPU kernel file an NPU unit includes, the compiler's version, a flag."""
    npu_build = importlib.import_module(npu.__name__ + "_build")

    def rebuilt() -> bool:
        before = len(builds(ready))
        npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
        return len(builds(ready)) > before

    assert rebuilt()
    assert not rebuilt()
    (ready / "pto-isa" / "include" / "pto" / "pto-inst.hpp").touch()  # a new mtime, the same text
    assert not rebuilt()
    tile = ready / "pto-isa" / "include" / "pto" / "common" / "pto_tile.hpp"
    tile.parent.mkdir()
    tile.write_text("// tiles\n")
    assert rebuilt()
    tile.write_text("// tiles, fixed\n")
    assert rebuilt()
    (ready / "cann" / "include" / "acl").mkdir(parents=True)
    (ready / "cann" / "include" / "acl" / "acl.h").write_text("// acl\n")
    assert rebuilt()
    kernel = with_kernel.root / "kernels" / "softmax" / "cpu" / "f32" / "softmax_f32_k0.cpp"
    kernel.write_text(kernel.read_text() + "// changed\n")
    assert rebuilt()
    fake_compiler(ready / "bin", version="bisheng 1.1.0 (fake, newer)")
    assert rebuilt()
    monkeypatch.setattr(npu_build, "CCE_OPTIONS", (*npu_build.CCE_OPTIONS, "-DNDEBUG"))
    assert rebuilt()
    monkeypatch.setattr(npu_build, "HOST_OPTIONS", (*npu_build.HOST_OPTIONS, "-DNDEBUG"))
    assert rebuilt()
    assert not rebuilt()


def test_build_failure_shows_the_compiler_output(with_kernel: Any, ready: Path):
    fake_compiler(ready / "bin", exit_code=1)
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0928"
    assert "(exit 1, compiling softmax_f32_k0.cpp)" in str(err) and "unknown type name TADD" in str(err)
    assert not list((ready / "cache").rglob("*.so"))


def test_no_pto_isa_headers(with_kernel: Any, ready: Path, monkeypatch):
    monkeypatch.delenv("PTO_ISA_ROOT")
    err = npu_error(lambda: with_kernel((x(),), {}, {}, backend="npu"))
    assert err.diagnostic.code == "E0931" and "PTO_ISA_ROOT" in err.diagnostic.help


def test_the_packaged_npu_build(pkg: ModuleType):
    """What the NPU build compiles: kernels with pto-isa's launcher form, a host program on ACL."""
    folder = Path(pkg.__file__).parent / "kernels" / "softmax_long" / "npu" / "f32"
    plan = json.loads((folder / "build.json").read_text())
    assert plan["entry"] == "softmax_long_f32" and plan["host"] == "host.cpp"
    # the one-pass version for rows that fit the UB and the multi-pass loop (passes/tile_fit.py)
    assert [(k["name"], k["core"]) for k in plan["kernels"]] == [("softmax_long_f32_k0", "vector"),
                                                                ("softmax_long_f32_k1", "vector")]
    assert [p["kind"] for p in plan["params"]] == ["tensor", "tensor", "symbol", "symbol", "poison"]
    kernel = (folder / "softmax_long_f32_k0.cpp").read_text()
    # the kernel's code is the CPU build's file, included; the unit adds the launcher
    assert '#include "../../cpu/f32/softmax_long_f32_k0.cpp"' in kernel
    kernel += (folder.parents[1] / "cpu" / "f32" / "softmax_long_f32_k0.cpp").read_text()
    assert 'extern "C" __global__ AICORE void softmax_long_f32_k0(' in kernel
    assert ('extern "C" void softmax_long_f32_k0_launch(uint32_t block_dim, void* stream, float* x, float* y,'
            in kernel)
    assert "softmax_long_f32_k0<<<block_dim, nullptr, stream>>>((__gm__ float*)x," in kernel
    host = (folder / "host.cpp").read_text()
    assert '#include "acl/acl.h"' in host and "#pragma omp" not in host
    assert ('extern "C" int softmax_long_f32(int32_t device, void* stream, float* x, float* y, int64_t B, int64_t N, '
            'int poison)' in host)
    # the rows are the kernel's blocks: one launch of them all
    assert "softmax_long_f32_k0_launch(softmax_long_f32_k0_blocks, ptodsl_stream, x, y, B, N);" in host
    # a GM workspace of the call (tensor_sum's partial accumulator rows, passes/splitred.py) is a
    # device workspace of the host program
    sums = (Path(pkg.__file__).parent / "kernels" / "tensor_sum" / "npu" / "f32" / "host.cpp").read_text()
    assert "DeviceWorkspace acc_parts_bytes(" in sums and "* N) * static_cast<int64_t>(sizeof(float)), poison);" in sums
    assert "aclrtMalloc(" in host and "aclrtSetDevice(device)" in host
    assert "__global__" not in host  # the host program launches; it defines no kernel


def test_a_scalar_read_waits_for_the_stream(pkg: ModuleType):
    # gather_rows reads each row index out of a tensor in its control program, to check it
    kernels = Path(pkg.__file__).parent / "kernels"
    host = (kernels / "gather_rows" / "npu" / "i32_f32" / "host.cpp").read_text()
    body = host.split("Call call(device, stream);")[1]
    assert "static_cast<int64_t>(ids_pages[_ix1]);" in body  # a page of ids per copy
    assert "aclrtMemcpy(page_.data(), n * sizeof(T), device_ + first, n * sizeof(T)," in host
    # seq_add's lengths are read by the kernel that runs its loop (nothing in the call writes them)
    seq = (kernels / "seq_add" / "npu" / "default" / "host.cpp").read_text().split("Call call(device, stream);")[1]
    assert "read_device(" not in seq


# ------------------------------------------------------------------ arguments before the environment


def test_argument_errors_come_first(pkg: ModuleType, fake_env: Path):
    with pytest.raises(pkg.ArgumentTypeError, match="`x` has dtype i32"):
        pkg.softmax(np.ones((4, 1024), np.int32), backend="npu")
    with pytest.raises(pkg.ArgumentValueError, match="symbol `N` is 8"):
        pkg.softmax(np.ones((4, 8), np.float32), backend="npu")


def test_device_tensors_are_checked_without_reading_them(pkg: ModuleType, fake_env: Path):
    torch = pytest.importorskip("torch")
    on_device = torch.empty((4, 1024), device="meta")  # stands for a tensor in NPU memory
    err = npu_error(lambda: pkg.softmax(on_device, backend="npu"))
    assert err.diagnostic.code == "E0920"  # the arguments passed; the environment is next
    with pytest.raises(pkg.ArgumentValueError, match="`x` has rank 1"):
        pkg.softmax(torch.empty(1024, device="meta"), backend="npu")


# ------------------------------------------------------------------ version strings and files


@pytest.mark.parametrize(("older", "newer"), [
    ("8.0.RC3", "8.5.0"),
    ("8.5.RC1", "8.5.0"),
    ("8.2.RC1.alpha003", "8.2.RC1"),
    ("7.0.0.alpha001", "7.0.0"),
    ("8.5.0", "8.5.1"),
    ("8.5.0", "9.0.0"),
    ("24.1.rc3", "25.2.0"),
    ("25.0.rc1", "25.0.rc1.1"),
    ("25.2.0", "25.2.0.1"),
])
def test_version_order(older: str, newer: str, npu: ModuleType):
    assert npu.version_key(older) < npu.version_key(newer)


def test_version_file_tolerance(tmp_path: Path, npu: ModuleType):
    info = tmp_path / "version.info"
    info.write_text('# comment\r\n  VERSION = "8.5.0"\r\nversion_dir=8.5.0\r\n')
    assert npu.read_version(info) == "8.5.0"
    info.write_text("innerversion=V100R001C25B001\npackage_version=[25.3.rc1]\n")
    assert npu.read_version(info) == "25.3.rc1"
    info.write_text("Version=\nnothing here\n")
    assert npu.read_version(info) is None
    assert npu.read_version(tmp_path / "missing.info") is None


def test_codes_are_registered_and_explained(capsys):
    codes = [c for c in code_registry() if "E0920" <= c <= "E0939"]
    assert codes == [f"E09{n}" for n in range(20, 33)]
    assert main(["explain", "E0923"]) == 0
    assert "8.5.0" in capsys.readouterr().out


# ------------------------------------------------------------------ the host entry's arguments


def _marshal(pkg: ModuleType, name: str, inputs: tuple, kwargs: dict):
    torch = pytest.importorskip("torch")
    launch = importlib.import_module(f"{pkg.__name__}._ptodsl.runtime.npu_launch")
    ctypes_of, marshal = launch.ctypes_of, launch.marshal

    op = importlib.import_module(f"{pkg.__name__}.ops.{name}")._PTODSL_OP
    index, symbols = op.validate(inputs, kwargs)
    folder = op.root / "kernels" / name / "npu" / "f32"
    params = [(p["kind"], p["name"], p["dtype"]) for p in json.loads((folder / "build.json").read_text())["params"]]
    moved = []

    def move(t):
        moved.append(t)
        return t.contiguous()

    args, results = marshal(op.operator, index, inputs, kwargs, symbols, params, move,
                            lambda shape, dtype: torch.zeros(shape, dtype=getattr(torch, {"f32": "float32"}[dtype])))
    return args, results, params, moved, ctypes_of(params)


def test_numpy_inputs_cross_as_device_pointers_and_results_come_back(pkg: ModuleType):
    """What the host entry of softmax gets: x and y as pointers, B, no poisoning; what the kernels
    write through y's pointer is what the caller gets back."""
    import ctypes

    x = np.arange(3 * 1024, dtype=np.float32).reshape(3, 1024)
    args, results, params, moved, types = _marshal(pkg, "softmax", (x,), {})
    assert [p[:2] for p in params] == [("tensor", "x"), ("tensor", "y"), ("symbol", "B"), ("poison", "poison")]
    assert types == [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    assert args[2:] == [3, 0] and len(moved) == 1  # x moved to the device; y allocated there
    assert ctypes.string_at(args[0], x.nbytes) == x.tobytes()  # x's data behind the pointer
    want = np.full((3, 1024), 0.5, np.float32)
    ctypes.memmove(args[1], want.ctypes.data, want.nbytes)  # "the kernels" write y
    got = results()
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and np.array_equal(got, want)


def test_a_given_numpy_output_is_written_in_place(pkg: ModuleType):
    import ctypes

    x, y = np.ones((2, 1024), np.float32), np.zeros((2, 1024), np.float32)
    args, results, _params, _moved, _types = _marshal(pkg, "softmax", (x,), {"y": y})
    two = np.full_like(y, 2.0)
    ctypes.memmove(args[1], two.ctypes.data, y.nbytes)
    assert results() is y and (y == 2.0).all()


# ------------------------------------------------------------------ the device of the tensors


class _NpuTensor:
    """Stands for a torch tensor on an NPU: what tensor_device looks at."""

    __module__ = "torch"

    def __init__(self, index: int):
        self.device = type("device", (), {"type": "npu", "index": index})()


def test_the_tensors_decide_the_device(npu: ModuleType):
    assert npu.tensor_device((_NpuTensor(2), np.ones(3)), {}) == 2
    assert npu.tensor_device((np.ones(3),), {}) is None  # numpy inputs: device= or the environment


def test_tensors_on_two_npus_are_refused(npu: ModuleType):
    with pytest.raises(npu.NpuError) as exc:
        npu.tensor_device((_NpuTensor(0),), {"y": _NpuTensor(1)})
    assert exc.value.diagnostic.code == "E0921"
    assert "argument 1 on npu:0, `y` on npu:1" in str(exc.value)
