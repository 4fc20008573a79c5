"""Test support: the one capability helper, fp32 references and per-dtype tolerances (R4.2-R4.6).

``requires`` is the only place that decides whether a test can run on the hardware at hand. It
skips — never fails — when the GPU is missing or too old; it never skips a supported GPU.
Compile-only coverage of every supported arch runs on CPU through ``EMBER_CUDA_ARCH_LIST``.
"""

from __future__ import annotations

from ember.testing.capability import FEATURES, device_capability, requires
from ember.testing.reference import (
    batch_decode_ref,
    fused_add_rmsnorm_ref,
    page_table,
    rmsnorm_ref,
    tolerances,
)

__all__ = [
    "FEATURES",
    "batch_decode_ref",
    "device_capability",
    "fused_add_rmsnorm_ref",
    "page_table",
    "requires",
    "rmsnorm_ref",
    "tolerances",
]
