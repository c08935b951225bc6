"""The angle rule: θ_i, the angles m·θ_i and their cos/sin tables, for every path.

Every way :func:`rope_lab.apply_rope` can compute (the reference formula, the eager blocks,
the complex multiply, the C loop, the Triton kernel) rotates by the angles this module
defines, so they all give the same numbers:

    θ_i = base^(−2i/d)      computed in float64 and rounded once (correctly rounded)
    angle = m·θ_i           float32 θ: the float32 product of m and θ_i below 2^24 (what
                            transformers computes); at or beyond 2^24 the exact product
                            reduced modulo 2π first. float64 θ: the float64 product.
    cos, sin of the angle   computed in float64, rounded once to the table's dtype

The C loop and the Triton kernel compute the same rule in their own language when they
take the angles from the positions themselves (kernels/rope.c,
rope_lab/_triton_rope.py);
the tests hold them to it.

Tables come in two conventions, both ``(..., seq, ·)``: the ``(..., seq, r/2)`` one value per
pair that every path here rotates by (flash-attention's and vLLM's), and transformers'
duplicated ``(..., seq, r)`` one value per feature, in the pairs' layout
(``cat((c, c))`` for "half", each value twice in a row for "interleaved").
:func:`pair_tables` turns the second into the first.

Internal: the functions trust their inputs (``rope_lab.rope`` checks them at the boundary).
"""

from __future__ import annotations

import math

import torch

from rope_lab import _validate


def inv_freq_values(dim: int, base: float, device=None, dtype=torch.float32) -> torch.Tensor:
    """θ_i = base^(−2i/dim), i = 0 … dim/2 − 1, for validated arguments: ``(dim // 2,)``."""
    # Exponents in float64 so that float32 results are correctly rounded.
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim
    return (base**-exponents).to(dtype)


# θ by (rotary_dim, base, dtype, device): what depends on nothing else is computed once.
_theta_cache: dict = {}


def theta(rotary_dim: int, base: float, dtype, device) -> torch.Tensor:
    """θ_i for a rotation, cached (never modified in place by the package; not returned to
    callers). Under torch.compile it is computed in the graph instead (a cache lookup would
    break it), and a tensor made during CUDA graph capture is not kept (its values exist only
    when the graph replays)."""
    if _validate._is_compiling():
        return inv_freq_values(rotary_dim, base, device, dtype)
    key = (rotary_dim, base, dtype, device)
    found = _theta_cache.get(key)
    if found is None:
        with torch.inference_mode(False), torch.no_grad():
            found = inv_freq_values(rotary_dim, base, device, dtype)
        remember(_theta_cache, key, found, device)
    return found


def remember(cache: dict, key, value, device) -> None:
    """Keep value unless device is capturing a CUDA graph; at most 32 entries."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return
    if len(cache) >= 32:
        cache.clear()
    cache[key] = value


def outer_angles(positions: torch.Tensor, inv_freq: torch.Tensor, *,
                 wide: bool | None = None) -> torch.Tensor:
    """m·θ_i for every position and pair: ``(..., seq)`` × ``(r/2,)`` → ``(..., seq, r/2)``.

    wide: float64 angles; default when positions or inv_freq is float64 (dtypes decide,
    never values). Otherwise float32: the product of float32 m and float32 θ_i."""
    if wide is None:
        wide = torch.float64 in (inv_freq.dtype, positions.dtype)
    dtype = torch.float64 if wide else torch.float32
    return positions.to(dtype)[..., None] * inv_freq.to(dtype)


# m·θ_i past FLOAT32_EXACT_LIMIT: formed in float64 and reduced to [−π, π) before rounding.
_TWO_PI = 2 * math.pi


def cos_sin_table(positions: torch.Tensor, theta: torch.Tensor,
                  dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of m·θ_i by the rule above, ``(..., seq, r/2)`` each, in dtype.

    float64 θ: float64 angles. float32 θ: the product m·θ_i is formed exactly in float64
    (m exact, θ_i float32); below 2^24 it is rounded to float32 — the float32 product —
    and at or beyond 2^24, where a float32 angle would be off by up to a radian, it is first
    reduced modulo 2π. A per-element choice: nothing is read on the host (no device sync,
    traceable by torch.compile, capturable in a CUDA graph). On a CPU, where a read costs
    no sync, one small reduction first asks whether any position reaches 2^24; when none
    does, the float32 product is computed directly (the same numbers, a third of the work).
    """
    if theta.dtype == torch.float32 and not any_past_float32_limit(positions):
        angles = positions.to(torch.float32)[..., None] * theta
        return cos_sin_of(angles, dtype)
    # float64 × float32 multiplies in float64: θ_i's float32 value, widened exactly
    product = positions.to(torch.float64)[..., None] * theta
    if theta.dtype == torch.float64:
        angles = product
    else:
        big = (positions.abs() >= _validate.FLOAT32_EXACT_LIMIT)[..., None]
        reduced = (product + math.pi).remainder(_TWO_PI) - math.pi  # in [−π, π)
        angles = torch.where(big, reduced, product).to(torch.float32)
    return cos_sin_of(angles, dtype)


