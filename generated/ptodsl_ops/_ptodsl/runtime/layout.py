"""Where things live inside a generated package: the one place both ``ptodsl gen`` (writing) and
the runtime (reading) take the file names from."""

from __future__ import annotations

from collections.abc import Mapping

VENDOR = "_ptodsl"  # the package's copy of this runtime


def variant_slug(variant: Mapping[str, str]) -> str:
    """File-name form of a dtype variant: its dtypes in variable order, as the IR names kernels."""
    return "_".join(variant[k] for k in sorted(variant)) or "default"


def program_file(op: str) -> str:
    """The op's program (:mod:`.program`), under ``kernels/``."""
    return f"{op}/op.json"


def ir_file(op: str, slug: str, level: str) -> str:
    return f"{op}/{slug}.{level}.ir"


def cpu_folder(op: str, slug: str) -> str:
    """The C++ of one variant for the cpu backend: a translation unit per compute kernel and one
    for the control program, as the compiler emitted them."""
    return f"{op}/cpu/{slug}"


def npu_folder(op: str, slug: str) -> str:
    """The NPU build of one variant: a translation unit per compute kernel (compiled for its own
    core type), the host program and ``build.json`` describing them."""
    return f"{op}/npu/{slug}"


__all__ = ["VENDOR", "cpu_folder", "ir_file", "npu_folder", "program_file", "variant_slug"]
