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

import math

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
    return _inv_freq(dim, base, device, dtype)


def _inv_freq(dim: int, base: float, device, dtype) -> torch.Tensor:
    """:func:`inv_freq` for validated arguments."""
    # Exponents in float64 so that float32 results are correctly rounded.
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim
    return (base**-exponents).to(dtype)


# θ by (rotary_dim, base, dtype, device): what depends on nothing else is computed once.
_theta_cache: dict = {}


def _theta(rotary_dim: int, base: float, dtype, device) -> torch.Tensor:
    """θ_i for apply_rope, cached (never modified in place by the package; not returned to
    callers). Under torch.compile it is computed in the graph instead (a cache lookup would
    break it), and a tensor made during CUDA graph capture is not kept (its values exist only
    when the graph replays)."""
    if _validate._is_compiling():
        return _inv_freq(rotary_dim, base, device, dtype)
    key = (rotary_dim, base, dtype, device)
    theta = _theta_cache.get(key)
    if theta is None:
        with torch.inference_mode(False), torch.no_grad():
            theta = _inv_freq(rotary_dim, base, device, dtype)
        _remember(_theta_cache, key, theta, device)
    return theta


def _remember(cache: dict, key, value, device) -> None:
    """Keep value unless device is capturing a CUDA graph; at most 32 entries."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return
    if len(cache) >= 32:
        cache.clear()
    cache[key] = value


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
    return _outer_angles(positions, inv_freq, wide=wide)


def _outer_angles(positions: torch.Tensor, inv_freq: torch.Tensor, *,
                  wide: bool | None = None) -> torch.Tensor:
    """:func:`rope_angles` for trusted inputs (a table no bigger than the x it rotates).

    wide: float64 angles; default when positions or inv_freq is float64 (dtypes decide,
    never values)."""
    if wide is None:
        wide = torch.float64 in (inv_freq.dtype, positions.dtype)
    dtype = torch.float64 if wide else torch.float32
    return positions.to(dtype)[..., None] * inv_freq.to(dtype)


# m·θ_i past FLOAT32_EXACT_LIMIT: formed in float64 and reduced to [−π, π) before rounding.
_TWO_PI = 2 * math.pi


def _cos_sin_table(positions: torch.Tensor, theta: torch.Tensor,
                   dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of m·θ_i by the rule of :func:`apply_rope`, ``(..., seq, d/2)`` in dtype.

    float64 θ: float64 angles. float32 θ: the product m·θ_i is formed exactly in float64
    (m exact, θ_i float32); below 2^24 it is rounded to float32 — the float32 product, so the
    same numbers as transformers — and at or beyond 2^24, where a float32 angle would be off
    by up to a radian, it is first reduced modulo 2π. A per-element choice: nothing is read
    on the host (no device sync, traceable by torch.compile, capturable in a CUDA graph).
    On a CPU, where a read costs no sync, one small reduction first asks whether any
    position reaches 2^24; when none does, the float32 product is computed directly (the
    same numbers, a third of the work).
    """
    if theta.dtype == torch.float32 and not _any_past_float32_limit(positions):
        angles = positions.to(torch.float32)[..., None] * theta
        return _cos_sin_of(angles, dtype)
    # float64 × float32 multiplies in float64: θ_i's float32 value, widened exactly
    product = positions.to(torch.float64)[..., None] * theta
    if theta.dtype == torch.float64:
        angles = product
    else:
        big = (positions.abs() >= _validate.FLOAT32_EXACT_LIMIT)[..., None]
        reduced = (product + math.pi).remainder(_TWO_PI) - math.pi  # in [−π, π)
        angles = torch.where(big, reduced, product).to(torch.float32)
    return _cos_sin_of(angles, dtype)


