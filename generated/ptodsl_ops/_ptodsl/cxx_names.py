"""Names the emitted C++ cannot give to a spec's variables, parameters or ops.

A kernel translation unit includes the pto-isa header (``pto/pto-inst.hpp``) and a few standard
headers, and says ``using namespace pto``. A spec name equal to one of their macros (``NAN``,
``M_PI``, ``HUGE_VAL``), or to a name the emitted code calls unqualified (``TASSIGN``, ``Tile``,
``set_flag``, ``PIPE_V``), would be replaced by the preprocessor or hide the API. The C++ emitter
renames such variables (``NAN`` becomes ``NAN_1``); an op name, which is also the exported entry
symbol, is refused by the spec checker (E0211).

``MACROS`` is the output of ``g++ -std=c++17 -fopenmp -dM -E`` over those includes, without names
starting with ``_`` (which :func:`ptodsl.yamlio.schema.identifier_problem` reserves anyway), plus
macros of other common C headers; tests/test_hostile_names.py checks it against the local g++.
``PTO_NAMES`` are the declarations of the header visible in a kernel. Any name of the pto-isa
naming patterns (instructions ``TADD``..., pipes, events) is reserved too, for the real library's
names that the CPU header does not implement.
"""

from __future__ import annotations

import re

MACROS: frozenset[str] = frozenset("""
    AICORE ATOMIC_BOOL_LOCK_FREE ATOMIC_CHAR16_T_LOCK_FREE ATOMIC_CHAR32_T_LOCK_FREE
    ATOMIC_CHAR_LOCK_FREE ATOMIC_FLAG_INIT ATOMIC_INT_LOCK_FREE ATOMIC_LLONG_LOCK_FREE
    ATOMIC_LONG_LOCK_FREE ATOMIC_POINTER_LOCK_FREE ATOMIC_SHORT_LOCK_FREE ATOMIC_VAR_INIT
    ATOMIC_WCHAR_T_LOCK_FREE BIG_ENDIAN BUFSIZ BYTE_ORDER EOF EXIT_FAILURE EXIT_SUCCESS FD_CLR
    FD_ISSET FD_SET FD_SETSIZE FD_ZERO FILENAME_MAX FOPEN_MAX FP_ILOGB0 FP_ILOGBNAN FP_INFINITE
    FP_INT_DOWNWARD FP_INT_TONEAREST FP_INT_TONEARESTFROMZERO FP_INT_TOWARDZERO FP_INT_UPWARD
    FP_LLOGB0 FP_LLOGBNAN FP_NAN FP_NORMAL FP_SUBNORMAL FP_ZERO HUGE_VAL HUGE_VALF HUGE_VALL
    HUGE_VAL_F128 HUGE_VAL_F32 HUGE_VAL_F32X HUGE_VAL_F64 HUGE_VAL_F64X INFINITY INT16_C INT16_MAX
    INT16_MIN INT16_WIDTH INT32_C INT32_MAX INT32_MIN INT32_WIDTH INT64_C INT64_MAX INT64_MIN
    INT64_WIDTH INT8_C INT8_MAX INT8_MIN INT8_WIDTH INTMAX_C INTMAX_MAX INTMAX_MIN INTMAX_WIDTH
    INTPTR_MAX INTPTR_MIN INTPTR_WIDTH INT_FAST16_MAX INT_FAST16_MIN INT_FAST16_WIDTH INT_FAST32_MAX
    INT_FAST32_MIN INT_FAST32_WIDTH INT_FAST64_MAX INT_FAST64_MIN INT_FAST64_WIDTH INT_FAST8_MAX
    INT_FAST8_MIN INT_FAST8_WIDTH INT_LEAST16_MAX INT_LEAST16_MIN INT_LEAST16_WIDTH INT_LEAST32_MAX
    INT_LEAST32_MIN INT_LEAST32_WIDTH INT_LEAST64_MAX INT_LEAST64_MIN INT_LEAST64_WIDTH
    INT_LEAST8_MAX INT_LEAST8_MIN INT_LEAST8_WIDTH LITTLE_ENDIAN L_ctermid L_cuserid L_tmpnam
    MATH_ERREXCEPT MATH_ERRNO MAXFLOAT MB_CUR_MAX M_1_PI M_1_PIf M_1_PIf128 M_1_PIf32 M_1_PIf32x
    M_1_PIf64 M_1_PIf64x M_1_PIl M_2_PI M_2_PIf M_2_PIf128 M_2_PIf32 M_2_PIf32x M_2_PIf64 M_2_PIf64x
    M_2_PIl M_2_SQRTPI M_2_SQRTPIf M_2_SQRTPIf128 M_2_SQRTPIf32 M_2_SQRTPIf32x M_2_SQRTPIf64
    M_2_SQRTPIf64x M_2_SQRTPIl M_E M_Ef M_Ef128 M_Ef32 M_Ef32x M_Ef64 M_Ef64x M_El M_LN10 M_LN10f
    M_LN10f128 M_LN10f32 M_LN10f32x M_LN10f64 M_LN10f64x M_LN10l M_LN2 M_LN2f M_LN2f128 M_LN2f32
    M_LN2f32x M_LN2f64 M_LN2f64x M_LN2l M_LOG10E M_LOG10Ef M_LOG10Ef128 M_LOG10Ef32 M_LOG10Ef32x
    M_LOG10Ef64 M_LOG10Ef64x M_LOG10El M_LOG2E M_LOG2Ef M_LOG2Ef128 M_LOG2Ef32 M_LOG2Ef32x
    M_LOG2Ef64 M_LOG2Ef64x M_LOG2El M_PI M_PI_2 M_PI_2f M_PI_2f128 M_PI_2f32 M_PI_2f32x M_PI_2f64
    M_PI_2f64x M_PI_2l M_PI_4 M_PI_4f M_PI_4f128 M_PI_4f32 M_PI_4f32x M_PI_4f64 M_PI_4f64x M_PI_4l
    M_PIf M_PIf128 M_PIf32 M_PIf32x M_PIf64 M_PIf64x M_PIl M_SQRT1_2 M_SQRT1_2f M_SQRT1_2f128
    M_SQRT1_2f32 M_SQRT1_2f32x M_SQRT1_2f64 M_SQRT1_2f64x M_SQRT1_2l M_SQRT2 M_SQRT2f M_SQRT2f128
    M_SQRT2f32 M_SQRT2f32x M_SQRT2f64 M_SQRT2f64x M_SQRT2l NAN NFDBITS NULL PDP_ENDIAN PTRDIFF_MAX
    PTRDIFF_MIN PTRDIFF_WIDTH P_tmpdir RAND_MAX RENAME_EXCHANGE RENAME_NOREPLACE RENAME_WHITEOUT
    SEEK_CUR SEEK_DATA SEEK_END SEEK_HOLE SEEK_SET SIG_ATOMIC_MAX SIG_ATOMIC_MIN SIG_ATOMIC_WIDTH
    SIZE_MAX SIZE_WIDTH SNAN SNANF SNANF128 SNANF32 SNANF32X SNANF64 SNANF64X SNANL TMP_MAX UINT16_C
    UINT16_MAX UINT16_WIDTH UINT32_C UINT32_MAX UINT32_WIDTH UINT64_C UINT64_MAX UINT64_WIDTH
    UINT8_C UINT8_MAX UINT8_WIDTH UINTMAX_C UINTMAX_MAX UINTMAX_WIDTH UINTPTR_MAX UINTPTR_WIDTH
    UINT_FAST16_MAX UINT_FAST16_WIDTH UINT_FAST32_MAX UINT_FAST32_WIDTH UINT_FAST64_MAX
    UINT_FAST64_WIDTH UINT_FAST8_MAX UINT_FAST8_WIDTH UINT_LEAST16_MAX UINT_LEAST16_WIDTH
    UINT_LEAST32_MAX UINT_LEAST32_WIDTH UINT_LEAST64_MAX UINT_LEAST64_WIDTH UINT_LEAST8_MAX
    UINT_LEAST8_WIDTH WCHAR_MAX WCHAR_MIN WCHAR_WIDTH WCONTINUED WEXITED WEXITSTATUS WIFCONTINUED
    WIFEXITED WIFSIGNALED WIFSTOPPED WINT_MAX WINT_MIN WINT_WIDTH WNOHANG WNOWAIT WSTOPPED WSTOPSIG
    WTERMSIG WUNTRACED alloca assert be16toh be32toh be64toh errno htobe16 htobe32 htobe64 htole16
    htole32 htole64 i386 issubnormal le16toh le32toh le64toh linux major math_errhandling minor
    offsetof stderr stdin stdout strdupa strndupa unix va_arg va_copy va_end va_start
""".split())

