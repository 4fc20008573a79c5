"""The artifact repository over a real loopback HTTP server (R7.1-R7.6, issue 8).

No external network: every URL is ``127.0.0.1`` or a local directory.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.cli import main
from ember.config import knobs
from ember.errors import ArtifactError, JitDisabledError
from ember.jit import artifacts, build_and_load, clear_memory_cache
from ember.jit.prebuilt import download_root
from ember.ops import toy

from .artifact_server import serve
from .conftest import Tree

HOST, CUDA = "toy_axpy_host", "toy_axpy_cuda"
VERSION = ember.__version__


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "BACKOFF_S", 0.01)


@pytest.fixture
def repo(toy_tree: Tree, tmp_path: Path) -> Path:
    """A repository root holding the toy tree under this ember version."""
    root = tmp_path / "repo"
    shutil.copytree(toy_tree.path, root / VERSION)
    return root


def _no_compiler(tmp_path: Path) -> dict[str, object]:
    return {"disable_jit": True, "cxx": str(tmp_path / "no-such-c++"), "nvcc": "/no/nvcc"}


def _axpy_works() -> bool:
    a = np.arange(5, dtype=np.float32)
    out = np.full(5, np.nan, dtype=np.float32)
    build_and_load(toy.host_spec()).axpy(a, a, 2.0, out)
    return bool(np.array_equal(out, 3 * a))


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".") and "manifest" not in p.name]


def test_fetch_all_then_load_without_compiler(
    repo: Path, toy_tree: Tree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Happy path: `ember artifacts fetch` installs and verifies every file; the node then loads
    with no compiler and EMBER_DISABLE_JIT=1 (R7.3, R7.6)."""
    with serve(repo) as (url, stats), knobs.scope(artifact_url=url):
        assert main(["-q", "artifacts", "fetch", "--arch", "9.0a"]) == 0, capsys.readouterr()
    assert "2 module(s) present and verified" in capsys.readouterr().out
    assert stats.connections == 1 + 6  # the manifest, then 3 files per module
    root = download_root()
    assert root == knobs.cache_dir / "artifacts" / VERSION
    for rec in toy_tree.manifest["modules"]:
        for path, info in rec["files"].items():
            assert hashlib.sha256((root / path).read_bytes()).hexdigest() == info["sha256"]
    assert _leftovers(root) == []
    with knobs.scope(**_no_compiler(tmp_path)):
        assert _axpy_works()


def test_on_demand_download_fetches_only_the_module(repo: Path, tmp_path: Path) -> None:
    """Lookup order: cache -> local prebuilt -> download -> compile; here the download serves."""
    with serve(repo) as (url, stats), knobs.scope(artifact_url=url, **_no_compiler(tmp_path)):
        assert _axpy_works()
        clear_memory_cache()
        assert _axpy_works()  # second process-equivalent: now local, no new connection
    assert stats.connections == 1 + 3  # the manifest and the host files, once
    assert sorted(p.name for p in (download_root()).iterdir()) == ["manifest.json", HOST]


