// pto/pto-inst.hpp -- ptodsl's CPU implementation of the part of the pto-isa C++ API (the tile
// library of Ascend's PTO programming model) that ptodsl emits. It is written from the library's
// public documentation and keeps its names, template parameter orders and signatures, so a kernel
// that builds against this header with g++ also builds against a real pto-isa checkout
// (-I$PTO_ISA_ROOT/include -D__CPU_SIM), and for the NPU.
//
// What it implements (namespace pto unless noted):
//   types      half, bfloat16_t (global; 16-bit storage, float arithmetic, round-to-nearest-even),
//              TileType, BLayout, SLayout, PadValue, CompactMode, RoundMode, CmpMode, AtomicType,
//              Layout, DYNAMIC, TileConfig, GlobalTensorDim, RecordEvent;
//              AICORE, __gm__, __global__, __aicore__ (empty macros)
//   tiles      Tile<Loc, T, Rows, Cols, BLayout, RowValid, ColValid, SLayout, SFractalSize, PadValue,
//              CompactMode> with the documented compile-time checks, dynamic valid extents
//              (constructor, SetValidRow/Col/Shape, GetValidRow/Col); TileLeft, TileRight, TileAcc
//   GM         Shape<5>, Stride<5>, GlobalTensor<T, Shape, Stride, Layout>, TileShape2D and
//              BaseShape2D (ND, DN)
//   placement  TASSIGN(tile, byte_offset) into a per-thread arena per memory space (UB, L1, L0A,
//              L0B, L0C, bias, scaling; sizes from PTO_CPU_*_BYTES), TASSIGN(global_tensor, ptr)
//   memory     TLOAD, TSTORE (atomic add, Acc narrowing), TMOV, TEXTRACT, TFILLPAD, TFILLPAD_INPLACE
//   vector     TADD TSUB TMUL TDIV TMAX TMIN; TADDS TSUBS TMULS TDIVS (both operand orders) TMAXS
//              TMINS; TEXP TLOG TSQRT TRSQRT TRECIP TABS TNEG TRELU TNOT; TEXPANDS; TCVT; TCMP TCMPS TSEL;
//              TPOW TPOWS (PowAlgorithm); TAND TOR
//   reduce     TROWSUM TROWMAX TROWMIN; TCOLSUM TCOLMAX TCOLMIN
//   broadcast  TROWEXPAND TCOLEXPAND; TROWEXPAND{ADD,SUB,MUL,DIV,MAX,MIN};
//              TCOLEXPAND{ADD,SUB,MUL,DIV,MAX,MIN}
//   cube       TMATMUL TMATMUL_ACC TMATMUL_BIAS
//   layout     TTRANS (with its scratch tile), TCONCAT
//   index      Coalesce, GatherOOB, ScatterAtomicOp, ScatterOOB, ScatterConflict; MGATHER<CMode, Mode>,
//              MSCATTER<Mode, Atomic, Oob> (Row; replacing); TCI<Tile, T, descending>,
//              TTRI<Tile, isUpperOrLower>, TROWARGMAX, TROWARGMIN (index only)
//   sync       pipe_t (PIPE_S PIPE_V PIPE_M PIPE_MTE1 PIPE_MTE2 PIPE_MTE3 PIPE_ALL PIPE_FIX),
//              event_t (EVENT_ID0..7), set_flag, wait_flag, pipe_barrier (global; no-ops)
//
// Where the NPU would misbehave silently -- a tile placed outside its buffer, a tile used before
// TASSIGN, a transfer whose GM view does not match the tile's valid region, an operand too small
// for the region an instruction covers -- this header prints the reason and throws
// pto::cpu::Failure (a ptodsl entry returns it to its caller; see cpu_subset/common.hpp). Fresh buffer
// bytes are poisoned (NaN for floats) so reads of never-written tile data show in the results;
// pto::cpu::poison_buffers() (a CPU-only extension: guard it with #ifdef PTO_CPU_SUBSET) poisons
// the calling thread's buffers again, e.g. at the start of a kernel launch. With
// PTO_CPU_CHECK_FLAGS defined, a wait_flag without a matching set_flag fails too.
#ifndef PTODSL_CPU_SUBSET_PTO_INST_HPP
#define PTODSL_CPU_SUBSET_PTO_INST_HPP

// Lets a kernel or test tell this header from the real library.
#define PTO_CPU_SUBSET 1

// The API's names get hidden visibility, so each kernel library keeps its own arenas and scratch:
// the per-thread buffers are inline variables, which the toolchain would otherwise merge across
// all loaded kernel libraries (even ones loaded RTLD_LOCAL), and two libraries built with
// different PTO_CPU_*_BYTES would share one allocation. half and bfloat16_t stay visible, since a
// kernel's exported functions take pointers to them (a function over a hidden type is hidden
// too). The standard headers come first so that none of their declarations fall in the region.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "cpu_subset/float16.hpp"

#pragma GCC visibility push(hidden)
#include "cpu_subset/common.hpp"
#include "cpu_subset/convert.hpp"
#include "cpu_subset/arena.hpp"
#include "cpu_subset/tile.hpp"
#include "cpu_subset/sync.hpp"
#include "cpu_subset/ops_memory.hpp"
#include "cpu_subset/ops_vector.hpp"
#include "cpu_subset/ops_elem.hpp"
#include "cpu_subset/ops_reduce.hpp"
#include "cpu_subset/ops_cube.hpp"
#include "cpu_subset/ops_layout.hpp"
#include "cpu_subset/ops_index.hpp"
#pragma GCC visibility pop

#endif
