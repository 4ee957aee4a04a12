"""Shared fixtures: the repository root, the library's spec paths, and a tmp spec writer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from library_families import EVERYDAY  # beside this file

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "specs").glob("*.yaml"))


def pytest_configure(config):
    """The everyday suite builds its C++ at -O1 unless PTODSL_CPU_OPT says otherwise: g++ -O3 takes
    two to three times as long, and the levels compute alike (backends/cpp/toolchain.py). CI runs
    the golden matrix (`-m full`) at -O3, the level users and `ptodsl bench` build at."""
    os.environ.setdefault("PTODSL_CPU_OPT", "1")


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    """Run every test from the repository root, so rendered paths are relative and stable."""
    monkeypatch.chdir(ROOT)


@pytest.fixture
def write_spec(tmp_path):
    """write_spec(name, pto, yaml) -> path of the YAML, with the .pto beside it."""

    def write(name: str, pto: str, yaml: str) -> str:
        (tmp_path / f"{name}.pto").write_text(pto)
        (tmp_path / f"{name}.yaml").write_text(yaml)
        return os.fspath(tmp_path / f"{name}.yaml")

    return write


@pytest.fixture
def compile_text(write_spec):
    """compile_text(pto, yaml) -> the codes that compiling reports; the kernel is named `k`."""
    from ptodsl.diagnostics import CompileError, Diagnostics
    from ptodsl.driver import compile_spec

    def run(pto: str, spec: str = "schedule: {vec_tile: [1, 256]}\n") -> list[str]:
        diags = Diagnostics()
        try:
            compile_spec(write_spec("k", pto, "op: k\n" + spec), diags)
        except CompileError as exc:
            return [d.code for d in exc.diagnostics]
        return [d.code for d in diags.items]

    return run


def pytest_generate_tests(metafunc):
    """A ``spec_path`` argument runs the test once per library spec."""
    if "spec_path" in metafunc.fixturenames:
        metafunc.parametrize("spec_path", SPECS)


# Library-wide checks that compile each spec several times (printed IR parsed back after every pass,
# the schedule search): the everyday suite runs them on one spec per kernel family (EVERYDAY),
# `pytest -m slow` on the rest.
SAMPLED = {"test_tune_runs_on_every_library_spec", "test_compiling_from_printed_ir_gives_the_same_block_ir",
           "test_roundtrip_after_every_pass", "test_opcheck",
           "test_every_torch_equivalent_computes_what_the_reference_does",
           # every case of every spec again on the simulator (the golden tests run each once a day):
           # at Tile IR level, through `ptodsl bench`, with sums left to right
           "test_tile_level_still_passes_every_library_case", "test_bench_runs_every_case_of_every_library_spec",
           "test_f32_cases_pass_with_left_to_right_sums"}
# The library-wide checks below take a spec each; on these thirteen (the attention kernels and the
# FFN, mixed kernels; the backward specs, RoPE, the batched and multi-axis ones) they take two thirds
# of the checks' time, so
# the everyday suite leaves them to `pytest -m slow` (CI runs it). Their golden cases still run in
# the everyday suite.
HEAVY_SPECS = {"online_softmax_attn", "paged_attention", "varlen_attention", "flash_attn", "layernorm_bwd", "rope",
               "gelu_bwd", "reduce_axes", "mha_sdpa", "rmsnorm_bwd", "bmm", "matmul_bwd", "ffn"}
# Tuning softmax, reshape_heads and argmax_rows compiles many candidates too: the light specs
# whose tune is slow.
HEAVY_FOR = {"test_tune_runs_on_every_library_spec": HEAVY_SPECS | {"softmax", "reshape_heads", "argmax_rows"},
             # the printed-IR round trip of the three family specs slowest to compile pass by pass
             "test_compiling_from_printed_ir_gives_the_same_block_ir":
                 HEAVY_SPECS | {"transpose2d", "matmul_i8", "argmax_rows"}}
LIBRARY_WIDE = {"test_tune_runs_on_every_library_spec", "test_bench_runs_every_case_of_every_library_spec",
                "test_every_kernel_of_every_spec_is_fully_synchronised",
                "test_every_library_spec_without_its_schedule", "test_compiling_from_printed_ir_gives_the_same_block_ir",
                "test_roundtrip_after_every_pass", "test_fixtures_compile_or_fail_as_they_should"}


def _heavy(item) -> bool:
    name = getattr(item, "originalname", None)
    if name not in LIBRARY_WIDE and name not in SAMPLED:
        return False
    heavy = HEAVY_FOR.get(name, HEAVY_SPECS)
    params = getattr(getattr(item, "callspec", None), "params", {})
    # a spec's path, or a case naming it (test_fixtures_compile_or_fail_as_they_should's)
    stems = [Path(str(v)).stem if isinstance(v, (str, Path)) else getattr(v, "name", None) for v in params.values()]
    return any((name in LIBRARY_WIDE and s in heavy) or (name in SAMPLED and s not in EVERYDAY) for s in stems)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``wheel`` install packages from an index into a fresh venv (about a minute,
    and the network), those marked ``full`` complete the cpu golden matrix (a C++ build per
    variant of every library spec, minutes), and those marked ``slow`` are long end-to-end tests
    and the library-wide checks of HEAVY_SPECS: they run only when ``-m`` names them, as CI does
    after the suite. The pytest plugin's ``-cpu`` items of the library's own specs are left out:
    tests/backends/emit/test_cpu_golden.py runs the same cases and also compares them with the
    simulator."""
    expr = config.getoption("markexpr", default="") or ""
    for item in items:
        if _heavy(item):
            item.add_marker(pytest.mark.slow)
    specs = (Path(__file__).resolve().parents[1] / "specs").resolve()

    def kept_item(item) -> bool:
        if item.get_closest_marker("cpu") is not None and Path(str(item.path)).resolve().parent == specs:
            return False
        return all(item.get_closest_marker(m) is None for m in ("wheel", "full", "slow") if m not in expr)

    kept = [item for item in items if kept_item(item)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


# `pytester` runs pytest inside a test: the ptodsl plugin's own tests (tests/test_pytest_plugin.py).
pytest_plugins = ["pytester"]
