"""Plain scaled dot-product attention, written out so a notebook can take it apart.

    scores  = q kᵀ / √d
    weights = softmax(scores + mask)
    output  = weights v
"""

from __future__ import annotations

import math

import torch

from rope_lab import _validate


def attention(q, k, v, *, mask=None, return_weights: bool = False):
    """Scaled dot-product attention.

    Args:
        q: ``(..., seq_q, d)`` queries.
        k: ``(..., seq_k, d)`` keys.
        v: ``(..., seq_k, d_v)`` values.
        mask: None; ``"causal"`` (query i sees keys 0 … i); a bool tensor broadcasting to
            ``(..., seq_q, seq_k)`` where True means *may attend*; or a float tensor added
            to the scores (use −inf to block).
        return_weights: also return the ``(..., seq_q, seq_k)`` attention weights.

    Returns:
        ``(..., seq_q, d_v)`` outputs, or ``(outputs, weights)``.
    """
    _validate.check_qkv(q, k, v)
    _validate.check_bool(return_weights, "return_weights")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + _additive_mask(mask, scores)
    weights = torch.softmax(scores, dim=-1)
    output = weights @ v
    return (output, weights) if return_weights else output


def causal_mask(seq_q: int, seq_k: int | None = None, *, device=None) -> torch.Tensor:
    """Bool ``(seq_q, seq_k)``, True on and below the diagonal: query i may see keys ≤ i.

    When ``seq_k > seq_q`` the queries are the last ``seq_q`` positions (as with a KV cache).
    """
    _validate.check_positive_int(seq_q, "seq_q")
    seq_k = seq_q if seq_k is None else _validate.check_positive_int(seq_k, "seq_k")
    _validate.check_table_size("causal_mask", f"seq_q={seq_q} × seq_k={seq_k}", seq_q * seq_k)
    offset = seq_k - seq_q
    rows = torch.arange(seq_q, device=device)[:, None]
    cols = torch.arange(seq_k, device=device)[None, :]
    return cols <= rows + offset


def _additive_mask(mask, scores: torch.Tensor) -> torch.Tensor:
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"mask must be None, 'causal' or a tensor, got {mask!r}")
        mask = causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be None, 'causal' or a tensor, got {type(mask).__name__}")
    try:
        torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError as error:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores.shape)} (..., seq_q, seq_k)"
        ) from error
    if mask.dtype == torch.bool:
        if not bool(mask.any(dim=-1).all()):
            raise ValueError("mask blocks every key for some query; its softmax would be NaN")
        blocked = scores.new_full((), float("-inf"))
        return torch.where(mask, scores.new_zeros(()), blocked)
    if not mask.is_floating_point():
        raise TypeError(f"mask must be bool or floating point, got dtype {mask.dtype}")
    if bool(torch.isnan(mask).any()):
        raise ValueError("mask contains NaN; use -inf to block a key and 0 to allow it")
    if bool(torch.isneginf(mask).all(dim=-1).any()):
        raise ValueError("mask blocks every key for some query; its softmax would be NaN")
    return mask.to(scores.dtype)
