"""Every IR op is declared once with its signature (``ptodsl/ir/opdefs.py``), and each stage that
gives ops a meaning has a handler for every family it can meet.

The verifier checks each op against its declaration: an op with an operand removed or added, an
operand of the wrong kind, a required attribute missing or an attribute it does not declare never
verifies. These are tried on every op of every pass of a few library specs, not on hand-written
cases only, so a declaration that is looser than what the compiler builds shows up here.
"""

from __future__ import annotations

import dataclasses

import pytest

from ptodsl import ir
from ptodsl.backends.cpp.control import CONTROL
from ptodsl.backends.cpp.kernel import KERNEL
from ptodsl.backends.sim import SIM
from ptodsl.cost.timeline import COST
from ptodsl.driver import compile_spec
from ptodsl.ir import TensorType, TileType, Value
from ptodsl.ir.opdefs import FAMILIES, IR_OPS, families_at
from ptodsl.passes.tile import COMPUTE, TILING

TILE_AND_BLOCK = families_at("tile") | families_at("block")
# A compute kernel holds grid loops and branches besides its tile ops.
IN_KERNELS = families_at("block", control=False) | {"loop", "if"}
ON_A_PIPE = frozenset(d.family for d in IR_OPS.values() if d.pipe is not None)
COMPUTATIONS = frozenset(d.family for d in IR_OPS.values() if "tensor" in d.levels and d.results
                         and not d.control)


@pytest.mark.parametrize("table, families", [
    (SIM, TILE_AND_BLOCK),
    (KERNEL, IN_KERNELS),
    (CONTROL, families_at("block", control=True)),
    (COST, ON_A_PIPE),
    (TILING, families_at("tensor")),
    (COMPUTE, COMPUTATIONS),
], ids=lambda x: getattr(x, "what", None))
def test_every_family_has_a_handler(table, families):
    assert not table.missing(families), f"{table.what} has no handler for {sorted(table.missing(families))}"
    assert set(table.table) <= FAMILIES


def test_a_handler_for_a_family_no_op_has_is_refused():
    with pytest.raises(ValueError, match="no IR op has the family"):
        SIM.on("frobnicate")(lambda m, op: None)


SPECS = ["specs/softmax.yaml", "specs/flash_attn.yaml", "specs/where_relu.yaml", "specs/scalar_ops.yaml",
         "specs/seq_add.yaml", "specs/cast_f16_f32.yaml", "specs/matmul_splitk.yaml", "specs/bmm.yaml",
         "specs/transpose2d.yaml", "specs/concat_last.yaml", "specs/permute_heads.yaml", "specs/kv_cache_update.yaml",
         "specs/moe_topk.yaml", "specs/gather_last.yaml", "specs/causal_mask.yaml"]


def _modules():
    for spec in SPECS:
        c = compile_spec(spec)
        for name, module in c.after.items():
            yield f"{spec}:{name}", module


def _mutants(op: ir.Op):
    """(what was done, a broken copy) for each way to break the op's signature."""
    d = IR_OPS[op.name]
    if op.operands:
        for k in range(len(op.operands)):
            arg = d.args[min(k, len(d.args) - 1)]
            if not (arg.optional or arg.many):
                yield f"drop operand {k}", dataclasses.replace(op, operands=op.operands[:k] + op.operands[k + 1:])
            other = TileType("ub", "f32", (8, 8), (8, 8)) if isinstance(op.operands[k].type, TensorType) \
                else TensorType("f32", (8, 8))
            swapped = list(op.operands)
            swapped[k] = Value("kind", other)
            yield f"operand {k} of the other kind", dataclasses.replace(op, operands=swapped)
    if not any(a.many for a in d.args):
        yield "one operand too many", dataclasses.replace(op, operands=[*op.operands, *op.operands[:1]] or
                                                          [Value("extra", TensorType("f32", (8,)))])
    for a in d.required:
        yield f"drop attribute {a}", dataclasses.replace(op, attrs={k: v for k, v in op.attrs.items() if k != a})
    yield "an attribute it does not declare", dataclasses.replace(op, attrs={**op.attrs, "frob": 1})


@pytest.mark.slow  # every op of every library kernel, mutated: about 20 s; the everyday suite stays under five minutes
def test_every_broken_signature_is_refused():
    tried = 0
    for where, module in _modules():
        ops = {}
        for op in module.walk():
            ops.setdefault(op.name, op)  # one instance of each op per module is enough
        for op in ops.values():
            for what, broken in _mutants(op):
                problem = IR_OPS[op.name].check(broken)
                assert problem is not None, f"{where}: `{op.name}` with {what} still fits its declaration"
                tried += 1
    assert tried > 300


def test_the_verifier_refuses_a_launch_that_does_not_match_its_kernel():
    c = compile_spec("specs/softmax.yaml")
    module = c.after["sync"].clone()
    launch = next(op for op in module.walk() if op.name == "launch")
    launch.operands = launch.operands[:-1]
    with pytest.raises(ir.VerifyError, match="passes .* tensors and .* scalars for"):
        ir.verify(module)


def test_a_tile_op_whose_shapes_disagree_is_refused():
    text = (
        'module @m level tile {\n'
        '  kernel @k(%x: tensor<f32 [M, 64]>) {\n'
        '    %a = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>\n'
        '    %b = tile.alloc() : tile<ub f32 [8, 32] valid [8, 32]>\n'
        '    %c = tile.alloc() : tile<ub f16 [8, 64] valid [8, 64]>\n'
        '    tile.add(%a, %a, %X)\n'
        '  }\n'
        '}\n'
    )
    for bad, message in (("%b", "shapes dst \\[8, 64\\], x \\[8, 64\\], y \\[8, 32\\] differ"),
                         ("%c", "dtypes dst f32, x f32, y f16 differ")):
        with pytest.raises(ir.VerifyError, match=message):
            ir.verify(ir.parse(text.replace("%X", bad)))
