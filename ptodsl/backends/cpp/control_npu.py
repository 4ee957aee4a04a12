"""The NPU host program (host="npu"): the control program run by the host CPU against device memory
through the ACL runtime, as CANN's launch conventions and pto-isa's NPU tests have it.

The entry ``int <entry>(int32_t device, void* stream, ...)`` takes the CPU entry's parameters after
the device and the caller's stream. It makes ``device`` the thread's current device, starts every
compute kernel on ``stream`` with its ``<kernel>_launch`` function (one launch of ``block_dim``
blocks for a kernel that runs as blocks), and returns once the stream has drained: 0, the number of
the bounds guard that stopped the call, or -1 when an ACL call or a launch failed;
``<entry>_failure()`` then names the call and its ACL error code.

Workspaces come from a pool the call owns: a workspace whose scope has ended is reused by the next
one that fits, cleared on the stream behind the kernels that used it (kernels on one stream run in
order), so iterations of a loop neither allocate device memory nor wait for the device. The pool
is freed when the call's stream has drained. Only a scalar read out of device memory (and a status
buffer of guards) waits for the stream; the host reads an input tensor (one no kernel of the call
writes: an index tensor) a page of elements at a time, waiting once, not once per element.
"""

from __future__ import annotations

from ...escape import cpp_string
from ...ir import Func, Op, Param
from ...shapes import product
from . import cxx
from .control import HOSTS, ControlEmitter

