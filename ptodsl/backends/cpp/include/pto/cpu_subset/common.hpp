// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Keyword macros, the enums of the public API, and the loud failure every check ends in.
#ifndef PTODSL_CPU_SUBSET_COMMON_HPP
#define PTODSL_CPU_SUBSET_COMMON_HPP

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

// Device keywords of the NPU compiler. On the CPU they mean nothing; kernels keep them so that the
// same source also compiles for the NPU.
#ifndef AICORE
#define AICORE
#endif
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef __ubuf__
#define __ubuf__
#endif
#ifndef __cbuf__
#define __cbuf__
#endif
#ifndef __ca__
#define __ca__
#endif
#ifndef __cb__
#define __cb__
#endif
#ifndef __cc__
#define __cc__
#endif

namespace pto {

// Where a tile lives. Vec is the unified buffer (UB), Mat is L1, Left/Right are L0A/L0B and Acc is
// L0C; Bias and Scaling are the cube's small side buffers.
enum class TileType { Vec, Mat, Left, Right, Acc, Bias, Scaling };

// Order of the boxes (fractals) of a tile, and order of the elements inside one box.
enum class BLayout { RowMajor = 0, ColMajor = 1 };
enum class SLayout { NoneBox = 0, RowMajor = 1, ColMajor = 2 };

// What TFILLPAD (and, on the NPU, TLOAD) writes outside the valid region.
enum class PadValue : std::uint64_t { Null = 0, Zero = 1, Max = 2, Min = 3 };

enum class CompactMode { Null, Normal, RowPlusOne, RowAlignedPadding };

// Rounding of TCVT: RINT ties to even, ROUND ties away from zero, ODD is round-to-odd.
enum class RoundMode : std::uint8_t {
    CAST_NONE = 0,
    CAST_RINT = 1,
    CAST_ROUND = 2,
    CAST_FLOOR = 3,
    CAST_CEIL = 4,
    CAST_TRUNC = 5,
    CAST_ODD = 6,
};

enum class CmpMode : std::uint8_t { EQ = 0, NE = 1, LT = 2, LE = 3, GT = 4, GE = 5 };

enum class AtomicType : std::uint8_t { AtomicNone = 0, AtomicAdd = 1 };
enum class ReluPreMode : std::uint8_t { NoRelu = 0, NormalRelu = 1 };

// GM data layouts: ND is row-major, DN column-major, NZ the cube's fractal layout.
enum class Layout { ND, DN, NZ, SCALE, MAX };

constexpr int DYNAMIC = -1;

namespace TileConfig {
static constexpr int alignedSize = 32;
static constexpr int fixedRowSize = 16;
static constexpr int fixedColSize = 16;
static constexpr int fixedMxRowSize = 16;
static constexpr int fixedMxColSize = 2;
static constexpr int fractalABSize = 512;
static constexpr int fractalCSize = 1024;
static constexpr int fractalMxSize = 32;
}  // namespace TileConfig

namespace GlobalTensorDim {
constexpr int DIM_0 = 0;
constexpr int DIM_1 = 1;
constexpr int DIM_2 = 2;
constexpr int DIM_3 = 3;
constexpr int DIM_4 = 4;
constexpr int TOTAL_DIM = 5;
}  // namespace GlobalTensorDim

// Instructions return an event on the real library; the CPU has nothing to wait for.
struct RecordEvent {};

namespace cpu {

// Every violated contract ends here. A kernel that would corrupt memory or hang on the NPU must
// not quietly produce numbers on the CPU, nor take its caller's process down: the first message
// of a call is kept (failure_message) and a Failure is thrown, which the entry of a ptodsl control
// program catches and reports to its caller. The message also goes to stderr. Define
// PTO_CPU_ABORT_ON_FAIL to abort instead, e.g. to get a core dump under a debugger.
struct Failure {};

inline char failure_text[1024];
inline std::atomic<bool> failure_seen{false};

// Forget the last call's failure; the entry calls it first.
inline void clear_failure() {
    failure_text[0] = '\0';
    failure_seen.store(false);
}

inline bool failed() { return failure_seen.load(); }

inline const char* failure_message() { return failure_text; }

[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] inline void fail(const char* fmt, ...) {
    char text[sizeof(failure_text)];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(text, sizeof(text), fmt, args);
    va_end(args);
    std::fprintf(stderr, "pto CPU: %s\n", text);
    std::fflush(stderr);
#ifdef PTO_CPU_ABORT_ON_FAIL
    std::abort();
#else
    // Threads of a parallel loop may fail at once; the first one's message is the one reported.
    if (!failure_seen.exchange(true)) {
        std::memcpy(failure_text, text, sizeof(text));
    }
    throw Failure{};
#endif
}

template <typename>
inline constexpr bool always_false = false;

constexpr const char* space_name(TileType loc) {
    switch (loc) {
        case TileType::Vec: return "UB (Vec)";
        case TileType::Mat: return "L1 (Mat)";
        case TileType::Left: return "L0A (Left)";
        case TileType::Right: return "L0B (Right)";
        case TileType::Acc: return "L0C (Acc)";
        case TileType::Bias: return "bias table (Bias)";
        case TileType::Scaling: return "fixpipe buffer (Scaling)";
    }
    return "?";
}

}  // namespace cpu
}  // namespace pto

#endif
