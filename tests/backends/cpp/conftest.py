"""Fixtures of the C++ backend tests: a private build cache, and building test kernels with it.

Every test here builds into a temporary cache (never the user's), and compiles against ptodsl's
own header unless a test opts into PTO_ISA_ROOT. A test module builds its C++ once, in a
module-scoped fixture, and calls its extern "C" functions with numpy buffers through ctypes.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ptodsl.backends.cpp.build import build_shared, load_library


@pytest.fixture(scope="session", autouse=True)
def _private_build_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("ptodsl-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PTODSL_CACHE_DIR", str(root))
        mp.delenv("PTO_ISA_ROOT", raising=False)
        mp.delenv("PTODSL_CXX", raising=False)
        yield root


class CppTools:
    """Helpers the test modules reach through the ``cpp`` fixture."""

    @staticmethod
    def build(sources: dict[str, str], name: str, **kwargs: object) -> tuple[Path, ctypes.CDLL]:
        if shutil.which("g++") is None:
            pytest.skip("g++ is not installed")
        path = build_shared(sources, name, **kwargs)  # type: ignore[arg-type]
        return path, load_library(path)

    @staticmethod
    def ptr(array: np.ndarray) -> ctypes.c_void_p:
        """The address of a C-contiguous array, for an extern "C" function's pointer parameter."""
        assert array.flags.c_contiguous, "pass C-contiguous arrays to kernels"
        return ctypes.c_void_p(array.ctypes.data)

    @staticmethod
    def run_in_subprocess(library: Path, function: str, *int_args: int) -> subprocess.CompletedProcess[str]:
        """Call one function of a library in a fresh interpreter: for calls that are meant to abort."""
        code = (
            "import ctypes, sys\n"
            "lib = ctypes.CDLL(sys.argv[1])\n"
            "getattr(lib, sys.argv[2])(*[ctypes.c_int(int(a)) for a in sys.argv[3:]])\n"
        )
        return subprocess.run(
            [sys.executable, "-c", code, os.fspath(library), function, *map(str, int_args)],
            capture_output=True, text=True, timeout=60, check=False,
        )


@pytest.fixture(scope="session")
def cpp() -> CppTools:
    return CppTools()
