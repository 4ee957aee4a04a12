"""A mixed kernel's NPU form: one entry whose cube part runs on the AIC and whose vector part runs
on the AIVs beside it, the hand-overs between them behind cross-core flags.

The sync pass names a mixed kernel's queues by core (``cube.FIX``, ``vec.MTE2``) and turns every
order between the two cores into a flag pair whose set sits on the producer's core and whose wait
sits on the consumer's (``passes/sync.py``). The emitter writes the kernel once, each line tagged
with the core its op runs on; this module lays the tagged lines out three times:

- the CPU build (ptodsl's header, pto-isa's CPU simulation): every line in program order, a valid
  order of the two cores' events, with the cross-core flags left out (the pipe flags are no-ops);
- ``__DAV_CUBE__``: the loops, views and scalars, the cube's ops and flags;
- ``__DAV_VEC__``: the same skeleton with the vector ops and flags. A block has two AIVs and a
  flag from the cube reaches both (``CV_CORES_SYNC``); the cube's wait for the vector cores
  completes when both have set. So both AIVs run the skeleton and every flag; sub-block 0 runs the
  data ops (``ptodsl_aiv0``), except those ``passes/aivsplit.py`` gave sub-block 1
  (``aiv = 1``: rows of their own, under ``!ptodsl_aiv0``).

Both cores run the same loops over the same bounds, so every flag is set as often as it is
waited for (the sync checker proves sets and waits balance in every region, per core).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import Op
from ...ir.queues import core_of, is_cross, split_unit
from .cxx import format_lines

# The FFTS message of a flag between a cube core and its vector cores (pto-isa's
# TPipe::getFFTSMsgCfg with mode CV_CORES_SYNC = 2): bits 0..3 = 1, 4..5 = mode, 8..11 = flag id.
CROSS_MESSAGE = "(1ULL | (2ULL << 4) | ((uint64_t)({flag}) << 8))"
FFTS_PARAM = "ptodsl_ffts"
AIV0 = "ptodsl_aiv0"
# Where the second vector core's tiles (``aiv = 1``) start: each core's UB begins at 0 on the NPU,
# while the CPU build, which runs both cores' copies in one thread, holds the second UB after the
# first in its one arena (``load.target_defines``).
AIV1_UB = "ptodsl_aiv1_ub"


@dataclass(frozen=True)
class Tag:
    """Where a line of a mixed kernel goes: ``core`` None on both cores; ``data`` a vector data
    op (sub-block 0 only); ``npu`` a cross-core flag (not in the CPU build)."""

    core: str | None = None
    data: bool = False
    npu: bool = False
    aiv: int = 0  # the vector core of a data op (passes/aivsplit.py)


BOTH = Tag()


def tag_of(op: Op) -> Tag:
    """The core that runs ``op`` in a mixed kernel (its flags are tagged by the emitter)."""
    core = core_of(op)
    if core is None:
        return BOTH
    # an allocation is a declaration, not a data op: every AIV declares the tiles its ops name
    return Tag(core, data=core == "vec" and op.name not in ("tile.alloc", "sync.barrier"),
               aiv=int(op.attrs.get("aiv", 0)))


def flag_lines(op: Op, pipe) -> list[tuple[Tag, str]]:
    """The C++ of one sync.set/wait of a mixed kernel, with the core it runs on."""
    a = op.attrs
    (src_core, src), (dst_core, dst) = split_unit(a["src"]), split_unit(a["dst"])
    event = int(a["event"])
    if not is_cross(a["src"], a["dst"]):
        fn = "set_flag" if op.name == "sync.set" else "wait_flag"
        return [(Tag(src_core), f"{fn}({pipe(src, op)}, {pipe(dst, op)}, EVENT_ID{event});")]
    if op.name == "sync.set":
        return [(Tag(src_core, npu=True),
                 f"ffts_cross_core_sync({pipe(src, op)}, {CROSS_MESSAGE.format(flag=event)});")]
    return [(Tag(dst_core, npu=True), f"wait_flag_dev({event});")]


def layout(lines: list[tuple[int, str, str]], tags: list[Tag], head: list[str], cpu_guard: str, ffts: str,
           aiv0: str, aiv1_ub: int | None = None) -> list[str]:
    """The body of a mixed kernel: the CPU build's lines, then the cube's and the vector cores'.
    ``aiv1_ub``: where the CPU build's arena holds the second vector core's UB, when the kernel
    has tiles there (:data:`AIV1_UB`)."""

    def part(core: str) -> list[str]:
        out: list[tuple[int, str, str]] = []
        opened: int | None = None  # the depth of the open `if (ptodsl_aiv0)` (or `!ptodsl_aiv0`)
        aiv = 0  # the vector core whose `if` is open
        for (depth, code, loc), tag in zip(lines, tags):
            if tag.core not in (None, core):
                continue
            if opened is not None and (not tag.data or depth < opened or tag.aiv != aiv):
                out.append((opened, "}", ""))
                opened = None
            if tag.data and opened is None:
                out.append((depth, f"if ({'!' if tag.aiv else ''}{aiv0}) {{", ""))
                opened, aiv = depth, tag.aiv
            out.append((depth + 1, code, loc) if tag.data else (depth, code, loc))
        if opened is not None:
            out.append((opened, "}", ""))
        return format_lines(out)

    cpu = [line for line, tag in zip(lines, tags) if not tag.npu]

    def base(at: int) -> list[str]:
        return [] if aiv1_ub is None else [f"    constexpr int64_t {AIV1_UB} = {at};"]

    # each part in a scope of its own: both declare the skeleton's names (a block's view of its
    # workspace copy, passes/blocks.py), which a reader of both parts at once must not see twice
    return [f"#if {cpu_guard}", *base(aiv1_ub or 0), *format_lines(cpu), "#else",
            f"    set_ffts_base_addr((uint64_t){ffts});", *head,
            "#if defined(__DAV_CUBE__)", "    {", *part("cube"), "    }", "#endif",
            "#if defined(__DAV_VEC__)", "    {", f"    const bool {aiv0} = get_subblockid() == 0;", *base(0),
            *part("vec"), "    }", "#endif",
            "#endif"]


__all__ = ["AIV0", "AIV1_UB", "BOTH", "FFTS_PARAM", "Tag", "flag_lines", "layout", "tag_of"]
