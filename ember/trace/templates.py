"""Every public op's trace template (R3.14, R8.11), and the ops exempt from one, with reasons."""

from __future__ import annotations

from ember.trace import TraceTemplate
from ember.trace.attention import (
    APPEND_PAGED_KV_CACHE,
    BATCH_DECODE,
    MERGE_STATE,
    MERGE_STATES,
    SINGLE_DECODE,
)
from ember.trace.dense import (
    APPLY_ROPE,
    APPLY_ROPE_,
    APPLY_ROPE_COS_SIN,
    APPLY_ROPE_COS_SIN_,
    FUSED_ADD_RMSNORM,
    GELU_AND_MUL,
    GELU_TANH_AND_MUL,
    RMSNORM,
    SILU_AND_MUL,
)
from ember.trace.sampling import (
    MIN_P_SAMPLING_FROM_PROBS,
    SAMPLING_FROM_LOGITS,
    SAMPLING_FROM_PROBS,
    SOFTMAX,
    TOP_K_MASK_LOGITS,
    TOP_K_RENORM_PROBS,
    TOP_K_SAMPLING_FROM_PROBS,
    TOP_K_TOP_P_SAMPLING_FROM_LOGITS,
    TOP_K_TOP_P_SAMPLING_FROM_PROBS,
    TOP_P_RENORM_PROBS,
    TOP_P_SAMPLING_FROM_PROBS,
)

__all__ = ["EXEMPT", "TEMPLATES"]

TEMPLATES: tuple[TraceTemplate, ...] = (
    SILU_AND_MUL, GELU_AND_MUL, GELU_TANH_AND_MUL,
    RMSNORM, FUSED_ADD_RMSNORM,
    APPLY_ROPE, APPLY_ROPE_, APPLY_ROPE_COS_SIN, APPLY_ROPE_COS_SIN_,
    SOFTMAX, SAMPLING_FROM_PROBS, SAMPLING_FROM_LOGITS, MIN_P_SAMPLING_FROM_PROBS,
    TOP_K_SAMPLING_FROM_PROBS, TOP_P_SAMPLING_FROM_PROBS, TOP_K_TOP_P_SAMPLING_FROM_PROBS,
    TOP_K_TOP_P_SAMPLING_FROM_LOGITS, TOP_K_RENORM_PROBS, TOP_P_RENORM_PROBS, TOP_K_MASK_LOGITS,
    BATCH_DECODE, SINGLE_DECODE, APPEND_PAGED_KV_CACHE, MERGE_STATES, MERGE_STATE,
)  # fmt: skip

EXEMPT: dict[str, str] = {
    "plan_batch_decode": "plan of a plan/run API: it launches no kernel and computes no output;"
    " its page-table arguments are inputs of batch_decode's definition (R3.15)",
}
"""Public ops without a template, each with the reason the sync test prints."""
