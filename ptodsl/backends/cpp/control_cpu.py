"""The control program run on the CPU (the cpu backend): tensors and workspaces in host memory,
the blocks of a launch and the loops the parallel pass proved independent on the machine's threads
(OpenMP), the checks of the CPU header turned into return codes.

The entry returns 0, the number of the bounds guard that stopped the call, -1 when a check of the
CPU header failed (``<entry>_failure()`` then says which) and -2 when a GM workspace could not be
allocated. With a real pto-isa checkout (no PTO_CPU_SUBSET) the library's own checks apply.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir import Func, Op, Param
from . import cxx
from .control import HOSTS, ControlEmitter

PRELUDE = """\
// Each launch starts from fresh on-chip buffers when poisoning, so that no kernel can pass by
// reading what an earlier one left there.
static void start_launch(int poison)
{
#ifdef PTO_CPU_SUBSET
    if (poison) {
        pto::cpu::poison_buffers();
    }
#else
    (void)poison;
#endif
}

// A GM workspace: NaN bytes when poisoning (reads of unwritten data show), zeros otherwise.
static std::vector<unsigned char> workspace(int64_t bytes, int poison)
{
    return std::vector<unsigned char>(static_cast<size_t>(bytes > 0 ? bytes : 0), poison ? 0xFF : 0);
}

"""
FAILURE_ENTRY = """\
extern "C" const char* {name}_failure(void)
{{
#ifdef PTO_CPU_SUBSET
    return pto::cpu::failure_message();
#else
    return "";
#endif
}}"""
CATCH_BEGIN = ["#ifdef PTO_CPU_SUBSET", "    pto::cpu::clear_failure();", "#endif", "    try {"]
# -1: a check of the CPU header failed (guards that stop a call return their number, from 1);
# -2: a GM workspace could not be allocated (E0718), which would otherwise abort the process
CATCH_END = ["#ifdef PTO_CPU_SUBSET", "    } catch (const pto::cpu::Failure&) {", "        return -1;", "#endif",
             "    } catch (const std::bad_alloc&) {", "        return -2;", "    }", "    return 0;"]


class CpuHost(ControlEmitter):
    RESERVED = ("start_launch", "workspace")
    RUN_BY = ", as the AICPU runs them on the NPU."
    PRELUDE = PRELUDE.rstrip()

    def _declarations(self) -> list[str]:
        return [k.declaration for k in self.kernels.values()]

    def _entry(self, params: str) -> list[str]:
        name = self.control.name
        return [*FAILURE_ENTRY.format(name=name).splitlines(), "", f'extern "C" int {name}({params})', "{",
                *CATCH_BEGIN, *cxx.format_lines(self.lines), *CATCH_END, "}"]

    def _workspace(self, depth: int, memory: str, nbytes: str, op: Op) -> None:
        self._line(depth, f"std::vector<unsigned char> {memory} = workspace({nbytes}, poison);", op)

    def _read_value(self, pointer: str, index: str, source: Param | None) -> str:
        return f"{pointer}[{index}]"

    def _block_args(self, block: str, blocks: str) -> tuple[str | None, str | None]:
        return block, blocks

    def _status(self, depth: int, status: str, count: str, op: Op) -> str:
        self._line(depth, f"std::vector<int64_t> {status}(static_cast<size_t>(4 * {count}), 0);", op)
        return f"{status}.data()"

    def _status_entries(self, depth: int, status: str, count: str, op: Op) -> str:
        return f"{status}.data()"

    def _start(self, depth: int, kernel: Func, args: list[str], blocks: str | None, block: str | None,
               op: Op) -> None:
        call = f"{kernel.name}({', '.join(args)});"
        if blocks is None or block is None:
            self._line(depth, "start_launch(poison);", op)
            self._line(depth, call, op)
            return

        def body(d: int) -> None:
            self._line(d + 1, "start_launch(poison);", op)
            self._line(d + 1, call, op)

        self._openmp(depth, f"for (int64_t {block} = 0; {block} < {blocks}; ++{block}) {{", block, body, op)

    def _openmp(self, depth: int, head: str, index: str, body: Callable[[int], None], op: Op) -> None:
        """``head`` (a ``for`` over ``index``) shared out over the machine's threads.

        An exception may not leave an OpenMP region: each iteration catches the header's Failure
        (the message is kept) and a failed workspace allocation, and the loop rethrows them once
        all threads are done."""
        oom = self.names.claim(f"{index}_no_memory")
        self._line(depth, f"bool {oom} = false;")
        self._line(depth, "#pragma omp parallel for schedule(static)")
        self._line(depth, head, op)
        self._line(depth + 1, "try {")
        body(depth + 1)
        self._line(0, "#ifdef PTO_CPU_SUBSET")
        self._line(depth + 1, "} catch (const pto::cpu::Failure&) {")
        self._line(0, "#endif")
        self._line(depth + 1, "} catch (const std::bad_alloc&) {")
        self._line(0, "#pragma omp atomic write")
        self._line(depth + 2, f"{oom} = true;")
        self._line(depth + 1, "}")
        self._line(depth, "}")
        self._line(depth, f"if ({oom}) {{")
        self._line(depth + 1, "throw std::bad_alloc();")
        self._line(depth, "}")
        self._line(0, "#ifdef PTO_CPU_SUBSET")
        self._line(depth, "if (pto::cpu::failed()) {")
        self._line(depth + 1, "throw pto::cpu::Failure{};")
        self._line(depth, "}")
        self._line(0, "#endif")


HOSTS["cpu"] = CpuHost
__all__ = ["CpuHost"]
