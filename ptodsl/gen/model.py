"""What the templates see of one operator: its Python signature, docs and variants, from the spec.

Everything here is plain data in a fixed order, so rendering it is deterministic. Names that reach
the generated Python were validated before: the spec loader checks op names, and the checker
parameter names (Python keywords such as ``lambda``, and the call's own keywords, ``backend`` and
``device``: ``yamlio.schema.CALL_KEYWORDS``). :func:`name_problems` adds what only a package
has: an op name that would shadow one of the package's modules.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field

from .. import sym
from ..api import program_of
from ..diagnostics import Diagnostic, Label, Span
from ..driver import Compiled
from ..frontend import ast
from ..golden import case_id
from ..runtime.layout import VENDOR, cpu_folder, npu_folder, variant_slug
from ..yamlio.schema import E_NAME, identifier_problem

# Names of the package's own modules and folders; an op named so would shadow them.
PACKAGE_NAMES = frozenset({"ops", "tests", "specs", "kernels", "torch_ops", "conftest", "manifest", VENDOR})
# Package names that would shadow what the package imports, or that torch keeps for itself.
RESERVED_PACKAGES = frozenset({"ptodsl", "torch", "numpy", "pytest", "ml_dtypes", "jinja2", "yaml",
                               "aten", "at", "prim", "prims", "pytorch"})

PY_SCALAR = {"bool": "bool", "f16": "float", "bf16": "float", "f32": "float"}  # integers: "int"


@dataclass(frozen=True)
class ParamModel:
    name: str
    kind: str  # input | inout | output | scalar
    dtype: str  # a dtype or a dtype variable
    dims: tuple[str, ...]  # () for scalars; literal dims as digits
    default: str | None = None  # Python literal of a scalar's default, None when required

    @property
    def decl(self) -> str:
        """The parameter as the ``.pto`` declares it: ``T[B, N]``, ``out T[B, N]``, ``f32``."""
        mode = {"inout": "inout ", "output": "out "}.get(self.kind, "")
        return f"{mode}{self.dtype}[{', '.join(self.dims)}]" if self.kind != "scalar" else self.dtype

    @property
    def role(self) -> str:
        """What the docstring says after the declaration."""
        if self.kind == "input":
            return ", an input."
        if self.kind == "inout":
            return ", read, then updated in place and returned."
        if self.kind == "output":
            return "; allocated and returned when None, else written in place and returned."
        return " scalar, required." if self.default is None else f" scalar, default {self.default}."

    @property
    def py_type(self) -> str:
        if self.kind != "scalar":
            return "TensorLike"
        return PY_SCALAR.get(self.dtype, "int")


@dataclass(frozen=True)
class VariantModel:
    slug: str  # file-name form, e.g. "f32"
    dtypes: dict[str, str]  # dtype variable -> dtype
    kernels: tuple[str, ...]  # paths relative to the package


@dataclass(frozen=True)
class CaseModel:
    index: int
    id: str  # e.g. softmax[bf16-B33]


@dataclass(frozen=True)
class OpModel:
    name: str
    doc: str
    spec: str  # the YAML inside the package, e.g. specs/softmax.yaml
    files: dict[str, str]  # packaged spec files -> sha256
    target: str
    params: tuple[ParamModel, ...]  # in kernel order
    symbols: dict[str, int]  # fixed by the YAML
    dtype_vars: dict[str, tuple[str, ...]]
    variants: tuple[VariantModel, ...]
    cases: tuple[CaseModel, ...]
    backward: str | None = None  # the op of its spec's `backward:`, an op of the same package
    defined: dict[str, str] = field(default_factory=dict)  # dims defined by others, `D: 2*H`
    max_dims: dict[str, int] = field(default_factory=dict)  # `max_dims:`, checked at each call

    @property
    def inputs(self) -> tuple[ParamModel, ...]:
        """Positional tensor arguments: inputs and in-out tensors, in kernel order."""
        return tuple(p for p in self.params if p.kind in ("input", "inout"))

    @property
    def outputs(self) -> tuple[ParamModel, ...]:
        """Output-only tensors, taken by keyword (allocated when not given)."""
        return tuple(p for p in self.params if p.kind == "output")

    @property
    def results(self) -> tuple[ParamModel, ...]:
        """What a call returns, in kernel order: outputs and in-out tensors."""
        return tuple(p for p in self.params if p.kind in ("output", "inout"))

    @property
    def scalars(self) -> tuple[ParamModel, ...]:
        return tuple(p for p in self.params if p.kind == "scalar")

    @property
    def summary(self) -> str:
        """The doc's first line (the module docstring and the torch op's)."""
        return self.doc.strip().splitlines()[0] if self.doc.strip() else f"the ptodsl operator {self.name}."

    @property
    def doc_text(self) -> str:
        return self.doc.strip() or self.summary

    @property
    def returns(self) -> str:
        """The docstring's Returns line."""
        names = [p.name for p in self.results]
        if not names:
            return "None."
        if len(names) == 1:
            return f"{names[0]}, a numpy array or torch tensor like the inputs."
        return f"({', '.join(names)}), numpy arrays or torch tensors like the inputs."

    @property
    def input_tuple(self) -> str:
        """The inputs as a Python tuple expression: ``(x,)``, ``(x, gamma)``."""
        names = [p.name for p in self.inputs]
        return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"

    @property
    def torch_result(self) -> str:
        """The torch op's return annotation."""
        n = len(self.results)
        if n == 0:
            return "None"
        return "torch.Tensor" if n == 1 else f"tuple[{', '.join(['torch.Tensor'] * n)}]"

    @property
    def variant_names(self) -> tuple[str, ...]:
        """Readable dtype variants: ``T=f32``, or ``default`` when the op has no dtype variable."""
        return tuple(",".join(f"{k}={v}" for k, v in v.dtypes.items()) or "default" for v in self.variants)

    @property
    def notes(self) -> tuple[str, ...]:
        """The docstring's closing lines: dtype variants and symbols."""
        lines = []
        if self.dtype_vars:
            lines.append("Dtype variants: " + "; ".join(f"{k} in {', '.join(v)}" for k, v in self.dtype_vars.items())
                         + ".")
        parts = [f"{k} = {v} (fixed)" for k, v in self.symbols.items()]
        parts += [f"{k} = {v} (checked at each call)" for k, v in self.defined.items()]
        parts += [f"{k} from 1 to {v} (checked at each call)" for k, v in self.max_dims.items()]
        if self.runtime_symbols:
            parts.append(f"{', '.join(self.runtime_symbols)} from the arguments' shapes")
        if parts:
            lines.append(f"Symbols: {'; '.join(parts)}.")
        return tuple(lines)

    @property
    def signature(self) -> str:
        """The wrapper's signature as a user reads it (README, docstrings)."""
        parts = [p.name for p in self.inputs] + ["*"]
        parts += [f"{p.name}=None" for p in self.outputs]
        parts += [p.name if p.default is None else f"{p.name}={p.default}" for p in self.scalars]
        parts += ['backend="sim"', "device=None"]
        return f"{self.name}({', '.join(parts)})"

    @property
    def runtime_symbols(self) -> tuple[str, ...]:
        """Symbols bound from the arguments' shapes at call time, in first-use order."""
        seen: dict[str, None] = {}
        for p in self.params:
            for d in p.dims:
                if not d.isdigit() and d not in self.symbols:
                    seen.setdefault(d)
        return tuple(seen)


