"""Racing processes and killed builds (R5.6): one compile, no half-built module, no stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ember.config import knobs
from ember.jit import build_and_load, resolve
from ember.jit.entry import validate

from .helpers import REPO, make_value_module, make_wrapper, pythonpath, run_py, spec_code


def _popen(code: str, env: dict[str, str]) -> subprocess.Popen[str]:
    full = dict(os.environ, PYTHONPATH=pythonpath(REPO), **env)
    return subprocess.Popen(
        [sys.executable, "-c", code], env=full, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def test_four_processes_one_cold_spec_compile_once(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 17)
    wrapper.slow.touch()  # hold the first compile until all four are waiting
    code = (
        spec_code(spec)
        + "from ember.jit import build_and_load\nprint(build_and_load(spec).value())"
    )
    procs = [_popen(code, {"EMBER_CXX": str(wrapper.path)}) for _ in range(4)]
    deadline = time.monotonic() + 60
    while not wrapper.compiles() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    wrapper.slow.unlink()
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "17"
    assert len(wrapper.compiles()) == 1, wrapper.calls()


def test_sigkill_mid_compile_leaves_nothing_loadable_and_no_stale_lock(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 23)
    wrapper.slow.touch()
    code = spec_code(spec) + "from ember.jit import build_and_load\nbuild_and_load(spec)"
    victim = _popen(code, {"EMBER_CXX": str(wrapper.path)})
    deadline = time.monotonic() + 60
    while not wrapper.compiles() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert wrapper.compiles(), "the victim never started compiling"
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    wrapper.slow.unlink()
    with knobs.scope(cxx=str(wrapper.path)):
        r = resolve(spec)
        assert r.entry is not None and validate(r.entry, r.entry.name, log_problems=False) is None
        staged = list(r.entry.parent.glob(".staging-*"))
        assert staged, "the killed build should have left its staging dir"
        t0 = time.monotonic()
        assert build_and_load(spec).value() == 23
        assert time.monotonic() - t0 < 60, "the next build waited on a stale lock"
    assert not any(p.exists() for p in staged), "a dead build's staging dir was not cleaned"


def test_warm_entry_reused_across_processes(tmp_path: Path) -> None:
    spec = make_value_module(tmp_path / "m", 31)
    assert build_and_load(spec).value() == 31
    proc = run_py(
        spec_code(spec)
        + "from ember.jit import build_and_load\nprint(build_and_load(spec).value())"
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "31", proc.stderr
