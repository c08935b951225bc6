"""Rotary position embedding (RoPE): the functions every notebook calls.

Notation (the same in every notebook):
    m, n     token positions
    d        head dimension (``dim``), even
    θ_i      base^(−2i/d) for i = 0 … d/2 − 1, the rotation speed of pair i
    R_{Θ,m}  the block-diagonal rotation that turns pair i by the angle m·θ_i

RoPE rotates each pair of features of a query or key by an angle proportional to its
position. Because rotations compose, ⟨R_m q, R_n k⟩ = qᵀ R_{n−m} k: the attention score sees
only the offset n − m.

Which features form a pair is a convention, the ``layout``:
    "half"         pairs (i, i + d/2)  — GPT-NeoX, Hugging Face ``rotate_half``
    "interleaved"  pairs (2i, 2i + 1)  — RoFormer, Meta LLaMA, GPT-J
Both give the same scores; they differ by a fixed permutation of features.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from rope_lab import _validate, fast

DEFAULT_BASE = 10000.0
# RotaryEmbedding grows its cos/sin cache on demand up to this many positions (or twice its
# current size); positions beyond are computed on the fly.
MAX_AUTO_CACHE = 1 << 16


def inv_freq(dim: int, base: float = DEFAULT_BASE, *, device=None, dtype=torch.float32):
    """The per-pair rotation speeds θ_i = base^(−2i/dim), i = 0 … dim/2 − 1.

    Args:
        dim: head dimension d (even).
        base: the RoPE base (10000 in the RoFormer paper, 5e5 in Llama 3).
        device: where to put the result.
        dtype: torch.float32 or torch.float64.

    Returns:
        ``(dim // 2,)`` tensor, θ_0 = 1 down to θ_{d/2−1} = base^(−(d−2)/d).
    """
    _validate.check_dim(dim)
    base = _validate.check_base(base)
    _validate.check_angle_dtype(dtype)
    _validate.check_table_size("inv_freq", f"dim={dim}", dim // 2 * 8 * 2)
    # Exponents in float64 so that float32 results are correctly rounded.
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim
    return (base**-exponents).to(dtype)


def rope_angles(positions, inv_freq: torch.Tensor) -> torch.Tensor:
    """The angles m·θ_i for every position m and pair i (an outer product).

    Computed in float32, or float64 when ``positions`` or ``inv_freq`` is float64 or a
    position reaches 2^24 (where float32 cannot hold every integer) — never in a 16-bit type,
    where m·θ_i loses whole turns once m passes a few hundred.

    Args:
        positions: ``(..., seq)`` integer or float positions (a tensor, list or range).
        inv_freq: ``(dim // 2,)`` rotation speeds, e.g. from :func:`inv_freq`.

    Returns:
        ``(..., seq, dim // 2)`` angles in radians.

    Raises ``ValueError`` when the table would pass ``rope_lab._validate.MAX_TABLE_BYTES``.
    """
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.ndim != 1:
        raise ValueError(
            "inv_freq must be a 1-D tensor of shape (dim // 2,), got "
            f"{tuple(inv_freq.shape) if isinstance(inv_freq, torch.Tensor) else inv_freq!r}"
        )
    if not inv_freq.is_floating_point():
        raise TypeError(f"inv_freq must be a floating-point tensor, got dtype {inv_freq.dtype}")
    positions = _validate.as_positions(positions, device=inv_freq.device)
    wide = inv_freq.dtype == torch.float64 or _validate.needs_wide_angles(positions)
    _validate.check_table_size(
        "rope_angles", f"{positions.numel()} positions × {inv_freq.numel()} frequencies",
        positions.numel() * inv_freq.numel() * (8 if wide else 4))
    return _outer_angles(positions, inv_freq, wide=wide)


def _outer_angles(positions: torch.Tensor, inv_freq: torch.Tensor, *,
                  wide: bool | None = None) -> torch.Tensor:
    """:func:`rope_angles` for trusted inputs (a table no bigger than the x it rotates).

    wide: float64 angles, when the caller already knows; else decided here."""
    if wide is None:
        wide = inv_freq.dtype == torch.float64 or _validate.needs_wide_angles(positions)
    dtype = torch.float64 if wide else torch.float32
    return positions.to(dtype)[..., None] * inv_freq.to(dtype)


def rope_pairs(dim: int, layout: str = "half") -> tuple[torch.Tensor, torch.Tensor]:
    """Feature indices (first, second) of the d/2 rotated pairs under ``layout``.

    Pair i rotates features ``first[i]`` and ``second[i]`` by the angle m·θ_i.
    """
    _validate.check_dim(dim)
    _validate.check_layout(layout)
    _validate.check_table_size("rope_pairs", f"dim={dim}", dim * 8)
    if layout == "half":
        first = torch.arange(dim // 2)
        return first, first + dim // 2
    first = torch.arange(0, dim, 2)
    return first, first + 1


def apply_rope(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = DEFAULT_BASE,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    rotary_dim: int | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Rotate each feature pair of ``x`` by the angle m·θ_i of its position m.

    For a pair (a, b) of features at position m, with c = cos(m·θ_i), s = sin(m·θ_i):

        a' = a·c − b·s
        b' = a·s + b·c

    Args:
        x: ``(..., seq, dim)`` queries or keys, any float dtype.
        positions: positions m, one per token: ``(seq,)``, or a tensor with as many
            dimensions as ``x.shape[:-1]`` that broadcasts to it (per-batch positions for
            ``(batch, heads, seq, dim)`` x are ``(batch, 1, seq)``). Integers, or floats for
            interpolated positions. Default ``arange(seq)``.
        base: RoPE base, used when ``inv_freq`` is not given.
        inv_freq: ``(rotary_dim // 2,)`` rotation speeds, for scaled variants (PI, NTK,
            YaRN …). Overrides ``base``.
        layout: "half" pairs (i, i + r/2); "interleaved" pairs (2i, 2i + 1).
        rotary_dim: rotate only the first ``rotary_dim`` features and pass the rest through
            (partial rotary, as in GPT-NeoX and Phi). Default: all of them.
        backend: which implementation computes it (all give the formula's result, to float
            rounding; :mod:`rope_lab.fast` explains each):

            - "auto" (default): the fastest that applies: "triton" on CUDA, "c" for the half
              layout on a CPU, "complex" for the interleaved layout, else "eager";
              "reference" on other devices, under torch.compile and when gradients must
              flow into ``inv_freq``.
            - "reference": :func:`rotate_reference`, the formula in plain torch ops.
            - "eager": three torch kernels per cache-sized block of rows (any device).
            - "c": one C loop compiled on first use (half layout, CPU, float32/float64).
            - "complex": one complex multiply (interleaved layout).
            - "triton": one Triton kernel (CUDA; CPU tensors under ``TRITON_INTERPRET=1``).

            A backend named here runs or raises ``BackendUnavailable`` saying why; it never
            falls back to another one.

    Returns:
        Tensor with the shape, dtype and device of ``x``. The angles and the rotation are
        computed in float32 (float64 for float64 input) and rounded once at the end.
    """
    _validate.check_rope_input(x)
    _validate.check_layout(layout)
    _validate.check_backend(backend)
    rotary_dim = _validate.check_rotary_dim(rotary_dim, x.shape[-1])
    cos, sin = _cos_sin_for(x, positions, base=base, freqs=inv_freq, rotary_dim=rotary_dim)
    return _rotate(x, cos, sin, layout, backend)


def apply_rope_(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = DEFAULT_BASE,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    rotary_dim: int | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """In-place :func:`apply_rope`: overwrite ``x`` with its rotation and return it.

    Same arguments and result as :func:`apply_rope`, without allocating an output: the
    cheapest way to rotate a tensor you no longer need unrotated (a fresh q or k).

    Refused (``ValueError``) for tensors that require grad (autograd needs the unrotated
    values), for inference tensors outside ``torch.inference_mode`` (PyTorch forbids writing
    into them there) and for tensors whose elements share memory (an ``expand`` or an
    overlapping ``as_strided`` view: each shared element would be rotated more than once).
    Like PyTorch's own in-place ops it moves x's version counter, so if autograd saved x for
    a backward pass, that backward raises "modified by an inplace operation" instead of
    silently using the rotated values.
    """
    _validate.check_rope_input(x)
    _validate.check_writable_in_place(x, "apply_rope_")
    _validate.check_layout(layout)
    _validate.check_backend(backend)
    rotary_dim = _validate.check_rotary_dim(rotary_dim, x.shape[-1])
    cos, sin = _cos_sin_for(x, positions, base=base, freqs=inv_freq, rotary_dim=rotary_dim)
    return _rotate(x, cos, sin, layout, backend, out=x)


def _cos_sin_for(x, positions, *, base, freqs, rotary_dim):
    """Validate positions and frequencies for ``x``; return cos and sin of m·θ_i."""
    if freqs is None:
        wide = x.dtype == torch.float64
        dtype = torch.float64 if wide else torch.float32
        if positions is None:  # the common call: positions 0 … seq − 1, from a small cache
            base = _validate.check_base(base)
            return _cached_cos_sin(x.shape[-2], rotary_dim, base, x.device, dtype)
        freqs = inv_freq(rotary_dim, base, device=x.device, dtype=dtype)
    else:
        if base != DEFAULT_BASE:
            raise ValueError(
                f"pass either base or inv_freq, not both: got base={base} and an inv_freq tensor"
            )
        freqs = _validate.check_inv_freq(freqs, rotary_dim // 2).to(x.device)
    angles = _outer_angles(_validate.positions_for(x, positions), freqs)
    # Positions past 2^24 widen the angles to float64; cos and sin fit the frequencies' dtype.
    return angles.cos().to(freqs.dtype), angles.sin().to(freqs.dtype)


@functools.lru_cache(maxsize=16)
def _cached_cos_sin(seq: int, rotary_dim: int, base: float, device, dtype):
    """cos and sin of m·θ_i for m = 0 … seq − 1: ``(seq, rotary_dim/2)`` each, kept for reuse.

    Without the cache every call (every layer, every step) recomputes seq × d/2 angles and
    their cos and sin; with it only the first call pays. Built as ordinary tensors even under
    inference_mode, so a later call that records autograd may use them.
    """
    with torch.inference_mode(False), torch.no_grad():
        freqs = inv_freq(rotary_dim, base, device=device, dtype=dtype)
        angles = _outer_angles(torch.arange(seq, device=device), freqs)
        return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str,
            backend: str = "auto", *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate the first 2·cos.shape[-1] features of x (into out when given) on ``backend``.

    :mod:`rope_lab.fast` computes what :func:`rotate_reference` computes, to float rounding
    (the tests check it), in fewer passes over memory. "auto" uses the reference on other
    devices, for differentiable cos/sin and in code being traced by torch.compile.
    """
    if backend == "auto" and not fast.can_use_fast_path(x, cos):
        backend = "reference"
    if backend == "reference":
        result = rotate_reference(x, cos, sin, layout)
        return result if out is None else out.copy_(result)
    fast.check_backend(backend, x, cos, layout)
    return fast.rotate(x, cos, sin, layout, out=out, backend=backend)


def rotate_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """The formula as written, the reference every fast path is tested against.

    Rotates the first 2·cos.shape[-1] features of x and passes the rest; trusts its inputs.
    cos, sin: ``(..., seq, r/2)`` in float32 or float64, broadcasting against x.
    """
    half = cos.shape[-1]
    rotary_dim = 2 * half
    compute = torch.promote_types(x.dtype, cos.dtype)
    rotated = x[..., :rotary_dim].to(compute)
    if layout == "half":
        a, b = rotated[..., :half], rotated[..., half:]
        out = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    else:
        a, b = rotated[..., 0::2], rotated[..., 1::2]
        out = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    out = out.to(x.dtype)
    if rotary_dim == x.shape[-1]:
        return out
    return torch.cat((out, x[..., rotary_dim:]), dim=-1)


def rope_matrix(
    position,
    dim: int,
    *,
    base: float = DEFAULT_BASE,
    layout: str = "interleaved",
    dtype=torch.float32,
    device=None,
) -> torch.Tensor:
    """The dense rotation R_{Θ,m}: ``apply_rope(x)[m] == rope_matrix(m, d) @ x[m]``.

    Block-diagonal for the interleaved layout (2×2 blocks on the diagonal); the same blocks
    spread out to rows (i, i + d/2) for the half layout.

    Args:
        position: m, a number or a tensor of positions of any shape ``P``.
        dim: d (even).
        base, layout: as in :func:`apply_rope`.
        dtype: torch.float32 or torch.float64.

    Returns:
        ``P + (dim, dim)`` tensor, orthogonal, with R_mᵀ R_n = R_{n−m}. Refused
        (``ValueError``) past ``rope_lab._validate.MAX_TABLE_BYTES``: d² numbers per position.
    """
    _validate.check_angle_dtype(dtype)
    _validate.check_dim(dim)
    _validate.check_layout(layout)
    positions = _validate.as_positions(position, device=device, name="position")
    count = positions.numel()
    _validate.check_table_size(
        "rope_matrix", f"dim={dim}" + (f" at {count} positions" if positions.ndim else ""),
        count * dim * dim * dtype.itemsize)
    return _rope_matrix(positions, dim, base=base, layout=layout, dtype=dtype)


def _rope_matrix(positions, dim, *, base, layout, dtype):
    """:func:`rope_matrix` for validated inputs whose size was checked."""
    first, second = rope_pairs(dim, layout)
    angles = rope_angles(positions, inv_freq(dim, base, device=positions.device, dtype=dtype))
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    matrix = torch.zeros(*angles.shape[:-1], dim, dim, dtype=dtype, device=positions.device)
    matrix[..., first, first] = cos
    matrix[..., first, second] = -sin
    matrix[..., second, first] = sin
    matrix[..., second, second] = cos
    return matrix


def interleaved_to_half(x: torch.Tensor) -> torch.Tensor:
    """Reorder features (x0, x1, x2, x3, …) → (x0, x2, …, x1, x3, …).

    If ``y = apply_rope(x, layout="interleaved")`` then
    ``interleaved_to_half(y) == apply_rope(interleaved_to_half(x), layout="half")``.
    """
    _check_pairs_of_features(x)
    return x[..., _interleaved_to_half_order(x.shape[-1], x.device)]


def half_to_interleaved(x: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`interleaved_to_half`."""
    _check_pairs_of_features(x)
    order = _interleaved_to_half_order(x.shape[-1], x.device)
    return x[..., torch.argsort(order)]


def _check_pairs_of_features(x) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("x must have at least one dimension (the features), got a scalar")
    _validate.check_dim(x.shape[-1], name="x.shape[-1]")


def _interleaved_to_half_order(dim: int, device=None) -> torch.Tensor:
    return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2))).to(device)


def permute_for_half_layout(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder the rows of a q or k projection so half-split RoPE reproduces interleaved RoPE.

    A model trained with interleaved RoPE (Meta's LLaMA code) computes scores
    ⟨R_int(m) W_q x_m, R_int(n) W_k x_n⟩. Hugging Face's LLaMA runs half-split RoPE, so its
    checkpoint converter permutes, within every head, the output rows of W_q and W_k by
    :func:`interleaved_to_half`. The scores are then identical.

    Args:
        weight: ``(n_heads · head_dim, in_features)`` projection weight, or its
            ``(n_heads · head_dim,)`` bias.
        n_heads: number of heads the rows are split into.

    Returns:
        A new tensor of the same shape with each head's rows reordered.
    """
    _validate.check_float_tensor(weight, "weight")
    n_heads = _validate.check_positive_int(n_heads, "n_heads")
    if weight.ndim not in (1, 2):
        raise ValueError(
            "weight must be a 2-D projection weight (out_features, in_features) or a 1-D "
            f"bias, got shape {tuple(weight.shape)}"
        )
    rows = weight.shape[0]
    if rows % n_heads or (rows // n_heads) % 2:
        raise ValueError(
            f"weight.shape[0] = {rows} must split into n_heads = {n_heads} heads of even "
            "size"
        )
    head_dim = rows // n_heads
    order = _interleaved_to_half_order(head_dim, weight.device)
    offsets = torch.arange(n_heads, device=weight.device)[:, None] * head_dim
    return weight[(offsets + order).flatten()]


class RotaryEmbedding(nn.Module):
    """RoPE as a module: caches cos and sin (float32) and rotates q and k.

    ``forward(q, k, positions=None) -> (q, k)`` with q, k of shape ``(..., seq, D)`` and
    D ≥ dim; features past ``dim`` pass through unrotated (partial rotary).

    Args:
        dim: number of rotated features (even).
        base: RoPE base.
        layout: "half" or "interleaved", as in :func:`apply_rope`.
        max_seq_len: precompute the cache for positions 0 … max_seq_len − 1. Positions past
            the cache, and float positions, are computed on the fly, with the same result.
    """

    def __init__(
        self,
        dim: int,
        base: float = DEFAULT_BASE,
        layout: str = "half",
        max_seq_len: int | None = None,
    ):
        super().__init__()
        self.dim = _validate.check_dim(dim)
        self.base = _validate.check_base(base)
        self.layout = _validate.check_layout(layout)
        if max_seq_len is not None:
            _validate.check_positive_int(max_seq_len, "max_seq_len")
            # angles, cos and sin: three float32 tables of max_seq_len × dim/2
            _validate.check_table_size("RotaryEmbedding", f"max_seq_len={max_seq_len}",
                                       3 * max_seq_len * (dim // 2) * 4)
        self.max_seq_len = max_seq_len
        self.register_buffer("inv_freq", inv_freq(dim, base), persistent=False)
        self.register_buffer("cos_cached", torch.empty(0, dim // 2), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, dim // 2), persistent=False)
        # Frequencies set by hand (inv_freq replaced or written into, e.g. a scaled variant)
        # take over from ``base``; the cache follows them (see _refresh_if_frequencies_changed).
        self.custom_frequencies = False
        self._build_cache(max_seq_len or 0, self.inv_freq.device)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}, "
            f"max_seq_len={self.max_seq_len}"
        )

    def _apply(self, fn, recurse=True):
        # Module casts (.half(), .to(torch.bfloat16)) would round the frequencies and the
        # cos/sin cache to 16 bits; angles stay float32, so rebuild both after any move/cast.
        super()._apply(fn, recurse)
        device = self.inv_freq.device
        if self.custom_frequencies:
            self.inv_freq = self.inv_freq.float()
        else:
            self.inv_freq = inv_freq(self.dim, self.base, device=device)
        self._build_cache(self.cos_cached.shape[0], device)
        return self

    def _build_cache(self, length: int, device) -> None:
        freqs = self.inv_freq.to(device)
        angles = _outer_angles(torch.arange(length, device=device), freqs)
        self.cos_cached, self.sin_cached = angles.cos(), angles.sin()
        self._cache_source = self.inv_freq
        self._cache_version = None if freqs.is_inference() else self.inv_freq._version

    def _refresh_if_frequencies_changed(self, device) -> None:
        """Rebuild the cache when inv_freq was replaced or written into since it was built."""
        freqs = self.inv_freq
        changed = freqs is not self._cache_source or (
            not freqs.is_inference() and freqs._version != self._cache_version
        )
        if changed:
            _validate.check_inv_freq(freqs.float(), self.dim // 2)
            self.custom_frequencies = True
            self._build_cache(self.cos_cached.shape[0], device)

    def cos_sin(
        self, positions: torch.Tensor, dtype=torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of m·θ_i for ``positions`` ``(..., seq)`` → two ``(..., seq, dim/2)``.

        float32 comes from the cache when it covers the positions; float64 is computed.
        """
        self._refresh_if_frequencies_changed(positions.device)
        if dtype == torch.float64:
            freqs = (self.inv_freq.to(positions.device, dtype) if self.custom_frequencies
                     else inv_freq(self.dim, self.base, device=positions.device, dtype=dtype))
            angles = _outer_angles(positions, freqs)
            return angles.cos(), angles.sin()
        cached = self.cos_cached.shape[0]
        device = positions.device
        if self.cos_cached.device != device:
            self._build_cache(cached, device)
        integral = not positions.is_floating_point()
        if integral and positions.numel() and self.max_seq_len is None:
            needed = int(positions.max()) + 1
            # Grow the cache for ordinary lengths only: one far position (say 10^6) must not
            # allocate a table of 10^6 rows; such positions are computed on the fly.
            if cached < needed <= max(2 * cached, MAX_AUTO_CACHE):
                self._build_cache(needed, device)
                cached = needed
        if integral and (positions.numel() == 0 or (
            int(positions.min()) >= 0 and int(positions.max()) < cached
        )):
            return self.cos_cached[positions], self.sin_cached[positions]
        angles = _outer_angles(positions, self.inv_freq.to(device))
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions=None):
        for name, tensor in (("q", q), ("k", k)):
            _validate.check_rope_input(tensor, name)
            if tensor.shape[-1] < self.dim:
                raise ValueError(
                    f"{name}.shape[-1] = {tensor.shape[-1]} is smaller than the rotary "
                    f"dim = {self.dim} this module was built with"
                )
        if positions is None:
            if q.shape[-2] != k.shape[-2]:
                raise ValueError(
                    f"q has {q.shape[-2]} positions and k has {k.shape[-2]}; pass positions "
                    "explicitly when they differ"
                )
        else:
            positions = _validate.as_positions(positions, device=q.device)
            _validate.check_positions_shape(positions, q.shape[:-1])
            _validate.check_positions_shape(positions, k.shape[:-1])
        wide = torch.float64 in (q.dtype, k.dtype)
        if positions is None and not wide:
            # The common call: positions 0 … seq − 1, a slice of the cache, no device sync.
            seq = q.shape[-2]
            self._refresh_if_frequencies_changed(q.device)
            if self.cos_cached.shape[0] < seq or self.cos_cached.device != q.device:
                self._build_cache(max(seq, self.cos_cached.shape[0]), q.device)
            cos, sin = self.cos_cached[:seq], self.sin_cached[:seq]
            return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)
        if positions is None:
            positions = torch.arange(q.shape[-2], device=q.device)
        cos, sin = self.cos_sin(positions, torch.float64 if wide else torch.float32)
        return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)
