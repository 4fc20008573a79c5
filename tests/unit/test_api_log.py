"""API call logging (R6.1-R6.9, R3.15): levels, destinations, the pre-launch line, dump bounds.

Functions are decorated inside ``knobs.scope(loglevel=...)``, as ``import ember`` decorates the
public ops at the level in effect then; subprocess tests check the real import-time behaviour.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch

from ember import api_dump, api_log
from ember.api_log import REGISTRY, api, note
from ember.config import knobs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Test APIs (``ember.test.*``) leave the registry; each test starts a fresh dump budget and
    dumps into ``tmp_path/dumps`` (dump settings are read when a call is dumped)."""
    monkeypatch.setenv("EMBER_DUMP_DIR", str(tmp_path / "dumps"))
    api_dump.reset_budget()
    yield
    for name in [n for n in REGISTRY if n.startswith("ember.test.")]:
        del REGISTRY[name]
    api_dump.reset_budget()


def _scale(x: torch.Tensor, factor: float = 2.0, *, out: torch.Tensor | None = None) -> Any:
    if out is None:
        return x * factor
    torch.mul(x, factor, out=out)
    return out


def _add_(x: torch.Tensor, y: torch.Tensor) -> None:
    x.add_(y)


def _decorate(fn: Callable[..., Any], level: int, dest: str, name: str, **more: Any) -> Any:
    with knobs.scope(loglevel=level, logdest=dest, **more):
        return api(name=name)(fn)


def _lines(text: str) -> list[str]:
    """Log lines without the ``[ember.api pid=P #N] `` prefix."""
    return [re.sub(r"^\[ember\.api pid=\d+ #\d+\] ", "", ln) for ln in text.splitlines()]


def test_level_0_returns_the_function_itself() -> None:
    """R6.2: off costs nothing: no wrapper at all, but the API is still registered."""
    f = _decorate(_scale, 0, "stderr", "ember.test.scale")
    assert f is _scale
    assert REGISTRY["ember.test.scale"] is _scale
    assert _scale.__ember_api__ == "ember.test.scale"  # type: ignore[attr-defined]


def test_level_1_writes_the_name_before_the_call(capsys: pytest.CaptureFixture[str]) -> None:
    """R6.3: level 1 is the API name, written and flushed before the function runs."""
    seen: list[str] = []

    def probe(x: int) -> int:
        seen.append(capsys.readouterr().err)  # what was already written when the call ran
        return x + 1

    f = _decorate(probe, 1, "stderr", "ember.test.probe")
    assert f is not probe and f.__wrapped__ is probe
    assert f(1) == 2
    assert re.fullmatch(r"\[ember\.api pid=\d+ #\d+\] ember\.test\.probe\n", seen[0])
    assert capsys.readouterr().err == ""


def test_level_3_arguments_and_results(capsys: pytest.CaptureFixture[str]) -> None:
    """R6.3: level 3 adds each argument (tensors by metadata, scalars by value) and the result."""
    f = _decorate(_scale, 3, "stdout", "ember.test.scale")
    x = torch.zeros(4, 6)[:, :3]
    y = f(x, 0.5)
    assert torch.equal(y, x * 0.5)
    assert _lines(capsys.readouterr().out) == [
        "ember.test.scale",
        "  x: Tensor(shape=[4, 3], dtype=torch.float32, strides=[6, 1], device=cpu, "
        "contiguous=False)",
        "  factor: 0.5",
        "  out: None",
        "  -> return: Tensor(shape=[4, 3], dtype=torch.float32, strides=[3, 1], device=cpu, "
        "contiguous=True)",
    ]


class _Plan(NamedTuple):
    batch: int
    layout: str
    table: torch.Tensor


class _Workspace:
    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.max_batch = 8
        self._hidden = 1


