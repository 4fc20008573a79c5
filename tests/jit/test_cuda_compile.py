"""CUDA modules compile on a machine with no GPU for an explicit arch list (R2.12-R2.15, R4.6)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ember.config import knobs
from ember.errors import ToolchainError, UnsupportedError
from ember.jit import KernelSpec, build_and_load, resolve
from ember.jit.workspace import CSRC_DIR
from ember.ops import toy

from .helpers import make_wrapper

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _gencodes(entry: Path) -> list[str]:
    return re.findall(r"-gencode=\S+", (entry / "build.ninja").read_text())


def test_cuda_toy_compiles_for_90a_with_exact_gencode() -> None:
    with knobs.scope(cuda_arch_list=("9.0a",)):
        module = build_and_load(toy.cuda_spec())
        entry = resolve(toy.cuda_spec()).entry
    assert entry is not None
    assert _gencodes(entry) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert module.get_function("axpy") is not None


def test_arch_list_changes_key_and_keeps_suffixes_exactly() -> None:
    with knobs.scope(cuda_arch_list=("9.0a",)):
        k1 = resolve(toy.cuda_spec()).key
    with knobs.scope(cuda_arch_list=("9.0",)):
        k2 = resolve(toy.cuda_spec()).key
    with knobs.scope(cuda_arch_list=("8.0", "9.0a")):
        r = resolve(toy.cuda_spec())
    assert len({k1, k2, r.key}) == 3
    assert [str(a) for a in r.targets] == ["8.0", "9.0a"]


def test_spec_for_another_family_fails_before_compiling(tmp_path: Path) -> None:
    wrapper = make_wrapper(tmp_path / "w", real="nvcc")
    spec = KernelSpec(
        uri="toy_sm100_only", sources=(CSRC_DIR / "ops" / "toy.cu",), archs=("sm100a",)
    )
    with (
        knobs.scope(cuda_arch_list=("9.0a",), nvcc=str(wrapper.path)),
        pytest.raises(UnsupportedError) as info,
    ):
        build_and_load(spec)
    msg = str(info.value)
    assert "sm100a" in msg and "9.0a" in msg and "EMBER_CUDA_ARCH_LIST" in msg
    assert wrapper.calls() == [], "nothing may be compiled for an unsupported family"
    assert not (knobs.cache_dir / "jit").exists()


def test_no_gpu_and_no_arch_list_is_a_clear_error() -> None:
    from ember.jit.arch import detect_gpu_archs

    if detect_gpu_archs():
        pytest.skip("a GPU is present: targets come from it")
    with pytest.raises(ToolchainError, match="EMBER_CUDA_ARCH_LIST"):
        build_and_load(toy.cuda_spec())
