"""fp32 references and per-dtype tolerances for the kernel tests and the bench refcheck."""

from __future__ import annotations

from typing import Any

__all__ = ["fused_add_rmsnorm_ref", "rmsnorm_ref", "tolerances"]

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
