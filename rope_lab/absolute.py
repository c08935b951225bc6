"""Absolute position encodings: one vector PE(p) per position p, added to the token embedding.

Positions count from 0. Every function returns a ``(length, dim)`` float32 tensor whose row
p is PE(p); notebook 02 compares them against the five properties a position encoding
should have.
"""

from __future__ import annotations

import torch
from torch import nn

from rope_lab import _validate
from rope_lab.rope import DEFAULT_BASE


def _check_length_dim(length, dim) -> None:
    _validate.check_positive_int(length, "length")
    _validate.check_positive_int(dim, "dim")


def integer_pe(length: int, dim: int) -> torch.Tensor:
    """PE(p) = (p, p, …, p): unique, but grows without bound and drowns the embedding."""
    _check_length_dim(length, dim)
    return torch.arange(length, dtype=torch.float32)[:, None].expand(length, dim).clone()


def normalized_integer_pe(length: int, dim: int) -> torch.Tensor:
    """PE(p) = (p / length) · 1: bounded, but the code for p depends on the sequence length."""
    return integer_pe(length, dim) / length


def binary_pe(length: int, dim: int) -> torch.Tensor:
    """PE(p)_j = bit j of p (feature 0 is the least significant bit, the fastest to flip).

    ``dim`` bits count only to 2^dim − 1, so ``length`` may not exceed 2^dim.
    """
    _check_length_dim(length, dim)
    if dim < 63 and length > 2**dim:
        raise ValueError(
            f"binary_pe with dim = {dim} bits can number at most 2**{dim} = {2**dim} "
            f"positions, got length = {length}"
        )
    positions = torch.arange(length)[:, None]
    bits = torch.arange(dim)
    return ((positions >> bits) & 1).to(torch.float32)


def sin_only_pe(length: int, dim: int, base: float = DEFAULT_BASE) -> torch.Tensor:
    """PE(p)_i = sin(p / base^(i/dim)): smooth, but no fixed linear map takes PE(p) to PE(p+k)."""
    _check_length_dim(length, dim)
    base = _validate.check_base(base)
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    frequencies = base ** -(torch.arange(dim, dtype=torch.float64) / dim)
    return torch.sin(positions * frequencies).to(torch.float32)


def sinusoidal_pe(length: int, dim: int, base: float = DEFAULT_BASE) -> torch.Tensor:
    """The original transformer's encoding, with ω_i = base^(−2i/dim):

        PE(p)_{2i}   = sin(p·ω_i)
        PE(p)_{2i+1} = cos(p·ω_i)

    For every offset k a fixed rotation per pair takes PE(p) to PE(p+k), whatever p is.
    """
    _validate.check_positive_int(length, "length")
    _validate.check_dim(dim)
    base = _validate.check_base(base)
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    omega = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = positions * omega
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)
    return pe.to(torch.float32)


class LearnedPositionalEmbedding(nn.Module):
    """A trained table with one row per position, as in BERT (512 × 768) and GPT-2.

    ``forward(positions)`` looks the rows up; a position past the table is an error, which
    is the point: a learned table has nothing to say about positions it never saw.

    Args:
        max_len: number of rows (positions 0 … max_len − 1).
        dim: embedding size.
    """

    def __init__(self, max_len: int, dim: int):
        super().__init__()
        self.max_len = _validate.check_positive_int(max_len, "max_len")
        self.dim = _validate.check_positive_int(dim, "dim")
        self.table = nn.Embedding(max_len, dim)
        nn.init.normal_(self.table.weight, std=0.02)  # BERT's initialiser range

    def forward(self, positions) -> torch.Tensor:
        """positions: an int length L (→ rows 0 … L−1) or an integer tensor ``(..., seq)``."""
        if isinstance(positions, int) and not isinstance(positions, bool):
            positions = torch.arange(_validate.check_positive_int(positions, "positions"))
        positions = _validate.as_positions(positions, device=self.table.weight.device)
        if positions.is_floating_point():
            raise TypeError(
                f"positions must be integers for a learned table, got dtype {positions.dtype}"
            )
        if positions.numel() and (positions.min() < 0 or positions.max() >= self.max_len):
            worst = int(positions.max()) if positions.max() >= self.max_len else int(
                positions.min()
            )
            raise IndexError(
                f"position {worst} is outside the learned table, which has rows "
                f"0 … {self.max_len - 1} (max_len = {self.max_len})"
            )
        return self.table(positions)
