"""fp32 references and per-dtype tolerances for the kernel tests and the bench refcheck."""

from __future__ import annotations

from typing import Any

__all__ = [
    "batch_decode_ref",
    "filter_threshold_ref",
    "fused_add_rmsnorm_ref",
    "page_table",
    "rmsnorm_ref",
    "tolerances",
]

# (rtol, atol) for comparing a kernel in `dtype` against an fp32 reference rounded to `dtype`:
# about two units in the last place of the storage type.
_TOLERANCES = {
    "torch.float32": (1e-5, 1e-5),
    "torch.float16": (2e-3, 2e-3),
    "torch.bfloat16": (1.6e-2, 1.6e-2),
}


def tolerances(dtype: Any) -> tuple[float, float]:
    """(rtol, atol) for results stored in ``dtype``."""
    try:
        return _TOLERANCES[str(dtype)]
    except KeyError:
        raise KeyError(f"no tolerance for dtype {dtype}; known: {sorted(_TOLERANCES)}") from None


def rmsnorm_ref(x: Any, weight: Any, eps: float = 1e-6) -> Any:
    """``x * rsqrt(mean(x^2) + eps) * weight`` in fp32, returned in ``x``'s dtype."""
    xf = x.float()
    rstd = (xf.pow(2).mean(dim=-1, keepdim=True) + eps).rsqrt()
    return (xf * rstd * weight.float()).to(x.dtype)


def fused_add_rmsnorm_ref(x: Any, residual: Any, weight: Any, eps: float = 1e-6) -> tuple[Any, Any]:
    """(new x, new residual): the sum is rounded to the residual's dtype, then normalised."""
    new_residual = (x.float() + residual.float()).to(residual.dtype)
    return rmsnorm_ref(new_residual, weight, eps), new_residual


def page_table(lengths: Any, page_size: int) -> tuple[Any, Any]:
    """``(kv_indptr, kv_last_page_len)`` (CPU int32) for requests of ``lengths`` tokens.

    Request ``b`` owns ``ceil(lengths[b] / page_size)`` pages (none when empty, last-page length
    0); pages are numbered in request order, so ``kv_indptr[-1]`` is the page count. Pair it with
    any ``kv_indices`` of that many pages (shuffled, for tests and benchmarks).
    """
    import torch

    indptr, last = [0], []
    for n in lengths:
        pages = (n + page_size - 1) // page_size
        indptr.append(indptr[-1] + pages)
        last.append(n - (pages - 1) * page_size if pages else 0)
    return torch.tensor(indptr, dtype=torch.int32), torch.tensor(last, dtype=torch.int32)


