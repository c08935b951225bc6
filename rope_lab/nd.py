"""RoPE beyond one dimension: image patches (2D) and video or multimodal tokens (3D).

One idea covers every variant here. Rotated pair i gets a frequency *vector* ω_i with one
component per axis, and a token at coordinates p = (p_1, …, p_A) turns pair i by

    angle_i(p) = ⟨p, ω_i⟩ = Σ_a p_a · ω_{a,i}

The angle is linear in p, so rotations compose and a score sees only the offset:
⟨R(p) q, R(p′) k⟩ = qᵀ R(p′ − p) k, with p′ − p = (Δx, Δy) on an image grid.

    1D RoPE      A = 1   ω_{0,i} = θ_i
    axial 2D     A = 2   the first d/4 pairs turn with x, the last d/4 with y
    RoPE-Mixed   A = 2   every pair turns along its own, learnable direction in (x, y)
                         (Heo et al. 2024, "Rotary Position Embedding for Vision Transformer")
    M-RoPE       A = 3   (t, h, w); the pairs are cut into ``mrope_section`` blocks that turn
                         with t, h and w (Qwen2-VL, Wang et al. 2024), or dealt out in turn,
                         t, h, w, t, h, w, … (interleaved M-RoPE, Qwen3-VL)

:func:`apply_rope_nd` applies it as A successive 1D rotations with :func:`rope_lab.apply_rope`,
one per axis: two rotations of the same pair add their angles.

Frequency tables have shape ``(A, d/2)`` (axis, pair) and index pairs in the order of
``layout`` (pair i is features (i, i + d/2) for "half", (2i, 2i + 1) for "interleaved").
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rope_lab import _validate
from rope_lab.rope import DEFAULT_BASE, apply_rope, inv_freq

# Heo et al. (2024) use base 100 for axial and 10 for mixed RoPE on 14 × 14 patch grids:
# an image is short compared with text, so the slowest pair needs far fewer turns.
AXIAL_BASE = 100.0
MIXED_BASE = 10.0
QWEN2_VL_MROPE_SECTION = (16, 24, 24)  # head_dim 128 → 64 pairs: t, h, w
QWEN3_VL_MROPE_SECTION = (24, 20, 20)  # the same 64 pairs, interleaved


def _check_dim_multiple_of_4(dim) -> int:
    _validate.check_dim(dim)
    if dim % 4:
        raise ValueError(
            f"dim must be a multiple of 4 for 2D RoPE (half the pairs per axis), got {dim}"
        )
    return dim


def axial_freqs(dim: int, base: float = AXIAL_BASE, *, dtype=torch.float32) -> torch.Tensor:
    """Frequencies of axial 2D RoPE: pairs 0 … d/4 − 1 turn with x, pairs d/4 … d/2 − 1 with y.

    Each axis gets the full spectrum of a d/2-dimensional RoPE, θ_j = base^(−2j/(d/2)).

    Returns:
        ``(2, dim // 2)``: row 0 is ω_x, row 1 is ω_y.
    """
    _check_dim_multiple_of_4(dim)
    spectrum = inv_freq(dim // 2, base, dtype=dtype)
    zeros = torch.zeros_like(spectrum)
    return torch.stack((torch.cat((spectrum, zeros)), torch.cat((zeros, spectrum))))


def mixed_freqs(
    dim: int, base: float = MIXED_BASE, angle: float = 0.0, *, dtype=torch.float32
) -> torch.Tensor:
    """Initial frequencies of RoPE-Mixed (Heo et al. 2024): pairs turn along directions.

    Pair j < d/4 turns along the direction ``angle``, pair d/4 + j along ``angle + π/2``,
    both with speed θ_j = base^(−2j/(d/2)):

        ω_j = θ_j · (cos φ, sin φ),   ω_{d/4+j} = θ_j · (cos(φ + π/2), sin(φ + π/2))

    ``angle = 0`` gives exactly :func:`axial_freqs`. In the paper the angle is drawn at random
    per head and the table is then learned (see :class:`RoPEMixed`).

    Returns:
        ``(2, dim // 2)``: row 0 is ω_x, row 1 is ω_y.
    """
    _check_dim_multiple_of_4(dim)
    if isinstance(angle, bool) or not isinstance(angle, (int, float)) or not math.isfinite(angle):
        raise ValueError(f"angle must be a finite number of radians, got {angle!r}")
    spectrum = inv_freq(dim // 2, base, dtype=torch.float64)
    directions = torch.tensor([angle, angle + math.pi / 2], dtype=torch.float64)
    direction_of_pair = directions.repeat_interleave(dim // 4)
    speed = torch.cat((spectrum, spectrum))
    table = torch.stack((speed * direction_of_pair.cos(), speed * direction_of_pair.sin()))
    # cos(π/2) is 6e-17 in floating point, not 0: snap it so angle 0 is exactly axial RoPE.
    table = torch.where(table.abs() < 1e-15 * speed, torch.zeros_like(table), table)
    return table.to(dtype)


def mrope_freqs(
    dim: int,
    base: float = DEFAULT_BASE,
    mrope_section=QWEN2_VL_MROPE_SECTION,
    *,
    interleaved: bool = False,
    dtype=torch.float32,
) -> torch.Tensor:
    """Frequencies of M-RoPE (Qwen2-VL, Qwen3-VL): the 1D spectrum θ_i shared out among t, h, w.

    Each pair turns with one axis, at its usual speed θ_i = base^(−2i/d). Qwen2-VL cuts the
    pairs into blocks: pairs 0 … s_t − 1 turn with the temporal position t, the next s_h
    with the height h, the last s_w with the width w, so time gets the fast pairs and space
    the slow ones. Qwen3-VL (``interleaved=True``, its config's ``mrope_interleaved``) deals
    them out in turn instead, so every axis gets fast and slow pairs: pair 1, 4, 7, … turns
    with h (s_h of them), pair 2, 5, 8, … with w (s_w of them), the rest with t. A text
    token has t = h = w = m, its angles are m·θ_i for every pair: exactly 1D RoPE.

    Args:
        dim: the rotated dimension (the head dimension d, or ``rotary_dim`` for a partial
            M-RoPE such as GLM-4.1V's).
        mrope_section: ``(s_t, s_h, s_w)``, pairs per axis, summing to dim/2.
        interleaved: Qwen3-VL's order instead of Qwen2-VL's blocks.

    Returns:
        ``(3, dim // 2)``: rows ω_t, ω_h, ω_w; each pair is non-zero in one row only.
    """
    _validate.check_dim(dim)
    _validate.check_bool(interleaved, "interleaved")
    sections = _check_sections(mrope_section, dim)
    spectrum = inv_freq(dim, base, dtype=dtype)
    axis_of_pair = _axis_of_pair(sections, dim // 2, interleaved)
    owned = axis_of_pair[None, :] == torch.arange(len(sections))[:, None]
    return torch.where(owned, spectrum, torch.zeros_like(spectrum))


def _axis_of_pair(sections, pairs: int, interleaved: bool) -> torch.Tensor:
    """The axis (0 t, 1 h, 2 w) each pair turns with, ``(pairs,)``."""
    if not interleaved:
        return torch.repeat_interleave(torch.arange(3), torch.tensor(sections))
    axis = torch.zeros(pairs, dtype=torch.long)
    for index in (1, 2):  # h from pair 1, w from pair 2, every third pair, s_h and s_w of them
        axis[index:min(3 * sections[index], pairs):3] = index
    counts = torch.bincount(axis, minlength=3).tolist()
    if counts != list(sections):
        raise ValueError(
            f"mrope_section {tuple(sections)} cannot be interleaved over {pairs} pairs: "
            f"every third pair from pair 1 turns with h and from pair 2 with w, which gives "
            f"(t, h, w) = {tuple(counts)}; expected 3·s_h − 1 ≤ {pairs} and 3·s_w ≤ {pairs}")
    return axis


def _check_sections(mrope_section, dim: int) -> tuple[int, ...]:
    try:
        sections = tuple(mrope_section)
    except TypeError:
        sections = None
    if (
        sections is None
        or len(sections) != 3
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sections)
        or sum(sections) != dim // 2
    ):
        raise ValueError(
            "mrope_section must be three non-negative ints (pairs for t, h, w) summing to "
            f"dim // 2 = {dim // 2}, got {mrope_section!r}"
        )
    return sections


def apply_rope_nd(
    x: torch.Tensor, positions, freqs: torch.Tensor, *, layout: str = "half",
    rotary_dim: int | None = None,
) -> torch.Tensor:
    """Rotate pair i of every token by the angle ⟨p, ω_i⟩ of its coordinates p.

    Done as one :func:`rope_lab.apply_rope` per axis a, with inv_freq = ω_a: rotations of
    the same pair compose by adding angles, Σ_a p_a · ω_{a,i}.

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        positions: ``(..., seq, A)`` coordinates of each token (x, y for images;
            t, h, w for M-RoPE), broadcasting against ``x.shape[:-1]`` plus the axis.
        freqs: ``(A, rotary_dim // 2)`` frequency table, e.g. from :func:`axial_freqs`.
        layout: "half" or "interleaved", as in :func:`rope_lab.apply_rope`.
        rotary_dim: rotate only the first ``rotary_dim`` features and pass the rest through
            (GLM-4.1V's M-RoPE turns half of each head). Default: all of them.

    Returns:
        Tensor with the shape, dtype and device of ``x``; computed in float32 (float64 for
        float64 input) and rounded once.
    """
    _validate.check_rope_input(x)
    _validate.check_layout(layout)
    rotary_dim = _validate.check_rotary_dim(rotary_dim, x.shape[-1])
    if not isinstance(freqs, torch.Tensor) or freqs.ndim != 2 or freqs.shape[1] != rotary_dim // 2:
        shape = tuple(freqs.shape) if isinstance(freqs, torch.Tensor) else type(freqs).__name__
        raise ValueError(
            f"freqs must be a (axes, rotary_dim // 2) = (A, {rotary_dim // 2}) tensor, got "
            f"{shape}"
        )
    positions = _validate.as_positions(positions, device=x.device)
    if positions.ndim < 2 or positions.shape[-1] != freqs.shape[0]:
        raise ValueError(
            f"positions must have shape (..., seq, {freqs.shape[0]}), one coordinate per axis "
            f"of freqs, got shape {tuple(positions.shape)}"
        )
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    rotated = x.to(compute)
    for axis in range(freqs.shape[0]):
        speeds = freqs[axis].to(x.device, compute)
        rotated = apply_rope(rotated, positions[..., axis], inv_freq=speeds, layout=layout,
                             rotary_dim=rotary_dim)
    return rotated.to(x.dtype)


def grid_positions(height: int, width: int, *, device=None) -> torch.Tensor:
    """(x, y) coordinates of a height × width patch grid in raster order (row by row).

    Returns:
        ``(height · width, 2)`` long tensor; token y·width + x sits at column x, row y.
    """
    height = _validate.check_positive_int(height, "height")
    width = _validate.check_positive_int(width, "width")
    # int64 (x, y) pairs, and the two meshgrid views flattened on the way
    _validate.check_table_size("grid_positions", f"height={height} × width={width}",
                               height * width * 32)
    rows, columns = torch.meshgrid(torch.arange(height, device=device),
                                   torch.arange(width, device=device), indexing="ij")
    return torch.stack((columns.flatten(), rows.flatten()), dim=-1)


def raster_positions(height: int, width: int, *, device=None) -> torch.Tensor:
    """The 1D positions a flattened patch grid gets: m = y·width + x (``(height·width, 1)``)."""
    coordinates = grid_positions(height, width, device=device)
    return (coordinates[:, 1] * width + coordinates[:, 0])[:, None]


def relative_kernel(freqs: torch.Tensor, offsets) -> torch.Tensor:
    """The score a query gives a copy of itself at an offset Δ, for q with equal pair halves.

        K(Δ) = (1 / (d/2)) Σ_i cos⟨Δ, ω_i⟩

    This is ⟨R(p) q, R(p + Δ) q⟩ / ‖q‖² for q = (1, 1, …, 1): the shape of the position
    signal alone, 1 at Δ = 0.

    Args:
        freqs: ``(A, d/2)`` frequency table.
        offsets: ``(..., A)`` offsets Δ.

    Returns:
        ``(...)`` kernel values in [−1, 1], float64.
    """
    if not isinstance(freqs, torch.Tensor) or freqs.ndim != 2:
        raise ValueError(f"freqs must be a 2-D (axes, pairs) tensor, got {freqs!r}")
    offsets = _validate.as_positions(offsets, device=freqs.device, name="offsets")
    if offsets.ndim < 1 or offsets.shape[-1] != freqs.shape[0]:
        raise ValueError(
            f"offsets must have shape (..., {freqs.shape[0]}), one entry per axis, got "
            f"shape {tuple(offsets.shape)}"
        )
    angles = offsets.to(torch.float64) @ freqs.to(torch.float64)
    return angles.cos().mean(dim=-1)


MROPE_RULES = ("qwen2-vl", "transformers")


def mrope_positions(text_before: int, grid_thw, text_after: int = 0, *,
                    rule: str = "qwen2-vl") -> torch.Tensor:
    """M-RoPE coordinates (t, h, w) for [text, one image or video, text], as in Qwen2-VL.

    Text token m gets (m, m, m). The vision tokens (raster order: frame, row, column) get
    (s + t, s + h, s + w) with s the next free position. Where the text after them resumes
    depends on the rule:

        "qwen2-vl"      one past the largest position used so far, s + max(frames, rows,
                        columns): the Qwen2-VL paper and the ``get_rope_index`` the model
                        shipped with (transformers 4.x, up to 5.2)
        "transformers"  s + max(rows, columns), frames ignored: ``get_rope_index`` from
                        transformers 5.3 on (whose 5.3 to 5.5 releases also give every
                        frame of a video the first frame's t; 5.6 fixed that)

    The two agree unless a video has more frames than rows and columns.

    Args:
        text_before: number of text tokens before the image or video.
        grid_thw: (frames, rows, columns) of the vision tokens (after patch merging).
        text_after: number of text tokens after it.
        rule: "qwen2-vl" or "transformers", see above.

    Returns:
        ``(seq, 3)`` long tensor.
    """
    if isinstance(text_before, bool) or not isinstance(text_before, int) or text_before < 0:
        raise ValueError(f"text_before must be a non-negative int, got {text_before!r}")
    if isinstance(text_after, bool) or not isinstance(text_after, int) or text_after < 0:
        raise ValueError(f"text_after must be a non-negative int, got {text_after!r}")
    try:
        frames, rows, columns = (_validate.check_positive_int(n, "grid_thw entry")
                                 for n in grid_thw)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"grid_thw must be three positive ints (frames, rows, columns), got {grid_thw!r}"
        ) from error
    if rule not in MROPE_RULES:
        raise ValueError(f"rule must be one of {MROPE_RULES}, got {rule!r}")
    tokens = text_before + frames * rows * columns + text_after
    _validate.check_table_size(
        "mrope_positions", f"text_before={text_before} + grid_thw={tuple(grid_thw)} + "
        f"text_after={text_after} = {tokens} tokens", tokens * 3 * 8 * 3)
    before = torch.arange(text_before)[:, None].expand(-1, 3)
    t, h, w = torch.meshgrid(torch.arange(frames), torch.arange(rows), torch.arange(columns),
                             indexing="ij")
    vision = torch.stack((t.flatten(), h.flatten(), w.flatten()), dim=-1) + text_before
    start = (int(vision.max()) + 1 if rule == "qwen2-vl"
             else text_before + max(rows, columns))
    after = torch.arange(start, start + text_after)[:, None].expand(-1, 3)
    return torch.cat((before, vision, after))


class RoPEMixed(nn.Module):
    """RoPE-Mixed (Heo et al. 2024): 2D RoPE whose frequency directions are learned per head.

    Each head h owns a table ω^(h) of shape ``(2, dim/2)``, initialised by
    :func:`mixed_freqs` with a random angle, and trained with the rest of the model.

    ``forward(q, k, positions) -> (q, k)`` with q, k of shape ``(..., n_heads, seq, dim)``
    and positions ``(seq, 2)`` (x, y) coordinates.
    """

    def __init__(self, dim: int, n_heads: int = 1, base: float = MIXED_BASE,
                 angles: torch.Tensor | None = None):
        super().__init__()
        _check_dim_multiple_of_4(dim)
        n_heads = _validate.check_positive_int(n_heads, "n_heads")
        _validate.check_table_size("RoPEMixed", f"n_heads={n_heads} × dim={dim}",
                                   n_heads * dim * 8)
        if angles is None:
            angles = torch.rand(n_heads, dtype=torch.float64) * 2 * math.pi
        angles = torch.as_tensor(angles, dtype=torch.float64)
        if angles.shape != (n_heads,):
            raise ValueError(
                f"angles must have shape (n_heads,) = ({n_heads},), got {tuple(angles.shape)}"
            )
        self.dim, self.n_heads = dim, n_heads
        self.freqs = nn.Parameter(
            torch.stack([mixed_freqs(dim, base, float(a)) for a in angles])
        )

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions):
        for name, tensor in (("q", q), ("k", k)):
            _validate.check_rope_input(tensor, name)
            if tensor.ndim < 3 or tensor.shape[-3] != self.n_heads or tensor.shape[-1] != self.dim:
                raise ValueError(
                    f"{name} must have shape (..., n_heads={self.n_heads}, seq, "
                    f"dim={self.dim}), got {tuple(tensor.shape)}"
                )
        heads = range(self.n_heads)
        rotate = [
            torch.stack([apply_rope_nd(t[..., h, :, :], positions, self.freqs[h]) for h in heads],
                        dim=-3)
            for t in (q, k)
        ]
        return rotate[0], rotate[1]
