"""``ember aot build``: prebuilt trees for an explicit GPU list, their lookup and their package.

Rules: R1.8, R1.10, R5.14, R5.15, R7.6, R7.14, R7.15 (issue 8).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import ember
from ember.cli import main
from ember.config import knobs
from ember.errors import ConfigError, JitDisabledError, UnsupportedError
from ember.jit import build, build_and_load, clear_memory_cache, resolve
from ember.jit.aot import aot_build, package_wheel
from ember.jit.workspace import PACKAGE_DIR
from ember.ops import toy

from .conftest import Tree
from .helpers import REPO, make_wrapper, pythonpath, run_py

HOST, CUDA = "toy_axpy_host", "toy_axpy_cuda"


def _copy(tree: Tree, dest: Path) -> Path:
    shutil.copytree(tree.path, dest)
    return dest


def _edit_metadata(entry: Path, **changes: object) -> None:
    path = entry / "metadata.json"
    meta = json.loads(path.read_text())
    meta["inputs"].update(changes)
    path.write_text(json.dumps(meta))


def test_aot_build_without_arch_list_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No arch list: refused before anything is built or written, never guessed (R7.14)."""
    with knobs.scope(cuda_arch_list=("9.0a",)):  # NOTE: not a substitute for --arch
        assert main(["aot", "build", "--ops", "toy*", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert "explicit architecture list" in err and "--arch '8.0 9.0a'" in err
    assert not (tmp_path / "t").exists()
    for bad in (None, [], "", " , "):
        with pytest.raises(UnsupportedError, match="explicit architecture list"):
            aot_build(tmp_path / "t", bad)
    with pytest.raises(ConfigError, match="'9'"):
        aot_build(tmp_path / "t", ["9"])
    with pytest.raises(ConfigError, match="inside the installed ember package"):
        aot_build(PACKAGE_DIR / "prebuilt", ["9.0a"])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(ConfigError, match="not empty"):
        aot_build(tmp_path / "full", ["9.0a"])
    assert not knobs.cache_dir.exists(), "a refused build must write nothing"


def test_manifest_records_every_module_and_file(toy_tree: Tree) -> None:
    """Per module: uri, key, targets, ember version, source hash, sha256 per full path (R7.3)."""
    m = toy_tree.manifest
    assert m["ember"] == ember.__version__ and m["archs"] == ["9.0a"] and m["arch_tag"] == "sm90a"
    assert {r["uri"] for r in m["modules"]} == {HOST, CUDA} and m["skipped"] == []
    assert toy_tree.record(CUDA)["targets"] == ["9.0a"] and toy_tree.record(HOST)["targets"] == []
    for rec in m["modules"]:
        assert rec["ember"] == ember.__version__ and len(rec["source_hash"]) == 64
        assert rec["path"] == f"{rec['uri']}/{rec['key']}"
        assert set(rec["files"]) == {
            f"{rec['path']}/{n}" for n in ("metadata.json", "build.ninja", f"{rec['uri']}.so")
        }
        for path, info in rec["files"].items():
            data = (toy_tree.path / path).read_bytes()
            assert info == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        meta = json.loads((toy_tree.path / rec["path"] / "metadata.json").read_text())
        assert meta["key"] == rec["key"] and meta["inputs"]["targets"] == rec["targets"]
    # the same template as the JIT: the cache key of a JIT build for 9.0a is the tree's key
    with knobs.scope(cuda_arch_list=("9.0a",)):
        assert resolve(toy.cuda_spec()).key == toy_tree.record(CUDA)["key"]


def test_aot_skips_specs_that_support_none_of_the_archs(toy_tree: Tree, tmp_path: Path) -> None:
    """A spec whose families exclude every listed arch is skipped and listed, not built (R2.14)."""
    m = aot_build(tmp_path / "t", ["7.0"], "toy_axpy_cuda")
    assert m["modules"] == [] and [s["uri"] for s in m["skipped"]] == [CUDA]
    assert "sm75+" in m["skipped"][0]["reason"]


PROBE = """
import json, numpy as np
from ember.jit import build, build_and_load, resolve
from ember.ops import toy
m = build_and_load(toy.host_spec())
a = np.arange(8, dtype=np.float32); out = np.full(8, np.nan, dtype=np.float32)
m.axpy(a, a, 2.0, out)
r = resolve(toy.cuda_spec())
so = build(r)
try:
    build_and_load(toy.cuda_spec())
    cuda_load = "loaded"
except Exception as exc:  # no libcuda on some CPU machines: the .so may not even dlopen
    cuda_load = f"{type(exc).__name__}: {exc}"
print(json.dumps({"out": out.tolist(), "cuda_key": r.key, "cuda_so": str(so),
                  "compiler_error": str(r.compiler_error), "cuda_load": cuda_load}))
"""


def _no_compiler_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": str(tmp_path / "empty-bin"),  # no c++, nvcc or ninja to be found
        "EMBER_CXX": str(tmp_path / "no-such-c++"),
        "EMBER_NVCC": str(tmp_path / "no-such-nvcc"),
        "EMBER_DISABLE_JIT": "1",
        "EMBER_CUDA_ARCH_LIST": "9.0a",
        "EMBER_CACHE_DIR": str(tmp_path / "node-cache"),
        **extra,
    }


def test_tree_loads_with_no_compiler_and_jit_disabled(toy_tree: Tree, tmp_path: Path) -> None:
    """A 9.0a + host tree serves a node with no compiler and EMBER_DISABLE_JIT=1 (R1.8, R7.14).

    The host module is loaded and computes; the CUDA module resolves to the tree's verified
    ``.so`` without a compiler (calling it needs a GPU, which CI lacks).
    """
    proc = run_py(PROBE, env=_no_compiler_env(tmp_path, EMBER_PREBUILT_PATH=str(toy_tree.path)))
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["out"] == [3.0 * i for i in range(8)]
    assert facts["cuda_key"] is None and "no-such-nvcc" in facts["compiler_error"]
    assert facts["cuda_so"] == str(toy_tree.entry(CUDA) / f"{CUDA}.so")
    print(f"CUDA module without a GPU: {facts['cuda_load']}")
    assert not (tmp_path / "node-cache").exists(), "loading a prebuilt tree writes nothing"


@pytest.mark.parametrize(
    ("uri", "change", "arch", "expected"),
    [
        (HOST, {"ember": "0.0.1"}, "9.0a", "built by ember 0.0.1, this is ember"),
        (HOST, {"sources": [["ember/csrc/ops/toy_host.cc", "0" * 64]]}, "9.0a", "source hash"),
        (CUDA, {}, "8.0", "targets [9.0a] do not cover [8.0]"),
        (CUDA, {"ember": "9.9.9"}, "9.0a", "built by ember 9.9.9"),
    ],
    ids=["version", "source-hash", "arch", "cuda-version"],
)
def test_mismatching_prebuilt_is_rejected_with_one_warning(  # noqa: PLR0917
    toy_tree: Tree,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    uri: str,
    change: dict[str, object],
    arch: str,
    expected: str,
) -> None:
    """Another version, source hash or arch: skipped, never loaded, warned once with the fix."""
    root = _copy(toy_tree, tmp_path / "tree")
    _edit_metadata(toy_tree.entry(uri, root), **change)
    spec = toy.host_spec() if uri == HOST else toy.cuda_spec()
    with (
        knobs.scope(prebuilt_path=(root,), disable_jit=True, cuda_arch_list=(arch,)),
        caplog.at_level(logging.WARNING, logger="ember.jit"),
    ):
        for _ in range(2):
            with pytest.raises(JitDisabledError):
                build(resolve(spec))
            clear_memory_cache()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert expected in warnings[0] and uri in warnings[0]
    assert f'ember aot build --arch "{arch}" --ops {uri}' in warnings[0]
    assert "pip install" in warnings[0]


def test_rejected_prebuilt_is_compiled_instead_never_loaded(toy_tree: Tree, tmp_path: Path) -> None:
    """With the JIT enabled a stale prebuilt is replaced by a fresh build (R5.14)."""
    root = _copy(toy_tree, tmp_path / "tree")
    stale = toy_tree.entry(HOST, root)
    _edit_metadata(stale, ember="0.0.1")
    wrapper = make_wrapper(tmp_path / "w")
    with knobs.scope(prebuilt_path=(root,), cxx=str(wrapper.path)):
        r = resolve(toy.host_spec())
        so = build(r)
    assert so.parent == r.entry and len(wrapper.compiles()) == 1


def test_skip_version_check_loads_and_warns(
    toy_tree: Tree, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """EMBER_SKIP_VERSION_CHECK bypasses the version only, and says so (R5.15)."""
    root = _copy(toy_tree, tmp_path / "tree")
    _edit_metadata(toy_tree.entry(HOST, root), ember="0.0.1")
    with (
        knobs.scope(prebuilt_path=(root,), disable_jit=True, skip_version_check=True),
        caplog.at_level(logging.WARNING, logger="ember.jit"),
    ):
        assert build(resolve(toy.host_spec())).parent == toy_tree.entry(HOST, root)
    assert any("EMBER_SKIP_VERSION_CHECK=1" in r.getMessage() for r in caplog.records)
    _edit_metadata(toy_tree.entry(HOST, root), sources=[["x", "0" * 64]])
    with (
        knobs.scope(prebuilt_path=(root,), disable_jit=True, skip_version_check=True),
        pytest.raises(JitDisabledError),
    ):
        build(resolve(toy.host_spec()))  # the source hash is never bypassed


def test_covering_target_is_accepted(toy_tree: Tree) -> None:
    """9.0a code runs on a 9.0 device: an explicit 9.0 request is covered by the tree."""
    with knobs.scope(prebuilt_path=(toy_tree.path,), disable_jit=True, cuda_arch_list=("9.0",)):
        assert build(resolve(toy.cuda_spec())).parent == toy_tree.entry(CUDA)


def test_prebuilt_package_is_discovered_and_versions_agree(toy_tree: Tree, tmp_path: Path) -> None:
    """ember-prebuilt==<ember>+sm90a installs, is found with no configuration, and the versions
    of package, manifest and ember.__version__ agree (R7.15)."""
    wheel = package_wheel(toy_tree.path, tmp_path / "dist")
    version = f"{ember.__version__}+sm90a"
    assert wheel.name == f"ember_prebuilt-{version}-py3-none-{wheel.name.rsplit('-', 1)[1]}"
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"ember_prebuilt-{version}.dist-info/METADATA").decode()
        assert f"Requires-Dist: ember-kernels=={ember.__version__}" in meta
        packed = json.loads(z.read("ember_prebuilt/manifest.json"))
    assert packed == toy_tree.manifest
    site = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    code = PROBE.replace(
        "print(json.dumps({",
        "import importlib.metadata as md, ember\n"
        "print(json.dumps({'package': md.version('ember-prebuilt'), 'ember': ember.__version__, ",
    )
    env = _no_compiler_env(tmp_path, EMBER_JIT_LOGLEVEL="INFO")
    env["PYTHONPATH"] = pythonpath(REPO, site)
    proc = run_py(code, env=env)
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["package"] == version and facts["ember"] == ember.__version__
    assert facts["out"] == [3.0 * i for i in range(8)]
    assert facts["cuda_so"].startswith(str(site / "ember_prebuilt"))
    assert "(ember-prebuilt package)" in proc.stderr, "EMBER_JIT_LOGLEVEL=INFO shows the source"
    assert packed["ember"] == facts["ember"] == version.split("+", maxsplit=1)[0]


def test_package_refuses_a_tree_of_another_version(toy_tree: Tree, tmp_path: Path) -> None:
    root = _copy(toy_tree, tmp_path / "tree")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["ember"] = "0.0.1"
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=r"built by ember '0\.0\.1'"):
        package_wheel(root, tmp_path / "dist")
    with pytest.raises(ConfigError, match=r"has no manifest\.json"):
        package_wheel(tmp_path, tmp_path / "dist")


def test_cli_aot_build_and_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, dist = tmp_path / "tree", tmp_path / "dist"
    rc = main(["-q", "aot", "build", "--arch", "9.0a", "--ops", HOST, "--out", str(out),
               "--wheel", str(dist)])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "wrote 1 module(s) for [9.0a]" in text and "ember_prebuilt-" in text
    assert [m["uri"] for m in json.loads((out / "manifest.json").read_text())["modules"]] == [HOST]
    assert len(list(dist.glob("*.whl"))) == 1
    clear_memory_cache()
    with knobs.scope(prebuilt_path=(out,), disable_jit=True, cache_dir=tmp_path / "other"):
        assert build_and_load(toy.host_spec()) is not None
