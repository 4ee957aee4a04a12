"""A golden test case of a spec, as the YAML's ``tests:`` gives it.

A leaf: the front end builds cases, the golden harness and the standalone runtime of generated
packages run them, and neither may import the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # keeps pytest from collecting this class when a test module imports it

    index: int
    shapes: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    scalars: dict[str, float | int | bool] = field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    seed: int | None = None
    data_range: tuple[float, float] | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    name: str | None = None
    # explicit values of some inputs, as nested lists in the parameter's shape (index data whose
    # repetitions, orders or out-of-range entries a random draw would not give)
    inputs: dict[str, list] = field(default_factory=dict)
    # the code of the diagnostic the call must stop with (index data outside the tensor it indexes)
    refuses: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"index": self.index, "shapes": self.shapes, "dtypes": self.dtypes, "scalars": self.scalars,
               "rtol": self.rtol, "atol": self.atol, "seed": self.seed,
               "data_range": list(self.data_range) if self.data_range else None,
               "ranges": {k: list(v) for k, v in self.ranges.items()}, "name": self.name}
        # written only when given, so the cases of specs that use neither keep their form
        if self.inputs:
            out["inputs"] = dict(self.inputs)
        if self.refuses is not None:
            out["refuses"] = self.refuses
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestCase:
        rng = data.get("data_range")
        return cls(int(data["index"]), dict(data.get("shapes", {})), dict(data.get("dtypes", {})),
                   dict(data.get("scalars", {})), data.get("rtol"), data.get("atol"), data.get("seed"),
                   tuple(rng) if rng else None, {k: tuple(v) for k, v in data.get("ranges", {}).items()},
                   data.get("name"), dict(data.get("inputs", {})), data.get("refuses"))


__all__ = ["TestCase"]