def test_level_3_describes_objects_nested_values_and_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Other objects: type plus a short summary; a raised error is logged after the call."""

    def run(plan: _Plan, ws: _Workspace, pair: tuple[Any, Any], dtype: Any, **extra: Any) -> None:
        raise ValueError("bad page index 7")

    f = _decorate(run, 3, "stderr", "ember.test.run")
    plan = _Plan(2, "NHD", torch.zeros(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="bad page index"):
        f(plan, _Workspace(), (torch.ones(2), None), torch.bfloat16, seed=3)
    t3 = "Tensor(shape=[3], dtype=torch.int32, strides=[1], device=cpu, contiguous=True)"
    t2 = "Tensor(shape=[2], dtype=torch.float32, strides=[1], device=cpu, contiguous=True)"
    assert _lines(capsys.readouterr().err) == [
        "ember.test.run",
        f"  plan: _Plan(batch=2, layout='NHD', table={t3})",
        "  ws: _Workspace(device=cpu, max_batch=8)",
        f"  pair: tuple[{t2}, None]",
        "  dtype: torch.bfloat16",
        "  extra: {'seed': 3}",
        "  raised ValueError: bad page index 7",
    ]


def test_level_5_statistics_and_graph_capture_note(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """R6.4/R6.5: statistics at level 5 only; skipped with a note while a graph is captured."""
    f = _decorate(_add_, 5, "stderr", "ember.test.add_")
    x = torch.tensor([1.0, float("nan"), float("inf"), -3.0])
    f(x, torch.tensor([1.0, 1.0, 1.0, 1.0]))
    lines = _lines(capsys.readouterr().err)
    assert "  stats x: min=-3 max=1 mean=-1 nan=1 inf=1" in lines
    assert "  stats y: min=1 max=1 mean=1 nan=0 inf=0" in lines
    # an in-place op: its arguments after the call are its results
    assert "  stats x (after): min=-2 max=2 mean=0 nan=1 inf=1" in lines
    g = _decorate(lambda t: t.argmax(), 5, "stderr", "ember.test.argmax")
    g(torch.tensor([3, 9, -2], dtype=torch.int32))
    lines = _lines(capsys.readouterr().err)
    assert "  stats t: min=-2 max=9" in lines and "  stats return: min=1 max=1" in lines

    monkeypatch.setattr(api_log, "_capturing", lambda: True)
    f(x, x)
    lines = _lines(capsys.readouterr().err)
    assert lines.count("  stats skipped: CUDA graph capture") == 2  # before and after the call
    assert not [ln for ln in lines if ln.startswith("  stats x")]


def test_nested_public_calls_are_marked(capsys: pytest.CaptureFixture[str]) -> None:
    inner = _decorate(_scale, 3, "stderr", "ember.test.inner")

    def outer(x: torch.Tensor) -> Any:
        note(backend="inner-scale")
        return inner(x, 3.0)

    _decorate(outer, 3, "stderr", "ember.test.outer")(torch.ones(2))
    text = capsys.readouterr().err
    first = re.search(r"#(\d+)\] ember\.test\.outer\n", text)
    assert first, text
    assert f"ember.test.inner (inside #{first.group(1)})" in text
    assert "  note: backend='inner-scale'" in _lines(text)


def test_file_destination_appends_with_pid(tmp_path: Path) -> None:
    """EMBER_LOGDEST as a path: appended to, ``%p`` replaced by the process id."""
    dest = tmp_path / "logs" / "api-%p.log"
    f = _decorate(_scale, 1, str(dest), "ember.test.scale")
    f(torch.ones(1))
    f(torch.ones(1))
    path = tmp_path / "logs" / f"api-{os.getpid()}.log"
    assert _lines(path.read_text()) == ["ember.test.scale", "ember.test.scale"]


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_LOG")}
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), full.get("PYTHONPATH", "")])
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


CRASH = """
    import os
    from ember.api_log import api

    @api(name="ember.test.crash")
    def crash(n, page=None):
        os.abort()  # dies inside the call, as a faulting kernel takes the process down

    crash(3, page=1 << 40)
"""


@pytest.mark.parametrize("level", [1, 3])
@pytest.mark.parametrize("dest", ["file", "stderr"])
def test_pre_launch_line_survives_a_crash(tmp_path: Path, level: int, dest: str) -> None:
    """R6.1: the call's line is out before the process dies inside the call."""
    log = tmp_path / "api.log"
    env = {"EMBER_LOGLEVEL": str(level), "EMBER_LOGDEST": str(log) if dest == "file" else dest}
    proc = _run(CRASH, env)
    assert proc.returncode == -6, proc.stderr  # SIGABRT
    lines = _lines(log.read_text() if dest == "file" else proc.stderr)
    assert lines[0] == "ember.test.crash"
    if level == 3:
        assert lines[1:3] == ["  n: 3", "  page: 1099511627776"]