PRELUDE = """\
static thread_local void* ptodsl_stream = nullptr;  // the stream of the running entry
static thread_local bool ptodsl_failed = false;  // an ACL call failed: launch nothing more
static thread_local char ptodsl_failure[160] = "";  // which call, and its error code

// Record the first failing ACL call of the entry; true when `rc` is a success.
static bool ptodsl_check(aclError rc, const char* what)
{
    if (rc == ACL_SUCCESS) {
        return true;
    }
    if (!ptodsl_failed) {
        std::snprintf(ptodsl_failure, sizeof(ptodsl_failure), "%s returned ACL error %d", what,
                      static_cast<int>(rc));
    }
    ptodsl_failed = true;
    return false;
}

// The device memory of one call's workspaces. A buffer is busy while a workspace holds it; a free
// one is reused by the next workspace that fits without waiting: whoever uses it next is queued on
// the same stream after the kernels that used it before.
struct PoolBuffer {
    void* data;
    size_t size;
    bool busy;
};
static thread_local std::vector<PoolBuffer> ptodsl_pool;

// The call: the device made current and the thread's error state cleared on entry; on every
// return, the stream drained and the pool freed.
class Call {
public:
    Call(int32_t device, void* stream)
    {
        ptodsl_stream = stream;
        ptodsl_failed = false;
        ptodsl_failure[0] = 0;
        ptodsl_pool.clear();
        (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);  // an earlier caller's error is not ours
        ptodsl_check(aclrtSetDevice(device), "aclrtSetDevice");
    }
    ~Call()
    {
        finish();
        for (PoolBuffer& b : ptodsl_pool) {
            ptodsl_check(aclrtFree(b.data), "aclrtFree");
        }
        ptodsl_pool.clear();
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    int finish()
    {
        if (!drained_) {
            drained_ = true;
            ptodsl_check(aclrtSynchronizeStream(ptodsl_stream), "aclrtSynchronizeStream");
        }
        return ptodsl_failed ? -1 : 0;
    }

private:
    bool drained_ = false;
};

// A GM workspace: a pool buffer cleared on the stream to 0xFF bytes (NaN) when poisoning, zeros
// otherwise.
class DeviceWorkspace {
public:
    DeviceWorkspace(int64_t bytes, int poison)
    {
        size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
        for (size_t k = 0; k < ptodsl_pool.size() && slot_ < 0; ++k) {
            if (!ptodsl_pool[k].busy && ptodsl_pool[k].size >= size) {
                slot_ = static_cast<long>(k);
            }
        }
        if (slot_ < 0) {
            void* data = nullptr;
            if (!ptodsl_check(aclrtMalloc(&data, size, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc")) {
                return;
            }
            ptodsl_pool.push_back(PoolBuffer{data, size, false});
            slot_ = static_cast<long>(ptodsl_pool.size() - 1);
        }
        ptodsl_pool[slot_].busy = true;
        ptodsl_check(aclrtMemsetAsync(ptodsl_pool[slot_].data, size, poison ? 0xFF : 0, size, ptodsl_stream),
                     "aclrtMemsetAsync");
    }
    ~DeviceWorkspace()
    {
        if (slot_ >= 0) {
            ptodsl_pool[slot_].busy = false;
        }
    }
    DeviceWorkspace(const DeviceWorkspace&) = delete;
    DeviceWorkspace& operator=(const DeviceWorkspace&) = delete;
    unsigned char* data() { return slot_ < 0 ? nullptr : static_cast<unsigned char*>(ptodsl_pool[slot_].data); }

private:
    long slot_ = -1;
};

// The FFTS control address through which a mixed kernel's cube and vector cores set each other's
// flags (the runtime's; pto-isa's mixed-kernel tests pass it as the kernel's first argument).
extern "C" int32_t rtGetC2cCtrlAddr(uint64_t* addr, uint32_t* len);  // rtError_t
static uint64_t* ptodsl_c2c_ctrl()
{
    uint64_t addr = 0;
    uint32_t len = 0;
    const int32_t rc = rtGetC2cCtrlAddr(&addr, &len);
    if (rc != 0 && !ptodsl_failed) {
        std::snprintf(ptodsl_failure, sizeof(ptodsl_failure), "rtGetC2cCtrlAddr returned error %d", rc);
        ptodsl_failed = true;
    }
    return reinterpret_cast<uint64_t*>(addr);
}

// After a launch: the runtime's error for it, if any.
static bool launched(const char* kernel)
{
    return ptodsl_check(aclrtGetLastError(ACL_RT_THREAD_LEVEL), kernel);
}

// One element of device memory, once every kernel queued before has finished.
template <typename T>
static T read_device(const T* p)
{
    T value{};
    if (ptodsl_check(aclrtSynchronizeStream(ptodsl_stream), "aclrtSynchronizeStream")) {
        ptodsl_check(aclrtMemcpy(&value, sizeof(T), p, sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    }
    return value;
}

// The elements of an input tensor read by the host, fetched a page at a time: nothing in the call
// writes the tensor, so a page once fetched stays true, and only the first fetch waits for the
// kernels queued before it (the caller's, which may still be producing the tensor).
template <typename T>
class HostPages {
public:
    HostPages(const T* device, int64_t count) : device_(device), count_(count) {}
    T operator[](int64_t i)
    {
        const int64_t first = i - i % kPage;
        if (first != first_) {
            if (!synced_) {
                synced_ = ptodsl_check(aclrtSynchronizeStream(ptodsl_stream), "aclrtSynchronizeStream");
                if (!synced_) {
                    return T{};
                }
            }
            const int64_t n = count_ - first < kPage ? count_ - first : kPage;
            page_.assign(static_cast<size_t>(n), T{});
            first_ = -1;
            if (!ptodsl_check(aclrtMemcpy(page_.data(), n * sizeof(T), device_ + first, n * sizeof(T),
                                          ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy")) {
                return T{};
            }
            first_ = first;
        }
        return page_[static_cast<size_t>(i - first)];
    }

private:
    static constexpr int64_t kPage = 4096;
    const T* device_;
    int64_t count_;
    int64_t first_ = -1;
    bool synced_ = false;
    std::vector<T> page_;
};

// The status entries of a kernel's blocks, copied back once the kernel has finished.
static std::vector<int64_t> read_status(DeviceWorkspace& status, int64_t blocks)
{
    std::vector<int64_t> host(static_cast<size_t>(4 * (blocks > 0 ? blocks : 1)), 0);
    if (status.data() != nullptr && ptodsl_check(aclrtSynchronizeStream(ptodsl_stream), "aclrtSynchronizeStream")) {
        ptodsl_check(aclrtMemcpy(host.data(), host.size() * sizeof(int64_t), status.data(),
                                 host.size() * sizeof(int64_t), ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    }
    return host;
}"""
FAILURE_ENTRY = """\
extern "C" const char* {name}_failure(void)
{{
    return ptodsl_failure;
}}"""