PTO_NAMES: frozenset[str] = frozenset("""
    AICORE AtomicType BLayout BaseShape2D CAST_CEIL CAST_FLOOR CAST_NONE CAST_ODD CAST_RINT
    CAST_ROUND CAST_TRUNC CmpMode CompactMode DYNAMIC EVENT_ID0 EVENT_ID1 EVENT_ID2 EVENT_ID3
    EVENT_ID4 EVENT_ID5 EVENT_ID6 EVENT_ID7 GlobalTensor GlobalTensorDim Layout PIPE_ALL PIPE_FIX
    PIPE_M PIPE_MTE1 PIPE_MTE2 PIPE_MTE3 PIPE_S PIPE_V PadValue RecordEvent RoundMode SLayout Shape
    Stride Tile TileAcc TileConfig TileLeft TileRight TileShape2D TileType bfloat16_t cpu event_t
    half is_global is_global_data_v is_tile is_tile_data_v pipe_barrier pipe_t pto set_flag
    wait_flag
""".split())

# the CPU header's own macros (include guards, sizes) carry one of two prefixes: a new header is
# covered without a new entry in MACROS
_PTO_PATTERN = re.compile(r"T[A-Z][A-Z0-9_]*|PIPE_\w+|EVENT_ID\w*|CAST_\w+|PTODSL_\w+|PTO_CPU_\w+")


def cxx_reserved(name: str) -> bool:
    """Whether ``name`` collides with a macro or an API name in the emitted C++."""
    return name in MACROS or name in PTO_NAMES or _PTO_PATTERN.fullmatch(name) is not None


__all__ = ["MACROS", "PTO_NAMES", "cxx_reserved"]
