"""KernelSpec validation, the build manifest, the registry and the version source."""

from __future__ import annotations

import ast
import importlib.metadata
import re
from pathlib import Path

import pytest

import ember
from ember.jit import KernelSpec, all_specs
from ember.jit.manifest import BuildEdge, BuildPlan, NinjaRule, render
from ember.jit.ninja import plan_parallelism

REPO = Path(__file__).resolve().parents[2]


def test_version_single_source() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'version = { attr = "ember._version.__version__" }' in pyproject
    # setuptools reads the attribute statically; it must be a literal equal to ember.__version__.
    tree = ast.parse((REPO / "ember" / "_version.py").read_text())
    literal = next(
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in n.targets)
    )  # fmt: skip
    assert literal == ember.__version__
    try:
        installed = importlib.metadata.version("ember-kernels")
    except importlib.metadata.PackageNotFoundError:
        return  # NOTE: run from a checkout on PYTHONPATH (the GPU host): no metadata to compare
    assert installed == ember.__version__


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(uri="bad uri", sources=("x.cc",), toolchain="host"), "uri"),
        (dict(uri="m", sources=("x.cu",), toolchain="cuda"), "arch families"),
        (dict(uri="m", sources=("x.cc",), toolchain="host", archs=("sm80+",)), "must not list"),
        (dict(uri="m", sources=(), toolchain="host"), "no sources"),
        (dict(uri="m", sources=("x.cc",), toolchain="rocm"), "toolchain"),
    ],
)
def test_spec_rejects_bad_fields(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        KernelSpec(**kwargs)  # type: ignore[arg-type]


def test_spec_normalises_params_so_equal_specs_hash_equal() -> None:
    a = KernelSpec(uri="m", sources=("x.cc",), toolchain="host", params={"b": 1, "a": "x"})
    b = KernelSpec(
        uri="m", sources=(Path("x.cc"),), toolchain="host", params=(("a", "x"), ("b", 1))
    )
    assert a == b and hash(a) == hash(b)


def test_manifest_renders_exact_edges() -> None:
    plan = BuildPlan(
        variables=(("cxx", "g++"),),
        rules=(NinjaRule("cxx", "$cxx -c $in -o $out", "cxx $out"),),
        edges=(BuildEdge(("a.o",), "cxx", ("/src dir/a.cc",)),),
        output="a.o",
    )
    text = render(plan)
    assert "build a.o: cxx /src$ dir/a.cc" in text
    assert re.search(r"^default a\.o$", text, re.M)


def test_parallelism_is_bounded_by_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import ember.jit.ninja as nj
    from ember.config import knobs

    monkeypatch.setattr(nj, "available_memory_gb", lambda: 9.0)
    monkeypatch.setattr(nj, "_cpu_count", lambda: 64)
    with knobs.scope(compile_mem_gb=2.0):
        assert plan_parallelism(units=100, threads=4) == 1  # 9 // (4 * 2)
        assert plan_parallelism(units=100, threads=1) == 4
        assert plan_parallelism(units=2, threads=1) == 2
    with knobs.scope(max_jobs=3):
        assert plan_parallelism(units=100, threads=1) == 3


def test_registry_lists_toy_specs_with_unique_uris() -> None:
    uris = [s.uri for s in all_specs()]
    assert {"toy_axpy_host", "toy_axpy_cuda"} <= set(uris)
    assert len(uris) == len(set(uris))
    assert [s.uri for s in all_specs("toy_axpy_h*")] == ["toy_axpy_host"]
