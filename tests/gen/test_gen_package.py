"""``ptodsl gen``: the package's files, reproducibility, the atomic swap, name checks, freshness."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptodsl.cli import main
from ptodsl.gen import Package
from ptodsl.gen.kernels import STAMP
from ptodsl.ir.parser import parse

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ptodsl_ops"

BROKEN_PTO = """kernel broken(x: f32[M, N], y: out f32[M, N]):
    y = x + 1.0
"""
BROKEN_YAML = """op: broken
schedule:
  vec_tile: [8, 64]
"""


def read_tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by posix relative path, without Python's and pytest's caches."""
    skip = {"__pycache__", ".pytest_cache"}
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not skip.intersection(p.relative_to(folder).parts)
    }


def small_specs(folder: Path, *names: str) -> Path:
    """A copy of a few library specs (with the backward specs they name, and their shared
    reference file) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        for stem in (name, f"{name}_bwd"):
            for suffix in (".pto", ".yaml"):
                if (ROOT / "specs" / f"{stem}{suffix}").exists():
                    shutil.copy(ROOT / "specs" / f"{stem}{suffix}", folder)
    shutil.copy(ROOT / "specs" / "refs.py", folder)
    return folder


# ------------------------------------------------------------------ layout and content


def test_layout(built: Package):
    files = built.files
    for path in ("pyproject.toml", "README.md", f"{PACKAGE}/__init__.py", f"{PACKAGE}/manifest.json",
                 f"{PACKAGE}/torch_ops.py", f"{PACKAGE}/conftest.py", f"{PACKAGE}/ops/__init__.py",
                 f"{PACKAGE}/ops/softmax.py", f"{PACKAGE}/tests/__init__.py", f"{PACKAGE}/tests/test_golden.py",
                 f"{PACKAGE}/specs/softmax.pto", f"{PACKAGE}/specs/softmax.yaml", f"{PACKAGE}/specs/refs.py",
                 f"{PACKAGE}/kernels/softmax/f32.tensor.ir", f"{PACKAGE}/kernels/softmax/bf16.tile.ir",
                 f"{PACKAGE}/kernels/add_one/default.tile.ir", f"{PACKAGE}/specs/online_softmax_attn.pto",
                 f"{PACKAGE}/ops/attn.py"):
        assert path in files, path
    assert list(files) == sorted(files)
    assert len(built.ops) == len(list((ROOT / "specs").glob("*.yaml")))


def test_every_generated_file_is_stamped(built: Package):
    for path, data in built.files.items():
        if f"{PACKAGE}/specs/" in path or path == "LICENSE":
            continue  # verbatim copies: their sha256 in the manifest must match the sources
        text = data.decode()
        if path.endswith(".json"):
            assert json.loads(text)["_generated"].startswith(STAMP), path
        else:
            assert STAMP in text.splitlines()[0], path
        assert text.endswith("\n") and not text.endswith("\n\n"), path


def test_no_machine_paths(built: Package, tmp_path: Path):
    for path, data in built.files.items():
        text = data.decode()
        assert str(ROOT) not in text, path
        assert str(tmp_path.parent) not in text, path


def test_spec_copies_and_manifest(built: Package):
    manifest = json.loads(built.files[f"{PACKAGE}/manifest.json"])
    assert manifest["package"] == PACKAGE and manifest["compiler"]["name"] == "ptodsl"
    assert list(manifest["ops"]) == sorted(manifest["ops"])
    softmax = manifest["ops"]["softmax"]
    assert softmax["spec"] == "specs/softmax.yaml"
    assert set(softmax["variants"]) == {"f32", "f16", "bf16"}
    assert softmax["variants"]["bf16"] == {"dtypes": {"T": "bf16"},
                                           "kernels": ["kernels/softmax/bf16.block.ir",
                                                       "kernels/softmax/bf16.cpp",
                                                       "kernels/softmax/bf16.tensor.ir",
                                                       "kernels/softmax/bf16.tile.ir"]}
    assert "softmax[bf16-B33]" in softmax["tests"]
    for op in manifest["ops"].values():
        for rel, digest in op["files"].items():
            copy = built.files[f"{PACKAGE}/{rel}"]
            assert hashlib.sha256(copy).hexdigest() == digest
            assert copy == (ROOT / rel).read_bytes()  # a verbatim copy
        for variant in op["variants"].values():
            for kernel in variant["kernels"]:
                assert f"{PACKAGE}/{kernel}" in built.files


def test_kernel_ir_parses_back_and_names_the_packaged_spec(built: Package):
    irs = {p: d.decode() for p, d in built.files.items() if p.endswith(".ir")}
    assert len(irs) == 3 * built.variants  # tensor, tile and block IR per variant
    cpp = built.files[f"{PACKAGE}/kernels/softmax/f32.cpp"].decode()
    assert STAMP in cpp and "#include <pto/pto-inst.hpp>" in cpp and "TROWMAX(" in cpp
    for path, text in irs.items():
        module = parse(text)
        assert module.attrs["generated"].startswith(STAMP)
        assert str(module) == text, path
    text = irs[f"{PACKAGE}/kernels/softmax/f32.tile.ir"]
    assert 'loc("specs/softmax.pto":' in text
    assert "@softmax_f32(" in text and "softmax_f16" not in text


def test_wrapper_source(built: Package):
    text = built.files[f"{PACKAGE}/ops/rmsnorm.py"].decode()
    assert "def rmsnorm(\n    x: TensorLike,\n    gamma: TensorLike,\n    *,\n    y: TensorLike | None = None,\n" \
           "    eps: float = 1e-06,\n    backend: str = \"sim\",\n" in text
    assert 'PackagedOp("ptodsl_ops", "rmsnorm", "specs/rmsnorm.yaml")' in text
    torch_ops = built.files[f"{PACKAGE}/torch_ops.py"].decode()
    assert '@torch.library.custom_op("ptodsl_ops::rmsnorm", mutates_args=())' in torch_ops
    assert "import annotations" not in torch_ops.replace("`from __future__ import annotations`", "")
    readme = built.files["README.md"].decode()
    assert '`rmsnorm(x, gamma, *, y=None, eps=1e-06, backend="sim", device=None)`' in readme
    assert "| [`softmax`](#softmax) |" in readme and "T=f32, T=f16, T=bf16" in readme
    tests = built.files[f"{PACKAGE}/tests/test_golden.py"].decode()
    assert 'pytest.param("softmax", 1, id="softmax[bf16-B33]")' in tests
    pyproject = built.files["pyproject.toml"].decode()
    assert 'dependencies = ["ptodsl==' in pyproject and 'torch = ["ptodsl[torch]==' in pyproject


# ------------------------------------------------------------------ the command


def test_gen_twice_gives_identical_trees(tree: Path, tmp_path: Path):
    # The session's tree came from the API in this process, with an absolute specs path; this one
    # from the command in another process, with a relative path (the tests run from the repository
    # root) and another hash seed: byte-identical all the same.
    out = tmp_path / "again"
    env = {**os.environ, "PYTHONHASHSEED": "1"}
    proc = subprocess.run([sys.executable, "-m", "ptodsl", "gen", "specs", "-o", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "generated ptodsl_ops" in proc.stderr
    assert read_tree(out) == read_tree(tree)


def test_a_broken_spec_leaves_the_previous_output_untouched(tmp_path: Path, capsys):
    specs = small_specs(tmp_path / "specs", "softmax", "relu")
    out = tmp_path / "out"
    assert main(["gen", str(specs), "-o", str(out), "--name", "small_ops"]) == 0
    before = read_tree(out)
    assert set(json.loads(before["small_ops/manifest.json"])["ops"]) == {"relu", "softmax", "softmax_bwd"}
    (specs / "broken.pto").write_text(BROKEN_PTO)
    (specs / "broken.yaml").write_text(BROKEN_YAML)
    capsys.readouterr()
    assert main(["gen", str(specs), "-o", str(out), "--name", "small_ops"]) == 1
    err = capsys.readouterr().err
    assert "error[E0400]" in err and "broken.pto:2:5" in err and "left as it was" in err
    assert read_tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "specs"]  # no staging folder left


def test_regenerating_replaces_the_tree(tmp_path: Path):
    specs = small_specs(tmp_path / "specs", "softmax", "relu")
    out = tmp_path / "out"
    assert main(["gen", str(specs), "-o", str(out)]) == 0
    (specs / "relu.yaml").unlink()
    (out / PACKAGE / "stray.txt").write_text("left by hand")
    assert main(["gen", str(specs), "-o", str(out)]) == 0
    files = read_tree(out)
    assert f"{PACKAGE}/ops/softmax.py" in files
    assert f"{PACKAGE}/ops/relu.py" not in files and f"{PACKAGE}/stray.txt" not in files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "specs"]


def test_refuses_to_replace_a_folder_it_did_not_generate(tmp_path: Path, capsys):
    specs = small_specs(tmp_path / "specs", "relu")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious")
    assert main(["gen", str(specs), "-o", str(out)]) == 1
    assert "refusing to replace it" in capsys.readouterr().err
    assert read_tree(out) == {"notes.txt": b"precious"}


def test_missing_specs_folder(tmp_path: Path, capsys):
    assert main(["gen", str(tmp_path / "nope"), "-o", str(tmp_path / "out")]) == 1
    assert "E0203" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("name", "why"), [
    ("for", "Python keyword"),
    ("9ops", "must start with a letter"),
    ("my-ops", "only letters, digits"),
    ("torch", "would shadow"),
    ("class", "Python keyword"),
])
def test_invalid_package_names(name: str, why: str, tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["gen", "specs", "-o", str(tmp_path / "out"), "--name", name])
    assert exc.value.code == 2
    assert why in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("pto", "yaml", "code", "fragment"), [
    # a keyword never gets as far as gen: the checker rejects it for C++ and Python alike
    ("kernel kw(lambda: f32[M], y: out f32[M]):\n    y[:] = lambda + 1.0\n", "op: kw\nschedule: {vec_tile: [64]}\n",
     "E0322", "`lambda` is a Python keyword"),
    ("kernel kw(x: f32[M], backend: out f32[M]):\n    backend[:] = x + 1.0\n", "op: kw\nschedule: {vec_tile: [64]}\n",
     "E0211", "`backend=` keyword of its own"),
    ("kernel tests(x: f32[M], y: out f32[M]):\n    y[:] = x + 1.0\n", "op: tests\nsource: kw.pto\nschedule: {vec_tile: [64]}\n",
     "E0211", "the package has a `tests` of its own"),
], ids=["keyword", "wrapper-keyword", "package-name"])
def test_names_that_cannot_reach_python(pto: str, yaml: str, code: str, fragment: str, write_spec, tmp_path: Path,
                                        capsys):
    write_spec("kw", pto, yaml)
    assert main(["gen", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"error[{code}]" in err and fragment in err
    assert not (tmp_path / "out").exists()


def test_two_specs_of_one_op(tmp_path: Path, capsys):
    (tmp_path / "same.pto").write_text("kernel same(x: f32[M], y: out f32[M]):\n    y[:] = x + 1.0\n")
    for stem in ("a", "b"):
        (tmp_path / f"{stem}.yaml").write_text("op: same\nsource: same.pto\nschedule: {vec_tile: [64]}\n")
    assert main(["gen", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "op `same` is defined by two specs" in err and "first defined here" in err


def test_files_outside_the_specs_folder_are_refused(tmp_path: Path, capsys):
    (tmp_path / "shared.pto").write_text("kernel k(x: f32[M], y: out f32[M]):\n    y[:] = x + 1.0\n")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "k.yaml").write_text("op: k\nsource: ../shared.pto\nschedule: {vec_tile: [64]}\n")
    assert main(["gen", str(tmp_path / "specs"), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "E0219" in err and "lies outside" in err


# ------------------------------------------------------------------ the committed package


def test_generated_folder_is_fresh(built: Package):
    committed = ROOT / "generated"
    if not committed.is_dir():
        pytest.skip("no generated/ folder in this checkout: nothing to compare")
    have = read_tree(committed)
    want = built.files
    stale = sorted(p for p in want if p in have and have[p] != want[p])
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    assert not (stale or missing or extra), (
        "generated/ is stale: run `ptodsl gen specs -o generated` and commit the result\n"
        f"  differ: {stale[:10]}\n  missing: {missing[:10]}\n  extra: {extra[:10]}")
