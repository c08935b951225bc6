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

import torch
from torch import nn

from rope_lab import _angles, _validate, fast
from rope_lab._eager import rotate_reference  # noqa: F401 - the formula, shown from here

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
    return _angles.inv_freq_values(dim, base, device, dtype)


def rope_angles(positions, inv_freq: torch.Tensor) -> torch.Tensor:
    """The angles m·θ_i for every position m and pair i (an outer product).

    In float32 — the product of float32 m and float32 θ_i, exactly as transformers computes
    it — or in float64 when ``positions`` or ``inv_freq`` is float64; never in a 16-bit type,
    where m·θ_i loses whole turns once m passes a few hundred. A float32 angle carries a
    relative error of 2^-24 (from θ_i and from the product), an absolute error of about
    m·θ_i·2^-24 radians: 0.0002 at m = 4096, about a radian near m = 2^24, where float32 no
    longer holds every integer either. For positions that large pass float64 positions.
    (:func:`apply_rope` keeps integer positions exact at any size; see its docstring.)

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
    wide = torch.float64 in (inv_freq.dtype, positions.dtype)
    _validate.check_table_size(
        "rope_angles", f"{positions.numel()} positions × {inv_freq.numel()} frequencies",
        positions.numel() * inv_freq.numel() * (8 if wide else 4))
    return _angles.outer_angles(positions, inv_freq, wide=wide)


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
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
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

            - "auto" (default): the fastest that applies: "triton" on CUDA, "c" on a CPU,
              "complex" for the interleaved layout, else "eager"; "reference" on other
              devices, under torch.compile and when gradients must flow into ``inv_freq``
              or the tables.
            - "reference": :func:`rotate_reference`, the formula in plain torch ops.
            - "eager": three torch kernels per cache-sized block of rows on a CPU, four
              whole-tensor kernels on other devices.
            - "c": one C loop compiled on first use (CPU, float32, float64 or bfloat16);
              given position ids, their cos and sin are computed in the same call.
            - "complex": one complex multiply (interleaved layout).
            - "triton": one Triton kernel, which computes the angles from the positions
              itself (CUDA; CPU tensors under ``TRITON_INTERPRET=1``).

            A backend named here runs or raises ``BackendUnavailable`` saying why; it never
            falls back to another one.
        cos, sin: precomputed tables instead of positions and frequencies (both or neither),
            in either convention: ``(..., seq, r/2)``, one value per pair (flash-attention,
            vLLM), or transformers' ``(..., seq, r)``, one value per feature, duplicated in
            the layout's pairing (``cat((c, c))`` for "half", each value twice in a row for
            "interleaved"), with r = ``rotary_dim`` (default: the whole of ``x.shape[-1]``).
            Their leading dims broadcast against ``x.shape[:-1]`` like positions do
            (transformers' ``(batch, seq, r)`` tables need ``[:, None]`` for
            ``(batch, heads, seq, dim)`` x). An attention factor (YaRN's mscale, LongRoPE's
            scale) is carried in them: x is multiplied by whatever cos and sin hold. Any
            float dtype; 16-bit tables are widened to float32 exactly. On a CPU a duplicated
            table whose two copies differ is refused (another pairing); elsewhere that check
            would cost a device sync and is skipped.

    Returns:
        Tensor with the shape, dtype and device of ``x``: the rotation computed in float32,
        or in float64 when x, ``positions``, ``inv_freq`` or the tables are float64, and
        rounded once to x's dtype at the end.

    Angles (what "exact" means here):
        - θ_i is float32, as in transformers, unless x, ``positions`` or ``inv_freq`` is
          float64: then θ_i (from ``base``: base^(−2i/d) in float64), the angles, cos and
          sin and the rotation are float64, rounded once to x's dtype (float64 positions
          with float32 x give the float64 rotation rounded to float32).
        - θ_i from ``base`` is base^(−2i/d) computed in float64 and rounded once: the float32
          nearest to the exact value. transformers computes ``1 / base ** (arange(0, d, 2) /
          d)`` in float32, rounding three times: at base 10⁴ and d = 128 its θ_i differs from
          rope_lab's in 19 of the 64 pairs, each by one unit in the last place (relative
          1.2e-7 at most), so over positions 0 … 8191 its angles, and with them its cos and
          sin, differ from rope_lab's by up to 2.4e-4 (m·Δθ_i). Pass transformers' own
          ``inv_freq`` to get its angles.
        - A float32 θ_i is itself off by up to 2^-24 of its value, so the angle m·θ_i is off
          by up to about m·θ_i·2^-24 radians from the exact-θ angle whatever the arithmetic
          (0.0002 at m = 4096, about a radian near 2^24): ask for float64 if such positions
          matter.
        - Integer positions are exact at any size, and m·θ_i is the exact product of m and
          the float32 θ_i: below 2^24 rounded once to float32 (the float32 product,
          transformers' angle bit for bit); at or beyond 2^24, where float32 can hold neither
          m nor the angle to within a radian, reduced modulo 2π in float64 first, so the
          angle is accurate to a few 1e-7 radians (up to m ≈ 2^31). The choice is made per
          element: no value is read on the host.
        - cos and sin of a float32 angle are computed in float64 and rounded once to float32
          (the float32 nearest to the exact cosine of that angle; PyTorch's float32 ``cos``,
          and with it transformers' tables, is one unit in the last place off in about 5 %
          of them).
        - Float positions (interpolated) in a 16/32-bit dtype are converted to float32;
          such positions at or beyond 2^24 are refused, as are NaN and ±inf: one reduction,
          a device sync on a GPU. Integer positions are never read on the host, so a call
          with them can be captured in a CUDA graph and traced by torch.compile (fullgraph).
          Under torch.compile and during CUDA graph capture value checks (finite float
          positions, finite ``inv_freq``) are skipped: a bad value gives NaN, not an error.
    """
    _validate.check_rope_input(x)
    _validate.check_layout(layout)
    _validate.check_backend(backend)
    rotary_dim = _validate.check_rotary_dim(rotary_dim, x.shape[-1])
    return _apply(x, positions, base, inv_freq, layout, rotary_dim, backend, None, cos, sin)


