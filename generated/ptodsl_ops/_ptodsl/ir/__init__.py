"""The PTO IR: tensor, tile and block levels sharing one op structure and one textual form."""

from .core import SPACES, Func, Module, Op, Param, TensorType, TileType, Type, Value
from .parser import IRSyntaxError, parse
from .printer import print_module
from .verify import VerifyError, verify

__all__ = [
    "SPACES",
    "Func",
    "IRSyntaxError",
    "Module",
    "Op",
    "Param",
    "TensorType",
    "TileType",
    "Type",
    "Value",
    "parse",
    "print_module",
    "verify",
    "VerifyError",
]
