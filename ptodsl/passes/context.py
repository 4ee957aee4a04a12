"""What every pass may read besides the IR: the spec, the target and where to report."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostics
from ..frontend.spec import Spec
from ..targets import Target


@dataclass
class PassContext:
    spec: Spec
    target: Target
    diags: Diagnostics = field(default_factory=Diagnostics)
