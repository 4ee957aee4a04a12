"""Print -> parse -> print is the identity at every level, for every spec, after every pass, and
the verifier accepts every module."""

from pathlib import Path

import pytest

from ptodsl import ir
from ptodsl.driver import compile_spec, lower_ir


def test_roundtrip_after_every_pass(spec_path):
    path = spec_path
    compiled = compile_spec(path)
    assert compiled.after, "no pass ran"
    for name, module in compiled.after.items():
        ir.verify(module)
        text = str(module)
        again = ir.parse(text)
        assert str(again) == text, f"{path}: round trip differs after {name}"
        ir.verify(again)
        copy = module.clone()
        assert str(copy) == text, f"{path}: clone differs after {name}"
        ir.verify(copy)


def test_a_clone_shares_nothing_mutable():
    root = Path(__file__).resolve().parents[2]
    module = compile_spec(str(root / "specs" / "softmax.yaml")).after["sync"]
    text = str(module)
    copy = module.clone()
    for op in copy.walk():
        op.attrs["touched"] = 1
        op.regions.clear()
        for v in op.results:
            v.name += "_x"
    for f in copy.funcs:
        f.body.clear()
        f.attrs["touched"] = 1
    assert str(module) == text


def test_parse_keeps_spans_types_and_attrs():
    text = (
        'module @m level tile {\n'
        '  kernel @k(%x: tensor<f16 [M, 64] valid [M, 60]>, %y: tensor<f16 [M, 64]> out, eps: f32) {\n'
        '    loop() {index = "i", lo = 0, hi = cdiv(M, 8), step = 1, name = "rows"} region {\n'
        '      %t = tile.alloc() : tile<ub f16 [8, 64] valid [min(M - i * 8, 8), 60]> loc("a.pto":3:5:3:9)\n'
        '      tile.load(%t, %x) {offsets = [i * 8, 0]}\n'
        '      tile.add(%t, %t) {scalar = eps, side = "left"}\n'
        '      tile.store(%y, %t) {offsets = [i * 8, 0]}\n'
        '    }\n'
        '  }\n'
        '}\n'
    )
    m = ir.parse(text)
    assert str(m) == text
    ir.verify(m)
    alloc = m.funcs[0].body[0].regions[0][0]
    assert alloc.span.line == 3 and alloc.span.file == "a.pto"
    assert alloc.result.type.shape == (8, 64)


@pytest.mark.parametrize("bad, message", [
    ("tile.load(%t, %x) {offsets = [0]}", "offsets for a tensor of rank 2"),
    ("tile.store(%y, %x) {offsets = [0, 0]}", "operand `src` must be a tile"),
    ("tile.add(%t) {scalar = 1.0}", "takes 2 to 3 operands, has 1"),
    ("tile.add(%t, %x) {scalar = 1.0}", "operand `x` must be a tile"),
    ("tile.add(%t, %t, %t) {scalar = 1.0}", "both y and scalar"),
    ("tile.exp(%t, %t) {axis = 1}", "has no attribute 'axis'"),
    ("tile.sum(%t, %t)", "missing attribute 'axis'"),
    ("tile.sum(%t, %t) {axis = 1}", "is not x \\[8, 64\\] reduced on 1"),
    ("tile.add(%t, %t) {scalar = nope}", "unbound symbol nope"),
    ("frob(%x)", "not part of the tile level"),
])
def test_verifier_rejects(bad, message):
    text = (
        'module @m level tile {\n'
        '  kernel @k(%x: tensor<f32 [M, 64]>, %y: tensor<f32 [M, 64]> out) {\n'
        '    %t = tile.alloc() : tile<ub f32 [8, 64] valid [8, 64]>\n'
        f'    {bad}\n'
        '  }\n'
        '}\n'
    )
    with pytest.raises(ir.VerifyError, match=message):
        ir.verify(ir.parse(text))


def test_parse_errors_are_reported_at_line_and_column():
    with pytest.raises(ir.IRSyntaxError) as info:
        ir.parse("module @m level tile {\n  kernel @k( {")
    assert (info.value.line, info.value.col) == (2, 15) and str(info.value).startswith("2:15: unexpected end")
    with pytest.raises(ir.IRSyntaxError) as info:
        ir.parse("module @m level tile {\n  ?")
    assert (info.value.line, info.value.col) == (2, 3)


def test_a_verify_error_points_at_the_source_of_the_op():
    module = compile_spec(str(Path(__file__).resolve().parents[2] / "specs" / "add_one.yaml")).after["fuse"].clone()
    loop = next(op for op in module.walk() if op.name == "loop")
    loop.attrs.pop("name")
    with pytest.raises(ir.VerifyError) as info:
        ir.verify(module)
    assert info.value.span == loop.span and info.value.span is not None


def test_compiling_from_printed_ir_gives_the_same_block_ir(spec_path, tmp_path):
    """``ptodsl ir --from``: the passes resume from the module printed after any pass (it carries its
    target, schedule and the passes already applied), and end in the block IR of the spec's compile."""
    compiled = compile_spec(spec_path)
    want = str(compiled.stages["block"])
    for name, module in compiled.after.items():
        if name == "sync":
            continue
        path = tmp_path / f"{name}.ir"
        path.write_text(str(module), encoding="utf-8")
        lowered = lower_ir(str(path))
        assert str(lowered.stages["block"]) == want, f"{spec_path}: resuming after `{name}` differs"
