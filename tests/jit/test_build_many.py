"""Building many modules at once (``build_many``, ``ember precompile --jobs``) on a machine with no
GPU: the builds overlap up to ``jobs``, each lands as a complete validated entry, one failure
stops nothing else, and a spec listed twice compiles once (R5.6: the per-key lock).
"""

from __future__ import annotations

import importlib
import shutil
import threading
import time
from pathlib import Path

import pytest

from ember.cli import main
from ember.config import knobs
from ember.errors import CompileError, UnsupportedError
from ember.jit import build_and_load, build_many, resolve
from ember.jit.entry import validate
from ember.jit.ninja import module_parallelism
from ember.ops import toy

from .helpers import make_value_module, make_wrapper


def wait_for(predicate, seconds: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_builds_overlap_up_to_jobs_and_each_lands_complete(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    specs = [make_value_module(tmp_path / f"m{i}", 10 + i, uri=f"value_{i}") for i in range(3)]
    wrapper.slow.touch()  # every compile waits until this goes: they can only overlap
    out: list[Path | Exception] = []
    with knobs.scope(cxx=str(wrapper.path)):
        worker = threading.Thread(target=lambda: out.extend(build_many(specs, jobs=3)))
        worker.start()
        overlapped = wait_for(lambda: len(wrapper.compiles()) == 3)
        wrapper.slow.unlink()
        worker.join(timeout=300)
        assert overlapped, f"only {len(wrapper.compiles())} of 3 compiles ran at once"
        assert len(out) == 3 and all(isinstance(p, Path) and p.is_file() for p in out), out
        for i, (spec, so) in enumerate(zip(specs, out, strict=True)):
            r = resolve(spec)
            assert r.entry is not None and validate(r.entry, r.key or "", log_problems=True) == so
            assert build_and_load(spec).value() == 10 + i
    assert len(wrapper.compiles()) == 3, "loading what build_many built must not compile again"


def test_jobs_one_builds_one_at_a_time(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    specs = [make_value_module(tmp_path / f"m{i}", i, uri=f"value_{i}") for i in range(2)]
    wrapper.slow.touch()
    with knobs.scope(cxx=str(wrapper.path)):
        worker = threading.Thread(target=lambda: build_many(specs, jobs=1))
        worker.start()
        assert wait_for(lambda: len(wrapper.compiles()) == 1)
        assert not wait_for(lambda: len(wrapper.compiles()) > 1, seconds=1.5)
        wrapper.slow.unlink()
        worker.join(timeout=300)
    assert len(wrapper.compiles()) == 2


def test_a_spec_listed_twice_compiles_once(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 5)
    with knobs.scope(cxx=str(wrapper.path)):
        first, second = build_many([spec, spec], jobs=2)
    assert isinstance(first, Path) and first == second
    assert len(wrapper.compiles()) == 1


def test_a_failed_build_is_returned_and_stops_nothing_else(tmp_path: Path) -> None:
    good = make_value_module(tmp_path / "good", 3)
    bad = make_value_module(tmp_path / "bad", 4, uri="value_bad")
    bad.sources[0].write_text("this is not C++;\n")
    seen: list[str] = []
    out = build_many([bad, good], jobs=2, report=lambda spec, _res, _s: seen.append(spec.uri))
    assert isinstance(out[0], CompileError) and "value_bad" in str(out[0])
    assert isinstance(out[1], Path) and build_and_load(good).value() == 3
    assert sorted(seen) == ["value_bad", "value_mod"]
    entry = resolve(bad).entry
    assert entry is not None and not (entry / "metadata.json").exists()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_spec_for_other_targets_is_returned_as_unsupported(tmp_path: Path) -> None:
    host = make_value_module(tmp_path / "m", 2)
    with knobs.scope(cuda_arch_list=("7.0",)):
        cuda, built = build_many([toy.cuda_spec(), host], jobs=2)
    assert isinstance(cuda, UnsupportedError) and "toy_axpy_cuda" in str(cuda)
    assert isinstance(built, Path)


@pytest.mark.parametrize("jobs", [0, -1, 1.5, "2"])
def test_bad_jobs_raise_before_anything_builds(tmp_path: Path, jobs: object) -> None:
    wrapper = make_wrapper(tmp_path / "w")
    spec = make_value_module(tmp_path / "m", 1)
    with (
        knobs.scope(cxx=str(wrapper.path)),
        pytest.raises(ValueError, match=r"`jobs` must be a positive int or None, got "),
    ):
        build_many([spec], jobs=jobs)  # type: ignore[arg-type]
    assert wrapper.compiles() == []


def test_module_parallelism_stays_within_max_jobs_cpus_and_memory() -> None:
    with knobs.scope(max_jobs=9):
        assert module_parallelism(units=2) == 4
        assert module_parallelism(units=20) == 1
    with knobs.scope(compile_mem_gb=1e6):  # the memory bound: one compile job at most
        assert module_parallelism() == 1


def test_precompile_jobs_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["precompile", "--ops", "toy_axpy_host", "--jobs", "2"]) == 0
    assert "[1/1] toy_axpy_host: built in" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["precompile", "--ops", "toy_axpy_host", "--jobs", "0"])
    assert "expected a positive integer, got '0'" in capsys.readouterr().err


def test_a_resolved_item_is_built_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ember precompile`` resolves each spec once (to say cached or built) and hands build_many
    the Resolved: building it must not resolve (hash the sources) again."""
    build_mod = importlib.import_module("ember.jit.build")  # ember.jit.build is also a function

    spec = make_value_module(tmp_path / "m", 7)
    r = resolve(spec)
    calls: list[str] = []
    real = build_mod.resolve
    monkeypatch.setattr(build_mod, "resolve", lambda s: calls.append(s.uri) or real(s))
    seen: list[str] = []
    (so,) = build_many([r], jobs=1, report=lambda s, _o, _t: seen.append(s.uri))
    assert isinstance(so, Path) and so.is_file()
    assert calls == [] and seen == [spec.uri]
    assert build_and_load(spec).value() == 7


def test_precompile_resolves_each_spec_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ember.jit as jit_pkg

    build_mod = importlib.import_module("ember.jit.build")  # ember.jit.build is also a function

    calls: list[str] = []
    real = build_mod.resolve

    def counting(s):  # type: ignore[no-untyped-def]
        calls.append(s.uri)
        return real(s)

    monkeypatch.setattr(build_mod, "resolve", counting)
    monkeypatch.setattr(jit_pkg, "resolve", counting)
    assert main(["precompile", "--ops", "toy_axpy_host", "--jobs", "1"]) == 0
    assert calls == ["toy_axpy_host"], calls
    assert "built in" in capsys.readouterr().out
