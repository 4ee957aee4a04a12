"""Passes over the IR. Each module states what it requires and what it produces, and exposes
``run`` and a :class:`~ptodsl.passes.context.Pass` describing it; :data:`PIPELINE` is their order,
the one list the driver, ``ptodsl ir --after`` and the stage dumps read."""

from . import (
    aivsplit,
    blocks,
    dbuf,
    epilogue,
    fuse,
    fusedops,
    licm,
    loops,
    memplan,
    parallel,
    partition,
    paths,
    promote,
    rowgrid,
    skew,
    splitred,
    sync,
    tile,
    unroll,
)
from .context import Pass, check_pipeline

# After tensorize (typed AST -> Tensor IR), in order.
PIPELINE: list[Pass] = [loops.PASS, splitred.PASS, paths.PASS, unroll.PASS, epilogue.PASS, tile.PASS, fuse.PASS, fusedops.PASS,
                        parallel.PASS, rowgrid.PASS, licm.PASS, partition.PASS, blocks.PASS, skew.PASS, promote.PASS, aivsplit.PASS, dbuf.PASS, memplan.PASS,
                        sync.PASS]
check_pipeline(PIPELINE)

__all__ = ["PIPELINE", "Pass", "check_pipeline"]
