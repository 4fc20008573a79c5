"""Trace templates of the row-wise ops: gated activations, RMSNorm, RoPE (R3.14, R3.16).

Every reference is self-contained (imports inside): its source becomes a definition's ``run``.
"""

from __future__ import annotations

from typing import Any

from ember.trace import Axis, Model, Tensor, TraceTemplate

__all__ = [
    "APPLY_ROPE",
    "APPLY_ROPE_",
    "APPLY_ROPE_COS_SIN",
    "APPLY_ROPE_COS_SIN_",
    "FUSED_ADD_RMSNORM",
    "GELU_AND_MUL",
    "GELU_TANH_AND_MUL",
    "RMSNORM",
    "SILU_AND_MUL",
]

# --- gated activations --------------------------------------------------------------------


def silu_and_mul_ref(x: Any) -> Any:
    import torch

    d = x.shape[-1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def gelu_and_mul_ref(x: Any) -> Any:
    import torch

    d = x.shape[-1] // 2
    xf = x.float()
    return (torch.nn.functional.gelu(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def gelu_tanh_and_mul_ref(x: Any) -> Any:
    import torch

    d = x.shape[-1] // 2
    xf = x.float()
    gate = torch.nn.functional.gelu(xf[..., :d], approximate="tanh")
    return (gate * xf[..., d:]).to(x.dtype)


def _act(op: str, act: str, ref: Any) -> TraceTemplate:
    return TraceTemplate(
        op=op,
        name=f"{op}_i{{intermediate_size}}",
        op_type="gated_activation",
        description=f"out = {act}(x[:, :d]) * x[:, d:] (the fused gate/up projection of an MLP),"
        " computed in fp32 and stored in x's dtype.",
        axes={
            "num_tokens": Axis("var", "Tokens in the batch."),
            "intermediate_size": Axis("const", "MLP intermediate size d."),
            "gate_up_size": Axis("const", "Width of the fused gate/up projection, 2 * d."),
        },
        inputs={"x": Tensor(("num_tokens", "gate_up_size"), "bfloat16", "gate then up halves")},
        outputs={"out": Tensor(("num_tokens", "intermediate_size"), "bfloat16")},
        constraints=("gate_up_size == 2 * intermediate_size",),
        reference=ref,
        bind=lambda m: {
            "intermediate_size": m.intermediate_size,
            "gate_up_size": 2 * m.intermediate_size,
        },
        small={"num_tokens": 5, "intermediate_size": 64, "gate_up_size": 128},
    )


SILU_AND_MUL = _act("silu_and_mul", "silu", silu_and_mul_ref)
GELU_AND_MUL = _act("gelu_and_mul", "gelu (erf)", gelu_and_mul_ref)
GELU_TANH_AND_MUL = _act("gelu_tanh_and_mul", "gelu (tanh approximation)", gelu_tanh_and_mul_ref)

# --- RMSNorm --------------------------------------------------------------------------------


def rmsnorm_ref(x: Any, weight: Any, eps: float) -> Any:
    import torch

    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def fused_add_rmsnorm_ref(x: Any, residual: Any, weight: Any, eps: float) -> tuple[Any, Any]:
    import torch

    residual_out = (x.float() + residual.float()).to(residual.dtype)
    rf = residual_out.float()
    rstd = torch.rsqrt(rf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (rf * rstd * weight.float()).to(x.dtype), residual_out


def _hidden(m: Model) -> dict[str, int]:
    return {"hidden_size": m.hidden_size}


_NORM_AXES = {
    "batch_size": Axis("var", "Rows (tokens) normalised."),
    "hidden_size": Axis("const", "Model hidden size."),
}
_NORM_SMALL = {"batch_size": 3, "hidden_size": 256}
_EPS = Tensor(None, "float32", "Added to the mean square before the reciprocal square root.")

RMSNORM = TraceTemplate(
    op="rmsnorm",
    name="rmsnorm_h{hidden_size}",
    op_type="rmsnorm",
    description="out = x * rsqrt(mean(x^2) + eps) * weight per row, in fp32, stored in x's dtype.",
    axes=_NORM_AXES,
    inputs={
        "x": Tensor(("batch_size", "hidden_size"), "bfloat16"),
        "weight": Tensor(("hidden_size",), "bfloat16"),
        "eps": _EPS,
    },
    outputs={"out": Tensor(("batch_size", "hidden_size"), "bfloat16")},
    reference=rmsnorm_ref,
    bind=_hidden,
    small=_NORM_SMALL,
)

FUSED_ADD_RMSNORM = TraceTemplate(
    op="fused_add_rmsnorm_",
    name="fused_add_rmsnorm_h{hidden_size}",
    op_type="rmsnorm",
    description="residual += x (rounded to residual's dtype), then x = rmsnorm(residual) * weight;"
    " ember writes both in place, the reference returns them.",
    axes=_NORM_AXES,
    inputs={
        "x": Tensor(("batch_size", "hidden_size"), "bfloat16"),
        "residual": Tensor(("batch_size", "hidden_size"), "bfloat16"),
        "weight": Tensor(("hidden_size",), "bfloat16"),
        "eps": _EPS,
    },
    outputs={
        "x_out": Tensor(("batch_size", "hidden_size"), "bfloat16", "the new x (in place)"),
        "residual_out": Tensor(("batch_size", "hidden_size"), "bfloat16", "in place"),
    },
    reference=fused_add_rmsnorm_ref,
    bind=_hidden,
    tags=("inplace",),
    small=_NORM_SMALL,
)

# --- RoPE ---------------------------------------------------------------------------------


def apply_rope_ref(q: Any, k: Any, positions: Any, rope_theta: float) -> tuple[Any, Any]:
    import torch

    dim = q.shape[-1]
    exponent = torch.arange(0, dim, 2, dtype=torch.float64, device=q.device) / dim
    inv_freq = 1.0 / (rope_theta**exponent)
    angles = positions.double()[:, None] * inv_freq[None, :]
    cos = angles.cos().float()[:, None, :]
    sin = angles.sin().float()[:, None, :]

    def rotate(t: Any) -> Any:
        tf = t.float()
        a, b = tf[..., : dim // 2], tf[..., dim // 2 :]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).to(t.dtype)

    return rotate(q), rotate(k)


def apply_rope_cos_sin_ref(q: Any, k: Any, positions: Any, cos_sin_cache: Any) -> tuple[Any, Any]:
    import torch

    half = cos_sin_cache.shape[-1] // 2
    rows = cos_sin_cache[positions.long()].float()
    cos, sin = rows[:, None, :half], rows[:, None, half:]

    def rotate(t: Any) -> Any:
        tf = t.float()
        a, b = tf[..., :half], tf[..., half:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).to(t.dtype)

    return rotate(q), rotate(k)


def _heads(m: Model) -> dict[str, int]:
    return {"num_qo_heads": m.num_qo_heads, "num_kv_heads": m.num_kv_heads, "head_dim": m.head_dim}


_ROPE_AXES = {
    "num_tokens": Axis("var", "Tokens rotated."),
    "num_qo_heads": Axis("const", "Query heads."),
    "num_kv_heads": Axis("const", "Key heads."),
    "head_dim": Axis("const", "Head dimension, all of it rotated (NeoX pairs i, i + d/2)."),
}
_QK_OUT = {
    "q_out": Tensor(("num_tokens", "num_qo_heads", "head_dim"), "bfloat16"),
    "k_out": Tensor(("num_tokens", "num_kv_heads", "head_dim"), "bfloat16"),
}
_QK_IN = {
    "q": Tensor(("num_tokens", "num_qo_heads", "head_dim"), "bfloat16"),
    "k": Tensor(("num_tokens", "num_kv_heads", "head_dim"), "bfloat16"),
    "positions": Tensor(("num_tokens",), "int32", "Position of each token, >= 0."),
}
_ROPE_SMALL = {"num_tokens": 4, "num_qo_heads": 4, "num_kv_heads": 2, "head_dim": 64}


def _stem(op: str) -> str:
    """``apply_rope_`` -> ``apply_rope_inplace``: an in-place variant's definitions keep apart."""
    return op.rstrip("_") + "_inplace" if op.endswith("_") else op


def _rope(op: str, inplace: bool) -> TraceTemplate:
    return TraceTemplate(
        op=op,
        name=_stem(op) + "_h{num_qo_heads}_kv{num_kv_heads}_d{head_dim}",
        op_type="rope",
        description="NeoX-style rotary embedding of q and k, angles position * rope_theta^(-2i/d)"
        " computed in fp64 and applied in fp32" + (", in place." if inplace else "."),
        axes=_ROPE_AXES,
        inputs={**_QK_IN, "rope_theta": Tensor(None, "float32", "Base of the frequencies.")},
        outputs=_QK_OUT,
        reference=apply_rope_ref,
        bind=_heads,
        tags=("inplace",) if inplace else (),
        via=("apply_rope",),
        # the reference rotates all of head_dim, NeoX pairs, unscaled frequencies
        untraced=("rotary_dim", "interleave", "rope_scale", "llama31_scaling"),
        small=_ROPE_SMALL,
    )


def _rope_cos_sin(op: str, inplace: bool) -> TraceTemplate:
    return TraceTemplate(
        op=op,
        name=_stem(op) + "_h{num_qo_heads}_kv{num_kv_heads}_d{head_dim}",
        op_type="rope",
        description="NeoX-style rotary embedding of q and k with angles read from a cos/sin cache"
        " (cos of the d/2 pairs, then their sin), applied in fp32"
        + (", in place." if inplace else "."),
        axes={**_ROPE_AXES, "max_position": Axis("var", "Rows of the cos/sin cache.")},
        inputs={
            **_QK_IN,
            "cos_sin_cache": Tensor(("max_position", "head_dim"), "float32", "cos | sin"),
        },
        outputs=_QK_OUT,
        constraints=("max_position >= 1",),
        reference=apply_rope_cos_sin_ref,
        bind=_heads,
        tags=("inplace",) if inplace else (),
        untraced=("interleave",),  # the reference uses NeoX pairs
        small={**_ROPE_SMALL, "max_position": 16},
    )


APPLY_ROPE = _rope("apply_rope", inplace=False)
APPLY_ROPE_ = _rope("apply_rope_", inplace=True)
APPLY_ROPE_COS_SIN = _rope_cos_sin("apply_rope_with_cos_sin_cache", inplace=False)
APPLY_ROPE_COS_SIN_ = _rope_cos_sin("apply_rope_with_cos_sin_cache_", inplace=True)
