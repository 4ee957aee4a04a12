// Part of ptodsl's CPU implementation of the pto-isa subset it emits (see ../pto-inst.hpp).
// The on-chip buffers, one byte arena per memory space and per thread, so that kernels running
// their blocks on several threads (one thread = one core) never share tile storage.
#ifndef PTODSL_CPU_SUBSET_ARENA_HPP
#define PTODSL_CPU_SUBSET_ARENA_HPP

#include <cstddef>
#include <cstring>
#include <new>

#include "common.hpp"

// Buffer sizes in bytes. The defaults are the Ascend 910B (A2/A3) numbers; a build for another
// target defines the macros (the compiler passes them from the target description).
#ifndef PTO_CPU_UB_BYTES
#define PTO_CPU_UB_BYTES 196608
#endif
#ifndef PTO_CPU_L1_BYTES
#define PTO_CPU_L1_BYTES 524288
#endif
#ifndef PTO_CPU_L0A_BYTES
#define PTO_CPU_L0A_BYTES 65536
#endif
#ifndef PTO_CPU_L0B_BYTES
#define PTO_CPU_L0B_BYTES 65536
#endif
#ifndef PTO_CPU_L0C_BYTES
#define PTO_CPU_L0C_BYTES 131072
#endif
#ifndef PTO_CPU_BIAS_BYTES
#define PTO_CPU_BIAS_BYTES 1024
#endif
#ifndef PTO_CPU_SCALING_BYTES
#define PTO_CPU_SCALING_BYTES 4096
#endif
// Fresh arena bytes. 0xFF makes every float, half and bfloat16 element a NaN (integers read -1),
// so a kernel that reads a tile region no instruction wrote shows it in its results.
#ifndef PTO_CPU_POISON_BYTE
#define PTO_CPU_POISON_BYTE 0xFF
#endif
// Tile addresses must be multiples of this many bytes (one UB block).
#ifndef PTO_CPU_ADDRESS_ALIGN
#define PTO_CPU_ADDRESS_ALIGN 32
#endif

namespace pto {
namespace cpu {

constexpr std::size_t arena_bytes(TileType loc) {
    switch (loc) {
        case TileType::Vec: return PTO_CPU_UB_BYTES;
        case TileType::Mat: return PTO_CPU_L1_BYTES;
        case TileType::Left: return PTO_CPU_L0A_BYTES;
        case TileType::Right: return PTO_CPU_L0B_BYTES;
        case TileType::Acc: return PTO_CPU_L0C_BYTES;
        case TileType::Bias: return PTO_CPU_BIAS_BYTES;
        case TileType::Scaling: return PTO_CPU_SCALING_BYTES;
    }
    return 0;
}

constexpr int kSpaces = 7;

// Allocated on first use, so a thread that only runs vector code never pays for L1.
class Arenas {
public:
    Arenas() = default;
    Arenas(const Arenas&) = delete;
    Arenas& operator=(const Arenas&) = delete;
    ~Arenas() {
        for (unsigned char* base : bases_) {
            if (base != nullptr) {
                ::operator delete(base, std::align_val_t(64));
            }
        }
    }

    // Refill every buffer this thread has touched with the poison byte.
    void poison() {
        for (int space = 0; space < kSpaces; ++space) {
            if (bases_[space] != nullptr) {
                std::memset(bases_[space], PTO_CPU_POISON_BYTE, arena_bytes(static_cast<TileType>(space)));
            }
        }
    }

    unsigned char* base(TileType loc) {
        unsigned char*& slot = bases_[static_cast<int>(loc)];
        if (slot == nullptr) {
            const std::size_t size = arena_bytes(loc);
            slot = static_cast<unsigned char*>(::operator new(size, std::align_val_t(64)));
            std::memset(slot, PTO_CPU_POISON_BYTE, size);
        }
        return slot;
    }

private:
    unsigned char* bases_[kSpaces] = {};
};

inline thread_local Arenas this_thread_arenas;

// A CPU-only extension, not part of the pto-isa API (guard calls with #ifdef PTO_CPU_SUBSET):
// poison this thread's buffers again, e.g. at the start of each kernel launch, so that a kernel
// cannot pass by reading what an earlier launch left behind.
inline void poison_buffers() { this_thread_arenas.poison(); }

// The storage of a tile of `bytes` bytes at byte offset `offset` of its space; fails when the
// tile would not fit, which on the NPU would silently overwrite another buffer.
inline void* place(TileType loc, long long offset, std::size_t bytes) {
    const std::size_t size = arena_bytes(loc);
    if (offset < 0) {
        fail("TASSIGN: negative address %lld for a tile in %s", offset, space_name(loc));
    }
    if (offset % PTO_CPU_ADDRESS_ALIGN != 0) {
        fail("TASSIGN: address %lld in %s is not a multiple of %d bytes", offset, space_name(loc),
             PTO_CPU_ADDRESS_ALIGN);
    }
    if (static_cast<unsigned long long>(offset) + bytes > size) {
        fail("TASSIGN: a %zu-byte tile at address %lld overflows %s, which holds %zu bytes", bytes, offset,
             space_name(loc), size);
    }
    return this_thread_arenas.base(loc) + offset;
}

}  // namespace cpu
}  // namespace pto

#endif
