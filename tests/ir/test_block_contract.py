"""The IR contract for blocks (ir/opdefs.py): a launch's optional `block_dim`, and the compute
kernel attributes `block_index` / `block_count` naming the scalar parameters each block receives
instead of the launch. The verifier checks the declarations."""

from __future__ import annotations

import pytest

from ptodsl import ir
from ptodsl.ir.gm import kernel_env
from ptodsl.ir.opdefs import FUNC_ATTRS, IR_OPS, block_params, launched_params

KERNEL_ATTRS = 'block_index = "bi", block_count = "bn"'
TEXT = '''module @m level block attributes {target = "ascend910b"} {
  vector @m_k0(%x: tensor<f32 [M, 256]>, %y: tensor<f32 [M, 256]> out, M: i64, bi: i64, bn: i64) attributes {KERNEL_ATTRS} {
    loop() {index = "r", lo = bi, hi = M, step = bn, name = "r"} region {
      %t = tile.alloc() {offset = 0} : tile<ub f32 [1, 256] valid [1, 256]>
      tile.load(%t, %x) {offsets = [r, 0]}
      sync.barrier() {pipe = "ALL"}
      tile.store(%y, %t) {offsets = [r, 0]}
      sync.barrier() {pipe = "ALL"}
    }
  }
  control @m(%x: tensor<f32 [M, 256]>, %y: tensor<f32 [M, 256]> out) attributes {CONTROL_ATTRS} {
    launch(%x, %y) {kernel = "m_k0", scalars = [SCALARS], block_dim = min(M, 48)}
  }
}
'''


def module(kernel_attrs: str = KERNEL_ATTRS, scalars: str = "M", control_attrs: str = 'variant = ""') -> ir.Module:
    return ir.parse(TEXT.replace("KERNEL_ATTRS", kernel_attrs).replace("SCALARS", scalars)
                    .replace("CONTROL_ATTRS", control_attrs))


def test_the_contract_is_declared_once():
    assert IR_OPS["launch"].attr("block_dim").kind == "expr"
    assert not IR_OPS["launch"].attr("block_dim").required
    assert set(FUNC_ATTRS) == {"block_index", "block_count"}
    assert all(a.kinds == ("vector", "cube", "mixed") and a.param for a in FUNC_ATTRS.values())


def test_a_launch_passes_every_scalar_but_the_blocks_own():
    m = module()
    ir.verify(m)
    kernel, control = m.funcs
    assert block_params(kernel) == ("bi", "bn")
    assert [p.name for p in launched_params(kernel)] == ["M"]
    launch = control.body[0]
    assert kernel_env(kernel, launch) == {"M": launch.attrs["scalars"][0]}
    assert str(m) == str(ir.parse(str(m)))


@pytest.mark.parametrize("kernel_attrs,scalars,control_attrs,problem", [
    ('block_index = "nope"', "M", "", "names no scalar parameter"),
    ('block_index = "x"', "M, bn", "", "names no scalar parameter"),  # a tensor
    ('block_index = "bi", block_count = "bi"', "M, bn", "", "name the same parameter"),
    (KERNEL_ATTRS, "M, M, M", "", "passes 2 tensors and 3 scalars for 2 and 1"),
    ('block_index = "bi"', "M", "", "passes 2 tensors and 1 scalars for 2 and 2"),
    (KERNEL_ATTRS, "M", 'block_index = "M"', "on a control function"),
])
def test_the_verifier_checks_the_declarations(kernel_attrs, scalars, control_attrs, problem):
    m = ir.parse(TEXT.replace("KERNEL_ATTRS", kernel_attrs).replace("SCALARS", scalars)
                 .replace(" attributes {CONTROL_ATTRS}", f" attributes {{{control_attrs}}}" if control_attrs else ""))
    with pytest.raises(ir.VerifyError) as info:
        ir.verify(m)
    assert problem in str(info.value)


def test_block_dim_is_an_expression_over_bound_symbols():
    m = ir.parse(TEXT.replace("KERNEL_ATTRS", KERNEL_ATTRS).replace("SCALARS", "M")
                 .replace(" attributes {CONTROL_ATTRS}", "").replace("min(M, 48)", "min(Q, 48)"))
    with pytest.raises(ir.VerifyError) as info:
        ir.verify(m)
    assert "unbound symbol Q" in str(info.value)
