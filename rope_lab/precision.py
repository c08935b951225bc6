"""RoPE angles in 16-bit floating point: the precision lab of notebook 04.

A float with p significant bits holds every integer up to 2^p and no further: bfloat16
(p = 8) stops at 256, float16 (p = 11) at 2048, float32 (p = 24) at 16 777 216. An angle
m·θ_i computed in a 16-bit type is rounded to a number that grows with m, so its error —
a phase error no later float32 arithmetic can undo — grows with the position too. That is
why :func:`rope_lab.rope_angles` and the libraries compute angles in float32 or wider
(Hugging Face transformers up to 5.18 disabled autocast around its ``inv_freq @ positions``;
from 5.19 on it casts ``inv_freq`` and the positions to float32 instead).

Every function returns float64 tensors so the errors themselves are measured exactly.
"""

from __future__ import annotations

import math

import torch

from rope_lab import _validate
from rope_lab.rope import rotate_reference

# The dtypes the lab compares, by the names a dropdown shows.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check_dtype(dtype) -> torch.dtype:
    """A floating-point torch dtype, or its name as in :data:`DTYPES`."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    raise ValueError(
        f"dtype must be a floating-point torch.dtype or one of {sorted(DTYPES)}, got {dtype!r}"
    )


def largest_exact_integer(dtype) -> int:
    """The largest N such that every integer 0 … N is exactly representable in ``dtype``.

    With p significant bits (the stored mantissa plus the implicit leading 1), N = 2^p:
    256 for bfloat16, 2048 for float16, 2^24 for float32. N + 1 already rounds.
    """
    dtype = check_dtype(dtype)
    significant_bits = round(-math.log2(torch.finfo(dtype).eps)) + 1
    return 2**significant_bits


def exact_angles(positions, inv_freq: torch.Tensor) -> torch.Tensor:
    """The reference angles m·θ_i in float64, ``(..., seq)`` × ``(d/2,)`` → ``(..., seq, d/2)``."""
    _check_inv_freq(inv_freq)
    positions = _validate.as_positions(positions, device=inv_freq.device)
    return positions.to(torch.float64)[..., None] * inv_freq.to(torch.float64)


def angles_in_dtype(positions, inv_freq: torch.Tensor, dtype) -> torch.Tensor:
    """m·θ_i as a kernel working entirely in ``dtype`` computes it (a naive one under autocast).

    The position m, the speed θ_i and their product are each rounded to ``dtype``.

    Args:
        positions: ``(..., seq)`` positions m.
        inv_freq: ``(d/2,)`` speeds θ_i (give them in float64 so only ``dtype`` rounds).
        dtype: the working type, e.g. ``torch.bfloat16`` or ``"float16"``.

    Returns:
        ``(..., seq, d/2)`` float64 tensor holding exactly the ``dtype`` values.
    """
    dtype = check_dtype(dtype)
    _check_inv_freq(inv_freq)
    positions = _validate.as_positions(positions, device=inv_freq.device)
    m = positions.to(torch.float64).to(dtype)
    return (m[..., None] * inv_freq.to(dtype)).to(torch.float64)


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Map angles to [−π, π): two angles a whole turn apart are the same rotation."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def angle_errors(positions, inv_freq: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Phase error and cos error of m·θ_i computed in ``dtype``, each ``(..., seq, d/2)``.

    phase error = |m·θ_i in dtype − exact m·θ_i|, wrapped to [0, π] radians;
    cos error   = |cos(m·θ_i in dtype) − cos(exact m·θ_i)|, the cosine taken in float64 so
    that only the angle's rounding is measured.
    """
    low = angles_in_dtype(positions, inv_freq, dtype)
    exact = exact_angles(positions, inv_freq)
    return wrap_angle(low - exact).abs(), (low.cos() - exact.cos()).abs()


def phase_error(positions, inv_freq: torch.Tensor, dtype) -> torch.Tensor:
    """The phase error of :func:`angle_errors` alone."""
    return angle_errors(positions, inv_freq, dtype)[0]


def cos_error(positions, inv_freq: torch.Tensor, dtype) -> torch.Tensor:
    """The cos error of :func:`angle_errors` alone."""
    return angle_errors(positions, inv_freq, dtype)[1]


def rotate_by_angles(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (i, i + d/2) of ``x`` by given angles (half layout), in float64.

    x: ``(..., seq, d)``; angles: ``(..., seq, d/2)``, broadcasting against x. For the
    exact angles this equals ``rope_lab.apply_rope(x, layout="half")``.
    """
    _validate.check_rope_input(x)
    half = _validate.check_dim(x.shape[-1], name="x.shape[-1]") // 2
    if angles.shape[-1] != half:
        raise ValueError(
            f"angles must have {half} columns (one per pair of x), got shape "
            f"{tuple(angles.shape)}"
        )
    wide = angles.to(torch.float64)
    return rotate_reference(x.to(torch.float64), wide.cos(), wide.sin(), "half")


def rope_scores(q: torch.Tensor, k: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Scores ⟨R_m q_m, R_n k_n⟩ / √d for all m, n, with the rotations given by ``angles``.

    q, k: ``(seq, d)``; angles: ``(seq, d/2)`` (row m holds m·θ_i). Returns ``(seq, seq)``.
    """
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape, got {tuple(q.shape)} and "
                         f"{tuple(k.shape)}")
    rotated_q, rotated_k = rotate_by_angles(q, angles), rotate_by_angles(k, angles)
    return rotated_q @ rotated_k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def _check_inv_freq(inv_freq) -> None:
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.ndim != 1:
        raise ValueError(
            "inv_freq must be a 1-D tensor of shape (dim // 2,), got "
            f"{tuple(inv_freq.shape) if isinstance(inv_freq, torch.Tensor) else inv_freq!r}"
        )
    _validate.check_float_tensor(inv_freq, "inv_freq")