def test_import_time_level_decides_every_public_op() -> None:
    """At EMBER_LOGLEVEL=0 each public op is the undecorated function (R6.2); at 1 it is a
    wrapper around it. The level is read once, when ember is imported."""
    code = """
        import ember
        from ember.api_log import REGISTRY
        ops = [n for n in ember.__all__ if not n[0].isupper() and not n.startswith("_")]
        for n in ops:
            fn, raw = getattr(ember, n), REGISTRY["ember." + n]
            print(n, fn is raw, getattr(fn, "__wrapped__", None) is raw)
    """
    for level, expect in (("0", "True False"), ("1", "False True")):
        proc = _run(code, {"EMBER_LOGLEVEL": level})
        assert proc.returncode == 0, proc.stderr
        rows = proc.stdout.splitlines()
        assert len(rows) >= 20
        assert all(r.endswith(expect) for r in rows), (level, rows)


# --- dumps (R6.6-R6.9) -------------------------------------------------------------------------


def _dumps(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _dumping(fn: Callable[..., Any], name: str, tmp_path: Path) -> Any:
    return _decorate(fn, 10, str(tmp_path / "log"), name)


def test_dump_contents_are_portable_safetensors(tmp_path: Path) -> None:
    """R6.8: inputs and outputs load with safetensors' torch and numpy readers."""
    from safetensors.numpy import load_file as load_np
    from safetensors.torch import load_file

    f = _dumping(_add_, "ember.test.add_", tmp_path)
    x, y = torch.arange(4.0), torch.full((4,), 0.5)
    f(x, y)
    (d,) = _dumps(tmp_path / "dumps")
    assert d.name == f"ember.test.add_-{os.getpid()}-" + d.name.rsplit("-", 1)[1]
    inputs, outputs = load_file(d / "inputs.safetensors"), load_np(d / "outputs.safetensors")
    assert torch.equal(inputs["arg.x"], torch.arange(4.0))  # before the in-place op
    assert outputs["arg.x"].tolist() == [0.5, 1.5, 2.5, 3.5]  # after it
    meta = json.loads((d / "meta.json").read_text())
    assert meta["api"] == "ember.test.add_" and meta["status"] == "returned"
    assert meta["function"] == f"{__name__}:_add_"
    assert meta["inputs"]["arg.y"] == {
        "shape": [4], "dtype": "float32", "strides": [1], "storage_offset": 0, "device": "cpu",
        "contiguous": True,
    }  # fmt: skip
    assert meta["loglevel"] == 10 and meta["ember"]
    assert meta["knobs"]["EMBER_DUMP_DIR"] == str(tmp_path / "dumps")  # non-default controls
    assert meta["bytes"] == 16 * 4


def test_dump_count_cap_is_exact(tmp_path: Path) -> None:
    f = _dumping(_scale, "ember.test.scale", tmp_path)
    with knobs.scope(dump_max_count=2):
        for _ in range(4):
            f(torch.ones(3))
    assert len(_dumps(tmp_path / "dumps")) == 2
    text = (tmp_path / "log").read_text()
    assert text.count("dump skipped: EMBER_DUMP_MAX_COUNT=2 dumps reached") == 2


@pytest.mark.parametrize(("cap", "dumps", "complete"), [(384, 2, 2), (383, 3, 1), (191, 2, 0)])
def test_dump_byte_cap_is_exact(tmp_path: Path, cap: int, dumps: int, complete: int) -> None:
    """A call on 16 float32 dumps 64 input bytes, then 128 output bytes (the result and the
    input after the call). 384 bytes hold two whole dumps and not the third's inputs; at 383 the
    second dump's outputs do not fit, but the third's inputs do; at 191 no outputs fit."""
    from safetensors.torch import load_file

    f = _dumping(_scale, "ember.test.scale", tmp_path)
    with knobs.scope(dump_max_bytes=cap):
        for _ in range(3):
            f(torch.ones(16))
    found = _dumps(tmp_path / "dumps")
    assert len(found) == dumps
    files = [p for d in found for p in d.glob("*.safetensors")]
    on_disk = sum(t.numel() * t.element_size() for p in files for t in load_file(p).values())
    assert on_disk == 192 * complete + 64 * (dumps - complete) <= cap
    assert sum((d / "outputs.safetensors").exists() for d in found) == complete
    text = (tmp_path / "log").read_text()
    assert text.count(f"more bytes would pass EMBER_DUMP_MAX_BYTES={cap}") == 3 - complete
    for d in found:
        meta = json.loads((d / "meta.json").read_text())
        if meta["outputs"] is None:
            assert f"EMBER_DUMP_MAX_BYTES={cap}" in meta["outputs_skipped"]


def test_dump_filters(tmp_path: Path) -> None:
    """R6.7: fnmatch include/exclude on the API name; exclude wins."""
    names = ["ember.test.alpha", "ember.test.alpha_beta", "ember.test.gamma"]
    fns = [_dumping(_scale, n, tmp_path) for n in names]
    with knobs.scope(dump_include=("ember.test.a*",), dump_exclude=("*beta",)):
        for f in fns:
            f(torch.ones(1))
    assert [d.name.split("-")[0] for d in _dumps(tmp_path / "dumps")] == ["ember.test.alpha"]
    text = (tmp_path / "log").read_text()
    assert "dump skipped: ember.test.alpha_beta matches EMBER_DUMP_EXCLUDE" in text
    assert "dump skipped: ember.test.gamma does not match EMBER_DUMP_INCLUDE" in text


def test_no_dump_under_graph_capture_nor_for_nested_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = _dumping(_scale, "ember.test.inner", tmp_path)

    def calls_inner(x: torch.Tensor) -> Any:
        return inner(x)

    outer = _dumping(calls_inner, "ember.test.outer", tmp_path)
    outer(torch.ones(2))
    assert [d.name.split("-")[0] for d in _dumps(tmp_path / "dumps")] == ["ember.test.outer"]
    monkeypatch.setattr(api_log, "_capturing", lambda: True)
    inner(torch.ones(2))
    assert len(_dumps(tmp_path / "dumps")) == 1
    assert "dump skipped: CUDA graph capture" in (tmp_path / "log").read_text()


def test_dump_of_a_crashed_call_keeps_its_inputs(tmp_path: Path) -> None:
    """The dump's inputs and metadata are on disk before the call; a call that kills the process
    leaves its dump in status ``called``."""
    code = """
        import os, torch
        from ember.api_log import api

        @api(name="ember.test.crash")
        def crash(x, page):
            os.abort()

        crash(torch.arange(3), page=7)
    """
    env = {"EMBER_LOGLEVEL": "10", "EMBER_DUMP_DIR": str(tmp_path), "EMBER_LOGDEST": "stderr"}
    proc = _run(code, env)
    assert proc.returncode == -6, proc.stderr
    (d,) = _dumps(tmp_path)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["status"] == "called" and meta["arguments"]["page"] == {"value": 7}
    assert not (d / "outputs.safetensors").exists()
    from safetensors.torch import load_file

    assert load_file(d / "inputs.safetensors")["arg.x"].tolist() == [0, 1, 2]


def test_replay_of_a_python_api(tmp_path: Path) -> None:
    """Match -> 0; a tampered output -> 1; an argument recorded by repr only -> 2."""
    from safetensors.torch import load_file, save_file

    f = _dumping(_scale, "ember.test.scale", tmp_path)
    f(torch.arange(6.0).view(2, 3).t(), 3.0)
    (d,) = _dumps(tmp_path / "dumps")
    report: list[str] = []
    assert api_dump.replay(d, report=report.append) == 0, report
    assert "  return: match" in report and "  arg.x: match" in report
    outputs = load_file(d / "outputs.safetensors")
    outputs["return"][1, 0] += 1e-3
    save_file(outputs, d / "outputs.safetensors")
    report.clear()
    assert api_dump.replay(d, report=report.append) == 1
    assert any(r.startswith("  return: MISMATCH: 1 of 6 elements differ") for r in report)
    assert api_dump.replay(d, atol=1e-2, report=report.append) == 0

    g = _dumping(lambda x, gen: x, "ember.test.gen", tmp_path)
    g(torch.ones(1), torch.Generator())
    (d2,) = [p for p in _dumps(tmp_path / "dumps") if p.name.startswith("ember.test.gen")]
    report.clear()
    assert api_dump.replay(d2, report=report.append) == 2
    assert "were recorded by type and repr only" in report[0]
