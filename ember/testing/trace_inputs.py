"""Valid random inputs for a trace template at its small sizes (the reference tests, R3.17)."""

from __future__ import annotations

import math
from typing import Any

from ember.trace import TraceTemplate

__all__ = ["random_inputs", "torch_dtype"]


def torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _page_table(sizes: dict[str, int], device: Any) -> dict[str, Any]:
    """Requests own consecutive runs of ``num_kv_indices`` shuffled pages; none is empty."""
    import torch

    batch, used, ps = sizes["batch_size"], sizes["num_kv_indices"], sizes["page_size"]
    cuts = sorted(torch.randperm(used - 1)[: batch - 1].add(1).tolist())
    indptr = torch.tensor([0, *cuts, used], dtype=torch.int32)
    last = torch.randint(1, ps + 1, (batch,), dtype=torch.int32)
    indices = torch.randperm(sizes["num_pages"])[:used].to(torch.int32)
    return {
        "kv_indptr": indptr.to(device),
        "kv_indices": indices.to(device),
        "kv_last_page_len": last.to(device),
    }


def _special(name: str, shape: tuple[int, ...], sizes: dict[str, int], device: Any) -> Any:
    """Inputs whose values have a contract (None: an ordinary random tensor)."""
    import torch

    rows = shape[0] if shape else 0
    u = torch.rand(rows, device=device)
    table: dict[str, Any] = {
        "probs": lambda: torch.softmax(torch.randn(shape, device=device) * 3, dim=-1),
        "temperature": lambda: 0.5 + u,
        "top_k": lambda: torch.randint(1, sizes.get("vocab_size", 2), (rows,), device=device).int(),
        "top_p": lambda: 0.3 + 0.6 * u,
        "min_p": lambda: 0.05 + 0.15 * u,
        "s": lambda: torch.randn(shape, device=device) * 2,
        "s_a": lambda: torch.randn(shape, device=device) * 2,
        "s_b": lambda: torch.randn(shape, device=device) * 2,
    }
    make = table.get(name)
    return None if make is None else make()


def random_inputs(template: TraceTemplate, device: Any = "cpu") -> dict[str, Any]:
    """Input name -> value at ``template.small`` sizes, satisfying each op's contract."""
    import torch

    sizes = dict(template.small)
    out: dict[str, Any] = {}
    if "kv_indptr" in template.inputs:
        out.update(_page_table(sizes, device))
    for name, spec in template.inputs.items():
        if name in out:
            continue
        if spec.shape is None:
            scalars = {"eps": 1e-6, "rope_theta": 10000.0}
            out[name] = scalars.get(name, 1.0 / math.sqrt(sizes.get("head_dim", 1)))
            continue
        shape = tuple(sizes[a] for a in spec.shape)
        value = _special(name, shape, sizes, device)
        if value is None and name == "positions":
            bound = sizes.get("max_position", 4096)
            value = torch.randint(0, bound, shape, device=device, dtype=torch.int32)
        if value is None and name == "batch_indices":
            value = torch.randint(0, sizes["batch_size"], shape, device=device, dtype=torch.int32)
        if value is None:
            value = torch.randn(shape, device=device)
        out[name] = value.to(torch_dtype(spec.dtype))
    if "batch_indices" in out:  # positions inside each request's pages
        ip = out["kv_indptr"].tolist()
        owned = [(ip[b + 1] - ip[b]) * sizes["page_size"] for b in out["batch_indices"].tolist()]
        out["positions"] = torch.tensor(
            [int(torch.randint(0, n, ())) for n in owned], dtype=torch.int32, device=device
        )
    return {name: out[name] for name in template.inputs}  # the reference's parameter order
