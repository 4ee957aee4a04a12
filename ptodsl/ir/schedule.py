"""The schedule as module attributes: written by tensorize, read by every pass after it.

Keys are flat so the textual IR needs no nested attribute syntax::

    vec_tile = [8, 128]            cube_tile.m = [64, 128]        cube_tile.split_k = 2
    loop.b.unroll = [4, 2, 1]      loop.b.vec_tile = [1, 256]      option.max_paths = 64
    max_dim.D = 128

The module also names its target (``target``) and the passes already applied (``passes``), so a
printed module is a complete input for the rest of the pipeline (``ptodsl ir --from``)."""

from __future__ import annotations

from typing import Any

from ..schedule import PASS_OPTION_DEFAULTS, LoopSchedule, Schedule
from .core import Module

LOOP_FIELDS = ("unroll", "vec_tile", "submit_before_loop")


def schedule_attrs(s: Schedule) -> dict[str, Any]:
    """The attributes that carry ``s``, in a fixed order so printed modules are reproducible."""
    out: dict[str, Any] = {}
    if s.vec_tile is not None:
        out["vec_tile"] = tuple(s.vec_tile)
    for axis, levels in sorted((s.cube_tile or {}).items()):
        out[f"cube_tile.{axis}"] = tuple(levels)
    if s.split_k != 1:
        out["cube_tile.split_k"] = s.split_k
    for name, ls in sorted(s.loops.items()):
        for f in LOOP_FIELDS:
            v = getattr(ls, f)
            if v is not None:
                out[f"loop.{name}.{f}"] = tuple(v) if isinstance(v, tuple) else v
    for k, v in sorted(s.pass_options.items()):
        out[f"option.{k}"] = v
    for k, v in sorted(s.max_dims.items()):
        out[f"max_dim.{k}"] = v
    if s.nondecreasing:
        out["nondecreasing"] = tuple(s.nondecreasing)
    return out


def reschedule(module: Module, s: Schedule, **extra: Any) -> None:
    """Replace the schedule ``module`` carries by ``s`` (in place), keeping its target and the
    passes applied; ``extra`` attributes (``chosen``) follow."""
    module.attrs = {"target": module.attrs["target"], **schedule_attrs(s), "passes": passes_applied(module),
                    **extra}


def schedule_of(module: Module) -> Schedule:
    """The schedule a module carries; what it leaves out takes the defaults."""
    vec_tile = None
    cube: dict[str, tuple[int, int]] = {}
    loops: dict[str, dict[str, Any]] = {}
    options = dict(PASS_OPTION_DEFAULTS)
    split_k = 1
    max_dims: dict[str, int] = {}
    for key, v in module.attrs.items():
        head, _, rest = key.partition(".")
        if key == "vec_tile":
            vec_tile = tuple(int(x) for x in v)
        elif key == "cube_tile.split_k":
            split_k = int(v)
        elif head == "cube_tile" and rest:
            cube[rest] = (int(v[0]), int(v[1]))
        elif head == "loop" and "." in rest:
            name, f = rest.rsplit(".", 1)
            if f in LOOP_FIELDS:
                loops.setdefault(name, {})[f] = bool(v) if f == "submit_before_loop" else tuple(int(x) for x in v)
        elif head == "option" and rest:
            options[rest] = int(v)
        elif head == "max_dim" and rest:
            max_dims[rest] = int(v)
    return Schedule(vec_tile, cube or None, split_k, {n: LoopSchedule(**fs) for n, fs in loops.items()},
                    pass_options=options, max_dims=max_dims,
                    nondecreasing=tuple(str(x) for x in module.attrs.get("nondecreasing", ())))


def passes_applied(module: Module) -> tuple[str, ...]:
    return tuple(module.attrs.get("passes", ()))


def with_pass(module: Module, name: str) -> Module:
    """Record that ``name`` ran on ``module`` (in place; passes hand over a fresh module)."""
    module.attrs["passes"] = (*passes_applied(module), name)
    return module
