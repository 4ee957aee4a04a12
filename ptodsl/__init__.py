"""ptodsl: a declarative compiler for Ascend NPU operators.

``specs/NAME.pto`` (the algorithm) + ``specs/NAME.yaml`` (interface and schedule) are type-checked,
lowered through the PTO IR (tensor -> tile -> block) and run on the numpy simulator, or emitted as
pto-isa C++ kernels.
"""

from .api import ArgumentError, ArgumentTypeError, ArgumentValueError, Operator, load
from .backends.guards import GuardError
from .backends.memory import AllocationError
from .diagnostics import CompileError, Diagnostic

__version__ = "0.1.0"

__all__ = [
    "AllocationError",
    "ArgumentError",
    "ArgumentTypeError",
    "ArgumentValueError",
    "CompileError",
    "Diagnostic",
    "GuardError",
    "Operator",
    "__version__",
    "load",
]