def test_repository_copy_that_does_not_match_is_skipped_with_one_warning(
    repo: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A manifest record of another source hash is not downloaded, never loaded (R5.14)."""
    path = repo / VERSION / "manifest.json"
    manifest = json.loads(path.read_text())
    for rec in manifest["modules"]:
        rec["source_hash"] = "0" * 64
    path.write_text(json.dumps(manifest))
    with (
        serve(repo) as (url, stats),
        knobs.scope(artifact_url=url, **_no_compiler(tmp_path)),
        caplog.at_level(logging.WARNING, logger="ember.jit"),
    ):
        for _ in range(2):
            with pytest.raises(JitDisabledError):
                _axpy_works()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "source hash 000000000000" in warnings[0], warnings
    assert url in warnings[0] and "ember aot build" in warnings[0]
    assert stats.connections == 1, "only the manifest may be read"


def test_corrupted_file_fails_verification_and_is_not_installed(repo: Path, toy_tree: Tree) -> None:
    """A tampered file: ArtifactError naming its full path; nothing installed, no retry (R7.3)."""
    so = repo / VERSION / toy_tree.record(HOST)["path"] / f"{HOST}.so"
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    so.write_bytes(bytes(data))
    rel = f"{toy_tree.record(HOST)['path']}/{HOST}.so"
    with serve(repo) as (url, stats), knobs.scope(artifact_url=url):
        with pytest.raises(ArtifactError, match="failed verification") as info:
            artifacts.fetch(HOST)
        assert stats.paths[f"/{VERSION}/{rel}"] == 1
    assert rel in str(info.value) and toy_tree.record(HOST)["files"][rel]["sha256"] in str(
        info.value
    )
    assert not (download_root() / HOST).exists() or not any(
        p for p in (download_root() / HOST).iterdir() if not p.name.startswith(".")
    )
    assert _leftovers(download_root()) == []


def test_verification_off_warns_on_every_use(
    repo: Path, toy_tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    """EMBER_ARTIFACT_VERIFY=0 is a debugging aid: it installs, and says so every time (R7.4)."""
    with (
        serve(repo) as (url, _),
        knobs.scope(artifact_url=url, artifact_verify=False),
        caplog.at_level(logging.WARNING, logger="ember.jit"),
    ):
        artifacts.fetch(HOST)
        artifacts.fetch(CUDA)
    warned = [r for r in caplog.records if "EMBER_ARTIFACT_VERIFY=0" in r.getMessage()]
    assert len(warned) == 2


def test_mirror_replaces_the_default_repository(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMBER_ARTIFACT_URL replaces the default repository entirely (R7.2)."""
    with serve(repo) as (default_url, default), serve(repo) as (mirror_url, mirror):
        monkeypatch.setattr(artifacts, "DEFAULT_ARTIFACT_URL", default_url)
        assert artifacts.repository_url() == f"{default_url}/{VERSION}"
        with knobs.scope(artifact_url=mirror_url):
            artifacts.fetch(HOST)
        assert default.connections == 0 and mirror.connections == 4
        clear_memory_cache()
        shutil.rmtree(download_root())
        artifacts.fetch(HOST)  # no knob: the default serves
        assert default.connections == 4 and mirror.connections == 4


def _synthetic_repo(root: Path, n: int) -> Path:
    """A repository of ``n`` one-file modules (enough files to saturate the worker limit)."""
    modules = []
    for i in range(n):
        rel = f"blob{i}/k{i}/data.bin"
        data = hashlib.sha256(str(i).encode()).digest() * 64
        (root / VERSION / rel).parent.mkdir(parents=True)
        (root / VERSION / rel).write_bytes(data)
        modules.append(
            {"uri": f"blob{i}", "family": "blob", "toolchain": "host", "targets": [],
             "path": f"blob{i}/k{i}",
             "files": {rel: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}}}
        )  # fmt: skip
    (root / VERSION / "manifest.json").write_text(
        json.dumps({"schema": 1, "ember": VERSION, "modules": modules})
    )
    return root


@pytest.mark.parametrize("workers", [None, 2])
def test_parallel_downloads_never_exceed_the_worker_limit(
    tmp_path: Path, workers: int | None
) -> None:
    """The server counts requests at once: at most EMBER_DOWNLOAD_WORKERS (default 4), and
    the limit is actually used (R7.5). A terminal sees a progress bar."""
    repo = _synthetic_repo(tmp_path / "repo", 12)
    tty = io.StringIO()
    tty.isatty = lambda: True  # type: ignore[method-assign]
    limit = workers or 4
    scope = {"download_workers": workers} if workers else {}
    with serve(repo, delay=0.15) as (url, stats), knobs.scope(artifact_url=url, **scope):
        dirs = artifacts.fetch(stream=tty)
    assert len(dirs) == 12 and all((d / "data.bin").is_file() for d in dirs)
    assert stats.connections == 13
    assert stats.max_active == limit, f"max concurrent {stats.max_active}, limit {limit}"
    assert "12/12 files" in tty.getvalue() and "\r" in tty.getvalue()


def test_transient_errors_are_retried_with_a_bound(repo: Path, toy_tree: Tree) -> None:
    """503s are retried (bounded, with backoff); a 404 is not retried."""
    rel = f"/{VERSION}/{toy_tree.record(HOST)['path']}/{HOST}.so"
    with serve(repo) as (url, stats), knobs.scope(artifact_url=url):
        stats.fail_first[rel] = 2
        artifacts.fetch(HOST)
        assert stats.paths[rel] == 3
    shutil.rmtree(download_root())
    clear_memory_cache()
    with serve(repo) as (url, stats), knobs.scope(artifact_url=url):
        stats.fail_first[rel] = 99
        with pytest.raises(ArtifactError, match=f"failed after {artifacts.ATTEMPTS} attempts"):
            artifacts.fetch(HOST)
        assert stats.paths[rel] == artifacts.ATTEMPTS
    (repo / VERSION / rel.split(f"/{VERSION}/")[1]).unlink()
    clear_memory_cache()
    with serve(repo) as (url, stats), knobs.scope(artifact_url=url):
        with pytest.raises(ArtifactError, match="HTTP 404"):
            artifacts.fetch(HOST)
        assert stats.paths[rel] == 1
    assert _leftovers(download_root()) == []