def cos_sin_of(angles: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of float32 or float64 angles, in dtype: computed in float64 and rounded
    once (for float32 angles the float32 nearest to the exact cosine of that angle, which
    PyTorch's float32 ``cos`` misses by one unit in the last place about once in twenty)."""
    wide = angles.double()
    cos, sin = wide.cos(), wide.sin()
    if cos.dtype != dtype:
        cos, sin = cos.to(dtype), sin.to(dtype)
    return cos, sin


def any_past_float32_limit(positions: torch.Tensor) -> bool:
    """Whether some position reaches 2^24, where it may be read at no cost (a CPU tensor,
    outside torch.compile); True, meaning "assume so", where reading would sync a device."""
    if not (positions.is_cpu and _validate.values_readable(positions)):
        return True
    return positions.numel() > 0 and bool(
        (positions.abs() >= _validate.FLOAT32_EXACT_LIMIT).any())


# cos/sin tables for positions 0 … seq − 1, by (seq, rotary_dim, base, device, dtype).
_table_cache: dict = {}


def cached_cos_sin(seq: int, rotary_dim: int, base: float, device, dtype):
    """cos and sin of m·θ_i for m = 0 … seq − 1: ``(seq, rotary_dim/2)`` each, kept for reuse.

    Without the cache every call (every layer, every step) recomputes seq × d/2 angles and
    their cos and sin; with it only the first call pays. Built as ordinary tensors even under
    inference_mode, so a later call that records autograd may use them. Under torch.compile
    they are computed in the graph (a lookup would break it); tables made during CUDA graph
    capture are not kept.
    """
    if not isinstance(device, torch.device):
        device = torch.device(device)
    if _validate._is_compiling():
        return cos_sin_table(torch.arange(seq, device=device),
                             inv_freq_values(rotary_dim, base, device, dtype), dtype)
    key = (seq, rotary_dim, base, device, dtype)
    tables = _table_cache.get(key)
    if tables is None:
        with torch.inference_mode(False), torch.no_grad():
            tables = cos_sin_table(torch.arange(seq, device=device),
                                   theta(rotary_dim, base, dtype, device), dtype)
        remember(_table_cache, key, tables, device)
    return tables


def pair_tables(cos: torch.Tensor, sin: torch.Tensor, layout: str,
                duplicated: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Tables in the one-value-per-pair convention ``(..., seq, r/2)``, float32 or float64.

    duplicated: the tables are transformers' ``(..., seq, r)``, one value per feature in
    the layout's pairing; each pair's value is read from its first feature (a view for
    "half"; a copy with unit stride, which the kernels need, for "interleaved"). 16-bit
    tables are widened to float32 (exactly: the rotation is then computed in float32 and
    rounded once). cos and sin have one shape and dtype (checked by the caller)."""
    if duplicated:
        half = cos.shape[-1] // 2
        if layout == "half":
            cos, sin = cos[..., :half], sin[..., :half]
        else:
            cos, sin = cos[..., 0::2].contiguous(), sin[..., 0::2].contiguous()
    if cos.dtype not in (torch.float32, torch.float64):
        cos, sin = cos.float(), sin.float()
    return cos, sin
