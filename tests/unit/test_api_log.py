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
import threading
from collections import Counter
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
    """Log lines without the ``[ember.api pid=P #N] `` prefix (and without the NUL padding of a
    ``%p`` file whose process has not exited, or was killed)."""
    text = text.replace("\0", "")
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


@pytest.mark.parametrize("before", ["", "earlier\n", "earlier\n" + "\0" * 100])
def test_file_destination_appends_with_pid(tmp_path: Path, before: str) -> None:
    """EMBER_LOGDEST as a path: appended to, ``%p`` replaced by the process id. A ``%p`` file is
    written through a memory map grown in steps: NUL-padded until the sink is closed (at exit),
    then exact; the padding a crashed process with the same pid left is written over."""
    dest = tmp_path / "logs" / "api-%p.log"
    path = tmp_path / "logs" / f"api-{os.getpid()}.log"
    if before:
        path.parent.mkdir()
        path.write_text(before)
    f = _decorate(_scale, 1, str(dest), "ember.test.scale")
    f(torch.ones(1))
    f(torch.ones(1))
    earlier = ["earlier"] if before else []
    assert _lines(path.read_text()) == [*earlier, "ember.test.scale", "ember.test.scale"]
    assert path.stat().st_size == 1 << 20  # the first step of the map
    api_log._SINKS[str(dest)].close()
    line = rf"\[ember\.api pid={os.getpid()} #\d+\] ember\.test\.scale\n"
    assert re.fullmatch(("earlier\n" if before else "") + line * 2, path.read_text())
    f(torch.ones(1))  # after the close (an exit handler logging): appended by os.write
    assert re.fullmatch(("earlier\n" if before else "") + line * 3, path.read_text())


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
@pytest.mark.parametrize("dest", ["file", "pidfile", "stderr"])
def test_pre_launch_line_survives_a_crash(tmp_path: Path, level: int, dest: str) -> None:
    """R6.1: the call's line is out before the process dies inside the call (``file``: appended
    by os.write; ``pidfile``: a ``%p`` path, through the memory map)."""
    log = {"file": tmp_path / "api.log", "pidfile": tmp_path / "api-%p.log"}.get(dest)
    env = {"EMBER_LOGLEVEL": str(level), "EMBER_LOGDEST": str(log or dest)}
    proc = _run(CRASH, env)
    assert proc.returncode == -6, proc.stderr  # SIGABRT
    if log is not None:
        (log,) = tmp_path.glob("api*.log")
    lines = _lines(log.read_text() if log else proc.stderr)
    assert lines[0] == "ember.test.crash"
    if level == 3:
        assert lines[1:3] == ["  n: 3", "  page: 1099511627776"]


NOOP = """
    import os, signal, sys
    from ember.api_log import api

    @api(name="ember.test.noop")
    def noop(x):
        return x

    @api(name="ember.test.killed")
    def killed(n):
        os.kill(os.getpid(), signal.SIGKILL)  # no exit handler, no Python buffer survives this
"""


def _log(pid: int, *calls: tuple[int, str]) -> bytes:
    return b"".join(b"[ember.api pid=%d #%d] %s\n" % (pid, n, a.encode()) for n, a in calls)


def test_pid_file_is_exact_after_a_normal_exit(tmp_path: Path) -> None:
    """The exit handler trims the mapped file to the lines: no NUL padding is left."""
    code = NOOP + "    for i in range(1000):\n        noop(i)\n"
    proc = _run(code, {"EMBER_LOGLEVEL": "1", "EMBER_LOGDEST": str(tmp_path / "api-%p.log")})
    assert proc.returncode == 0, proc.stderr
    (log,) = tmp_path.glob("api-*.log")
    pid = int(log.stem.split("-")[1])
    assert log.read_bytes() == _log(pid, *((n, "ember.test.noop") for n in range(1, 1001)))


@pytest.mark.parametrize("level", [1, 3])
def test_pid_file_line_survives_sigkill(tmp_path: Path, level: int) -> None:
    """R6.1 for the memory map: the lines are in the page cache once copied, so a SIGKILL inside
    the call (no exit handler, no flush) leaves them in the file, followed by NUL padding."""
    code = NOOP + "    noop(1)\n    killed(3)\n"
    proc = _run(code, {"EMBER_LOGLEVEL": str(level), "EMBER_LOGDEST": str(tmp_path / "api-%p.log")})
    assert proc.returncode == -9, proc.stderr  # SIGKILL
    (log,) = tmp_path.glob("api-*.log")
    data = log.read_bytes()
    assert len(data) == 1 << 20  # never trimmed: the process got no chance to
    lines = _lines(data.decode())
    assert lines[0] == "ember.test.noop"
    if level == 1:
        assert lines == ["ember.test.noop", "ember.test.killed"]
    else:
        assert lines[-2:] == ["ember.test.killed", "  n: 3"]


