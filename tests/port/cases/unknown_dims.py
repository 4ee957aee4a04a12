"""Shapes built from values the port cannot evaluate (read from the environment here): each dim
given by a variable becomes a symbol, one per variable wherever it stands, sized by the call; a
shape with no value at all takes every dim from the call, as `pypto.Tensor([])` does; so does one
that a branch the port cannot decide sets to different values."""
import os

import pypto
import torch


def run_scaled():
    rows = int(os.environ["ROWS"])
    cols = 16
    layout = tuple(os.environ["LAYOUT"])

    @pypto.frontend.jit
    def scaled(x: pypto.Tensor((rows, cols), pypto.DT_FP32), w: pypto.Tensor((cols, rows), pypto.DT_FP32),
               bias: pypto.Tensor(layout, pypto.DT_FP32), y: pypto.Tensor((rows, cols), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 16)
        y[:] = x * 3.0 + pypto.transpose(w, 0, 1) + bias

    x = torch.rand(12, 16)
    w = torch.rand(16, 12)
    bias = torch.rand(1, 16)
    scaled(x, w, bias, torch.empty(12, 16))


def run_shifted():
    n = int(os.environ["N"])

    @pypto.frontend.jit
    def shifted(x: pypto.Tensor((n, 8), pypto.DT_FP32), y: pypto.Tensor((n, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        y[:] = x - 2.0

    return shifted


def test_shifted():
    model = torch.compile(run_shifted())
    model(torch.rand(10, 8), torch.empty(10, 8))


def run_either(wide):
    if wide:
        shape = (4, 64)
    else:
        shape = (4, 32)

    @pypto.frontend.jit
    def either(x: pypto.Tensor(shape, pypto.DT_FP32), y: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 32)
        y[:] = x + x

    x = torch.rand(4, 64)
    either(x, torch.empty(4, 64))
