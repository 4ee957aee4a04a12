"""What a compiled kernel costs: the pipeline model of one core (:mod:`.timeline`) and the chip
around it (:mod:`.chip`: blocks on cores, the shared HBM, launches), run either beside the
simulator (exact control flow, real data) or by :mod:`.dryrun` over the Block IR alone (for the
compiler's own schedule choices and for shapes too large to simulate, before any data exists)."""

from .dryrun import estimate
from .timeline import Timeline

__all__ = ["Timeline", "estimate"]