def test_forked_child_writes_its_own_file(tmp_path: Path) -> None:
    """A forked child maps its own ``%p`` file and trims only that; the parent's map and file
    are untouched, also by a child that logs nothing and exits normally."""
    code = NOOP + textwrap.indent(
        textwrap.dedent("""
            noop(1)
            child = os.fork()
            if child == 0:
                noop(2)
                noop(3)
                sys.exit(0)  # a normal exit: the child's exit handler runs
            quiet = os.fork()
            if quiet == 0:
                sys.exit(0)
            statuses = [os.waitpid(c, 0)[1] for c in (child, quiet)]
            noop(4)
            print(child, *statuses)
        """),
        "    ",
    )
    proc = _run(code, {"EMBER_LOGLEVEL": "1", "EMBER_LOGDEST": str(tmp_path / "api-%p.log")})
    assert proc.returncode == 0, proc.stderr
    child, *statuses = (int(x) for x in proc.stdout.split())
    assert statuses == [0, 0]
    logs = {int(p.stem.split("-")[1]): p.read_bytes() for p in tmp_path.glob("api-*.log")}
    parent = next(pid for pid in logs if pid != child)
    name = "ember.test.noop"
    # the child's counter continues from the parent's at the fork
    assert logs == {
        parent: _log(parent, (1, name), (2, name)),
        child: _log(child, (2, name), (3, name)),
    }


def test_threads_never_tear_lines(tmp_path: Path) -> None:
    """Threads logging at once into one mapped file (past its first 1 MiB step): every line is
    whole, each call's pre-call block stays together, and none is lost or repeated."""
    dest = str(tmp_path / "api-%p.log")
    names = [f"ember.test.thread{i}" for i in range(8)]
    fns = [_decorate(_scale, 1, dest, name) for name in names]
    level3 = _decorate(_scale, 3, dest, "ember.test.level3")
    calls = 4000

    def work(f: Callable[..., Any], n: int) -> None:
        for _ in range(n):
            f(torch.ones(1))

    threads = [threading.Thread(target=work, args=(f, calls)) for f in fns]
    threads.append(threading.Thread(target=work, args=(level3, 300)))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    path = tmp_path / f"api-{os.getpid()}.log"
    assert path.stat().st_size > 1 << 20
    api_log._SINKS[dest].close()
    text = path.read_text()
    assert "\0" not in text and text.endswith("\n")
    line = re.compile(rf"\[ember\.api pid={os.getpid()} #(\d+)\] (.*)")
    parsed = [line.fullmatch(ln) for ln in text.splitlines()]
    assert all(parsed)
    rows = [(int(m.group(1)), m.group(2)) for m in parsed if m]
    heads = [(n, what) for n, what in rows if not what.startswith(" ")]
    assert Counter(what for _, what in heads) == {
        **dict.fromkeys(names, calls),
        "ember.test.level3": 300,
    }
    assert len({n for n, _ in heads}) == len(heads)  # each call number once
    tensor = "Tensor(shape=[1], dtype=torch.float32, strides=[1], device=cpu, contiguous=True)"
    block = ["ember.test.level3", f"  x: {tensor}", "  factor: 2.0", "  out: None"]
    for i, (n, what) in enumerate(rows):
        if what == "ember.test.level3":
            assert rows[i : i + 4] == [(n, b) for b in block]
    assert sum(what == f"  -> return: {tensor}" for _, what in rows) == 300


def test_growth_past_the_first_step(tmp_path: Path) -> None:
    """More than 1 MiB of lines, and one write larger than a doubling: the file grows and ends
    exact after the close."""
    dest = str(tmp_path / "api-%p.log")
    name = "ember.test." + "long_name_" * 20
    f = _decorate(_scale, 1, dest, name)
    for _ in range(6000):  # ~1.4 MB
        f(torch.ones(1))
    sink = api_log._SINKS[dest]
    big = "x" * (3 << 20) + "\n"
    sink.write(big)
    f(torch.ones(1))
    path = tmp_path / f"api-{os.getpid()}.log"
    assert path.stat().st_size % (1 << 20) == 0 and path.stat().st_size > 4 << 20
    sink.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 6002 and "\0" not in lines[-1]
    assert _lines("\n".join(lines[:6000] + lines[6001:])) == [name] * 6001
    assert lines[6000] == big[:-1]


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
