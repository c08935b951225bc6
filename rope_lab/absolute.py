"""Absolute position encodings: one vector PE(p) per position p, added to the token embedding.

Positions count from 0. Every function returns a ``(length, dim)`` float32 tensor whose row
p is PE(p); notebook 02 compares them against the five properties a position encoding
should have.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

from rope_lab import _validate
from rope_lab.rope import DEFAULT_BASE, inv_freq


def _check_length_dim(length, dim, function: str = "", bytes_per_entry: int = 8) -> None:
    """Positive ints, and a table within ``MAX_TABLE_BYTES`` (``bytes_per_entry``: what one
    entry costs at the builder's peak, its float64 work included)."""
    _validate.check_positive_int(length, "length")
    _validate.check_positive_int(dim, "dim")
    if function:
        _validate.check_table_size(function, f"length={length} × dim={dim}",
                                   length * dim * bytes_per_entry)


def integer_pe(length: int, dim: int) -> torch.Tensor:
    """PE(p) = (p, p, …, p): unique, but grows without bound and drowns the embedding."""
    _check_length_dim(length, dim, "integer_pe", 8)
    return torch.arange(length, dtype=torch.float32)[:, None].expand(length, dim).clone()


def normalized_integer_pe(length: int, dim: int) -> torch.Tensor:
    """PE(p) = (p / length) · 1: bounded, but the code for p depends on the sequence length."""
    return integer_pe(length, dim) / length


def binary_pe(length: int, dim: int) -> torch.Tensor:
    """PE(p)_j = bit j of p (feature 0 is the least significant bit, the fastest to flip).

    ``dim`` bits count only to 2^dim − 1, so ``length`` may not exceed 2^dim.
    """
    _check_length_dim(length, dim, "binary_pe", 20)  # int64 bits, then float32
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
    _check_length_dim(length, dim, "sin_only_pe", 20)  # float64 angles, then float32
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
    _check_length_dim(length, dim, "sinusoidal_pe", 28)  # float64 angles, sin, cos, float32
    base = _validate.check_base(base)
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    omega = inv_freq(dim, base, dtype=torch.float64)  # ω_i = base^(−2i/dim), RoPE's θ_i
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
        _validate.check_table_size("LearnedPositionalEmbedding", f"max_len={max_len} × dim={dim}",
                                   max_len * dim * 4)
        self.table = nn.Embedding(max_len, dim)
        nn.init.normal_(self.table.weight, std=0.02)  # BERT's initialiser range

    def forward(self, positions) -> torch.Tensor:
        """positions: an int length L (→ rows 0 … L−1) or an integer tensor ``(..., seq)``."""
        if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
            positions = torch.arange(_validate.check_positive_int(int(positions), "positions"))
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


# --- The five properties, measured -------------------------------------------------------
# Notebook 02 asks of every encoding: (1) a unique code per position; (2) a fixed linear map
# W_k with PE(p + k) = W_k PE(p) for every p; (3) positions past the training length L get
# codes without changing the old ones or leaving the value range seen in training; (4) a
# fixed pattern: PE(p) depends on p alone (not on L, not on a training run); (5) it extends
# to 2D (one code per axis, concatenated) keeping (1) and (2). The functions below measure
# each one, so the notebook's table is computed, not asserted.

PROPERTIES = ("unique", "linear shift map", "past training length", "fixed pattern",
              "extends to 2D")


def _check_table(pe, name: str = "pe") -> torch.Tensor:
    _validate.check_float_tensor(pe, name)
    if pe.ndim != 2:
        raise ValueError(f"{name} must be a (length, dim) table, got shape {tuple(pe.shape)}")
    return pe


def shift_map(pe: torch.Tensor, k: int) -> torch.Tensor:
    """The least-squares W_k with PE(p + k) ≈ W_k PE(p) over every p in the table.

    Args:
        pe: ``(length, dim)`` table, row p = PE(p).
        k: offset, 1 ≤ k < length.

    Returns:
        ``(dim, dim)`` float64 matrix (column convention, as in the equation).
    """
    _check_table(pe)
    _validate.check_positive_int(k, "k")
    if k >= pe.shape[0]:
        raise ValueError(f"k must be smaller than the table's length {pe.shape[0]}, got {k}")
    pe = pe.detach().double().cpu()
    # Rows: PE(p)ᵀ W_kᵀ = PE(p + k)ᵀ, one equation per p; lstsq solves for W_kᵀ.
    return _lstsq(pe[:-k], pe[k:]).T


def _lstsq(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # SVD-based driver: tables such as sinusoidal have singular values near 1e-9 (slow
    # frequencies barely move over a short range); the default QR driver then truncates
    # badly and reports a large residual for a map that exists.
    return torch.linalg.lstsq(a, b, driver="gelsd").solution


def shift_map_residual(pe: torch.Tensor, k: int) -> float:
    """Relative error of the best fixed linear map: ‖PE(p+k) − W_k PE(p)‖ / ‖PE(p+k)‖ over all p.

    About 1e-7 (float32 round-off) when an exact map exists; clearly larger when none does.
    """
    table = _check_table(pe).detach().double().cpu()
    fitted = table[:-k] @ shift_map(pe, k).T
    target = table[k:]
    return float((fitted - target).norm() / target.norm().clamp_min(1e-300))


def sinusoidal_shift_map(dim: int, k: int, base: float = DEFAULT_BASE) -> torch.Tensor:
    """The exact W_k for :func:`sinusoidal_pe`: one rotation per (sin, cos) pair, no p in it.

        [sin ω_i(p+k)]   [ cos kω_i   sin kω_i] [sin ω_i p]
        [cos ω_i(p+k)] = [−sin kω_i   cos kω_i] [cos ω_i p]

    Returns:
        ``(dim, dim)`` float64 block-diagonal matrix.
    """
    _validate.check_dim(dim)
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, got {k!r} of type {type(k).__name__}")
    base = _validate.check_base(base)
    omega = inv_freq(dim, base, dtype=torch.float64)
    cos, sin = torch.cos(k * omega), torch.sin(k * omega)
    blocks = torch.stack((torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)), -2)
    return torch.block_diag(*blocks)


def min_distance(pe: torch.Tensor) -> float:
    """The smallest distance ‖PE(p) − PE(q)‖ between two different positions (0 = a clash)."""
    table = _check_table(pe).detach().double().cpu()
    if table.shape[0] < 2:
        raise ValueError(f"need at least 2 positions to compare, got {table.shape[0]}")
    distances = torch.cdist(table, table)
    distances.fill_diagonal_(float("inf"))
    return float(distances.min())


def _grid_2d(encode, side: int, dim: int) -> torch.Tensor:
    """Codes of a side × side grid, (row code, column code) concatenated: ``(side², 2·dim)``."""
    axis = encode(side, dim)
    rows = axis[:, None, :].expand(side, side, dim)
    cols = axis[None, :, :].expand(side, side, dim)
    return torch.cat((rows, cols), dim=-1).reshape(side * side, 2 * dim)


def encoding_properties(encode, *, length: int = 64, dim: int = 16, offsets=(1, 5),
                        tolerance: float = 1e-4, rerun=None) -> dict[str, bool]:
    """Measure the five properties of ``encode(length, dim) → (length, dim)`` table.

    Each entry of the result is a measurement, not a label:
      unique: :func:`min_distance` > tolerance.
      linear shift map: :func:`shift_map_residual` < tolerance for every k in ``offsets``.
      past training length: ``encode(2·length)`` works, keeps the first ``length`` rows,
        and its new rows stay inside the overall value range of the first ``length``.
      fixed pattern: the first length/2 rows agree between ``encode(length)`` and
        ``encode(length // 2)`` (not a function of L), and ``rerun(length)`` gives the same
        codes (not a function of the training run). ``rerun`` is the encoding another training
        run would give; a formula is its own rerun (the default), a learned table is not
        (:func:`trained_table` with another seed).
      extends to 2D: per-axis codes of dim/2 features, concatenated on a grid, are unique
        and have linear shift maps for row, column and diagonal offsets.
    ``length`` must be well above ``dim`` so a shift map cannot fit by having more unknowns
    than equations.
    """
    _validate.check_positive_int(length, "length")
    _validate.check_positive_int(dim, "dim")
    if rerun is not None and not callable(rerun):
        raise TypeError(f"rerun must be None or an encode(length, dim) function, got "
                        f"{rerun!r} of type {type(rerun).__name__}")
    if length < 2 * dim:
        raise ValueError(f"length must be at least 2·dim = {2 * dim} so shift maps are "
                         f"over-determined, got length = {length}")
    trained = encode(length, dim)
    result = {"unique": min_distance(trained) > tolerance}
    result["linear shift map"] = all(shift_map_residual(trained, k) < tolerance for k in offsets)

    try:
        longer = encode(2 * length, dim)
    except (ValueError, IndexError):
        result["past training length"] = False
    else:
        same_old = torch.allclose(longer[:length], trained, atol=tolerance)
        new = longer[length:]
        inside = bool(new.min() >= trained.min() - tolerance) and bool(
            new.max() <= trained.max() + tolerance)
        result["past training length"] = same_old and inside

    half = length // 2
    again = (encode if rerun is None else rerun)(length, dim)
    result["fixed pattern"] = torch.allclose(encode(half, dim), trained[:half], atol=tolerance) \
        and torch.allclose(again, trained, atol=tolerance)

    # Each axis gets half the features; the grid side must again exceed them for the fit.
    axis_dim = max(dim // 2, 1)
    side = 2 * axis_dim + 2
    grid = _grid_2d(encode, side, axis_dim).detach().double().cpu()
    index = torch.arange(side * side).reshape(side, side)
    fits = []
    for drow, dcol in ((1, 0), (0, 1), (1, 1)):
        source = index[: side - drow, : side - dcol].flatten()
        target = index[drow:, dcol:].flatten()
        solution = _lstsq(grid[source], grid[target])
        error = (grid[source] @ solution - grid[target]).norm() / grid[target].norm()
        fits.append(float(error) < tolerance)
    result["extends to 2D"] = min_distance(grid) > tolerance and all(fits)
    return result


def learned_pe(length: int, dim: int) -> torch.Tensor:
    """A freshly initialised BERT-style table of exactly ``length`` rows (for the comparison).

    Each call initialises a new table, as each training run would learn a different one.
    """
    with torch.no_grad():
        return LearnedPositionalEmbedding(length, dim)(length)


def trained_table(rows: int, *, seed: int = 0):
    """One training run of a BERT-style table with ``rows`` rows, as ``encode(length, dim)``.

    Within one run the codes are fixed: every call returns the same rows (per ``dim``), and a
    position past the last row raises ``IndexError``, as :class:`LearnedPositionalEmbedding`
    does. Another ``seed`` stands for another training run, which learns other codes. Random
    initial rows stand in for trained ones: the properties measured here do not depend on
    their values.
    """
    rows = _validate.check_positive_int(rows, "rows")
    seed = _validate.check_int(seed, "seed")
    tables: dict[int, LearnedPositionalEmbedding] = {}

    def encode(length: int, dim: int) -> torch.Tensor:
        _check_length_dim(length, dim)
        _validate.check_table_size("trained_table", f"rows={rows} × dim={dim}", rows * dim * 4)
        if dim not in tables:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed * 1_000_003 + dim)
                tables[dim] = LearnedPositionalEmbedding(rows, dim)
        with torch.no_grad():
            return tables[dim](length)

    return encode


ENCODINGS = {
    "integer": integer_pe,
    "normalized integer": normalized_integer_pe,
    "binary": binary_pe,
    "sin-only": sin_only_pe,
    "sinusoidal": sinusoidal_pe,
    "learned (BERT-style)": learned_pe,
}


def property_table(*, length: int = 64, dim: int = 16) -> dict[str, dict[str, bool]]:
    """:func:`encoding_properties` for every encoding in :data:`ENCODINGS`.

    The learned table is measured as what it is after training: one run's table of ``length``
    rows (:func:`trained_table`), compared with a second run for the fixed pattern. So its ✘ on
    "past training length" comes from the missing rows, and on "fixed pattern" from the other
    run, not from :func:`learned_pe` drawing a new table on every call.
    """
    table = {}
    for name, encode in ENCODINGS.items():
        rerun = None
        if encode is learned_pe:
            encode, rerun = trained_table(length, seed=0), trained_table(length, seed=1)
        table[name] = encoding_properties(encode, length=length, dim=dim, rerun=rerun)
    return table


def property_table_markdown(table: dict[str, dict[str, bool]]) -> str:
    """A Markdown table with ✔/✘ per encoding and property, in the course's language (the
    names of :data:`PROPERTIES` and :data:`ENCODINGS` are in the package catalog)."""
    from rope_lab.i18n import _

    lines = ["| " + _("encoding") + " | " + " | ".join(_(p) for p in PROPERTIES) + " |",
             "|---|" + "---|" * len(PROPERTIES)]
    for name, found in table.items():
        marks = " | ".join("✔" if found[p] else "✘" for p in PROPERTIES)
        lines.append(f"| {_(name)} | {marks} |")
    return "\n".join(lines)
