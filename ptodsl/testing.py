"""A pytest plugin: every spec's ``tests:`` cases become test items.

Enabled through the ``pytest11`` entry point, so any project with ptodsl installed collects
``NAME.yaml`` specs (a YAML beside its ``.pto``) found under its test paths. Items are named like
``softmax[bf16-B33]`` and run on the simulator in poison mode; ``--ptodsl-backend cpu`` switches
backend. Each case also gives an item ``softmax[bf16-B33-cpu]``, marked ``cpu``, that runs the
emitted C++ built with g++ (``-m "not cpu"`` deselects them). A third item per case,
``softmax[bf16-B33-ptoisa]`` marked ``ptoisa``, builds the same C++ against the real pto-isa checkout
in ``PTO_ISA_ROOT``; those are long, so they are collected only when ``-m`` names ``ptoisa``, and
skip with the reason when ``PTO_ISA_ROOT`` is unset or the compiler cannot give bf16 its real type.
The plugin registers the ``cpu``, ``slow`` and ``ptoisa`` markers itself, so ``--strict-markers``
works without any configuration.

Collection only reads each spec's YAML for its case ids; the spec is compiled when the first of
its cases runs, once per process, so ``pytest -k 'softmax'`` compiles one spec. A spec whose YAML
cannot be read is one failing item at collection; a spec that does not compile fails each of its
cases with the diagnostics.
"""

from __future__ import annotations

import os

import pytest

MARKERS = {
    "cpu": "runs the emitted C++ built with g++ (backend=cpu)",
    "slow": "slower end-to-end tests",
    "ptoisa": "builds the emitted C++ against the real pto-isa headers in PTO_ISA_ROOT (collected with -m ptoisa)",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


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


def _as_named(path) -> str:
    """The spec's path as a command run here names it: relative to the working directory when it
    is under it (its diagnostics then read as `ptodsl check`'s, and a test compiling the same spec
    by that path shares the compile: ``driver.compile_spec`` keeps specs by the path given)."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return os.fspath(path)
    return os.fspath(path) if relative.startswith("..") else relative


def pytest_collect_file(parent, file_path):
    if _is_spec(file_path) and _wanted(parent.config, file_path):
        return SpecFile.from_parent(parent, path=file_path)
    return None


class SpecFile(pytest.File):
    def collect(self):
        from .diagnostics import CompileError
        from .frontend.spec import load_spec
        from .golden import case_id

        try:
            spec = load_spec(str(self.path))  # the YAML alone: the case ids, no compiling yet
        except CompileError as e:
            yield SpecError.from_parent(self, name=f"{self.path.stem}[compile]", error=e)
            return
        for case in spec.tests:
            yield SpecCase.from_parent(self, name=case_id(spec, case), index=case.index)
        for case in spec.tests:
            item = SpecCase.from_parent(self, name=case_id(spec, case, "cpu"), index=case.index, backend="cpu")
            item.add_marker(pytest.mark.cpu)
            yield item
        if "ptoisa" in (self.config.getoption("markexpr", default="") or ""):
            for case in spec.tests:
                item = PtoIsaCase.from_parent(self, name=case_id(spec, case, "ptoisa"), index=case.index,
                                              backend="cpu")
                item.add_marker(pytest.mark.ptoisa)
                yield item

    def operator(self):
        """The compiled spec, compiled at the first case that runs; its CompileError is kept and
        raised again for the other cases, which fail with the same diagnostics."""
        if not hasattr(self, "_compiled"):
            from . import api
            from .diagnostics import CompileError

            try:
                self._compiled = api.load(_as_named(self.path))
            except CompileError as e:
                self._compiled = e
        if isinstance(self._compiled, Exception):
            raise self._compiled
        return self._compiled


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


def _skip_unfaithful(item: SpecCase) -> None:
    """Skip a cpu case built against PTO_ISA_ROOT that this toolchain cannot build faithfully
    (``backends/cpp/run.unbuildable_reason``: a call would stop with E0908): a gap of the
    machine's toolchain, not of the spec."""
    from .backends.cpp.run import unbuildable_reason
    from .diagnostics import CompileError, DiagnosticError
    from .golden import case_variant

    try:
        op = item.parent.operator()
        reason = unbuildable_reason(op.compiled, case_variant(op, op.spec.tests[item.index]))
    except (CompileError, DiagnosticError):
        reason = None  # the run reports it
    if reason:
        pytest.skip(reason)


class SpecCase(pytest.Item):
    # Build every variant at the spec's first cpu item; against a pto-isa checkout each case builds
    # its own variant instead, so one variant that does not compile fails only its own cases.
    prebuild = True

    def __init__(self, *, index: int, backend: str | None = None, **kw):
        super().__init__(**kw)
        self.index = index  # the case's position in the spec's `tests:`
        self.backend = backend  # None: the --ptodsl-backend choice

    def runtest(self) -> None:
        from .diagnostics import CompileError, DiagnosticError
        from .golden import run_case

        backend = self.backend or self.config.getoption("--ptodsl-backend", default="sim")
        if backend == "cpu" and os.environ.get("PTO_ISA_ROOT"):
            _skip_unfaithful(self)  # the cpu backend builds against the checkout then
        try:
            op = self.parent.operator()
            if backend == "cpu" and self.prebuild:
                _build_cpu(op)
            result = run_case(op, op.spec.tests[self.index], backend=backend, poison=True)
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
        _skip_unfaithful(self)
        super().runtest()
