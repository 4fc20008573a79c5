"""Trace templates of decode attention and the paged-cache utilities (R3.14-R3.16).

``batch_decode`` is a plan/run API: its template is attached to ``batch_decode`` (what runs,
R3.15); the page-table inputs are arguments of ``plan_batch_decode`` carried by the plan, so the
template names ``plan_batch_decode`` in ``via`` and ``plan`` in ``opaque``.
``plan_batch_decode`` itself launches nothing and has no definition (see ``EXEMPT`` in
:mod:`ember.trace.templates`).
"""

from __future__ import annotations

from typing import Any

from ember.trace import Axis, Model, Tensor, TraceTemplate

__all__ = [
    "APPEND_PAGED_KV_CACHE",
    "BATCH_DECODE",
    "MERGE_STATE",
    "MERGE_STATES",
    "PAGE_SIZE",
    "SINGLE_DECODE",
]

PAGE_SIZE = 16
"""The page size of the decode and append examples (vLLM's and SGLang's common choice)."""


def batch_decode_ref(  # noqa: PLR0917 (the definition's inputs)
    q: Any, kv_cache: Any, kv_indptr: Any, kv_indices: Any, kv_last_page_len: Any, sm_scale: float
) -> tuple[Any, Any]:
    import torch

    batch, num_qo_heads, head_dim = q.shape
    page_size, num_kv_heads = kv_cache.shape[2], kv_cache.shape[3]
    out = torch.zeros(batch, num_qo_heads, head_dim, dtype=torch.float32, device=q.device)
    lse = torch.full((batch, num_qo_heads), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(batch):
        pages = kv_indices[int(kv_indptr[b]) : int(kv_indptr[b + 1])].long()
        if pages.numel() == 0:
            continue
        n = (pages.numel() - 1) * page_size + int(kv_last_page_len[b])
        k = kv_cache[pages, 0].float().reshape(-1, num_kv_heads, head_dim)[:n]
        v = kv_cache[pages, 1].float().reshape(-1, num_kv_heads, head_dim)[:n]
        group = num_qo_heads // num_kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        logits = torch.einsum("hd,thd->ht", q[b].float(), k) * sm_scale
        lse[b] = torch.logsumexp(logits, dim=-1)
        out[b] = torch.einsum("ht,thd->hd", torch.softmax(logits, dim=-1), v)
    return out.to(q.dtype), lse


def single_decode_ref(q: Any, k: Any, v: Any, sm_scale: float) -> Any:
    import torch

    group = q.shape[0] // k.shape[1]
    kf = k.float().repeat_interleave(group, dim=1)
    vf = v.float().repeat_interleave(group, dim=1)
    logits = torch.einsum("hd,thd->ht", q.float(), kf) * sm_scale
    return torch.einsum("ht,thd->hd", torch.softmax(logits, dim=-1), vf).to(q.dtype)


def append_paged_kv_cache_ref(  # noqa: PLR0917 (the op's signature)
    append_key: Any,
    append_value: Any,
    batch_indices: Any,
    positions: Any,
    kv_cache: Any,
    kv_indices: Any,
    kv_indptr: Any,
    kv_last_page_len: Any,
) -> Any:
    page_size = kv_cache.shape[2]
    out = kv_cache.clone()
    for i in range(append_key.shape[0]):
        b, pos = int(batch_indices[i]), int(positions[i])
        start, end = int(kv_indptr[b]), int(kv_indptr[b + 1])
        if start + pos // page_size >= end:
            continue  # past the request's pages: ember writes nothing
        page = int(kv_indices[start + pos // page_size])
        out[page, 0, pos % page_size] = append_key[i]
        out[page, 1, pos % page_size] = append_value[i]
    return out


def merge_states_ref(v: Any, s: Any) -> tuple[Any, Any]:
    import torch

    s_merged = torch.logsumexp(s.float(), dim=1)
    weight = torch.exp(s.float() - s_merged[:, None]).nan_to_num(0.0)
    v_merged = (weight[..., None] * v.float()).sum(dim=1)
    return v_merged.to(v.dtype), s_merged


def merge_state_ref(v_a: Any, s_a: Any, v_b: Any, s_b: Any) -> tuple[Any, Any]:
    import torch

    s = torch.stack((s_a.float(), s_b.float()), dim=1)
    v = torch.stack((v_a.float(), v_b.float()), dim=1)
    s_merged = torch.logsumexp(s, dim=1)
    weight = torch.exp(s - s_merged[:, None]).nan_to_num(0.0)
    return (weight[..., None] * v).sum(dim=1).to(v_a.dtype), s_merged


def _heads(m: Model) -> dict[str, int]:
    return {"num_qo_heads": m.num_qo_heads, "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


def _paged(m: Model) -> dict[str, int]:
    return {**_heads(m), "two": 2, "page_size": PAGE_SIZE}


_HEADS = {
    "num_qo_heads": Axis("const", "Query heads."),
    "num_kv_heads": Axis("const", "Key/value heads (GQA groups)."),
    "head_dim": Axis("const", "Head dimension."),
}
_GQA = ("num_qo_heads % num_kv_heads == 0",)
_SCALE = Tensor(None, "float32", "Logit scale, usually 1 / sqrt(head_dim).")
_CACHE = ("num_pages", "two", "page_size", "num_kv_heads", "head_dim")
_PAGE_TABLE = {
    "kv_indptr": Tensor(("batch_size_plus_1",), "int32", "Request b owns pages [indptr[b], +1)."),
    "kv_indices": Tensor(("num_kv_indices",), "int32", "Page ids, request by request."),
    "kv_last_page_len": Tensor(("batch_size",), "int32", "Tokens in each request's last page."),
}
_PAGED_AXES = {
    "num_pages": Axis("var", "Pages in the cache."),
    "two": Axis("const", "K then V."),
    "page_size": Axis("const", "Tokens per page."),
    "num_kv_indices": Axis("var", "Pages used by the batch."),
    "batch_size_plus_1": Axis("var", "batch_size + 1."),
}
_PAGED_SMALL = {
    "num_pages": 12, "two": 2, "page_size": PAGE_SIZE, "num_kv_indices": 7,
    "batch_size_plus_1": 4, "batch_size": 3,
}  # fmt: skip

BATCH_DECODE = TraceTemplate(
    op="batch_decode",
    name="batch_decode_h{num_qo_heads}_kv{num_kv_heads}_d{head_dim}_ps{page_size}",
    op_type="gqa_paged_decode",
    description="One query token per request attends over its pages of a paged KV cache (NHD"
    " layout [pages, 2, page_size, kv_heads, head_dim]); returns the output and the natural-log"
    " LSE. Plan/run: ember takes the page table through plan_batch_decode.",
    axes={"batch_size": Axis("var", "Requests decoded."), **_HEADS, **_PAGED_AXES},
    inputs={
        "q": Tensor(("batch_size", "num_qo_heads", "head_dim"), "bfloat16"),
        "kv_cache": Tensor(_CACHE, "bfloat16"),
        **_PAGE_TABLE,
        "sm_scale": _SCALE,
    },
    outputs={
        "out": Tensor(("batch_size", "num_qo_heads", "head_dim"), "bfloat16"),
        "lse": Tensor(("batch_size", "num_qo_heads"), "float32", "-inf for an empty request."),
    },
    constraints=(*_GQA, "two == 2", "batch_size_plus_1 == batch_size + 1"),
    reference=batch_decode_ref,
    bind=_paged,
    via=("plan_batch_decode",),
    opaque=("plan",),
    untraced=("return_lse",),  # the definition always outputs the LSE
    small={**_PAGED_SMALL, "num_qo_heads": 8, "num_kv_heads": 2, "head_dim": 128},
)

SINGLE_DECODE = TraceTemplate(
    op="single_decode",
    name="single_decode_h{num_qo_heads}_kv{num_kv_heads}_d{head_dim}",
    op_type="gqa_decode",
    description="One query token attends over one request's contiguous K and V (NHD).",
    axes={"kv_len": Axis("var", "Tokens in the cache."), **_HEADS},
    inputs={
        "q": Tensor(("num_qo_heads", "head_dim"), "bfloat16"),
        "k": Tensor(("kv_len", "num_kv_heads", "head_dim"), "bfloat16"),
        "v": Tensor(("kv_len", "num_kv_heads", "head_dim"), "bfloat16"),
        "sm_scale": _SCALE,
    },
    outputs={"out": Tensor(("num_qo_heads", "head_dim"), "bfloat16")},
    constraints=_GQA,
    reference=single_decode_ref,
    bind=_heads,
    # the reference: NHD, no soft cap, no window, unscaled KV; the output only
    untraced=("layout", "logits_soft_cap", "window_left", "k_scale", "v_scale", "return_lse"),
    small={"kv_len": 37, "num_qo_heads": 8, "num_kv_heads": 2, "head_dim": 128},
)

APPEND_PAGED_KV_CACHE = TraceTemplate(
    op="append_paged_kv_cache",
    name="append_paged_kv_cache_kv{num_kv_heads}_d{head_dim}_ps{page_size}",
    op_type="kv_cache_append",
    description="Writes each new token's K and V into its page slot (page kv_indices[kv_indptr[b]"
    " + pos // page_size], slot pos % page_size); ember updates kv_cache in place, the reference"
    " returns the updated copy.",
    axes={
        "nnz": Axis("var", "Tokens appended."),
        "batch_size": Axis("var", "Requests."),
        "num_kv_heads": Axis("const", "Key/value heads."),
        "head_dim": Axis("const", "Head dimension."),
        **_PAGED_AXES,
    },
    inputs={
        "append_key": Tensor(("nnz", "num_kv_heads", "head_dim"), "bfloat16"),
        "append_value": Tensor(("nnz", "num_kv_heads", "head_dim"), "bfloat16"),
        "batch_indices": Tensor(("nnz",), "int32", "Request of each token."),
        "positions": Tensor(("nnz",), "int32", "Sequence position of each token."),
        "kv_cache": Tensor(_CACHE, "bfloat16"),
        "kv_indices": _PAGE_TABLE["kv_indices"],
        "kv_indptr": _PAGE_TABLE["kv_indptr"],
        "kv_last_page_len": _PAGE_TABLE["kv_last_page_len"],
    },
    outputs={"kv_cache_out": Tensor(_CACHE, "bfloat16", "kv_cache after the append (in place)")},
    constraints=("two == 2", "batch_size_plus_1 == batch_size + 1"),
    reference=append_paged_kv_cache_ref,
    bind=lambda m: {
        "num_kv_heads": m.num_kv_heads,
        "head_dim": m.head_dim,
        "two": 2,
        "page_size": PAGE_SIZE,
    },
    tags=("inplace",),
    untraced=("layout",),  # the reference's cache is NHD
    small={**_PAGED_SMALL, "nnz": 5, "num_kv_heads": 2, "head_dim": 64},
)

_MERGE_AXES = {
    "num_tokens": Axis("var", "Rows (query tokens)."),
    "num_heads": Axis("const", "Query heads."),
    "head_dim": Axis("const", "Head dimension."),
}
_MERGE_OUT = {
    "v_merged": Tensor(("num_tokens", "num_heads", "head_dim"), "bfloat16"),
    "s_merged": Tensor(("num_tokens", "num_heads"), "float32", "Natural-log LSE of the union."),
}
_MERGE_SMALL = {"num_tokens": 5, "num_states": 3, "num_heads": 4, "head_dim": 64}


def _merge_bind(m: Model) -> dict[str, int]:
    return {"num_heads": m.num_qo_heads, "head_dim": m.head_dim}


MERGE_STATES = TraceTemplate(
    op="merge_states",
    name="merge_states_h{num_heads}_d{head_dim}",
    op_type="attention_state_merge",
    description="Combines attention partial results by their natural-log LSE into what attending"
    " over the union of their keys gives.",
    axes={**_MERGE_AXES, "num_states": Axis("var", "Partial states per row.")},
    inputs={
        "v": Tensor(("num_tokens", "num_states", "num_heads", "head_dim"), "bfloat16"),
        "s": Tensor(("num_tokens", "num_states", "num_heads"), "float32"),
    },
    outputs=_MERGE_OUT,
    reference=merge_states_ref,
    bind=_merge_bind,
    small=_MERGE_SMALL,
)

MERGE_STATE = TraceTemplate(
    op="merge_state",
    name="merge_state_h{num_heads}_d{head_dim}",
    op_type="attention_state_merge",
    description="Combines two attention states by their natural-log LSE.",
    axes=_MERGE_AXES,
    inputs={
        "v_a": Tensor(("num_tokens", "num_heads", "head_dim"), "bfloat16"),
        "s_a": Tensor(("num_tokens", "num_heads"), "float32"),
        "v_b": Tensor(("num_tokens", "num_heads", "head_dim"), "bfloat16"),
        "s_b": Tensor(("num_tokens", "num_heads"), "float32"),
    },
    outputs=_MERGE_OUT,
    reference=merge_state_ref,
    bind=_merge_bind,
    small=_MERGE_SMALL,
)