def test_offline_never_connects_and_names_the_missing_artifact(
    repo: Path, toy_tree: Tree, tmp_path: Path
) -> None:
    """EMBER_OFFLINE=1: no connection at all; the error names what is missing (R7.1)."""
    with serve(repo) as (url, stats):
        with knobs.scope(artifact_url=url, offline=True):
            with pytest.raises(ArtifactError, match="EMBER_OFFLINE=1") as info:
                artifacts.fetch()
            assert f"{url}/{VERSION}/manifest.json" in str(info.value)
            with knobs.scope(**_no_compiler(tmp_path)), pytest.raises(ArtifactError):
                _axpy_works()
        assert stats.connections == 0
        with knobs.scope(artifact_url=url):
            artifacts.fetch(CUDA)  # online: the manifest and the CUDA module are now local
        seen = stats.connections
        clear_memory_cache()
        with knobs.scope(artifact_url=url, offline=True, **_no_compiler(tmp_path)):
            with pytest.raises(ArtifactError, match="EMBER_OFFLINE=1") as info:
                _axpy_works()
            assert f"{toy_tree.record(HOST)['path']}/{HOST}.so" in str(info.value)
            assert artifacts.fetch(CUDA)  # present locally: fine offline
        assert stats.connections == seen


def test_local_directory_works_as_repository(repo: Path, tmp_path: Path) -> None:
    """A plain directory or a file:// URL is a repository, also offline (no network)."""
    for url in (str(repo), repo.as_uri()):
        clear_memory_cache()
        shutil.rmtree(knobs.cache_dir, ignore_errors=True)
        with knobs.scope(artifact_url=url, offline=True, **_no_compiler(tmp_path)):
            assert _axpy_works()


def test_manifest_problems_fail_clearly(repo: Path, toy_tree: Tree, tmp_path: Path) -> None:
    with (
        knobs.scope(artifact_url=str(tmp_path / "nowhere")),
        pytest.raises(ArtifactError, match="does not exist"),
    ):
        artifacts.fetch()  # a missing local file is final: no retries
    path = repo / VERSION / "manifest.json"
    manifest = json.loads(path.read_text())
    with knobs.scope(artifact_url=str(repo)):
        with (
            pytest.raises(ArtifactError, match="EMBER_ARTIFACT_URL"),
            knobs.scope(artifact_url=None),
        ):
            artifacts.fetch()
        with pytest.raises(ArtifactError, match="no module matching"):
            artifacts.fetch("nothing*")
        rec = next(m for m in manifest["modules"] if m["uri"] == HOST)
        rec["files"] = {"../../evil.so": next(iter(rec["files"].values()))}
        path.write_text(json.dumps(manifest))
        clear_memory_cache()
        with pytest.raises(ArtifactError, match="outside its module directory"):
            artifacts.fetch(HOST)
        manifest["ember"] = "0.0.1"
        path.write_text(json.dumps(manifest))
        clear_memory_cache()
        with pytest.raises(ArtifactError, match=r"for ember '0\.0\.1'"):
            artifacts.fetch(HOST)
    assert not (Path("/") / "evil.so").exists()


def test_unreachable_repository_falls_back_to_compiling_once(
    repo: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Download failed, JIT allowed: warn and compile; the manifest is not retried per module.
    With EMBER_DISABLE_JIT the download error is raised instead."""
    from .helpers import make_wrapper

    wrapper = make_wrapper(tmp_path / "w")
    with serve(repo) as (url, stats), caplog.at_level(logging.WARNING, logger="ember.jit"):
        stats.fail_first[f"/{VERSION}/manifest.json"] = 99
        with knobs.scope(artifact_url=url, disable_jit=True), pytest.raises(ArtifactError):
            _axpy_works()
        with knobs.scope(artifact_url=url, cxx=str(wrapper.path)):
            assert _axpy_works()
        assert stats.connections == artifacts.ATTEMPTS
    assert len(wrapper.compiles()) == 1
    assert any("compiling module toy_axpy_host instead" in r.getMessage() for r in caplog.records)
