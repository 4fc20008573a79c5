"""ember.config: typed knobs, the only reader of os.environ (issue 2, R2.11)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
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
    "EMBER_JIT_LOGLEVEL", "EMBER_LOGLEVEL", "EMBER_LOGDEST", "EMBER_DUMP_DIR",
    "EMBER_DUMP_MAX_COUNT", "EMBER_DUMP_MAX_BYTES", "EMBER_DUMP_INCLUDE", "EMBER_DUMP_EXCLUDE",
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
        ("EMBER_LOGLEVEL", "5", "loglevel", 5),
        ("EMBER_LOGDEST", "/tmp/api-%p.log", "logdest", "/tmp/api-%p.log"),
        ("EMBER_DUMP_MAX_COUNT", "0", "dump_max_count", 0),
        ("EMBER_DUMP_MAX_BYTES", "4096", "dump_max_bytes", 4096),
        (
            "EMBER_DUMP_INCLUDE",
            "ember.rmsnorm, ember.*decode*",
            "dump_include",
            ("ember.rmsnorm", "ember.*decode*"),
        ),
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
        ("EMBER_LOGLEVEL", "2", "loglevel"),
        ("EMBER_LOGLEVEL", "debug", "loglevel"),
        ("EMBER_DUMP_MAX_BYTES", "-1", "dump_max_bytes"),
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


def test_api_logging_is_off_by_default_and_dumps_are_bounded() -> None:
    """R6.2, R6.6, R6.9: level 0, stderr; dumps bounded and under the cache dir."""
    from ember.api_dump import dump_root

    assert knobs.loglevel == 0 and knobs.logdest == "stderr"
    assert knobs.dump_max_count == 32 and knobs.dump_max_bytes == 1 << 30
    assert knobs.dump_include == () and knobs.dump_exclude == ()
    assert dump_root() == knobs.cache_dir / "dumps"


DIAGNOSTIC = {
    "EMBER_DISABLE_CACHE": "1",
    "EMBER_JIT_DEBUG": "1",
    "EMBER_SKIP_VERSION_CHECK": "1",
    "EMBER_ARTIFACT_VERIFY": "0",
}


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the once-per-process warnings afresh."""
    from ember import config

    monkeypatch.setattr(config, "_WARNED", set())


@pytest.mark.usefixtures("fresh_warnings")
def test_diagnostic_knobs_are_marked_and_documented() -> None:
    """R6.15: the controls that are diagnosis aids say so in the docs table."""
    marked = {k.spec.env for k in Knobs.all() if k.spec.diagnostic is True}
    assert marked == set(DIAGNOSTIC)
    table = knobs_markdown_table()
    for env in marked:
        row = next(r for r in table.splitlines() if r.startswith(f"| `{env}` |"))
        assert "**Diagnostic** (warns when set)" in row
    some = {k.spec.env for k in Knobs.all() if callable(k.spec.diagnostic)}
    assert some == {"EMBER_EXTRA_CUDA_FLAGS"}
    row = next(r for r in table.splitlines() if r.startswith("| `EMBER_EXTRA_CUDA_FLAGS` |"))
    assert "**Diagnostic** for some values" in row and "-DEMBER_" in row


@pytest.mark.usefixtures("fresh_warnings")
def test_kernel_ab_switches_warn_and_other_extra_flags_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # R6.15: a -DEMBER_* switch replaces a kernel's measured default algorithm
    from ember.config import DiagnosticKnobWarning, warn_diagnostic_knobs

    monkeypatch.setenv("EMBER_EXTRA_CUDA_FLAGS", "-lineinfo -DNDEBUG")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_diagnostic_knobs() == []
    monkeypatch.setenv("EMBER_EXTRA_CUDA_FLAGS", "-lineinfo -DEMBER_ACT_FLAT=0")
    with pytest.warns(DiagnosticKnobWarning, match="EMBER_EXTRA_CUDA_FLAGS=.*ACT_FLAT"):
        assert warn_diagnostic_knobs() == ["EMBER_EXTRA_CUDA_FLAGS"]


@pytest.mark.usefixtures("fresh_warnings")
@pytest.mark.parametrize(("env", "raw"), sorted(DIAGNOSTIC.items()))
def test_diagnostic_knob_set_in_env_warns_once(
    monkeypatch: pytest.MonkeyPatch, env: str, raw: str
) -> None:
    from ember.config import DiagnosticKnobWarning, warn_diagnostic_knobs

    monkeypatch.setenv(env, raw)
    with pytest.warns(DiagnosticKnobWarning, match=f"{env}=.* is a diagnostic control"):
        assert warn_diagnostic_knobs() == [env]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_diagnostic_knobs() == [env]  # still set, but said once per process


@pytest.mark.usefixtures("fresh_warnings")
def test_diagnostic_knob_defaults_and_plain_knobs_do_not_warn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ember.config import DiagnosticKnobWarning, warn_diagnostic_knobs

    monkeypatch.setenv("EMBER_JIT_DEBUG", "0")  # set, but to the default
    monkeypatch.setenv("EMBER_MAX_JOBS", "3")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_diagnostic_knobs() == []
        knobs.jit_lineinfo = True
    with pytest.warns(DiagnosticKnobWarning, match="EMBER_JIT_DEBUG=True"):
        knobs.jit_debug = True  # from code, too


def test_import_warns_for_a_diagnostic_knob() -> None:
    """``import ember`` announces a diagnostic control set in the environment (R6.15)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    code = "import ember"
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert plain.returncode == 0 and "DiagnosticKnobWarning" not in plain.stderr
    env["EMBER_DISABLE_CACHE"] = "1"
    diag = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert diag.returncode == 0
    assert "DiagnosticKnobWarning: EMBER_DISABLE_CACHE=True is a diagnostic control" in diag.stderr


def test_the_callers_switch_flags_stay_out_of_the_machinery_tests() -> None:
    """EMBER_EXTRA_CUDA_FLAGS reaches only tests/ops (tests/conftest.py): a run under a switch
    (``EMBER_EXTRA_CUDA_FLAGS=-DEMBER_X=1 pytest tests``) leaves these tests a clean knob."""
    assert "EMBER_EXTRA_CUDA_FLAGS" not in os.environ
    assert knobs.extra_cuda_flags == ()
