"""ALiBi (Press et al. 2022): no position vectors at all, a distance penalty on the scores.

Head h adds −slope_h · (m − n) to the score of query m and key n (n ≤ m in a causal
model). The slopes are a geometric sequence: for a power-of-two head count H,

    slope_h = 2^(−8h/H),   h = 1 … H          (H = 8: 1/2, 1/4, …, 1/256)

so some heads look only at the last few tokens and others far back. Nothing in the bias
depends on the absolute position, and a larger distance only means a larger penalty — which
is why ALiBi runs on inputs longer than it was trained on.
"""

from __future__ import annotations

import math

import torch

from rope_lab import _validate


def alibi_slopes(n_heads: int, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """The per-head slopes, as in the paper's reference code (including non-powers of two).

    For H not a power of two, take the H' = 2^⌊log2 H⌋ slopes of H', then fill up with every
    other slope of 2H' (which interleave with the first set).

    Returns:
        ``(n_heads,)`` tensor, slopes in (0, 1).
    """
    _validate.check_positive_int(n_heads, "n_heads")
    _check_float_dtype(dtype)
    _validate.check_table_size("alibi_slopes", f"n_heads={n_heads}", n_heads * 40)  # a list
    return torch.tensor(_slopes(n_heads), dtype=torch.float64, device=device).to(dtype)


def _check_float_dtype(dtype) -> None:
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype}")


def _slopes(n_heads: int) -> list[float]:
    if n_heads & (n_heads - 1) == 0:  # a power of two
        start = 2.0 ** (-8.0 / n_heads)
        return [start ** (h + 1) for h in range(n_heads)]
    below = 2 ** math.floor(math.log2(n_heads))
    return _slopes(below) + _slopes(2 * below)[0::2][: n_heads - below]


def alibi_bias(seq_len: int, n_heads: int, *, device=None,
               dtype=torch.float32) -> torch.Tensor:
    """The bias added to the attention scores: bias[h, m, n] = −slope_h · |m − n|.

    A causal model masks n > m anyway; there the value equals the paper's −slope_h·(m − n).
    Add a causal mask separately (e.g. ``rope_lab.causal_mask``).

    Returns:
        ``(n_heads, seq_len, seq_len)`` tensor.
    """
    _validate.check_positive_int(seq_len, "seq_len")
    _check_float_dtype(dtype)
    _validate.check_positive_int(n_heads, "n_heads")
    # float64 distances and bias, then the result in dtype
    _validate.check_table_size("alibi_bias", f"n_heads={n_heads} × seq_len²={seq_len}²",
                               n_heads * seq_len * seq_len * 8 * 2 + seq_len * seq_len * 8)
    slopes = alibi_slopes(n_heads, device=device, dtype=torch.float64)
    positions = torch.arange(seq_len, device=device, dtype=torch.float64)
    distance = (positions[:, None] - positions[None, :]).abs()
    return (-slopes[:, None, None] * distance).to(dtype)
