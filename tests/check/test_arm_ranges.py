"""What an arm of `if is_loop_begin(j):` / `if is_loop_end(j):` knows of `j` (check/typer.py,
`Typer.arm_range`): the other arm of a begin branch runs from the second index on, the end arm at
the last index and its other arm up to the one before. A view of the previous (or the next) block
there is inside the tensor, so it needs no run-time guard; the same view where the arm does not say
so keeps its guard."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptodsl
from ptodsl.backends.guards import GuardError
from ptodsl.driver import compile_spec

# each block of 16 rows minus the block before it (the first block as it is)
PREVIOUS = """\
kernel diffs(x: f32[L, 64], y: out f32[L, 64]):
    for j in loop(cdiv(L, 16), name="blocks"):
        cur = view(x, [16, 64], [j * 16, 0])
        if is_loop_begin(j):
            y[j * 16:j * 16 + 16, :] = cur
        else:
            prev = view(x, [16, 64], [(j - 1) * 16, 0], valid_shape=[min(L - j * 16, 16), 64])
            y[j * 16:j * 16 + 16, :] = cur - prev
"""

# each block plus the block after it (the last block as it is), called with whole blocks of rows
NEXT = """\
kernel diffs(x: f32[L, 64], y: out f32[L, 64]):
    for j in loop(cdiv(L, 16), name="blocks"):
        cur = view(x, [16, 64], [j * 16, 0])
        if is_loop_end(j):
            y[j * 16:j * 16 + 16, :] = cur
        else:
            nxt = view(x, [16, 64], [(j + 1) * 16, 0])
            y[j * 16:j * 16 + 16, :] = cur + nxt
"""

REFS = """\
import numpy as np

def previous(x):
    y = x.astype(np.float64).copy()
    for j in range(1, -(-x.shape[0] // 16)):
        n = min(x.shape[0] - j * 16, 16)
        y[j * 16:j * 16 + n] = x[j * 16:j * 16 + n] - x[(j - 1) * 16:(j - 1) * 16 + n]
    return y

def next_block(x):
    y = x.astype(np.float64).copy()
    for j in range(-(-x.shape[0] // 16) - 1):
        n = min(x.shape[0] - (j + 1) * 16, 16)
        y[j * 16:j * 16 + n] = x[j * 16:j * 16 + n] + x[(j + 1) * 16:(j + 1) * 16 + n]
    return y
"""


def _spec(tmp_path: Path, pto: str, ref: str) -> str:
    (tmp_path / "diffs.pto").write_text(pto)
    (tmp_path / "refs.py").write_text(REFS)
    (tmp_path / "diffs.yaml").write_text(
        f"op: diffs\ndoc: blocks of rows and their neighbours\nschedule: {{vec_tile: [16, 64]}}\n"
        f"reference: refs.py:{ref}\n")
    return str(tmp_path / "diffs.yaml")


def _guards(path: str) -> list:
    return [o for o in compile_spec(path).after["tensorize"].walk() if o.name == "guard"]


@pytest.mark.parametrize("pto, ref", [(PREVIOUS, "previous"), (NEXT, "next_block")], ids=["previous", "next"])
def test_a_view_of_a_neighbouring_block_in_the_arm_that_has_one_needs_no_guard(tmp_path, pto, ref):
    path = _spec(tmp_path, pto, ref)
    assert not _guards(path)
    op = ptodsl.load(path)
    scope: dict = {}
    exec(REFS, scope)
    rng = np.random.default_rng(5)
    for rows in (64, 50, 9, 16, 17) if ref == "previous" else (64, 16, 48):
        x = rng.standard_normal((rows, 64)).astype(np.float32)
        np.testing.assert_allclose(op(x, backend="sim"), scope[ref](x), rtol=1e-6, atol=1e-6)


def test_the_same_view_where_the_arm_says_nothing_keeps_its_guard(tmp_path):
    # the begin arm runs at the first index, where the block before would start at row -16: the
    # branch itself proves nothing about it, so the guard stays and stops the call
    pto = PREVIOUS.replace("""        if is_loop_begin(j):
            y[j * 16:j * 16 + 16, :] = cur
        else:
            prev""", """        if is_loop_begin(j):
            prev""").replace("""            y[j * 16:j * 16 + 16, :] = cur - prev
""", """            y[j * 16:j * 16 + 16, :] = cur - prev
        else:
            y[j * 16:j * 16 + 16, :] = cur
""")
    path = _spec(tmp_path, pto, "previous")
    assert _guards(path)
    op = ptodsl.load(path)
    with pytest.raises(GuardError):
        op(np.ones((32, 64), np.float32), backend="sim")
