"""What a compiled kernel costs: the pipeline model (:mod:`.timeline`), run either beside the
simulator (exact control flow, real data) or by :mod:`.dryrun` over the Block IR alone (for the
compiler's own schedule choices, before any data exists)."""

from .dryrun import estimate
from .timeline import Timeline

__all__ = ["Timeline", "estimate"]