def batch_decode_ref(  # noqa: PLR0917 (mirrors the page-table convention)
    q: Any,
    k_cache: Any,
    v_cache: Any,
    kv_indptr: Any,
    kv_indices: Any,
    kv_last_page_len: Any,
    *,
    layout: str = "NHD",
    sm_scale: float | None = None,
    logits_soft_cap: float = 0.0,
    window_left: int = -1,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
) -> tuple[Any, Any]:
    """Decode attention in fp64 over a paged cache: ``(out [B, Hq, D] fp32, lse [B, Hq])``.

    ``k_cache``/``v_cache`` are ``[pages, page_size, kv_heads, D]`` (NHD) or ``[pages, kv_heads,
    page_size, D]`` (HND); the LSE is the natural log of the sum of exponentiated logits (-inf for
    an empty request, whose output is 0).
    """
    import math

    import torch

    batch, hq, dim = q.shape
    scale = 1.0 / math.sqrt(dim) if sm_scale is None else sm_scale
    ip = kv_indptr.tolist()
    last = kv_last_page_len.tolist()
    out = torch.zeros(batch, hq, dim, dtype=torch.float32, device=q.device)
    lse = torch.full((batch, hq), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(batch):
        pages = kv_indices[ip[b] : ip[b + 1]].long()
        if pages.numel() == 0:
            continue
        k = k_cache[pages].double() * k_scale
        v = v_cache[pages].double() * v_scale
        if layout == "HND":  # -> [pages, page_size, kv_heads, D]
            k, v = k.transpose(1, 2), v.transpose(1, 2)
        n = (pages.numel() - 1) * k.shape[1] + last[b]
        k = k.reshape(-1, k.shape[2], dim)[:n]  # [tokens, kv_heads, D]
        v = v.reshape(-1, v.shape[2], dim)[:n]
        first = max(0, n - 1 - window_left) if window_left >= 0 else 0
        k, v = k[first:], v[first:]
        group = hq // k.shape[1]
        k = k.repeat_interleave(group, dim=1)  # [tokens, hq, D]
        v = v.repeat_interleave(group, dim=1)
        logits = torch.einsum("hd,thd->ht", q[b].double(), k) * scale
        if logits_soft_cap > 0:
            logits = logits_soft_cap * torch.tanh(logits / logits_soft_cap)
        lse[b] = torch.logsumexp(logits, dim=-1).float()
        out[b] = torch.einsum("ht,thd->hd", torch.softmax(logits, dim=-1), v).float()
    return out, lse


def _per_row(value: Any, rows: int, device: Any, dtype: Any, off: float) -> Any:
    import torch

    if value is None:
        return torch.full((rows,), off, dtype=dtype, device=device)
    if isinstance(value, torch.Tensor):
        return value.to(dtype=dtype, device=device)
    return torch.full((rows,), value, dtype=dtype, device=device)


def filter_threshold_ref(
    values: Any, *, top_k: Any = None, top_p: Any = None, min_p: Any = None, mass: bool = True
) -> Any:
    """The per-row threshold of ember's sampling filters: keep ``values >= threshold`` (fp32).

    ``values``: fp32 ``[rows, vocab]`` (probabilities, or logits for a top-k mask with
    ``mass=False``). The same definition as the kernel, exactly: top-k keeps the ``k`` largest
    (ties at the ``k``-th value all kept; ``k <= 0`` or ``>= vocab``: off); top-p then keeps the
    largest values whose mass first reaches ``ceil(top_p * mass(kept so far))`` in the kernel's
    fixed point (an element's mass ``trunc(float32(x * float32(2^40 / row max)))``; ``>= 1``:
    off), where without top-k the mass kept so far is the row's fp64 sum times that scale,
    truncated (at least the elements' masses added up); min-p keeps ``>= float32(min_p * row
    max)`` (``<= 0``: off). Returns fp32 ``[rows]`` (``-inf``: keep all).
    """
    import math

    import torch

    rows, vocab = values.shape
    dev = values.device
    thr = torch.full((rows,), float("-inf"), dtype=torch.float32, device=dev)
    ks = _per_row(top_k, rows, dev, torch.int64, 0)
    ps = _per_row(top_p, rows, dev, torch.float32, 1.0)
    ms = _per_row(min_p, rows, dev, torch.float32, 0.0)
    sorted_v = values.sort(dim=-1, descending=True).values
    use_k = (ks > 0) & (ks < vocab)
    kth = sorted_v.gather(1, (ks.clamp(1, vocab) - 1)[:, None])[:, 0]
    thr = torch.where(use_k, kth, thr)
    if not mass:
        return thr
    row_max = values.max(-1).values
    scale = torch.tensor(2.0**40, dtype=torch.float32, device=dev) / row_max
    q = torch.trunc(sorted_v * scale[:, None]).to(torch.int64)
    q = torch.where(sorted_v >= thr[:, None], q, torch.zeros_like(q))
    cum = q.cumsum(-1)
    for r in range(rows):
        p = float(ps[r])
        if not p < 1.0 or not float(row_max[r]) > 0:
            continue
        total = int(cum[r, -1])
        if not bool(use_k[r]):  # the row's fp64 sum in fixed point (radix_select's row_mass)
            total = max(total, math.trunc(float(values[r].double().sum()) * float(scale[r])))
        need = min(max(math.ceil(p * float(total)), 1), total)
        idx = int(torch.searchsorted(cum[r], torch.tensor([need], device=dev)))
        thr[r] = torch.maximum(thr[r], sorted_v[r, idx])
    use_m = (ms > 0) & (row_max > 0)
    m_thr = torch.minimum(ms, torch.ones_like(ms)) * row_max
    return torch.where(use_m, torch.maximum(thr, m_thr), thr)
