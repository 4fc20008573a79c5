"""Trace templates of the sampling ops (R3.14, R3.16).

The filters keep, per row: top-k the ``k`` largest values (ties at the ``k``-th all kept;
``k <= 0`` or ``>= vocab``: off); top-p then the largest kept probabilities whose mass first
reaches ``top_p`` of the kept mass (``>= 1``: off); min-p the probabilities ``>= min_p * max``.
ember's kernel measures the top-p mass in 40-bit fixed point (``ember.testing.reference.
filter_threshold_ref`` is its exact model); these references sum in fp64, which agrees with it
except on a mass within ~1e-9 of ``top_p`` times the row's. Samplers are stochastic (tag
``stochastic``): a reference draws with ``torch.multinomial`` from the kept set, so compare the
support, not the token.
"""

from __future__ import annotations

from typing import Any

from ember.trace import Axis, Model, Tensor, TraceTemplate

__all__ = [
    "MIN_P_SAMPLING_FROM_PROBS",
    "SAMPLING_FROM_LOGITS",
    "SAMPLING_FROM_PROBS",
    "SOFTMAX",
    "TOP_K_MASK_LOGITS",
    "TOP_K_RENORM_PROBS",
    "TOP_K_SAMPLING_FROM_PROBS",
    "TOP_K_TOP_P_SAMPLING_FROM_LOGITS",
    "TOP_K_TOP_P_SAMPLING_FROM_PROBS",
    "TOP_P_RENORM_PROBS",
    "TOP_P_SAMPLING_FROM_PROBS",
]


def softmax_ref(logits: Any, temperature: Any) -> Any:
    import torch

    return torch.softmax(logits.float() / temperature.float()[:, None], dim=-1)


def sampling_from_probs_ref(probs: Any) -> Any:
    import torch

    return torch.multinomial(probs.float(), 1)[:, 0].to(torch.int32)


def sampling_from_logits_ref(logits: Any, temperature: Any) -> Any:
    import torch

    probs = torch.softmax(logits.float() / temperature.float()[:, None], dim=-1)
    return torch.multinomial(probs, 1)[:, 0].to(torch.int32)


def min_p_sampling_from_probs_ref(probs: Any, min_p: Any) -> Any:
    import torch

    p = probs.float()
    keep = p >= min_p.float()[:, None] * p.max(dim=-1, keepdim=True).values
    return torch.multinomial(torch.where(keep, p, 0.0), 1)[:, 0].to(torch.int32)


def top_k_sampling_from_probs_ref(probs: Any, top_k: Any) -> Any:
    import torch

    p = probs.float()
    vocab = p.shape[-1]
    kth = p.sort(dim=-1, descending=True).values.gather(
        1, top_k.long().clamp(1, vocab)[:, None] - 1
    )
    on = ((top_k > 0) & (top_k < vocab))[:, None]
    keep = ~on | (p >= kth)
    return torch.multinomial(torch.where(keep, p, 0.0), 1)[:, 0].to(torch.int32)


def top_p_sampling_from_probs_ref(probs: Any, top_p: Any) -> Any:
    import torch

    p = probs.float()
    s = p.sort(dim=-1, descending=True).values
    cum = s.double().cumsum(dim=-1)
    need = top_p.float()[:, None] * cum[:, -1:]
    idx = torch.searchsorted(cum, need).clamp(max=p.shape[-1] - 1)
    keep = (top_p[:, None] >= 1.0) | (p >= s.gather(1, idx))
    return torch.multinomial(torch.where(keep, p, 0.0), 1)[:, 0].to(torch.int32)


def top_k_top_p_sampling_from_probs_ref(probs: Any, top_k: Any, top_p: Any) -> Any:
    import torch

    p = probs.float()
    vocab = p.shape[-1]
    s = p.sort(dim=-1, descending=True).values
    kth = s.gather(1, top_k.long().clamp(1, vocab)[:, None] - 1)
    keep = ~((top_k > 0) & (top_k < vocab))[:, None] | (p >= kth)
    s = torch.where(s >= torch.where(keep, p, float("inf")).min(-1, keepdim=True).values, s, 0.0)
    cum = s.double().cumsum(dim=-1)
    idx = torch.searchsorted(cum, top_p.float()[:, None] * cum[:, -1:]).clamp(max=vocab - 1)
    keep &= (top_p[:, None] >= 1.0) | (p >= s.gather(1, idx))
    return torch.multinomial(torch.where(keep, p, 0.0), 1)[:, 0].to(torch.int32)


