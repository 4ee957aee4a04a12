"""The golden harness: run a spec's ``tests:`` cases and compare against its numpy reference.

Inputs are generated reproducibly from the case's seed (default: derived from the op name and case
index). Tolerances come from a per-dtype table that a case may override. A mismatch report says
how many elements differ, the worst absolute and relative errors with their index, whether the
mismatches sit in tail tiles, and any NaN/Inf.
"""

from __future__ import annotations

import os

from .api import Operator, load
from .diagnostics import CompileError, Diagnostic, Diagnostics, Span
from .frontend.spec import Spec, TestCase, check_spec_files
from .runtime import golden as _rt
from .runtime.golden import (
    TOLERANCES,
    CaseError,
    CaseResult,
    as_ref_input,
    compare,
    import_file,
    make_inputs,
    tolerance,
)


def case_id(spec: Spec, case: TestCase, backend: str | None = None) -> str:
    """Readable ids such as ``softmax[bf16-B33]``: dtypes, then the case name or its shapes."""
    return _rt.case_id(spec.op, case, backend)


def test_error(spec: Spec, path: tuple, message: str, label: str, help: str, code: str = "E0232") -> CompileError:
    """A mistake in a spec's reference or test case, reported at its YAML entry."""
    return CompileError([Diagnostic(code, message, spec.spans.at(path) if spec.spans else Span(spec.path, 1, 1),
                                    label, (), (), help)])


def _reference_module(spec: Spec):
    """The reference file of ``spec``, imported once per process."""
    # The reference is Python and runs: only a file inside the spec's root may be loaded, whoever
    # built this Spec (load_spec reports the same as E0219).
    diags = Diagnostics()
    check_spec_files(spec, diags)
    diags.raise_if_errors()
    path = spec.reference_path
    assert path is not None and spec.reference is not None
    where = ("reference",)
    if not os.path.isfile(path):
        raise test_error(spec, where, f"the reference file `{spec.reference.file}` does not exist",
                         "no such file beside the spec", "write `reference: FILE.py:FUNCTION`, FILE relative to "
                         "the YAML's folder", code="E0230")
    try:
        return import_file(os.path.abspath(path))
    except ImportError:
        raise test_error(spec, where, f"`{spec.reference.file}` cannot be loaded as a Python module",
                         "not a Python file", "name a .py file", code="E0230") from None
    except Exception as exc:  # the reference is the user's code: any failure is theirs to see
        raise test_error(spec, where, f"importing `{spec.reference.file}` failed: "
                         f"{type(exc).__name__}: {exc}", "this file raised while loading",
                         "fix the reference module; it must import on its own") from None


def _function(spec: Spec, module, name: str, key: str, code: str):
    fn = getattr(module, name, None)
    if not callable(fn):
        assert spec.reference is not None
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise test_error(spec, (key,), f"`{spec.reference.file}` has no function `{name}`",
                         "named here", "functions there: " + (", ".join(names) or "none"), code=code)
    return fn


def load_reference(spec: Spec):
    """The spec's numpy reference function, or None when it names none."""
    if spec.reference is None:
        return None
    return _function(spec, _reference_module(spec), spec.reference.function, "reference", "E0230")


def load_torch(spec: Spec):
    """The spec's torch equivalent (``torch:``, a function of the reference file), or None when it
    names none. Loading it does not import torch; calling it does."""
    if spec.torch is None:
        return None
    if spec.reference is None:
        raise test_error(spec, ("torch",), f"`torch: {spec.torch}` names a function of the reference file, "
                         "and the spec has no `reference:`", "no file to look in",
                         "add `reference: FILE.py:FUNCTION` and define both functions in FILE", code="E0234")
    return _function(spec, _reference_module(spec), spec.torch, "torch", "E0234")


def case_variant(op: Operator, case: TestCase) -> int:
    """The index of the dtype variant a case runs (raises what ``run_case`` would for a bad case)."""
    try:
        inputs, _ = make_inputs(op, case)
    except CaseError as exc:
        raise test_error(op.spec, exc.path, exc.message, exc.label, exc.help, exc.code) from None
    return op.resolve(dict(inputs))[0]


def run_case(op: Operator, case: TestCase, backend: str = "sim", poison: bool = True,
             level: str = "block") -> CaseResult:
    """Run one case (:func:`ptodsl.runtime.golden.run_case`); a mistake of the case or its
    reference is a CompileError at its YAML entry."""
    spec = op.spec
    ref_fn = load_reference(spec)
    try:
        return _rt.run_case(op, case, ref_fn, backend, poison, level,
                            spec.reference.function if spec.reference else "reference")
    except CaseError as exc:
        raise test_error(spec, exc.path, exc.message, exc.label, exc.help, exc.code) from None


def spec_paths(root: str) -> list[str]:
    if os.path.isfile(root):
        return [root]
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out.extend(os.path.join(dirpath, f) for f in files if f.endswith(".yaml"))
    return sorted(out)


__all__ = ["TOLERANCES", "CaseResult", "as_ref_input", "case_id", "compare", "load", "make_inputs", "run_case", "spec_paths",
           "tolerance"]
