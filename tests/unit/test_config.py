"""ember.config: typed knobs, the only reader of os.environ (issue 2, R2.11)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ember.config import Knobs, knobs, knobs_markdown_table
from ember.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {
    "EMBER_CACHE_DIR", "EMBER_LOCK_DIR", "EMBER_CUDA_ARCH_LIST", "EMBER_DISABLE_JIT",
    "EMBER_DISABLE_CACHE", "EMBER_JIT_VERBOSE", "EMBER_JIT_DEBUG", "EMBER_JIT_LINEINFO",
    "EMBER_MAX_JOBS", "EMBER_NVCC_THREADS", "EMBER_NVCC", "EMBER_NVCC_LAUNCHER",
    "EMBER_EXTRA_CUDA_FLAGS", "EMBER_PREBUILT_PATH", "EMBER_SKIP_VERSION_CHECK",
    "EMBER_ARTIFACT_URL", "EMBER_ARTIFACT_VERIFY", "EMBER_DOWNLOAD_WORKERS", "EMBER_OFFLINE",
    "EMBER_JIT_LOGLEVEL",
}  # fmt: skip


def test_every_required_knob_exists() -> None:
    assert {k.spec.env for k in Knobs.all()} >= REQUIRED


def test_docs_table_matches_code() -> None:
    text = (REPO / "docs" / "config.md").read_text()
    m = re.search(r"<!-- knobs:begin -->\n(.*?)<!-- knobs:end -->", text, re.S)
    assert m, "docs/config.md lacks the knobs:begin/knobs:end markers"
    assert m.group(1) == knobs_markdown_table(), "regenerate the table from knobs_markdown_table()"


def test_only_config_reads_environ() -> None:
    out = subprocess.run(
        ["grep", "-rlE", "--include=*.py", r"os\.environ|os\.getenv|getenv\(", str(REPO / "ember")],
        capture_output=True,
        text=True,
    ).stdout.split()
    assert [Path(p).name for p in out] == ["config.py"]


@pytest.mark.parametrize(
    ("env", "raw", "attr", "value"),
    [
        ("EMBER_DISABLE_JIT", "1", "disable_jit", True),
        ("EMBER_DISABLE_JIT", "off", "disable_jit", False),
        ("EMBER_MAX_JOBS", "3", "max_jobs", 3),
        ("EMBER_CUDA_ARCH_LIST", "8.0 9.0a", "cuda_arch_list", ("8.0", "9.0a")),
        ("EMBER_CUDA_ARCH_LIST", "9.0a,10.0a", "cuda_arch_list", ("9.0a", "10.0a")),
        ("EMBER_EXTRA_CUDA_FLAGS", "-Xptxas '-v -O3'", "extra_cuda_flags", ("-Xptxas", "-v -O3")),
        ("EMBER_CACHE_DIR", "/x/y", "cache_dir", Path("/x/y")),
        ("EMBER_PREBUILT_PATH", "/a:/b", "prebuilt_path", (Path("/a"), Path("/b"))),
        ("EMBER_ARTIFACT_URL", " https://mirror/x ", "artifact_url", "https://mirror/x"),
        ("EMBER_ARTIFACT_VERIFY", "0", "artifact_verify", False),
        ("EMBER_DOWNLOAD_WORKERS", "8", "download_workers", 8),
        ("EMBER_OFFLINE", "yes", "offline", True),
        ("EMBER_JIT_LOGLEVEL", "info", "jit_loglevel", 20),
        ("EMBER_JIT_LOGLEVEL", "10", "jit_loglevel", 10),
    ],
)
def test_values_parse(
    monkeypatch: pytest.MonkeyPatch, env: str, raw: str, attr: str, value: object
) -> None:
    monkeypatch.setenv(env, raw)
    assert getattr(knobs, attr) == value


@pytest.mark.parametrize(
    ("env", "raw", "attr"),
    [
        ("EMBER_DISABLE_JIT", "maybe", "disable_jit"),
        ("EMBER_MAX_JOBS", "many", "max_jobs"),
        ("EMBER_MAX_JOBS", "0", "max_jobs"),
        ("EMBER_NVCC_THREADS", "-2", "nvcc_threads"),
        ("EMBER_CUDA_ARCH_LIST", "hopper", "cuda_arch_list"),
        ("EMBER_COMPILE_MEM_GB", "lots", "compile_mem_gb"),
        ("EMBER_EXTRA_CUDA_FLAGS", "'unterminated", "extra_cuda_flags"),
        ("EMBER_DOWNLOAD_WORKERS", "0", "download_workers"),
        ("EMBER_ARTIFACT_VERIFY", "sometimes", "artifact_verify"),
        ("EMBER_JIT_LOGLEVEL", "loud", "jit_loglevel"),
    ],
)
def test_malformed_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, env: str, raw: str, attr: str
) -> None:
    monkeypatch.setenv(env, raw)
    with pytest.raises(ConfigError, match=env):
        getattr(knobs, attr)


def test_code_overrides_env_and_scope_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_MAX_JOBS", "2")
    assert knobs.max_jobs == 2
    with knobs.scope(max_jobs=7):
        assert knobs.max_jobs == 7
        assert knobs.snapshot()["EMBER_MAX_JOBS"] == ("max_jobs", 7, "code")
    assert knobs.max_jobs == 2
    knobs.disable_jit = True
    assert knobs.disable_jit is True
    knobs.reset()
    assert knobs.disable_jit is False
    with pytest.raises(ConfigError, match="unknown knob"), knobs.scope(no_such_knob=1):
        pass


def test_default_cache_dir_is_under_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_CACHE_DIR")
    assert knobs.cache_dir == Path.home() / ".cache" / "ember"


def test_artifact_defaults_are_safe() -> None:
    """Verification on, 4 workers, online, no repository: nothing downloads unless asked (R7)."""
    assert knobs.artifact_verify is True and knobs.download_workers == 4
    assert knobs.offline is False and knobs.artifact_url is None and knobs.jit_loglevel is None
