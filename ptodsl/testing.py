"""A pytest plugin: every spec's ``tests:`` cases become test items.

Enabled through the ``pytest11`` entry point, so any project with ptodsl installed collects
``NAME.yaml`` specs (a YAML beside its ``.pto``) found under its test paths. Items are named like
``softmax[bf16-B33]`` and run on the simulator in poison mode; ``--ptodsl-backend cpu`` switches
backend. Each case also gives an item ``softmax[bf16-B33-cpu]``, marked ``cpu``, that runs the
emitted C++ built with g++ (``-m "not cpu"`` deselects them). A third item per case,
``softmax[bf16-B33-ptoisa]`` marked ``ptoisa``, builds the same C++ against the real pto-isa checkout
in ``PTO_ISA_ROOT``; those are long, so they are collected only when ``-m`` names ``ptoisa``, and
skip with the reason when ``PTO_ISA_ROOT`` is unset or the compiler cannot give bf16 its real type.
A spec that does not compile is one failing item showing its diagnostics.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser) -> None:
    parser.addini("ptodsl_spec_paths", "folders whose specs become test items (default: any spec)",
                  type="paths", default=[])
    group = parser.getgroup("ptodsl")
    group.addoption("--ptodsl-backend", default="sim", choices=("sim", "cpu"),
                    help="backend for the golden spec cases (default: sim)")


def _is_spec(path) -> bool:
    return path.suffix == ".yaml" and os.path.exists(path.with_suffix(".pto"))


def _wanted(config, path) -> bool:
    roots = config.getini("ptodsl_spec_paths")
    return not roots or any(path.is_relative_to(r) for r in roots)


def pytest_collect_file(parent, file_path):
    if _is_spec(file_path) and _wanted(parent.config, file_path):
        return SpecFile.from_parent(parent, path=file_path)
    return None


class SpecFile(pytest.File):
    def collect(self):
        from .diagnostics import CompileError
        from .golden import case_id, load

        try:
            op = load(str(self.path))
        except CompileError as e:
            yield SpecError.from_parent(self, name=f"{self.path.stem}[compile]", error=e)
            return
        for case in op.spec.tests:
            name = case_id(op.spec, case)
            yield SpecCase.from_parent(self, name=name, op=op, case=case)
        for case in op.spec.tests:
            item = SpecCase.from_parent(self, name=case_id(op.spec, case, "cpu"), op=op, case=case, backend="cpu")
            item.add_marker(pytest.mark.cpu)
            yield item
        if "ptoisa" in (self.config.getoption("markexpr", default="") or ""):
            for case in op.spec.tests:
                item = PtoIsaCase.from_parent(self, name=case_id(op.spec, case, "ptoisa"), op=op, case=case,
                                              backend="cpu")
                item.add_marker(pytest.mark.ptoisa)
                yield item


class SpecError(pytest.Item):
    def __init__(self, *, error, **kw):
        super().__init__(**kw)
        self.error = error

    def runtest(self) -> None:
        raise SpecFailure(self.error.render())

    def repr_failure(self, excinfo):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, 0, self.name


class SpecFailure(Exception):
    pass


def _build_cpu(op) -> None:
    """Build every variant of the spec at its first cpu item, one compiler per core."""
    import shutil

    if shutil.which(os.environ.get("PTODSL_CXX") or "g++") is None:
        pytest.skip("no C++ compiler for the cpu backend (install g++ or set PTODSL_CXX)")
    from .backends.cpp.run import build_spec

    build_spec(op.compiled)


class SpecCase(pytest.Item):
    # Build every variant at the spec's first cpu item; against a pto-isa checkout each case builds
    # its own variant instead, so one variant that does not compile fails only its own cases.
    prebuild = True

    def __init__(self, *, op, case, backend=None, **kw):
        super().__init__(**kw)
        self.op = op
        self.case = case
        self.backend = backend  # None: the --ptodsl-backend choice

    def runtest(self) -> None:
        from .diagnostics import CompileError, DiagnosticError
        from .golden import run_case

        backend = self.backend or self.config.getoption("--ptodsl-backend", default="sim")
        try:
            if backend == "cpu" and self.prebuild:
                _build_cpu(self.op)
            result = run_case(self.op, self.case, backend=backend, poison=True)
        except CompileError as e:
            raise SpecFailure(e.render()) from None
        except DiagnosticError as e:  # inputs refused, or a guard or kernel check stopped the call
            raise SpecFailure(str(e)) from None
        if not result.ok:
            raise SpecFailure(result.report)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, SpecFailure):
            return f"{self.name}\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, self.name


class PtoIsaCase(SpecCase):
    """A case on the cpu backend, built against the pto-isa checkout in PTO_ISA_ROOT."""

    prebuild = False

    def runtest(self) -> None:
        import shutil

        if not os.environ.get("PTO_ISA_ROOT"):
            pytest.skip("PTO_ISA_ROOT is not set: point it at a pto-isa checkout to build against the real headers")
        if shutil.which(os.environ.get("PTODSL_CXX") or "g++") is None:
            pytest.skip("no C++ compiler for the cpu backend (install g++ or set PTODSL_CXX)")
        from .backends.cpp.run import unbuildable_reason
        from .diagnostics import CompileError, DiagnosticError
        from .golden import case_variant

        try:
            reason = unbuildable_reason(self.op.compiled, case_variant(self.op, self.case))
        except (CompileError, DiagnosticError):
            reason = None  # the run below reports it
        if reason:
            pytest.skip(reason)
        super().runtest()