def apply_rope_(
    x: torch.Tensor,
    positions=None,
    *,
    base: float = DEFAULT_BASE,
    inv_freq: torch.Tensor | None = None,
    layout: str = "half",
    rotary_dim: int | None = None,
    backend: str = "auto",
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
) -> torch.Tensor:
    """In-place :func:`apply_rope`: overwrite ``x`` with its rotation and return it.

    Same arguments and result as :func:`apply_rope` (tables included), without allocating an
    output: the cheapest way to rotate a tensor you no longer need unrotated (a fresh q or k).

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
    return _apply(x, positions, base, inv_freq, layout, rotary_dim, backend, x, cos, sin)


def _apply(x, positions, base, freqs, layout, rotary_dim, backend, out, cos=None, sin=None):
    """Check positions and frequencies (or tables) for x, then hand the rotation to the
    dispatcher, :mod:`rope_lab.fast` (into out when given)."""
    if cos is not None or sin is not None:
        cos, sin = _tables_for(x, positions, base, freqs, layout, rotary_dim, cos, sin)
        return fast.rotate(x, cos, sin, layout, out=out, backend=backend)
    if positions is not None:
        positions = _validate.positions_for(x, positions)
    theta, base = _frequencies(x, positions, base, freqs, rotary_dim)
    return fast.rope(x, positions, theta, layout, base=base, out=out, backend=backend)


def _frequencies(x, positions, base, freqs, rotary_dim):
    """(θ_i for x on x's device, the base it came from or None): float64 when x, the
    positions or inv_freq are float64."""
    wide = x.dtype == torch.float64 or (positions is not None
                                        and positions.dtype == torch.float64)
    if freqs is None:
        base = _validate.check_base(base)
        dtype = torch.float64 if wide else torch.float32
        return _angles.theta(rotary_dim, base, dtype, x.device), base
    if base != DEFAULT_BASE:
        raise ValueError(
            f"pass either base or inv_freq, not both: got base={base} and an inv_freq tensor"
        )
    freqs = _validate.check_inv_freq(freqs, rotary_dim // 2)
    dtype = torch.float64 if wide or freqs.dtype == torch.float64 else torch.float32
    return freqs.to(x.device, dtype), None


def _tables_for(x, positions, base, freqs, layout, rotary_dim, cos, sin):
    """Checked tables for x in the one-value-per-pair convention ``(..., seq, r/2)``."""
    given = [name for name, value in (("positions", positions), ("inv_freq", freqs))
             if value is not None]
    if base != DEFAULT_BASE:
        given.append(f"base={base}")
    if given:
        raise ValueError(
            f"pass either cos and sin tables or {' / '.join(given)}, not both: the tables "
            "already hold the angles of every position")
    duplicated = _validate.check_tables(cos, sin, x, rotary_dim, layout)
    return _angles.pair_tables(cos, sin, layout, duplicated)


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
    """RoPE as a module: rotates q and k, caching cos and sin (float32) on a CPU.

    ``forward(q, k, positions=None, *, cos=None, sin=None) -> (q, k)`` with q, k of shape
    ``(..., seq, D)`` and D ≥ dim; features past ``dim`` pass through unrotated (partial
    rotary). Without positions it rotates by positions 0 … seq − 1 (on a CPU a slice of its
    cache); with positions it computes as :func:`apply_rope` does (the same numbers, nothing
    read on the host); with tables ``cos, sin`` (either convention) it rotates by them, as
    ``apply_rope(t, cos=cos, sin=sin, rotary_dim=dim)`` does. On CUDA with Triton, when no
    gradient is recorded, q and k are rotated by one kernel launch that computes the angles
    itself (k may have fewer heads than q, as in grouped-query attention).

    Args:
        dim: number of rotated features (even).
        base: RoPE base.
        layout: "half" or "interleaved", as in :func:`apply_rope`.
        max_seq_len: precompute the cache for positions 0 … max_seq_len − 1. Positions past
            the cache, and float positions, are computed on the fly, with the same result.
        inv_freq: ``(dim // 2,)`` rotation speeds instead of base^(−2i/d): a scaled variant
            (:func:`rope_lab.scaling.scaled_inv_freq`, :func:`rope_lab.hf.inv_freq_from_config`).
        attention_factor: multiplies cos and sin, as transformers' rotary embeddings fold
            YaRN's mscale or LongRoPE's scale into theirs (the second value those functions
            return). Default 1.

    The frequencies live in the buffer ``inv_freq``: replace it (``module.inv_freq = t``) or
    write into it in place (through ``.data`` too) and the next call rotates by the new
    values, checked as ``apply_rope`` checks ``inv_freq``. On a CPU every call compares the
    buffer with the values its cache was built from (dim/2 numbers, no device sync there);
    on other devices no cache is kept, and cos and sin come from the buffer on every call,
    with nothing read on the host, except for float64 q or k, whose exact θ_i from ``base``
    is used only while the buffer still holds base's values: that comparison is one device
    sync per call.
    """

    def __init__(
        self,
        dim: int,
        base: float = DEFAULT_BASE,
        layout: str = "half",
        max_seq_len: int | None = None,
        *,
        inv_freq: torch.Tensor | None = None,
        attention_factor: float = 1.0,
    ):
        super().__init__()
        self.dim = _validate.check_dim(dim)
        self.base = _validate.check_base(base)
        self.layout = _validate.check_layout(layout)
        self.attention_factor = _validate.check_base(attention_factor, "attention_factor")
        if max_seq_len is not None:
            _validate.check_positive_int(max_seq_len, "max_seq_len")
            # angles, cos and sin: three float32 tables of max_seq_len × dim/2
            _validate.check_table_size("RotaryEmbedding", f"max_seq_len={max_seq_len}",
                                       3 * max_seq_len * (dim // 2) * 4)
        self.max_seq_len = max_seq_len
        if inv_freq is None:
            freqs = _angles.inv_freq_values(dim, self.base)
        else:
            freqs = _validate.check_inv_freq(inv_freq, dim // 2).detach().clone()
        self.register_buffer("inv_freq", freqs, persistent=False)
        self.register_buffer("cos_cached", torch.empty(0, dim // 2), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, dim // 2), persistent=False)
        # Frequencies given or set by hand (inv_freq replaced or written into, e.g. a scaled
        # variant) take over from ``base`` (see _frequencies).
        self.custom_frequencies = inv_freq is not None
        self._checked = None  # the inv_freq tensor last checked, its version and values
        self._frequencies(read=True)
        self._build_cache(max_seq_len or 0)

    def extra_repr(self) -> str:
        factor = (f", attention_factor={self.attention_factor:g}"
                  if self.attention_factor != 1 else "")
        custom = ", inv_freq=(custom)" if self.custom_frequencies else ""
        return (f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}, "
                f"max_seq_len={self.max_seq_len}{custom}{factor}")

    def _apply(self, fn, recurse=True):
        # Module casts (.half(), .to(torch.bfloat16)) would round the frequencies and the
        # cos/sin cache to 16 bits; angles stay float32 (or float64), so restore both after
        # any move or cast from the values last checked (taking in a change made since).
        self._frequencies(read=True)
        super()._apply(fn, recurse)
        device = self.inv_freq.device
        self.inv_freq = self._checked[2].to(device)
        self._checked = (self.inv_freq, self.inv_freq._version, self.inv_freq.clone())
        self._build_cache(self.cos_cached.shape[0])
        return self

    def _frequencies(self, *, read: bool) -> torch.Tensor:
        """inv_freq, checked again when it changed since the last check: replaced, written
        in place (its version counter moved) or, with ``read``, holding other values than
        the last checked ones (a write through ``.data`` moves no counter; comparing reads
        dim/2 numbers, free on a CPU)."""
        freqs = self.inv_freq
        last = self._checked
        changed = last is None or freqs is not last[0] or (
            not freqs.is_inference() and freqs._version != last[1])
        moved = changed
        if not changed and read and _validate.values_readable(freqs):
            changed = not torch.equal(freqs, last[2])
        if changed:
            _validate.check_inv_freq(freqs, self.dim // 2, recheck=not moved)
            if last is not None:
                self.custom_frequencies = True
            self._checked = (freqs, None if freqs.is_inference() else freqs._version,
                             freqs.detach().clone())
            self.cos_cached = self.cos_cached[:0]  # built from the old values: rebuilt
            self.sin_cached = self.sin_cached[:0]
        return freqs

    def _theta(self, wide: bool, device) -> torch.Tensor:
        """θ_i for a rotation on device: the buffer's values, or, for float64 angles with
        frequencies from ``base``, base^(−2i/d) computed in float64 (exact to the last bit,
        where the buffer holds it rounded to float32)."""
        freqs = self._frequencies(read=wide or device.type == "cpu")
        if wide and not self.custom_frequencies:
            return _angles.theta(self.dim, self.base, torch.float64, device)
        dtype = torch.float64 if wide or freqs.dtype == torch.float64 else torch.float32
        if freqs.dtype == dtype and freqs.device == device:
            return freqs
        return freqs.to(device, dtype)

    def _build_cache(self, length: int) -> None:
        """cos and sin (times attention_factor) of positions 0 … length − 1, float32, on a
        CPU; elsewhere nothing is kept (see the class docstring)."""
        device = self.inv_freq.device
        if device.type != "cpu":
            length = 0
        with torch.no_grad():
            cos, sin = _angles.cos_sin_table(torch.arange(length, device=device),
                                             self._checked[2].to(device, torch.float32))
        if self.attention_factor != 1:
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        self.cos_cached, self.sin_cached = cos, sin

    def _cached(self, seq: int):
        """The cache grown to cover 0 … seq − 1 (CPU)."""
        if self.cos_cached.shape[0] < seq:
            self._build_cache(max(seq, self.cos_cached.shape[0]))
        return self.cos_cached[:seq], self.sin_cached[:seq]

    def cos_sin(
        self, positions: torch.Tensor, dtype=torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of m·θ_i, times ``attention_factor``, for ``positions`` ``(..., seq)``
        → two ``(..., seq, dim/2)`` tensors in ``dtype`` (on the positions' device).

        Computed in float32 (in float64 for ``dtype=torch.float64``) and rounded once to
        ``dtype``; the same numbers whether or not the cache covers the positions.
        """
        positions = _validate.as_positions(positions)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
        device = positions.device
        wide = dtype == torch.float64
        theta = self._theta(wide, device)
        cached = self.cos_cached.shape[0]
        if (not wide and device.type == "cpu" and self.inv_freq.is_cpu
                and not positions.is_floating_point() and positions.numel()):
            needed = int(positions.max()) + 1
            # Grow the cache for ordinary lengths only: one far position (say 10^6) must not
            # allocate a table of 10^6 rows; such positions are computed on the fly.
            if self.max_seq_len is None and cached < needed <= max(2 * cached, MAX_AUTO_CACHE):
                self._build_cache(needed)
                cached = needed
            if int(positions.min()) >= 0 and needed <= cached:
                return self.cos_cached[positions].to(dtype), self.sin_cached[positions].to(dtype)
        cos, sin = _angles.cos_sin_table(positions, theta, theta.dtype)
        if self.attention_factor != 1:
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        return cos.to(dtype), sin.to(dtype)

    def _rotate_pair(self, q, k, positions, theta):
        """q and k in one launch of the Triton kernel (CUDA, float32 angles) or two calls of
        the C loop (CPU), with no factor and no gradient to record, or None. positions:
        validated, or None for 0 … seq − 1."""
        if (self.attention_factor != 1 or q.dtype != k.dtype or theta.device != q.device
                or (q.is_cuda and theta.dtype != torch.float32)):
            return None
        return fast.rotate_pair(q, k, positions, theta, self.layout)

    def forward(self, q: torch.Tensor, k: torch.Tensor, positions=None, *,
                cos: torch.Tensor | None = None, sin: torch.Tensor | None = None):
        for name, tensor in (("q", q), ("k", k)):
            _validate.check_rope_input(tensor, name)
            if tensor.shape[-1] < self.dim:
                raise ValueError(
                    f"{name}.shape[-1] = {tensor.shape[-1]} is smaller than the rotary "
                    f"dim = {self.dim} this module was built with"
                )
        if cos is not None or sin is not None:
            return tuple(_apply(t, positions, DEFAULT_BASE, None, self.layout, self.dim, "auto",
                                None, cos, sin) for t in (q, k))
        wide = torch.float64 in (q.dtype, k.dtype)
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
            wide = wide or positions.dtype == torch.float64
        theta = self._theta(wide, q.device)
        rotated = self._rotate_pair(q, k, positions, theta)  # one launch or one C call each
        if rotated is not None:
            return rotated
        if positions is None and not wide and q.device.type == "cpu" and theta.is_cpu:
            # The common call: positions 0 … seq − 1, a slice of the cache.
            cos, sin = self._cached(q.shape[-2])
            return tuple(fast.rotate(t, cos, sin, self.layout) for t in (q, k))
        if self.attention_factor == 1:
            # Given positions take apply_rope's path: nothing read on the host.
            return tuple(fast.rope(t, positions, theta, self.layout) for t in (q, k))
        if positions is None:
            positions = torch.arange(q.shape[-2], device=q.device)
        cos, sin = _angles.cos_sin_table(positions, theta, theta.dtype)
        cos, sin = cos * self.attention_factor, sin * self.attention_factor
        return tuple(fast.rotate(t, cos, sin, self.layout) for t in (q, k))