def top_k_top_p_sampling_from_logits_ref(
    logits: Any, top_k: Any, top_p: Any, temperature: Any
) -> Any:
    import torch

    p = torch.softmax(logits.float() / temperature.float()[:, None], dim=-1)
    vocab = p.shape[-1]
    s = p.sort(dim=-1, descending=True).values
    kth = s.gather(1, top_k.long().clamp(1, vocab)[:, None] - 1)
    keep = ~((top_k > 0) & (top_k < vocab))[:, None] | (p >= kth)
    s = torch.where(s >= torch.where(keep, p, float("inf")).min(-1, keepdim=True).values, s, 0.0)
    cum = s.double().cumsum(dim=-1)
    idx = torch.searchsorted(cum, top_p.float()[:, None] * cum[:, -1:]).clamp(max=vocab - 1)
    keep &= (top_p[:, None] >= 1.0) | (p >= s.gather(1, idx))
    return torch.multinomial(torch.where(keep, p, 0.0), 1)[:, 0].to(torch.int32)


def top_k_renorm_probs_ref(probs: Any, top_k: Any) -> Any:
    import torch

    p = probs.float()
    vocab = p.shape[-1]
    kth = p.sort(dim=-1, descending=True).values.gather(
        1, top_k.long().clamp(1, vocab)[:, None] - 1
    )
    keep = ~((top_k > 0) & (top_k < vocab))[:, None] | (p >= kth)
    kept = torch.where(keep, p, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def top_p_renorm_probs_ref(probs: Any, top_p: Any) -> Any:
    import torch

    p = probs.float()
    s = p.sort(dim=-1, descending=True).values
    cum = s.double().cumsum(dim=-1)
    idx = torch.searchsorted(cum, top_p.float()[:, None] * cum[:, -1:]).clamp(max=p.shape[-1] - 1)
    keep = (top_p[:, None] >= 1.0) | (p >= s.gather(1, idx))
    kept = torch.where(keep, p, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def top_k_mask_logits_ref(logits: Any, top_k: Any) -> Any:
    import torch

    x = logits.float()
    vocab = x.shape[-1]
    kth = x.sort(dim=-1, descending=True).values.gather(
        1, top_k.long().clamp(1, vocab)[:, None] - 1
    )
    keep = ~((top_k > 0) & (top_k < vocab))[:, None] | (x >= kth)
    return torch.where(keep, x, float("-inf")).to(logits.dtype)


def _vocab(m: Model) -> dict[str, int]:
    return {"vocab_size": m.vocab_size}


_AXES = {
    "batch_size": Axis("var", "Rows (sequences) sampled."),
    "vocab_size": Axis("const", "Vocabulary size."),
}
_ROW = ("batch_size",)
_GRID = ("batch_size", "vocab_size")
_PROBS = Tensor(_GRID, "float32", "Probabilities; each row sums to 1.")
_LOGITS = Tensor(_GRID, "float32")
_TEMPERATURE = Tensor(_ROW, "float32", "Per-row temperature, > 0.")
_TOP_K = Tensor(_ROW, "int32", "Per-row k; <= 0 or >= vocab_size: off.")
_TOP_P = Tensor(_ROW, "float32", "Per-row p in (0, 1]; >= 1: off.")
_MIN_P = Tensor(_ROW, "float32", "Per-row min-p in [0, 1]; <= 0: off.")
_SAMPLES = {"samples": Tensor(_ROW, "int32", "One token index per row.")}
_SMALL = {"batch_size": 4, "vocab_size": 1000}
# NOTE: what the definitions do not carry: the filters of the plain samplers (off in their
# definitions; each filter has its own op and definition), the random stream, the row check.
_SAMPLER_OPTIONS = ("top_k", "top_p", "min_p", "seed", "offset", "generator", "check")


def _template(
    op: str,
    ref: Any,
    description: str,
    inputs: dict[str, Tensor],
    outputs: dict[str, Tensor],
    *,
    stochastic: bool,
    untraced: tuple[str, ...] = (),
) -> TraceTemplate:
    return TraceTemplate(
        op=op,
        name=op + "_v{vocab_size}",
        op_type="sampling",
        description=description,
        axes=_AXES,
        inputs=inputs,
        outputs=outputs,
        reference=ref,
        bind=_vocab,
        tags=("stochastic",) if stochastic else (),
        untraced=untraced,
        small=_SMALL,
    )


SOFTMAX = _template(
    "softmax",
    softmax_ref,
    "probs = softmax(logits / temperature) per row, in fp32.",
    {"logits": _LOGITS, "temperature": _TEMPERATURE},
    {"probs": Tensor(_GRID, "float32")},
    stochastic=False,
)
SAMPLING_FROM_PROBS = _template(
    "sampling_from_probs",
    sampling_from_probs_ref,
    "One token per row drawn from probs.",
    {"probs": _PROBS},
    _SAMPLES,
    stochastic=True,
    untraced=_SAMPLER_OPTIONS,
)
SAMPLING_FROM_LOGITS = _template(
    "sampling_from_logits",
    sampling_from_logits_ref,
    "One token per row drawn from softmax(logits / temperature).",
    {"logits": _LOGITS, "temperature": _TEMPERATURE},
    _SAMPLES,
    stochastic=True,
    untraced=_SAMPLER_OPTIONS,
)
MIN_P_SAMPLING_FROM_PROBS = _template(
    "min_p_sampling_from_probs",
    min_p_sampling_from_probs_ref,
    "One token per row drawn from the probabilities >= min_p * row max.",
    {"probs": _PROBS, "min_p": _MIN_P},
    _SAMPLES,
    stochastic=True,
)
TOP_K_SAMPLING_FROM_PROBS = _template(
    "top_k_sampling_from_probs",
    top_k_sampling_from_probs_ref,
    "One token per row drawn from the top-k probabilities.",
    {"probs": _PROBS, "top_k": _TOP_K},
    _SAMPLES,
    stochastic=True,
)
TOP_P_SAMPLING_FROM_PROBS = _template(
    "top_p_sampling_from_probs",
    top_p_sampling_from_probs_ref,
    "One token per row drawn from the top-p (nucleus) probabilities.",
    {"probs": _PROBS, "top_p": _TOP_P},
    _SAMPLES,
    stochastic=True,
)
TOP_K_TOP_P_SAMPLING_FROM_PROBS = _template(
    "top_k_top_p_sampling_from_probs",
    top_k_top_p_sampling_from_probs_ref,
    "One token per row drawn after top-k, then top-p over what top-k kept.",
    {"probs": _PROBS, "top_k": _TOP_K, "top_p": _TOP_P},
    _SAMPLES,
    stochastic=True,
)
TOP_K_TOP_P_SAMPLING_FROM_LOGITS = _template(
    "top_k_top_p_sampling_from_logits",
    top_k_top_p_sampling_from_logits_ref,
    "One token per row drawn from softmax(logits / temperature) after top-k, then top-p.",
    {"logits": _LOGITS, "top_k": _TOP_K, "top_p": _TOP_P, "temperature": _TEMPERATURE},
    _SAMPLES,
    stochastic=True,
)
TOP_K_RENORM_PROBS = _template(
    "top_k_renorm_probs",
    top_k_renorm_probs_ref,
    "The top-k probabilities of each row renormalised to sum 1; the rest 0.",
    {"probs": _PROBS, "top_k": _TOP_K},
    {"renorm_probs": Tensor(_GRID, "float32")},
    stochastic=False,
    untraced=("check",),
)
TOP_P_RENORM_PROBS = _template(
    "top_p_renorm_probs",
    top_p_renorm_probs_ref,
    "The top-p probabilities of each row renormalised to sum 1; the rest 0.",
    {"probs": _PROBS, "top_p": _TOP_P},
    {"renorm_probs": Tensor(_GRID, "float32")},
    stochastic=False,
    untraced=("check",),
)
TOP_K_MASK_LOGITS = _template(
    "top_k_mask_logits",
    top_k_mask_logits_ref,
    "The top-k logits of each row kept, the rest set to -inf.",
    {"logits": _LOGITS, "top_k": _TOP_K},
    {"masked_logits": Tensor(_GRID, "float32")},
    stochastic=False,
    untraced=("check",),
)
