"""ember: JIT-compiled GPU kernels for LLM serving.

Importing ember is cheap: no subprocess, no CUDA context, no directory is created. Kernels are
compiled on first use and cached under ``EMBER_CACHE_DIR`` (see ``docs/config.md``).
"""

from __future__ import annotations

from ember._version import __version__
from ember.config import warn_diagnostic_knobs
from ember.errors import (
    ArtifactError,
    CompileError,
    ConfigError,
    EmberError,
    JitDisabledError,
    ToolchainError,
    UnsupportedError,
)
from ember.ops.act import gelu_and_mul, gelu_tanh_and_mul, silu_and_mul
from ember.ops.decode import (
    DecodePlan,
    DecodeWorkspace,
    batch_decode,
    plan_batch_decode,
    single_decode,
)
from ember.ops.norm import fused_add_rmsnorm_, rmsnorm
from ember.ops.paged import append_paged_kv_cache, merge_state, merge_states
from ember.ops.rope import (
    apply_rope,
    apply_rope_,
    apply_rope_with_cos_sin_cache,
    apply_rope_with_cos_sin_cache_,
)
from ember.ops.sampling import (
    min_p_sampling_from_probs,
    sampling_from_logits,
    sampling_from_probs,
    softmax,
    top_k_mask_logits,
    top_k_renorm_probs,
    top_k_sampling_from_probs,
    top_k_top_p_sampling_from_logits,
    top_k_top_p_sampling_from_probs,
    top_p_renorm_probs,
    top_p_sampling_from_probs,
)

# R6.15: a diagnostic control set in the environment is announced once, when ember is imported.
warn_diagnostic_knobs()

__all__ = [
    "ArtifactError",
    "CompileError",
    "ConfigError",
    "DecodePlan",
    "DecodeWorkspace",
    "EmberError",
    "JitDisabledError",
    "ToolchainError",
    "UnsupportedError",
    "__version__",
    "append_paged_kv_cache",
    "apply_rope",
    "apply_rope_",
    "apply_rope_with_cos_sin_cache",
    "apply_rope_with_cos_sin_cache_",
    "batch_decode",
    "fused_add_rmsnorm_",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "merge_state",
    "merge_states",
    "min_p_sampling_from_probs",
    "plan_batch_decode",
    "rmsnorm",
    "sampling_from_logits",
    "sampling_from_probs",
    "silu_and_mul",
    "single_decode",
    "softmax",
    "top_k_mask_logits",
    "top_k_renorm_probs",
    "top_k_sampling_from_probs",
    "top_k_top_p_sampling_from_logits",
    "top_k_top_p_sampling_from_probs",
    "top_p_renorm_probs",
    "top_p_sampling_from_probs",
]