def _cos_sin_of(angles: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    cos, sin = angles.cos(), angles.sin()
    if cos.dtype != dtype:
        cos, sin = cos.to(dtype), sin.to(dtype)
    return cos, sin


def _any_past_float32_limit(positions: torch.Tensor) -> bool:
    """Whether some position reaches 2^24, where it may be read at no cost (a CPU tensor,
    outside torch.compile); True, meaning "assume so", where reading would sync a device."""
    if not (positions.is_cpu and _validate.values_readable(positions)):
        return True
    return positions.numel() > 0 and bool(
        (positions.abs() >= _validate.FLOAT32_EXACT_LIMIT).any())


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
            - "eager": three torch kernels per cache-sized block of rows on a CPU, four
              whole-tensor kernels on other devices.
            - "c": one C loop compiled on first use (half layout, CPU, float32, float64 or
              bfloat16); a decode-sized x with its angles in one call.
            - "complex": one complex multiply (interleaved layout).
            - "triton": one Triton kernel, which computes the angles from the positions
              itself (CUDA; CPU tensors under ``TRITON_INTERPRET=1``).

            A backend named here runs or raises ``BackendUnavailable`` saying why; it never
            falls back to another one.

    Returns:
        Tensor with the shape, dtype and device of ``x``. The rotation is computed in
        float32 (float64 when an angle is) and rounded once at the end.

    Angles (what "exact" means here):
        - θ_i is float32, as in transformers, unless x, ``positions`` or ``inv_freq`` is
          float64: then θ_i (from ``base``: base^(−2i/d) in float64) and the angles are
          float64. A float32 θ_i is itself off by up to 2^-24 of its value, so the angle
          m·θ_i is off by up to about m·θ_i·2^-24 radians from the exact-θ angle whatever
          the arithmetic (0.0002 at m = 4096, about a radian near 2^24): ask for float64 if
          such positions matter.
        - Integer positions are exact at any size, and m·θ_i is the exact product of m and
          the float32 θ_i: below 2^24 rounded once to float32 (the float32 product, the same
          numbers as transformers); at or beyond 2^24, where float32 can hold neither m nor
          the angle to within a radian, reduced modulo 2π in float64 first, so the angle is
          accurate to a few 1e-7 radians (up to m ≈ 2^31). The choice is made per element:
          no value is read on the host.
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
    return _apply(x, positions, base, inv_freq, layout, rotary_dim, backend, None)


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
    return _apply(x, positions, base, inv_freq, layout, rotary_dim, backend, x)


def _apply(x, positions, base, freqs, layout, rotary_dim, backend, out):
    """Validate positions and frequencies for x, then rotate (into out when given).

    With float32 angles on the Triton path the kernel computes them itself from the
    positions and θ (one launch, no tables), as does the C loop for a decode-sized CPU
    tensor; every other path rotates by cos/sin tables.
    """
    if positions is not None:
        positions = _validate.positions_for(x, positions)
    if freqs is None:
        base = _validate.check_base(base)
    theta = _frequencies(x, positions, base, freqs, rotary_dim)
    if fast.angles_in_kernel(x, positions, theta, layout, backend):
        rotated = fast.rotate_positions(x, positions, theta, layout, out=out, backend=backend)
        if rotated is not None:
            return rotated
    if positions is None and freqs is None:  # the common call: a small cache, no arithmetic
        cos, sin = _cached_cos_sin(x.shape[-2], rotary_dim, base, x.device, theta.dtype)
    else:
        if positions is None:
            positions = torch.arange(x.shape[-2], device=x.device)
        cos, sin = _cos_sin_table(positions, theta,
                                  torch.float64 if x.dtype == torch.float64 else torch.float32)
    return _rotate(x, cos, sin, layout, backend, out=out)


def _frequencies(x, positions, base, freqs, rotary_dim) -> torch.Tensor:
    """θ_i for x on x's device: float64 when x, the positions or inv_freq are float64.
    base: validated (used when freqs is None)."""
    wide = x.dtype == torch.float64 or (positions is not None
                                        and positions.dtype == torch.float64)
    if freqs is None:
        return _theta(rotary_dim, base, torch.float64 if wide else torch.float32, x.device)
    if base != DEFAULT_BASE:
        raise ValueError(
            f"pass either base or inv_freq, not both: got base={base} and an inv_freq tensor"
        )
    freqs = _validate.check_inv_freq(freqs, rotary_dim // 2)
    dtype = torch.float64 if wide or freqs.dtype == torch.float64 else torch.float32
    return freqs.to(x.device, dtype)


# cos/sin tables for positions 0 … seq − 1, by (seq, rotary_dim, base, device, dtype).
_table_cache: dict = {}


def _cached_cos_sin(seq: int, rotary_dim: int, base: float, device, dtype):
    """cos and sin of m·θ_i for m = 0 … seq − 1: ``(seq, rotary_dim/2)`` each, kept for reuse.

    Without the cache every call (every layer, every step) recomputes seq × d/2 angles and
    their cos and sin; with it only the first call pays. Built as ordinary tensors even under
    inference_mode, so a later call that records autograd may use them. Under torch.compile
    they are computed in the graph (a lookup would break it); tables made during CUDA graph
    capture are not kept.
    """
    device = torch.device(device)
    if _validate._is_compiling():
        return _cos_sin_table(torch.arange(seq, device=device),
                              _inv_freq(rotary_dim, base, device, dtype), dtype)
    key = (seq, rotary_dim, base, device, dtype)
    tables = _table_cache.get(key)
    if tables is None:
        with torch.inference_mode(False), torch.no_grad():
            tables = _cos_sin_table(torch.arange(seq, device=device),
                                    _theta(rotary_dim, base, dtype, device), dtype)
        _remember(_table_cache, key, tables, device)
    return tables


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
    D ≥ dim; features past ``dim`` pass through unrotated (partial rotary). Without
    positions it slices its cache; with positions it computes as :func:`apply_rope` does
    (the same numbers, nothing read on the host). On CUDA with Triton, when no gradient is
    recorded, q and k are rotated by one kernel launch that computes the angles itself
    (k may have fewer heads than q, as in grouped-query attention).

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
        return _cos_sin_table(positions, self.inv_freq.to(device), dtype)

    def _rotate_pair(self, q, k, positions):
        """q and k in one launch of the Triton kernel (CUDA, float32 angles, no gradient to
        record), or None. positions: validated, or None for 0 … seq − 1."""
        if not q.is_cuda or _validate._is_compiling() or q.dtype != k.dtype or (
                torch.float64 in (q.dtype, None if positions is None else positions.dtype)):
            return None
        theta = (self.inv_freq if self.custom_frequencies
                 else _theta(self.dim, self.base, torch.float32, q.device))
        if theta.dtype != torch.float32 or theta.device != q.device:
            return None
        return fast.rotate_pair(q, k, positions, theta, self.layout)

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
            # Given positions take apply_rope's path: nothing read on the host (the cache
            # below would need the largest position to know whether it covers them).
            self._refresh_if_frequencies_changed(q.device)
            freqs = self.inv_freq if self.custom_frequencies else None
            base = DEFAULT_BASE if self.custom_frequencies else self.base
            rotated = self._rotate_pair(q, k, positions)  # CUDA: one launch for both
            if rotated is not None:
                return rotated
            return tuple(_apply(t, positions, base, freqs, self.layout, self.dim, "auto", None)
                         for t in (q, k))
        wide = torch.float64 in (q.dtype, k.dtype)
        if not wide and q.is_cuda:
            self._refresh_if_frequencies_changed(q.device)
            rotated = self._rotate_pair(q, k, None)
            if rotated is not None:
                return rotated
        if not wide:
            # The common call: positions 0 … seq − 1, a slice of the cache, no device sync.
            seq = q.shape[-2]
            self._refresh_if_frequencies_changed(q.device)
            if self.cos_cached.shape[0] < seq or self.cos_cached.device != q.device:
                self._build_cache(max(seq, self.cos_cached.shape[0]), q.device)
            cos, sin = self.cos_cached[:seq], self.sin_cached[:seq]
            return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)
        cos, sin = self.cos_sin(torch.arange(q.shape[-2], device=q.device), torch.float64)
        return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)