def _kind(p: ast.Param) -> str:
    if not p.is_tensor:
        return "scalar"
    return {"in": "input", "out": "output", "inout": "inout"}[p.mode]


def _default(p: ast.Param) -> str | None:
    from ..api import literal_value  # the one place that turns a .pto literal into a Python value

    if p.default is None:
        return None
    value = literal_value(p.default)
    if PY_SCALAR.get(p.dtype) == "float":
        value = float(value)
    return repr(value)


def op_model(compiled: Compiled, spec_rel: str, files: dict[str, str], kernels: dict[str, str]) -> OpModel:
    """The model of one compiled op; ``kernels`` are its ``kernels/`` files (see kernel_files)."""
    spec = compiled.spec
    kernel = compiled.module.kernel(spec.op)
    params = tuple(
        ParamModel(p.name, _kind(p), p.dtype, tuple(str(d.value) for d in p.dims or ()), _default(p))
        for p in kernel.params
    )
    variants = []
    for ck in compiled.checked:
        slug = variant_slug(ck.variant)
        mine = (f"{spec.op}/{slug}.", f"{cpu_folder(spec.op, slug)}/", f"{npu_folder(spec.op, slug)}/")
        paths = tuple(f"kernels/{k}" for k in kernels if k.startswith(mine))
        variants.append(VariantModel(slug, dict(sorted(ck.variant.items())), paths))
    return OpModel(
        name=spec.op,
        doc=spec.doc,
        spec=spec_rel,
        files=dict(sorted(files.items())),
        target=spec.target,
        params=params,
        symbols=dict(sorted(spec.symbols.items())),
        defined={k: sym.to_text(v) for k, v in spec.defined.items()},
        max_dims=dict(sorted(spec.schedule.max_dims.items())),
        dtype_vars={k: tuple(v) for k, v in sorted(spec.dtypes.items())},
        variants=tuple(variants),
        cases=tuple(CaseModel(c.index, case_id(spec, c)) for c in spec.tests),
        backward=back.op if (back := program_of(compiled).backward) is not None else None,
    )


def name_problems(compiled: Compiled) -> list[Diagnostic]:
    """Op names that cannot name a module of the generated package (parameter names were checked
    with the spec, by the one rule of ``yamlio.schema.parameter_name_problem``)."""
    out: list[Diagnostic] = []
    spec = compiled.spec
    if spec.op in PACKAGE_NAMES:
        out.append(Diagnostic(E_NAME, f"`{spec.op}` cannot name an op of a generated package",
                              spec.spans.at(("op",)), f"the package has a `{spec.op}` of its own", (), (),
                              f"rename the op, e.g. `{spec.op}_op`"))
    return out


def duplicate_op(compiled: Compiled, first: Compiled) -> Diagnostic:
    """Two specs that define the same op would generate one wrapper twice."""
    first_span = first.spec.spans.at(("op",)) if ("op",) in first.spec.spans else Span(first.spec.path, 1, 1)
    here = compiled.spec.spans.at(("op",)) if ("op",) in compiled.spec.spans else Span(compiled.spec.path, 1, 1)
    return Diagnostic(E_NAME, f"op `{compiled.spec.op}` is defined by two specs", here,
                      "this op name is taken", (Label(first_span, "first defined here"),), (),
                      "give one of them another `op:` name")


def package_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a generated package, or None."""
    if keyword.iskeyword(name):
        return f"`{name}` is a Python keyword"
    problem = identifier_problem(name)
    if problem is not None:
        return problem
    if name in RESERVED_PACKAGES:
        return f"`{name}` would shadow a package of the same name (or a torch namespace)"
    return None


__all__ = ["CaseModel", "OpModel", "ParamModel", "VariantModel", "duplicate_op", "name_problems", "op_model",
           "package_name_problem"]
