"""What the NPU compiles as device code calls nothing of the standard library.

pto-isa's own AICORE code calls no ``std::`` function (a device function may only call AICORE
functions); the emitted kernels spell min and max of their index expressions as the small AICORE
helpers the translation unit defines (``min_i64``...), and infinities and NaNs as the compiler's
builtins. Checked over every compute kernel of
the library's package: each NPU kernel unit and the CPU kernel file it includes.
"""

from __future__ import annotations

import json
import posixpath
import re

from ptodsl.gen import Package

STD = re.compile(r"\bstd::")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def _device_units(built: Package) -> dict[str, str]:
    """Every NPU kernel unit and what it includes of the package, by path."""
    units: dict[str, str] = {}
    for path, data in built.files.items():
        if not path.endswith("/build.json") or "/npu/" not in path:
            continue
        folder = posixpath.dirname(path)
        for kernel in json.loads(data)["kernels"]:
            todo = [posixpath.join(folder, kernel["source"])]
            while todo:
                unit = posixpath.normpath(todo.pop())
                text = built.files[unit].decode()
                units[unit] = text
                todo += [posixpath.join(posixpath.dirname(unit), inc) for inc in INCLUDE.findall(text)]
    return units


def test_no_standard_library_in_device_code(built: Package):
    units = _device_units(built)
    assert len(units) > 100  # kernel units of the NPU build and the CPU kernel files they include
    offenders = sorted(path for path, text in units.items() if STD.search(text))
    assert not offenders, f"{len(offenders)} device units use std::, e.g. {offenders[:3]}"
    # the library's tails do take minima: through the helpers, defined as AICORE functions
    uses = [text for text in units.values() if "min_i64(" in text]
    assert uses and all("AICORE static inline constexpr int64_t min_i64(" in text for text in uses)
