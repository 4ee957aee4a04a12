"""The checker's rules for issue 23's forms: `and`/`or`/`not` on bool tensors, `clip`, `pow`, a
`dim=[...]` list of axes, and a local that would take a builtin's name; each mistake is reported
at the user's line with its code, and every well-typed form lowers (see the library specs)."""

from __future__ import annotations

import pytest

from ptodsl.diagnostics import CompileError
from ptodsl.driver import compile_spec

HEAD = "kernel k(x: f32[M, N], z: f32[M, N], w: f32[B, M, N], i: i32[M, N], y: out f32[M, N]):\n"


@pytest.mark.parametrize(("body", "code"), [
    ("    y[:] = where((x > 0.0) and (z < 1.0), x, z)\n", None),
    ("    y[:] = where(not (x > 0.0) or z < 1.0, x, z)\n", None),
    ("    y[:] = where(logical_not(logical_and(x > 0.0, logical_or(z < 1.0, x > z))), x, z)\n", None),
    ("    y[:] = where((x > 0.0) and True, x, z)\n", "E0311"),        # a scalar beside a mask
    ("    y[:] = where(logical_and(x > 0.0, True), x, z)\n", "E0311"),
    ("    y[:] = where(x and z, x, z)\n", "E0307"),                    # float tensors are no masks
    ("    y[:] = where(logical_not(i), x, z)\n", "E0307"),
    ("    y[:] = clip(x, -1.0, z)\n", None),
    ("    y[:] = clip(1.0, x, z)\n", "E0311"),                          # the clipped value is a tensor
    ("    y[:] = clip(x, i, z)\n", "E0303"),
    ("    y[:] = clip(x, 0.0)\n", "E0302"),
    ("    y[:] = pow(x, 2.0) + pow(0.5, z) + pow(x, z)\n", None),
    ("    y[:] = pow(cast(i, f32), 2.0) + cast(pow(i, 2), f32)\n", "E0307"),
    ("    y[:] = sum(w, dim=[0])\n", None),
    ("    y[0:1, :] = sum(w, dim=[0, 1])\n", None),
    ("    y[:] = sum(w, dim=[])\n", "E0840"),
    ("    y[:] = sum(w, dim=[0, -3])\n", "E0840"),
    ("    y[:] = sum(w, dim=[0, 3])\n", "E0308"),
    ("    y[:] = sum(w, dim=[0, b])\n", "E0302"),
    ("    y[:] = round(x) + floor(x) + ceil(x) + trunc(x) + sign(x)\n", None),
    ("    y[:] = cast(floor(i), f32)\n", "E0307"),
])
def test_issue23_forms_type_check(compile_text, body, code):
    codes = compile_text(HEAD + body, "schedule: {vec_tile: [1, 8, 64]}\n")
    assert [c for c in codes if c.startswith("E")][:1] == ([code] if code else [])


def test_a_local_named_like_a_builtin_says_what_the_name_is(write_spec):
    path = write_spec("k", "kernel k(x: f32[M, N], y: out f32[M, 1]):\n"
                           "    mean = sum(x, dim=-1, keepdim=True)\n"
                           "    y[:] = mean\n", "op: k\nschedule: {vec_tile: [8, 64]}\n")
    with pytest.raises(CompileError) as info:
        compile_spec(path)
    (d,) = info.value.diagnostics
    assert (d.code, d.message) == ("E0316", "`mean` is a builtin name and cannot be bound")
    assert d.label == "`mean` is the builtin function `mean(...)`"
    assert "`mean_`" in d.help and "stays the builtin" in d.help
