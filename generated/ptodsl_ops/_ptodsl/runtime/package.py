"""The runtime side of a generated package: what its wrapper modules call.

A wrapper holds a :class:`PackagedOp` naming its op. On first use the op's program is read from
the package (``kernels/<op>/op.json`` with the Tensor and Block IR and the C++ it names), without
parsing or checking the spec, so what runs is exactly what was generated, and every argument check
is :class:`~ptodsl.runtime.operator.Operator`'s: this module adds only the routing of
``backend=``/``device=`` and the NPU path's environment checks.

The package does not import torch (it takes over a second): its torch custom ops are registered
(``<package>.torch_ops`` imported) when the package is imported after torch, when
``<package>.torch_ops`` is first used, or at the first call with a torch tensor
(:meth:`PackagedOp.register_torch`). A call that autograd records (a tensor that requires grad,
grad mode on) runs the torch custom op, so that the plain wrapper is exactly as differentiable as
``torch.ops.<package>.<op>``: its results carry a ``grad_fn`` whose backward is the op's backward
op, or raises E0716 when the spec names none (as the custom op's does: torch raises at
``.backward()``, not at the call, so a forward-only use of tensors that require grad still works).
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..diagnostics import Diagnostic
from .golden import CaseError, import_file, run_case
from .layout import program_file
from .operator import ArgumentValueError, Operator, check_run, is_torch, wants_grad
from .program import Program, load_program

# Annotation of tensor arguments in generated signatures: a numpy array or a torch tensor.
TensorLike = Any


class PackagedOp:
    """One op of a generated package, loaded lazily from the package's files."""

    def __init__(self, package: str, name: str):
        self.package = package  # import name of the generated package
        self.name = name
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ptodsl packaged op {self.package}.{self.name}>"

    @functools.cached_property
    def root(self) -> Path:
        """The package's folder (installed packages are plain folders; zip imports are not supported)."""
        return Path(str(resources.files(self.package)))

    @property
    def operator(self) -> Operator:
        # Loaded once per process; the lock keeps two threads from loading it twice.
        op = self.__dict__.get("_operator")
        if op is None:
            with self._lock:
                op = self.__dict__.get("_operator")
                if op is None:
                    op = Operator(load_program(self.root / "kernels" / program_file(self.name)))
                    self.__dict__["_operator"] = op
        return op

    @property
    def program(self) -> Program:
        return self.operator.program

    def register_torch(self) -> None:
        """Register the package's torch custom ops, ``torch.ops.<package>.<op>``, if not done yet."""
        module = f"{self.package}.torch_ops"
        if module in sys.modules:
            return
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name not in (self.package, module):
                raise  # torch_ops is there but cannot import what it needs: say what

    def __call__(self, inputs: tuple[Any, ...], outputs: Mapping[str, Any], scalars: Mapping[str, Any],
                 backend: str = "sim", device: Any = None) -> Any:
        """Run the op: ``outputs`` maps each output's name to a buffer, or None to allocate it."""
        if device is not None and backend != "npu":
            raise ArgumentValueError(Diagnostic(
                "E0704", f"{self.name}() got `device={device!r}`, which only backend=\"npu\" takes", None, "",
                (), (), "drop `device=`, or pass `backend=\"npu\"`"))
        kwargs = {k: v for k, v in outputs.items() if v is not None}
        arguments = (*inputs, *kwargs.values())
        if any(is_torch(x) for x in arguments):
            self.register_torch()
            if wants_grad(arguments):
                from .torch_support import call_custom_op

                return call_custom_op(self, inputs, kwargs, scalars, backend, device)
        kwargs.update(scalars)
        if backend == "npu":
            from . import npu

            return npu.run(self, inputs, kwargs, device)
        return self.operator(*inputs, **kwargs, backend=backend)

    def validate(self, inputs: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[int, dict[str, int]]:
        """Check every argument as a sim call would, without reading tensor data.

        Tensors on another device (the NPU) cannot become numpy arrays; they are checked through a
        stand-in of the same shape and dtype that owns no memory. Returns the dtype variant's index
        and the bound symbols.
        """
        index, symbols, _scalars = self.checked(inputs, kwargs)
        return index, symbols

    def checked(self, inputs: tuple[Any, ...], kwargs: Mapping[str, Any]
                ) -> tuple[int, dict[str, int], dict[str, Any]]:
        """:meth:`validate`, also returning the scalars as the Python numbers the kernel takes."""
        op = self.operator
        tensors, scalars, _backend = op.bind(tuple(inputs), dict(kwargs))
        shadows = {name: shadow(value) for name, value in tensors.items()}
        index, arrays, symbols = op.resolve(shadows)
        # Scalars, dims and empty calls as on the other backends; values inside device tensors
        # (data-dependent lengths) cannot be read here.
        check_run(op.program, index, arrays, scalars, symbols, lengths=False)
        return index, symbols, scalars


def shadow(x: Any) -> Any:
    """A memory-free numpy stand-in for a tensor on any device, for shape and dtype checks."""
    if type(x).__module__.startswith("torch"):
        from .torch_support import numpy_dtype_of, size_hints

        dtype = numpy_dtype_of(x.dtype)
        shape = size_hints(x)
        if dtype is None or shape is None:  # let resolve() report the unsupported dtype by name
            return x.detach().cpu() if x.device.type != "cpu" else x
        return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))
    return x


def golden_case(package: str, op: str, index: int, backend: str = "sim") -> None:
    """Run golden case ``index`` of a packaged op against the packaged numpy reference; fail with
    its report."""
    module = importlib.import_module(f"{package}.ops.{op}")
    operator = module._PTODSL_OP.operator
    prog = operator.program
    reference = None
    if prog.reference is not None:
        reference = getattr(import_file(prog.reference[0]), prog.reference[1])
    case = next(c for c in prog.cases if c.index == index)
    try:
        result = run_case(operator, case, reference, backend=backend)
    except CaseError as exc:
        raise AssertionError(f"{exc.code}: {exc.message} ({'.'.join(map(str, exc.path))})") from None
    if not result.ok:
        raise AssertionError(result.report)


__all__ = ["PackagedOp", "TensorLike", "golden_case", "shadow"]
