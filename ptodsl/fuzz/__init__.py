"""Differential random-program testing.

:mod:`.gen` writes random well-typed specs (a ``.pto`` and its ``.yaml``) from a seed, :mod:`.interp`
executes the parsed ``.pto`` with numpy (an oracle that shares no code with lowering), :mod:`.run`
compiles each program through the public API, runs it on the simulator (poison on) and the CPU
backend and compares both with the interpreter, and :mod:`.shrink` reduces a failing program to a
small one that still fails the same way.
"""

from .gen import ALL_FEATURES, KNOWN_BUG_FEATURES, Program, generate

__all__ = ["ALL_FEATURES", "KNOWN_BUG_FEATURES", "Program", "generate"]
