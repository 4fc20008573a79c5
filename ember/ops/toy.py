"""Toy family: ``axpy`` (``out = a + alpha * b``) as a host module and a CUDA module.

It exists to exercise the JIT lifecycle end to end — on a machine with no GPU through the host
module, and as a compile-only CUDA module — and to show the shape every family copies:
device code (``csrc/include/ember/toy.cuh``) → binding (``csrc/ops/toy.cu``) → spec → cached
getter → public function. It is not part of the public API.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR

__all__ = ["axpy", "cuda_spec", "host_spec"]


def host_spec() -> KernelSpec:
    """The host (CPU) axpy module."""
    return KernelSpec(
        uri="toy_axpy_host", sources=(CSRC_DIR / "ops" / "toy_host.cc",), toolchain="host"
    )


def cuda_spec() -> KernelSpec:
    """The CUDA axpy module; any GPU from sm_75 on."""
    return KernelSpec(uri="toy_axpy_cuda", sources=(CSRC_DIR / "ops" / "toy.cu",), archs=("sm75+",))


@register("toy")
def _specs() -> Iterator[KernelSpec]:
    yield host_spec()
    yield cuda_spec()


@functools.cache
def _module(device_type: str) -> Any:
    return build_and_load(host_spec() if device_type == "cpu" else cuda_spec())


@api(name="ember.toy.axpy")
def axpy(a: Any, b: Any, *, alpha: float = 1.0, out: Any = None) -> Any:
    """``out = a + alpha * b`` for 1-D contiguous float32 tensors on one device.

    Raises
    ------
    TypeError
        A tensor is not float32.
    ValueError
        Shapes differ, a tensor is not 1-D/contiguous, or tensors are on different devices.
    """
    if out is None:
        import torch

        out = torch.empty_like(a)
    _module(a.device.type).axpy(a, b, float(alpha), out)
    return out
