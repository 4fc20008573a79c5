"""Dump and replay of a real JIT op on the CPU: the toy host module's axpy (R6.6-R6.9, R6.12).

The dumping process imports ember at ``EMBER_LOGLEVEL=10`` (the level is read at import); the
replay runs in this process through ``ember replay``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file as load_np
from safetensors.torch import load_file, save_file

from ember.cli import main

from .helpers import run_py

CALLS = """
    import torch
    from ember.ops.toy import axpy

    a = torch.linspace(-1, 1, 33)
    b = torch.arange(66, dtype=torch.float32)[::2]  # strided: refused by the binding
    out = torch.full((33,), float("nan"))
    axpy(a, a.flip(0), alpha=0.25, out=out)
    try:
        axpy(a, b)
    except ValueError as exc:
        print("raised", exc)
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two calls above, dumped once per module (the host module builds once)."""
    base = tmp_path_factory.mktemp("replay")
    env = {
        "EMBER_LOGLEVEL": "10",
        "EMBER_DUMP_DIR": str(base / "dumps"),
        "EMBER_CACHE_DIR": str(base / "cache"),
    }
    proc = run_py(CALLS, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "raised" in proc.stdout
    return base / "dumps"


@pytest.fixture
def dumps(recorded: Path, tmp_path: Path) -> list[Path]:
    """A private copy of the dumps (a test may tamper with one), in call order."""
    shutil.copytree(recorded, tmp_path / "dumps")
    found = sorted((tmp_path / "dumps").iterdir(), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    assert [p.name.split("-")[0] for p in found] == ["ember.toy.axpy", "ember.toy.axpy"]
    return found


def test_dump_records_the_call_and_the_module(dumps: list[Path]) -> None:
    """R6.12: shapes, dtypes, strides, the module (uri, key, targets, flags) and the version."""
    meta = json.loads((dumps[0] / "meta.json").read_text())
    assert meta["function"] == "ember.ops.toy:axpy" and meta["status"] == "returned"
    assert meta["arguments"]["alpha"] == {"float": "0.25"}
    (module,) = meta["modules"]["loaded_during_call"]
    assert module["uri"] == "toy_axpy_host" and module["targets"] == ["host"]
    assert len(module["key"]) == 64 and module["debug"] is False
    bad = json.loads((dumps[1] / "meta.json").read_text())
    assert bad["inputs"]["arg.b"]["strides"] == [2] and bad["status"] == "raised"
    assert bad["raised"]["type"] == "ValueError"


def test_dumps_are_portable_safetensors(dumps: list[Path]) -> None:
    """R6.8: numpy reads what torch wrote; the values are the call's."""
    inputs, outputs = (
        load_np(dumps[0] / "inputs.safetensors"),
        load_np(dumps[0] / "outputs.safetensors"),
    )
    a = np.linspace(-1, 1, 33, dtype=np.float32)
    np.testing.assert_allclose(inputs["arg.a"], a, rtol=0, atol=1e-7)
    assert np.isnan(inputs["arg.out"]).all()  # the poisoned output, as it was before the call
    np.testing.assert_allclose(outputs["return"], a + 0.25 * a[::-1], rtol=1e-6, atol=1e-7)
    assert np.array_equal(outputs["arg.out"], outputs["return"])


def test_replay_matches_and_detects_a_tampered_output(
    dumps: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(dumps[0])]) == 0
    out = capsys.readouterr().out
    assert "  return: match" in out and "4/4 output(s) match" in out
    recorded = load_file(dumps[0] / "outputs.safetensors")
    recorded["return"][5] += 0.5
    save_file(recorded, dumps[0] / "outputs.safetensors")
    assert main(["replay", str(dumps[0])]) == 1
    out = capsys.readouterr().out
    assert "  return: MISMATCH: 1 of 33 elements differ" in out
    assert "  arg.a: match" in out


def test_replay_reproduces_a_refused_call_with_its_strides(
    dumps: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The strided ``b`` is rebuilt with its recorded strides, so the binding refuses it again."""
    assert main(["replay", str(dumps[1])]) == 0
    out = capsys.readouterr().out
    assert "replay raised ValueError: toy.axpy: `b` must be contiguous" in out
    assert "the recorded call raised it too" in out


def test_replay_refuses_what_is_not_a_dump(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(tmp_path)]) == 2
    assert "not replayable" in capsys.readouterr().out
