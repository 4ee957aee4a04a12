"""ptodsl names for PyPTO names: every name the port writes is an identifier ptodsl accepts."""

from __future__ import annotations

import re

from ..dtypes import DTYPE_NAMES
from ..ops import OPS, STRUCTURE_BUILTINS
from ..yamlio.schema import identifier_problem, op_name_problem

# Words of the .pto language and builtins a binding may not shadow.
_TAKEN = {"kernel", "for", "in", "if", "elif", "else", "pass", "and", "or", "not", "True", "False",
          "min", "max", "cdiv", "true", "false", "inf", "nan", "port_todo", *DTYPE_NAMES, *OPS, *STRUCTURE_BUILTINS}


def legal(name: str, taken: set[str], op: bool = False) -> str:
    """``name`` if ptodsl accepts it and it is free, else the nearest free name that is."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name).lstrip("_") or "v"
    if base[0].isdigit():
        base = "v" + base
    problem = op_name_problem if op else identifier_problem
    if problem(base) is not None or base in _TAKEN:
        base = base + "_"
        if problem(base) is not None:
            base = "v_" + base
    out, n = base, 1
    while out in taken or out in _TAKEN:
        n += 1
        out = f"{base}_{n}"
    return out
