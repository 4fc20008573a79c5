"""The build-and-load lifecycle on a machine with no GPU (R2.3-R2.5, R5.1-R5.6, R5.10)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
import torch

from ember.config import knobs
from ember.errors import CompileError, JitDisabledError
from ember.jit import KernelSpec, build_and_load, clear_memory_cache, resolve
from ember.jit.entry import validate
from ember.ops import toy

from .helpers import make_value_module, make_wrapper, run_py, set_header, spec_code


def test_host_module_computes_on_torch_cpu_tensors() -> None:
    a, b = torch.randn(1000), torch.randn(1000)
    out = torch.full_like(a, float("nan"))  # poisoned: an unwritten element fails
    toy.axpy(a, b, alpha=-1.5, out=out)
    ref = (a.double() - 1.5 * b.double()).float()
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("make_args", "exc", "needle"),
    [
        (lambda a: (a, a[:3]), ValueError, "`b` must have the shape of `a` [8], got [3]"),
        (lambda a: (a, a.double()), TypeError, "`b` must have dtype float32, got float64"),
        (lambda a: (a.view(2, 4), a.view(2, 4)), ValueError, "`a` must be 1-D, got shape [2, 4]"),
        (lambda a: (a[::2], a[::2]), ValueError, "`a` must be contiguous"),
    ],
)
def test_host_module_bad_input_raises_and_writes_nothing(make_args, exc, needle) -> None:  # type: ignore[no-untyped-def]
    a = torch.arange(8, dtype=torch.float32)
    x, y = make_args(a)
    out = (
        torch.full(x.shape, 7.0, dtype=torch.float32)
        if x.is_contiguous()
        else torch.full((4,), 7.0)
    )
    with pytest.raises(exc) as info:
        toy.axpy(x, y, out=out)
    assert needle in str(info.value)
    assert torch.all(out == 7.0), "a rejected call must not write its output"


def test_warm_cache_fresh_process_starts_no_compiler_and_takes_no_lock(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 21, scale=2)
    with knobs.scope(cxx=str(wrapper.path)):
        assert build_and_load(spec).value() == 42
    assert len(wrapper.compiles()) == 1
    calls_before = wrapper.calls()
    wrapper.deny.touch()  # any compiler start now fails loudly
    lock_blocker = tmp_path / "not-a-dir"
    lock_blocker.write_text("a file where the lock dir would be: taking a lock would fail")
    proc = run_py(
        spec_code(spec)
        + "from ember.jit import build_and_load\nprint(build_and_load(spec).value())",
        env={"EMBER_CXX": str(wrapper.path), "EMBER_LOCK_DIR": str(lock_blocker / "locks")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"
    assert wrapper.calls() == calls_before, "a warm load started the compiler"


def test_header_edit_rebuilds_and_revert_hits_old_entry(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    where = tmp_path / "m"
    spec = make_value_module(where, 1)
    with knobs.scope(cxx=str(wrapper.path)):
        key1 = resolve(spec).key
        assert build_and_load(spec).value() == 1
        set_header(where, 2)  # edit an included header only (R1.5)
        key2 = resolve(spec).key
        assert key2 != key1
        assert build_and_load(spec).value() == 2
        assert len(wrapper.compiles()) == 2
        set_header(where, 1)  # revert
        clear_memory_cache()
        assert resolve(spec).key == key1
        assert build_and_load(spec).value() == 1
        assert len(wrapper.compiles()) == 2, "reverting must hit the old entry, not rebuild"


@pytest.mark.parametrize("damage", ["truncate_so", "tamper_so", "truncate_meta", "bad_key"])
def test_damaged_entry_is_logged_and_rebuilt_never_loaded(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 5)
    # NOTE: build in another process: damaging a .so this process has mapped would crash it.
    built = run_py(spec_code(spec) + "from ember.jit import build_and_load\nbuild_and_load(spec)",
                   env={"EMBER_CXX": str(wrapper.path)})  # fmt: skip
    assert built.returncode == 0, built.stderr
    with knobs.scope(cxx=str(wrapper.path)):
        entry = resolve(spec).entry
        assert entry is not None
        so, meta = entry / "value_mod.so", entry / "metadata.json"
        if damage == "truncate_so":
            so.write_bytes(so.read_bytes()[:1000])
        elif damage == "tamper_so":
            data = bytearray(so.read_bytes())
            data[len(data) // 2] ^= 0xFF
            so.write_bytes(bytes(data))
        elif damage == "truncate_meta":
            meta.write_text(meta.read_text()[:40])
        else:
            m = json.loads(meta.read_text())
            m["key"] = "0" * 64
            meta.write_text(json.dumps(m))
        assert validate(entry, entry.name, log_problems=False) is None
        with caplog.at_level(logging.WARNING, logger="ember.jit"):
            assert build_and_load(spec).value() == 5
    assert any("ignoring cache entry" in r.message for r in caplog.records)
    assert len(wrapper.compiles()) == 2, "the damaged entry must be rebuilt"
    assert validate(entry, entry.name, log_problems=False) is not None


def test_disable_jit_cold_refuses_warm_loads(tmp_path: Path) -> None:
    spec = make_value_module(tmp_path / "m", 3)
    with knobs.scope(disable_jit=True), pytest.raises(JitDisabledError) as info:
        build_and_load(spec)
    msg = str(info.value)
    assert "'value_mod'" in msg and "EMBER_PREBUILT_PATH" in msg and "ember precompile" in msg
    assert not (knobs.cache_dir / "jit").exists(), "a refused build must write nothing"
    assert build_and_load(spec).value() == 3
    clear_memory_cache()
    with knobs.scope(disable_jit=True):
        assert build_and_load(spec).value() == 3


def test_prebuilt_entry_loads_without_compiler_and_is_version_checked(tmp_path: Path) -> None:
    spec = make_value_module(tmp_path / "m", 9)
    build_and_load(spec)
    entry = resolve(spec).entry
    assert entry is not None
    prebuilt = tmp_path / "prebuilt"
    (prebuilt / "value_mod").mkdir(parents=True)
    entry.rename(prebuilt / "value_mod" / "any-name")
    clear_memory_cache()
    with knobs.scope(
        prebuilt_path=(prebuilt,), disable_jit=True, cxx=str(tmp_path / "no-such-cxx")
    ):
        assert build_and_load(spec).value() == 9
    meta_path = prebuilt / "value_mod" / "any-name" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["inputs"]["ember"] = "0.0.0-other"
    meta_path.write_text(json.dumps(meta))
    clear_memory_cache()
    with knobs.scope(prebuilt_path=(prebuilt,), disable_jit=True), pytest.raises(JitDisabledError):
        build_and_load(spec)  # a stale prebuilt never bypasses the version check (R5.14)
    with knobs.scope(prebuilt_path=(prebuilt,), disable_jit=True, skip_version_check=True):
        assert build_and_load(spec).value() == 9


def test_disable_cache_builds_in_throwaway_dir(tmp_path: Path) -> None:
    spec = make_value_module(tmp_path / "m", 4)
    with knobs.scope(disable_cache=True):
        assert build_and_load(spec).value() == 4
    assert not knobs.cache_dir.exists(), "EMBER_DISABLE_CACHE must leave the cache untouched"


def test_compile_error_carries_command_code_errors_and_dir(tmp_path: Path) -> None:
    src = tmp_path / "broken.cc"
    src.write_text("int main( { this is not C++ }\n")
    spec = KernelSpec(uri="broken_mod", sources=(src,), toolchain="host")
    with pytest.raises(CompileError) as info:
        build_and_load(spec)
    err = info.value
    assert "broken.cc" in err.command and err.returncode != 0
    assert err.errors and any("error" in e for e in err.errors)
    assert (err.build_dir / "build.log").is_file() and (err.build_dir / "build.ninja").is_file()
    assert resolve(spec).entry is not None and not resolve(spec).entry.exists()  # type: ignore[union-attr]


def test_waiting_on_a_held_lock_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import filelock

    spec = make_value_module(tmp_path / "m", 6)
    r = resolve(spec)
    assert r.key is not None
    lock_path = r.workspace.lock_path(spec.uri, r.key)
    lock_path.parent.mkdir(parents=True)
    held = filelock.FileLock(str(lock_path), thread_local=False)
    held.acquire()
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(build_and_load(spec).value()))
    with caplog.at_level(logging.INFO, logger="ember.jit"):
        worker.start()
        time.sleep(2.0)
        assert not result, "the build must wait for the lock"
        held.release()
        worker.join(timeout=120)
    assert result == [6]
    assert any(
        "waiting for lock" in r.message and str(lock_path) in r.message for r in caplog.records
    )


def test_compile_is_announced_at_info(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spec = make_value_module(tmp_path / "m", 8)
    with caplog.at_level(logging.INFO, logger="ember.jit"):
        build_and_load(spec)
    messages = [r.message for r in caplog.records]
    assert any(m.startswith("compiling module value_mod for [host]") for m in messages)
    assert any(m.startswith("compiled module value_mod for [host] in") for m in messages)
    assert any(m.startswith("compile parallelism: jobs=") for m in messages)
