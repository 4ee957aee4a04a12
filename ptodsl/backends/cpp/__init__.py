"""The C++ backend: emit pto-isa C++ from the Block IR, build it with g++, run it on the CPU.

- :mod:`.emit` -- ``emit_variant(compiled, index)``: per dtype variant, one translation unit per
  compute kernel (``softmax_f32_k0.cpp``) and one for the control program (``softmax_f32.cpp``);
- :mod:`.build` -- ``build_shared(sources, name)``: g++ through a content-addressed cache;
- :mod:`.run` -- ``run_variant(...)``: the ``backend="cpu"`` of ``ptodsl.api``.

Nothing is imported eagerly: importing the package costs nothing for users of the simulator.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "EmittedVariant": "emit", "emit_spec": "emit", "emit_variant": "emit",
    "build_shared": "build", "load_library": "build", "STATS": "build",
    "build_spec": "run", "build_variant": "run", "run_variant": "run",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(name)
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = sorted(_EXPORTS)
