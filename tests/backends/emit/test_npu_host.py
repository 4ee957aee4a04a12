"""The NPU host program follows CANN's conventions, checked without CANN (tests/gen/test_gen_npu.py
compiles the host programs against a declaration-only ACL interface): the device made current,
every ACL call and launch checked, workspaces that never drain the stream, blocks as one launch."""

from __future__ import annotations

from pathlib import Path

import ptodsl
from ptodsl.backends.cpp.emit import emit_npu_variant

ROOT = Path(__file__).resolve().parents[3]


def _entry(host: str) -> str:
    return host[host.index('extern "C" int '):]


def test_the_entry_selects_the_device_and_checks_every_acl_call():
    op = ptodsl.load(str(ROOT / "specs" / "tensor_sum.yaml"))
    host = emit_npu_variant(op.compiled, 0).host
    entry = _entry(host)
    assert entry.startswith('extern "C" int tensor_sum_f32(int32_t device, void* stream, ')
    assert "Call call(device, stream);" in entry and entry.rstrip().endswith("return call.finish();\n}")
    assert "aclrtSetDevice(device)" in host
    for call in ("aclrtMalloc", "aclrtFree", "aclrtMemsetAsync", "aclrtMemcpy", "aclrtSynchronizeStream",
                 "aclrtSetDevice", "aclrtGetLastError(ACL_RT_THREAD_LEVEL), kernel"):
        assert f"ptodsl_check({call}" in host, call
    # each launch is checked, and the call stops at the first failure
    assert entry.count("_launch(") == entry.count('if (!launched("the launch of ')


def test_workspaces_never_drain_the_stream():
    """A workspace made in every iteration reuses the call's device memory, cleared on the stream
    behind the kernels that used it: neither a malloc nor a wait per iteration."""
    op = ptodsl.load(str(ROOT / "specs" / "tensor_sum.yaml"))
    host = emit_npu_variant(op.compiled, 0).host
    workspace = host[host.index("class DeviceWorkspace"):host.index("static bool launched")]
    assert "aclrtSynchronizeStream" not in workspace and "aclrtMemsetAsync" in workspace
    assert "aclrtMemset(" not in host  # the synchronous form could clear memory a queued kernel still reads


def test_blocks_are_one_launch_with_their_count():
    op = ptodsl.load(str(ROOT / "specs" / "softmax.yaml"))
    entry = _entry(emit_npu_variant(op.compiled, 0).host)
    assert entry.count("_launch(") == 1 and "_launch(softmax_f32_k0_blocks, ptodsl_stream" in entry
    assert "for (" not in entry  # the rows are the kernel's blocks, not a host loop


def test_an_index_tensor_is_read_a_page_at_a_time():
    """gather_rows checks every id in its control program: the host fetches the ids a page at a
    time (one wait for the stream before the first page), not one element per wait."""
    op = ptodsl.load(str(ROOT / "specs" / "gather_rows.yaml"))
    host = emit_npu_variant(op.compiled, 0).host
    entry = _entry(host)
    assert entry.count("HostPages<int32_t> ids_pages(ids, N);") == 1
    assert "ids_pages[_ix1]" in entry and "read_device(" not in entry
    pages = host[host.index("class HostPages"):host.index("static std::vector<int64_t> read_status")]
    assert pages.count("aclrtSynchronizeStream(") == 1 and "synced_" in pages


def test_a_read_of_a_tensor_the_call_writes_waits_for_the_stream(write_spec):
    # the call writes the ids before it reads them, so every read waits for the kernels before it
    pto = ("kernel pick(x: f32[V, N], ids: inout i32[B], out: out f32[B, N]):\n"
           "    ids[:] = ids + 1\n"
           "    for b in loop(B):\n"
           "        r = ids[b]\n"
           "        out[b, :] = x[r, :]\n")
    op = ptodsl.load(write_spec("pick", pto, "op: pick\nschedule:\n  vec_tile: [1, 64]\n"))
    entry = _entry(emit_npu_variant(op.compiled, 0).host)
    assert "read_device(ids + " in entry and "HostPages<" not in entry
