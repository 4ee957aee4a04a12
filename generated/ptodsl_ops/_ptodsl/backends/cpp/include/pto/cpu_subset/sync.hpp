// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// Pipe synchronisation. The CPU runs every instruction to completion in program order, so the
// calls do nothing; they are real functions over distinct enum types (global names, as on the NPU
// compiler) so that a swapped or misspelt argument still fails to compile.
//
// With PTO_CPU_CHECK_FLAGS defined they check what the CPU can see: a flag joins two different pipes,
// and each thread counts set_flag per (source pipe, destination pipe, event) and fails on a
// wait_flag that no earlier set_flag matches, since on the NPU that wait would never return.
#ifndef PTODSL_CPU_SUBSET_SYNC_HPP
#define PTODSL_CPU_SUBSET_SYNC_HPP

#include "common.hpp"

enum pipe_t {
    PIPE_S = 0,
    PIPE_V = 1,
    PIPE_M = 2,
    PIPE_MTE1 = 3,
    PIPE_MTE2 = 4,
    PIPE_MTE3 = 5,
    PIPE_ALL = 6,
    PIPE_FIX = 7,
};

enum event_t {
    EVENT_ID0 = 0,
    EVENT_ID1 = 1,
    EVENT_ID2 = 2,
    EVENT_ID3 = 3,
    EVENT_ID4 = 4,
    EVENT_ID5 = 5,
    EVENT_ID6 = 6,
    EVENT_ID7 = 7,
};

namespace pto {
namespace cpu {

constexpr int kPipes = 8;
constexpr int kEvents = 8;

inline const char* pipe_name(pipe_t pipe) {
    static const char* const names[kPipes] = {"PIPE_S", "PIPE_V", "PIPE_M", "PIPE_MTE1",
                                              "PIPE_MTE2", "PIPE_MTE3", "PIPE_ALL", "PIPE_FIX"};
    return pipe >= 0 && pipe < kPipes ? names[pipe] : "?";
}

#ifdef PTO_CPU_CHECK_FLAGS
inline void check_flag_pipes(pipe_t src, pipe_t dst, const char* op) {
    if (src == dst) {
        fail("%s(%s, %s, ...): a flag orders two different pipes; use pipe_barrier within one pipe", op,
             pipe_name(src), pipe_name(dst));
    }
}

inline thread_local unsigned pending_flags[kPipes][kPipes][kEvents] = {};
#endif

}  // namespace cpu
}  // namespace pto

inline void set_flag(pipe_t src, pipe_t dst, event_t event) {
#ifdef PTO_CPU_CHECK_FLAGS
    pto::cpu::check_flag_pipes(src, dst, "set_flag");
    ++pto::cpu::pending_flags[src][dst][event];
#else
    (void)src;
    (void)dst;
    (void)event;
#endif
}

inline void wait_flag(pipe_t src, pipe_t dst, event_t event) {
#ifdef PTO_CPU_CHECK_FLAGS
    pto::cpu::check_flag_pipes(src, dst, "wait_flag");
    unsigned& pending = pto::cpu::pending_flags[src][dst][event];
    if (pending == 0) {
        pto::cpu::fail("wait_flag(%s, %s, EVENT_ID%d) has no matching set_flag before it; on the NPU it would wait "
                       "forever",
                       pto::cpu::pipe_name(src), pto::cpu::pipe_name(dst), static_cast<int>(event));
    }
    --pending;
#else
    (void)src;
    (void)dst;
    (void)event;
#endif
}

inline void pipe_barrier(pipe_t pipe) { (void)pipe; }

#endif
