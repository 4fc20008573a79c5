"""Paged KV-cache utilities: append new tokens, and merge attention states by their LSE.

The cache convention is :mod:`ember.ops.decode`'s (FlashInfer's): ``[pages, 2, page_size,
kv_heads, head_dim]`` (``NHD``) or ``[pages, 2, kv_heads, page_size, head_dim]`` (``HND``), or a
``(k, v)`` pair. One module (``attention_util``, every dtype at runtime) holds both kernels
(``ember/paged.cuh``, binding ``csrc/ops/paged.cc``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from ember.api_log import api
from ember.jit import KernelSpec, build_and_load, register
from ember.jit.workspace import CSRC_DIR
from ember.ops.decode import LAYOUTS, _split_cache, _torch
from ember.trace import trace
from ember.trace.attention import APPEND_PAGED_KV_CACHE, MERGE_STATE, MERGE_STATES

__all__ = ["append_paged_kv_cache", "merge_state", "merge_states", "paged_spec"]


def paged_spec() -> KernelSpec:
    """The attention-utility module: paged-cache append and state merge (every dtype)."""
    ops = CSRC_DIR / "ops"
    return KernelSpec(
        uri="attention_util", sources=(ops / "paged.cc", ops / "paged.cu"), archs=("sm80+",)
    )


@functools.cache
def _paged() -> Any:
    return build_and_load(paged_spec())


@trace(APPEND_PAGED_KV_CACHE)
@api
def append_paged_kv_cache(  # noqa: PLR0917 (FlashInfer's signature, kept for engines)
    append_key: Any,
    append_value: Any,
    batch_indices: Any,
    positions: Any,
    kv_cache: Any,
    kv_indices: Any,
    kv_indptr: Any,
    kv_last_page_len: Any = None,
    *,
    layout: str = "NHD",
) -> None:
    """Write new tokens' K and V into their page slots of a paged KV cache, in place.

    Token ``i`` goes to request ``batch_indices[i]`` at sequence position ``positions[i]``: page
    ``kv_indices[kv_indptr[b] + pos // page_size]``, slot ``pos % page_size``. The page table
    must already hold the page (the engine allocates pages before appending); a position past the
    request's pages is not written, so nothing outside the request's pages is ever touched.

    Parameters
    ----------
    append_key, append_value:
        ``[nnz, kv_heads, head_dim]`` in the cache's dtype; last dimension contiguous.
    batch_indices, positions:
        ``[nnz]`` int32.
    kv_cache:
        ``[pages, 2, ...]`` or a ``(k, v)`` pair, as for :func:`batch_decode` (``layout``).
    kv_indices, kv_indptr:
        The page table (int32). ``kv_last_page_len`` is accepted for the usual call shape and
        not needed.

    Raises
    ------
    TypeError
        A dtype differs from the cache's, or an index tensor is not int32.
    ValueError
        Shapes, strides, layout or devices do not match.
    """
    if layout not in LAYOUTS:
        raise ValueError(
            f"ember.append_paged_kv_cache: `layout` must be one of {LAYOUTS}, got {layout!r}"
        )
    k, v = _split_cache(kv_cache, layout, "ember.append_paged_kv_cache")
    _paged().append(
        append_key,
        append_value,
        batch_indices,
        positions,
        k,
        v,
        kv_indices,
        kv_indptr,
        layout == "HND",
    )


@trace(MERGE_STATES)
@api
def merge_states(v: Any, s: Any, *, out: Any = None, out_lse: Any = None) -> tuple[Any, Any]:
    """Combine attention partial results by their log-sum-exp.

    ``v[r, i, h]`` is state ``i``'s attention output and ``s[r, i, h]`` the natural log of its
    sum of exponentiated logits (what ``batch_decode(..., return_lse=True)`` returns). The result
    is what attending over the union of the states' keys gives: ``(v_merged [rows, heads, dim],
    s_merged [rows, heads])``.

    Parameters
    ----------
    v:
        ``[rows, states, heads, dim]``, fp32/fp16/bf16, last dimension contiguous.
    s:
        ``[rows, states, heads]`` fp32.
    out, out_lse:
        Optional outputs (``[rows, heads, dim]`` in ``v``'s dtype; ``[rows, heads]`` fp32).
    """
    torch = _torch()
    if out is None:
        out = torch.empty(v.shape[0], v.shape[2], v.shape[3], dtype=v.dtype, device=v.device)
    if out_lse is None:
        out_lse = torch.empty(s.shape[0], s.shape[-1], dtype=torch.float32, device=s.device)
    _paged().merge_states(v, s, out, out_lse)
    return out, out_lse


@trace(MERGE_STATE)
@api
def merge_state(v_a: Any, s_a: Any, v_b: Any, s_b: Any) -> tuple[Any, Any]:
    """Combine two attention states (``[rows, heads, dim]`` and ``[rows, heads]`` each).

    The same as :func:`merge_states` over the pair.
    """
    torch = _torch()
    return merge_states(torch.stack((v_a, v_b), dim=1), torch.stack((s_a, s_b), dim=1))


@register("paged")
def _specs() -> Iterator[KernelSpec]:
    yield paged_spec()
