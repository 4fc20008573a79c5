"""The ember command: env, doctor, cache list/inspect/clear, precompile (issue 2 item 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ember.cli import main
from ember.jit import build_and_load, resolve
from ember.ops import toy

from .helpers import run_py

CLI = "import sys\nfrom ember.cli import main\nsys.exit(main(sys.argv[1:]))"


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = run_py(f"import sys; sys.argv = ['ember', *{list(args)!r}]\n" + CLI, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def test_env_reports_versions_knobs_and_cache(
    isolated_ember: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    for needle in (
        "ember",
        "torch",
        "apache-tvm-ffi",
        "nvcc",
        "c++",
        "GPUs",
        str(isolated_ember),
        "EMBER_DISABLE_JIT",
    ):
        assert needle in out


def test_doctor_passes_on_this_machine(isolated_ember: Path) -> None:
    env = {"EMBER_CUDA_ARCH_LIST": "9.0a"} if shutil.which("nvcc") else {}
    code, out, err = _cli("doctor", env=env)
    assert code == 0, out + err
    assert "host module: built, loaded and computed correctly" in out
    if shutil.which("nvcc"):
        assert "CUDA module: compiled and loaded for [9.0a]" in out


def test_doctor_fails_clearly_without_a_compiler(tmp_path: Path) -> None:
    code, _out, err = _cli("doctor", env={"EMBER_CXX": str(tmp_path / "no-such-c++")})
    assert code == 1
    assert "no-such-c++" in err and "EMBER_CXX" in err


def test_precompile_builds_matching_specs_with_timing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["precompile", "--ops", "toy_axpy_host"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] toy_axpy_host: built in" in out
    assert main(["precompile", "--ops", "toy_axpy_host"]) == 0
    assert "[1/1] toy_axpy_host: cached in" in capsys.readouterr().out
    assert main(["precompile", "--ops", "no_such_op*"]) == 1


def test_precompile_skips_unsupported_arch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["precompile", "--ops", "toy_axpy_cuda", "--arch", "7.0"]) == 0
    assert "skipped" in capsys.readouterr().out


def test_cache_list_inspect_and_clear(
    isolated_ember: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_and_load(toy.host_spec())
    entry = resolve(toy.host_spec()).entry
    assert entry is not None
    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert "toy_axpy_host" in out and entry.name[:16] in out and " ok " in out
    assert main(["cache", "inspect", "toy_axpy_host"]) == 0
    out = capsys.readouterr().out
    assert (
        "build.ninja" in out
        and "rule cxx" in out
        and '"module_sha256"' in out
        and "toy_axpy_host.so" in out
    )
    assert main(["cache", "inspect", "nope"]) == 1
    # --stale removes dead staging dirs and broken entries, keeps sound ones
    dead = entry.parent / ".staging-999999999-x"
    dead.mkdir()
    broken = entry.parent / ("f" * 64)
    broken.mkdir()
    assert main(["cache", "clear", "--stale"]) == 0
    assert not dead.exists() and not broken.exists() and entry.exists()
    assert main(["cache", "clear"]) == 0
    assert not (isolated_ember / "jit").exists()