class NpuHost(ControlEmitter):
    RESERVED = ("ptodsl_stream", "ptodsl_failed", "ptodsl_failure", "ptodsl_check", "ptodsl_pool", "PoolBuffer",
                "Call", "DeviceWorkspace", "HostPages", "launched", "read_device", "read_status", "stream", "device", "call",
                "rtGetC2cCtrlAddr", "ptodsl_c2c_ctrl")
    RUN_BY = ", run by the host on device memory through ACL."
    INCLUDES = ('#include "acl/acl.h"',)
    PRELUDE = PRELUDE

    def __init__(self, module, control, kernels, parallel, origin):
        super().__init__(module, control, kernels, [], origin)  # one stream, in order: no host threads
        self.pages: dict[str, str] = {}  # input tensor -> its HostPages, declared at the entry's top

    def _declarations(self) -> list[str]:
        return [k.launcher_declaration for k in self.kernels.values()]

    def _entry(self, params: str) -> list[str]:
        name = self.control.name
        return [*FAILURE_ENTRY.format(name=name).splitlines(), "",
                f'extern "C" int {name}(int32_t device, void* stream, {params})', "{",
                "    Call call(device, stream);", "    if (ptodsl_failed) {", "        return -1;", "    }",
                *self._page_declarations(),
                *cxx.format_lines(self.lines), "    return call.finish();", "}"]

    def _workspace(self, depth: int, memory: str, nbytes: str, op: Op) -> None:
        self._line(depth, f"DeviceWorkspace {memory}({nbytes}, poison);", op)
        self._after_device_call(depth, op)

    def _read_value(self, pointer: str, index: str, source: Param | None) -> str:
        if source is None:
            return f"read_device({pointer} + {index})"
        if source.name not in self.pages:
            self.pages[source.name] = self.names.claim(f"{source.name}_pages")
        base = self.vars[source.name]
        at = index if pointer == base else f"({pointer} - {base}) + {index}"  # a view's offset
        return f"{self.pages[source.name]}[{at}]"

    def _page_declarations(self) -> list[str]:
        out = []
        for name, pages in self.pages.items():
            param = next(p for p in self.control.params if p.name == name)
            count = self._e(product(param.type.shape))
            out.append(f"    HostPages<{cxx.cxx_type(param.dtype)}> {pages}({self.vars[name]}, {count});")
        return out

    def _block_args(self, block: str, blocks: str) -> tuple[str | None, str | None]:
        return None, None  # a block reads its index and the count from its core

    def _status(self, depth: int, status: str, count: str, op: Op) -> str:
        self._line(depth, f"DeviceWorkspace {status}(4 * {count} * static_cast<int64_t>(sizeof(int64_t)), 0);", op)
        self._after_device_call(depth, op)
        return f"reinterpret_cast<int64_t*>({status}.data())"

    def _status_entries(self, depth: int, status: str, count: str, op: Op) -> str:
        entries = self.names.claim(f"{status}_host")
        self._line(depth, f"const std::vector<int64_t> {entries} = read_status({status}, {count});", op)
        self._after_device_call(depth, op)
        return f"{entries}.data()"

    def _start(self, depth: int, kernel: Func, args: list[str], blocks: str | None, block: str | None,
               op: Op) -> None:
        if kernel.kind == "mixed":  # its first argument: the FFTS address its cores signal through
            ffts = self.names.claim("ffts")
            self._line(depth, f"uint64_t* {ffts} = ptodsl_c2c_ctrl();", op)
            self._after_device_call(depth, op)
            args = [ffts, *args]
        self._line(depth, f"{kernel.name}_launch({blocks or 1}, ptodsl_stream, {', '.join(args)});", op)
        self._line(depth, f'if (!launched("{cpp_string("the launch of " + kernel.name)}")) {{', op)
        self._line(depth + 1, "return -1;", op)
        self._line(depth, "}")

    def _after_device_call(self, depth: int, op: Op) -> None:
        self._line(depth, "if (ptodsl_failed) {", op)
        self._line(depth + 1, "return -1;", op)
        self._line(depth, "}")


HOSTS["npu"] = NpuHost
__all__ = ["NpuHost"]
