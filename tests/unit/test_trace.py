"""Trace templates (R3.14, R3.16, R3.17): every reference runs on CPU at small sizes and returns
the declared outputs; workload capture writes flashinfer-bench records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ember.config import knobs
from ember.testing.trace_inputs import random_inputs, torch_dtype
from ember.trace import MODELS, definitions
from ember.trace.capture import recording, workload_record
from ember.trace.templates import TEMPLATES

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.op)
def test_reference_runs_on_cpu_with_declared_outputs(template) -> None:
    torch.manual_seed(0)
    inputs = random_inputs(template)
    result = template.reference(*inputs.values())
    results = result if isinstance(result, tuple) else (result,)
    assert len(results) == len(template.outputs)
    for (name, spec), value in zip(template.outputs.items(), results, strict=True):
        want = tuple(template.small[a] for a in spec.shape or ())
        assert tuple(value.shape) == want, f"{template.op}.{name}"
        assert value.dtype == torch_dtype(spec.dtype), f"{template.op}.{name}"
        if value.is_floating_point():
            assert not value.isnan().any(), f"{template.op}.{name} has NaN"


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.op)
def test_small_sizes_and_examples_satisfy_the_constraints(template) -> None:
    assert set(template.small) >= set(template.axes)
    for c in template.constraints:
        assert eval(c, {}, dict(template.small)), f"{template.op}: small sizes break {c}"
    for consts, tags in template.examples().values():
        assert tags
        known = {**template.small, **consts}
        for c in template.constraints:
            assert eval(c, {}, known), f"{template.op} {consts}: breaks {c}"


def test_examples_cover_the_models_and_names_are_unique() -> None:
    names = [d["name"] for _, d in definitions()]
    assert len(names) == len(set(names))
    tags = {t for _, d in definitions() for t in d["tags"]}
    assert {f"model:{m.tag}" for m in MODELS} <= tags


def test_committed_definitions_validate_with_flashinfer_bench() -> None:
    """The definitions parse as flashinfer-bench's own Definition model (R3.16)."""
    fib = pytest.importorskip("flashinfer_bench.data")
    files = sorted((REPO / "definitions").glob("*.json"))
    assert len(files) == len(list(definitions()))
    for f in files:
        d = fib.Definition.model_validate_json(f.read_text())
        assert d.name == f.stem


AXIS_KEYS = {"const": {"type", "value", "description"}, "var": {"type", "description"}}
DEF_KEYS = {"name", "description", "op_type", "tags", "axes", "constraints", "inputs", "outputs"}
DTYPES = {"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1",
          "int64", "int32", "int16", "int8", "bool"}  # fmt: skip


def test_committed_definitions_match_the_mirrored_schema() -> None:
    """A mirror of flashinfer-bench 0.1.2's Definition rules, run even where it is not
    installed: fields, axis kinds, dtypes, axes referenced, names disjoint, a top-level `run`
    that executes on its own, constraints that parse."""
    import ast

    for f in sorted((REPO / "definitions").glob("*.json")):
        d = json.loads(f.read_text())
        assert set(d) == {*DEF_KEYS, "reference"}, f.name
        for ax in d["axes"].values():
            assert set(ax) <= AXIS_KEYS[ax["type"]], f.name
            assert ax["type"] == "var" or (isinstance(ax["value"], int) and ax["value"] >= 0)
        assert not set(d["inputs"]) & set(d["outputs"]), f.name
        for t in (*d["inputs"].values(), *d["outputs"].values()):
            assert t["dtype"] in DTYPES, f.name
            assert t["shape"] is None or set(t["shape"]) <= set(d["axes"]), f.name
        for c in d["constraints"]:
            ast.parse(c, mode="eval")
        namespace: dict[str, object] = {}
        exec(d["reference"], namespace)
        assert callable(namespace["run"]), f.name


def test_workload_capture_appends_one_record_per_var_binding(tmp_path) -> None:
    """EMBER_TRACE_DUMP: one flashinfer-bench workload trace per distinct var-axis binding."""
    from ember.trace.dense import RMSNORM

    calls = []

    def rmsnorm(x, weight, eps=1e-6, *, out=None):
        calls.append(x.shape)

    traced = recording(rmsnorm, RMSNORM)
    w = torch.ones(4096, dtype=torch.bfloat16)
    with knobs.scope(trace_dir=tmp_path):
        for rows in (3, 3, 5):
            traced(torch.zeros(rows, 4096, dtype=torch.bfloat16), w)
    assert len(calls) == 3
    lines = (tmp_path / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    assert [r["workload"]["axes"] for r in recs] == [{"batch_size": 3}, {"batch_size": 5}]
    assert recs[0]["workload"]["inputs"]["eps"] == {"type": "scalar", "value": 1e-6}
    assert recs[0]["workload"]["inputs"]["x"] == {"type": "random"}
    fib = pytest.importorskip("flashinfer_bench.data")
    for r in recs:
        fib.Trace.model_validate(r)


def test_workload_capture_skips_calls_that_do_not_bind() -> None:
    from ember.trace.dense import RMSNORM

    x = torch.zeros(3, 4096)
    assert workload_record(RMSNORM, {"x": x, "weight": torch.ones(512), "eps": 1e-6}) is None


def test_trace_dump_wraps_ops_only_when_on(monkeypatch) -> None:
    """Off (the default) ``@trace`` returns the function itself (R6.2); on, a recording wrapper
    that still carries ``.trace``."""
    import ember
    from ember.trace import trace
    from ember.trace.dense import RMSNORM

    assert not hasattr(ember.rmsnorm, "__wrapped__")
    assert ember.rmsnorm.trace is RMSNORM

    def rmsnorm(x, weight, eps=1e-6):
        return x

    assert trace(RMSNORM)(rmsnorm) is rmsnorm
    monkeypatch.setenv("EMBER_TRACE_DUMP", "1")
    wrapped = trace(RMSNORM)(rmsnorm)
    assert wrapped is not rmsnorm
    assert wrapped.__wrapped__ is rmsnorm
    assert wrapped.trace is RMSNORM
