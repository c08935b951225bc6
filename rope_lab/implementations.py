"""Four ways to write RoPE, as they appear in papers and in the libraries people use.

They compute the same thing as :func:`rope_lab.apply_rope` (the tests check it) and are
kept short and literal so a notebook can show them side by side:

    apply_rope_dense        multiply by the d×d matrix R_{Θ,m}        (the paper's equation)
    apply_rope_interleaved  cos ⊙ x + sin ⊙ (−x1, x0, −x3, x2, …)    (RoFormer, GPT-J)
    apply_rope_complex      pairs as complex numbers times e^{i m θ}  (Meta LLaMA)
    apply_rope_rotate_half  cos ⊙ x + sin ⊙ rotate_half(x)            (GPT-NeoX, Hugging Face)

Each takes ``x`` of shape ``(..., seq, dim)`` and optional ``positions`` and ``base``, and
returns a tensor like ``x``.
"""

from __future__ import annotations

import torch

from rope_lab import _validate
from rope_lab.rope import DEFAULT_BASE, _rope_matrix, inv_freq, rope_angles


def _angles(x: torch.Tensor, positions, base: float) -> torch.Tensor:
    """Validated angles m·θ_i, ``(..., seq, dim/2)``, float32 or float64 like x."""
    _validate.check_rope_input(x)
    dim = _validate.check_dim(x.shape[-1], name="x.shape[-1]")
    wide = x.dtype == torch.float64
    freqs = inv_freq(dim, base, device=x.device, dtype=torch.float64 if wide else torch.float32)
    return rope_angles(_validate.positions_for(x, positions), freqs)


def apply_rope_dense(
    x: torch.Tensor, positions=None, *, base: float = DEFAULT_BASE, layout: str = "interleaved"
) -> torch.Tensor:
    """x'_m = R_{Θ,m} x_m with the full ``(dim, dim)`` matrix: O(d²) work per token.

    Only for teaching: it builds one d×d matrix per token, so it refuses (``ValueError``) an x
    whose matrices would pass ``rope_lab._validate.MAX_TABLE_BYTES``.
    """
    _validate.check_rope_input(x)
    dim = _validate.check_dim(x.shape[-1], name="x.shape[-1]")
    _validate.check_layout(layout)
    base = _validate.check_base(base)
    positions = _validate.positions_for(x, positions)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    tokens = x.shape[:-1].numel()  # the batched matmul expands the matrices to every token
    _validate.check_table_size(
        "apply_rope_dense", f"x of shape {tuple(x.shape)} ({tokens} tokens × dim² = {dim}²)",
        tokens * dim * dim * dtype.itemsize)
    matrices = _rope_matrix(positions, dim, base=base, layout=layout, dtype=dtype)
    return (matrices @ x.to(dtype)[..., None]).squeeze(-1).to(x.dtype)


def apply_rope_interleaved(
    x: torch.Tensor, positions=None, *, base: float = DEFAULT_BASE
) -> torch.Tensor:
    """The sparse form for pairs (2i, 2i+1): x' = cos ⊙ x + sin ⊙ (−x1, x0, −x3, x2, …)."""
    angles = _angles(x, positions, base)
    cos = angles.cos().repeat_interleave(2, dim=-1)  # (c0, c0, c1, c1, …)
    sin = angles.sin().repeat_interleave(2, dim=-1)
    x_wide = x.to(cos.dtype)
    swapped = torch.stack((-x_wide[..., 1::2], x_wide[..., 0::2]), dim=-1).flatten(-2)
    return (x_wide * cos + swapped * sin).to(x.dtype)


def apply_rope_complex(
    x: torch.Tensor, positions=None, *, base: float = DEFAULT_BASE
) -> torch.Tensor:
    """Meta's form: read pairs (2i, 2i+1) as complex numbers and multiply by e^{i m θ_i}."""
    angles = _angles(x, positions, base)
    rotations = torch.polar(torch.ones_like(angles), angles)  # e^{i m θ_i}, unit length
    pairs = x.to(angles.dtype).reshape(*x.shape[:-1], -1, 2)
    as_complex = torch.view_as_complex(pairs.contiguous())
    return torch.view_as_real(as_complex * rotations).flatten(-2).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x_a, x_b) → (−x_b, x_a) for the two halves of the last dimension."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(
            f"x must have an even last dimension (its two halves are swapped), got shape "
            f"{tuple(x.shape)}"
        )
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rope_rotate_half(
    x: torch.Tensor, positions=None, *, base: float = DEFAULT_BASE
) -> torch.Tensor:
    """Hugging Face's form for pairs (i, i + d/2): x' = cos ⊙ x + sin ⊙ rotate_half(x)."""
    angles = _angles(x, positions, base)
    doubled = torch.cat((angles, angles), dim=-1)  # (θ_0 … θ_{d/2−1}, θ_0 … θ_{d/2−1})
    x_wide = x.to(doubled.dtype)
    return (x_wide * doubled.cos() + rotate_half(x_wide) * doubled.sin()).to(x.dtype)
