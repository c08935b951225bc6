"""Context-length scaling for RoPE: new rotation speeds θ'_i for a longer context.

A model trained on L = ``original_max_position`` tokens has only seen angles m·θ_i with
m < L. Pair i completes a turn every 2π/θ_i positions (its wavelength); the slow pairs, with
wavelengths longer than L, never turned fully in training, so positions past L show them
angles they never saw. Each method below changes θ_i so that a context s·L (s = ``factor``)
looks more like what the model was trained on.

    default  θ_i = base^(−2i/d)                         unchanged
    linear   θ'_i = θ_i / s                             position interpolation (PI): m → m/s
    ntk      θ'_i = (base·s^(d/(d−2)))^(−2i/d)          static NTK-aware: a larger base
    dynamic  ntk with s → s·ℓ/L − (s − 1) for the current length ℓ ≥ L (none while ℓ ≤ L)
    yarn     per pair: θ_i where it turns often within L, θ_i/s where it turns rarely,
             a linear ramp in between; attention logits scaled by (0.1·ln s + 1)²
    llama3   the same idea with the split set by wavelength: unchanged below L/high_freq_factor,
             θ_i/s above L/low_freq_factor, a smooth blend in between

Two methods take more than one knob, so they are not among the one-factor ``METHODS``:

    longrope      θ'_i = θ_i / λ_i with a searched factor per pair, one list (``short_factor``)
                  up to the trained length L and another (``long_factor``) past it (Phi-3)
    proportional  θ'_i = base^(−2i/d)/s for the first p·d/2 pairs, 0 for the rest: those
                  pairs never rotate (p-RoPE, Barbero et al. 2024; Gemma 4's global layers)

Every method is one plain function with the same inputs and the same return
``(inv_freq, attention_factor)`` — as in Hugging Face ``modeling_rope_utils.py`` — and
:func:`scaled_inv_freq` picks one by name. ``attention_factor`` multiplies cos and sin
(hence both q and k); it is 1 for every method except YaRN.

How the names map to Hugging Face ``rope_type`` (checked in tests/test_scaling.py):
``linear``, ``yarn``, ``llama3`` have the same name. HF's ``dynamic`` is our ``dynamic``,
with HF's ``max_position_embeddings`` as our ``original_max_position``. HF has no static NTK
type: our ``ntk`` with factor s equals HF ``default`` with ``rope_theta = base·s^(d/(d−2))``,
and equals HF ``dynamic`` with factor 1 evaluated at ``seq_len = s·L``.
"""

from __future__ import annotations

import math
import operator

import torch

from rope_lab import _validate
from rope_lab.rope import DEFAULT_BASE, inv_freq


def default_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                     original_max_position: int | None = None, seq_len: int | None = None,
                     device=None, dtype=torch.float32) -> tuple[torch.Tensor, float]:
    """Unscaled RoPE, θ_i = base^(−2i/d); ``factor`` and lengths are accepted and ignored.

    Returns:
        ``(dim // 2,)`` inv_freq and attention_factor 1.0.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype)
    return inv_freq(dim, base, device=device, dtype=dtype), 1.0


def linear_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                    original_max_position: int | None = None, seq_len: int | None = None,
                    device=None, dtype=torch.float32) -> tuple[torch.Tensor, float]:
    """Position interpolation (Chen et al. 2023): θ'_i = θ_i / s.

    Rotating position m with θ_i/s is rotating position m/s with θ_i: the positions
    0 … sL − 1 are squeezed into the trained range [0, L). Every pair slows down, the fast
    ones too, so neighbours (m − n = 1) now differ by 1/s of a trained step.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype)
    return (_theta(dim, base, device) / factor).to(dtype), 1.0


def ntk_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                 original_max_position: int | None = None, seq_len: int | None = None,
                 device=None, dtype=torch.float32) -> tuple[torch.Tensor, float]:
    """Static NTK-aware scaling (bloc97, 2023): base' = base · s^(d/(d−2)).

    The exponent is chosen so that the slowest pair, θ_{d/2−1} = base^(−(d−2)/d), becomes
    exactly θ_{d/2−1}/s (interpolated like PI) while the fastest, θ_0 = 1, is untouched:
    high frequencies extrapolate, low frequencies interpolate, with a smooth geometric
    blend in between.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype)
    _check_ntk_dim(dim)
    scaled_base = base * factor ** (dim / (dim - 2))
    return _theta(dim, scaled_base, device).to(dtype), 1.0


def dynamic_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                     original_max_position: int | None = None, seq_len: int | None = None,
                     device=None, dtype=torch.float32) -> tuple[torch.Tensor, float]:
    """Dynamic NTK (emozilla, 2023): NTK with a factor that grows with the current length ℓ.

        s(ℓ) = s·ℓ/L − (s − 1)   for ℓ = max(seq_len, L);   base' = base · s(ℓ)^(d/(d−2))

    While ℓ ≤ L nothing changes (s(L) = 1), so short inputs see the trained frequencies
    exactly; the base grows only as the input grows. ``seq_len`` defaults to L. This is
    Hugging Face's ``rope_type="dynamic"`` formula, L being its ``max_position_embeddings``.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype, need_length=True)
    _check_ntk_dim(dim)
    seq_len = _seq_len(seq_len)
    length = max(seq_len if seq_len is not None else original_max_position,
                 original_max_position)
    grown = factor * length / original_max_position - (factor - 1)
    try:
        scaled_base = base * grown ** (dim / (dim - 2))
    except OverflowError:
        scaled_base = math.inf
    if not math.isfinite(scaled_base):
        raise ValueError(
            f"factor={factor} with seq_len={length} and original_max_position="
            f"{original_max_position} grows the base past the largest float (base' = base · "
            f"s(ℓ)^(d/(d−2)) overflows); expected a smaller factor or seq_len"
        )
    return _theta(dim, scaled_base, device).to(dtype), 1.0


def yarn_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                  original_max_position: int | None = None, seq_len: int | None = None,
                  device=None, dtype=torch.float32, beta_fast: float = 32.0,
                  beta_slow: float = 1.0, attention_factor: float | None = None,
                  mscale: float | None = None, mscale_all_dim: float | None = None,
                  truncate: bool = True) -> tuple[torch.Tensor, float]:
    """YaRN (Peng et al. 2023, "NTK-by-parts" + attention temperature).

    Pair i turns r_i = L·θ_i/(2π) times within the trained length L. Pairs that turn more
    than ``beta_fast`` times keep θ_i (they saw every angle many times); pairs that turn
    fewer than ``beta_slow`` times get θ_i/s (PI); in between a linear ramp γ_i in the pair
    index blends the two:  θ'_i = (1 − γ_i)·θ_i/s + γ_i·θ_i.
    The pair index where r_i = β is  i(β) = d·ln(L/(2πβ)) / (2·ln base); with ``truncate``
    the ramp ends are rounded outwards (floor / ceil), as in the paper's code.

    attention_factor: default 0.1·ln s + 1 (the paper's √(1/t)); with ``mscale`` and
    ``mscale_all_dim`` (DeepSeek's variant) the ratio of that formula at the two scales.
    It multiplies cos and sin, so q·k logits grow by its square.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype, need_length=True)
    _validate.check_bool(truncate, "truncate")
    for name, value in (("beta_fast", beta_fast), ("beta_slow", beta_slow)):
        _check_positive_number(value, name)
    if beta_fast <= beta_slow:
        raise ValueError(
            f"beta_fast must be greater than beta_slow (pairs turning more than beta_fast "
            f"times keep their speed, fewer than beta_slow are interpolated), got "
            f"beta_fast={beta_fast} and beta_slow={beta_slow}"
        )
    for name, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)):
        if value is not None:
            _check_positive_number(value, name)
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    else:
        attention_factor = _check_positive_number(attention_factor, "attention_factor")

    def pair_index(turns: float) -> float:
        return dim * math.log(original_max_position / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a zero-width ramp would divide by zero
    theta = _theta(dim, base, device)
    index = torch.arange(dim // 2, dtype=torch.float64, device=device)
    keep = 1 - ((index - low) / (high - low)).clamp(0, 1)  # γ_i: 1 = keep θ_i, 0 = θ_i/s
    scaled = theta / factor * (1 - keep) + theta * keep
    return scaled.to(dtype), float(attention_factor)


def llama3_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                    original_max_position: int | None = None, seq_len: int | None = None,
                    device=None, dtype=torch.float32, low_freq_factor: float = 1.0,
                    high_freq_factor: float = 4.0) -> tuple[torch.Tensor, float]:
    """Llama 3.1's scaling: split the pairs by wavelength λ_i = 2π/θ_i.

        λ_i < L/high_freq_factor      keep θ_i
        λ_i > L/low_freq_factor       θ_i / s
        otherwise                     (1 − g)·θ_i/s + g·θ_i,  g = (L/λ_i − low)/(high − low)

    Meta's release used s = 8, low = 1, high = 4, L = 8192. The rule shipped with Llama 3.1:
    ``apply_scaling`` in Meta's reference code (github.com/meta-llama/llama-models,
    ``models/llama3/reference_impl/model.py``); transformers calls it ``rope_type="llama3"``.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype, need_length=True)
    _check_positive_number(low_freq_factor, "low_freq_factor")
    _check_positive_number(high_freq_factor, "high_freq_factor")
    if high_freq_factor < low_freq_factor:
        raise ValueError(
            f"high_freq_factor must be greater than low_freq_factor (or equal: a hard switch "
            f"at λ = L/low_freq_factor), got high_freq_factor={high_freq_factor} and "
            f"low_freq_factor={low_freq_factor}"
        )
    theta = _theta(dim, base, device)
    wavelength = 2 * math.pi / theta
    turns = original_max_position / wavelength  # L/λ_i
    if high_freq_factor == low_freq_factor:  # no blend band (Llama 4's test configs)
        blend = (turns > high_freq_factor).to(theta.dtype)
    else:
        blend = ((turns - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    scaled = (1 - blend) * theta / factor + blend * theta
    return scaled.to(dtype), 1.0


def longrope_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                      original_max_position: int | None = None, seq_len: int | None = None,
                      device=None, dtype=torch.float32, short_factor=None, long_factor=None,
                      attention_factor: float | None = None) -> tuple[torch.Tensor, float]:
    """LongRoPE (Ding et al. 2024; Phi-3): a searched rescale λ_i for every pair.

        θ'_i = θ_i / λ_i,   λ = short_factor while ℓ ≤ L,  long_factor once ℓ > L

    ℓ = ``seq_len`` (None: the short list, as at a model's start), L = ``original_max_position``.
    The switch is for the whole sequence at once: a prompt that grows past L changes the
    frequencies of every position, the cached keys included.

    attention_factor: default √(1 + ln s / ln L) for s = ``factor`` > 1 (else 1), s being the
    context extension (Phi-3: max_position_embeddings / original_max_position_embeddings).
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype, need_length=True)
    lists = {}
    for name, values in (("short_factor", short_factor), ("long_factor", long_factor)):
        if not isinstance(values, (list, tuple)) or not all(
                not isinstance(v, bool) and isinstance(v, (int, float)) for v in values):
            raise TypeError(f"{name} must be a list of {dim // 2} numbers (one per pair), "
                            f"got {values!r}")
        if len(values) != dim // 2:
            raise ValueError(f"{name} must have one number per pair, dim // 2 = {dim // 2}, "
                             f"got {len(values)}")
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise ValueError(f"{name} must hold finite numbers greater than 0, got {values!r}")
        lists[name] = torch.tensor(values, dtype=torch.float64, device=device)
    if attention_factor is None:
        attention_factor = (1.0 if factor <= 1 else
                            math.sqrt(1 + math.log(factor) / math.log(original_max_position)))
    else:
        attention_factor = _check_positive_number(attention_factor, "attention_factor")
    seq_len = _seq_len(seq_len)
    long = seq_len is not None and seq_len > original_max_position
    rescale = lists["long_factor" if long else "short_factor"]
    return (_theta(dim, base, device) / rescale).to(dtype), float(attention_factor)


def proportional_inv_freq(dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                          original_max_position: int | None = None, seq_len: int | None = None,
                          device=None, dtype=torch.float32,
                          partial_rotary_factor: float = 1.0) -> tuple[torch.Tensor, float]:
    """Proportional RoPE (p-RoPE, Barbero et al. 2024): only a fraction p of the pairs rotate.

        θ'_i = base^(−2i/d) / s   for i < ⌊p·d⌋ // 2,      θ'_i = 0   for the other pairs

    Unlike a partial rotary dimension, the exponent keeps the full head dim d, so the
    rotating pairs are the fast end of the *full* spectrum and the slowest ones are set to
    exactly 0 (a pair that never turns carries no position: semantic channels). Returns d/2
    entries. Gemma 4's global layers use p = 0.25.
    """
    _check_common(dim, base, factor, original_max_position, seq_len, dtype)
    if isinstance(partial_rotary_factor, bool) or not isinstance(partial_rotary_factor,
                                                                 (int, float)):
        raise TypeError(f"partial_rotary_factor must be a number in (0, 1], got "
                        f"{partial_rotary_factor!r}")
    if not 0 < partial_rotary_factor <= 1:
        raise ValueError(f"partial_rotary_factor must be in (0, 1] (the fraction of pairs that "
                         f"rotate), got {partial_rotary_factor}")
    rotating = int(partial_rotary_factor * dim // 2)
    theta = _theta(dim, base, device)
    theta[rotating:] = 0.0
    return (theta / factor).to(dtype), 1.0


# method name → function; the dispatcher's choices, in the order the notebook plots them.
SCALING_FUNCTIONS = {
    "default": default_inv_freq,
    "linear": linear_inv_freq,
    "ntk": ntk_inv_freq,
    "dynamic": dynamic_inv_freq,
    "yarn": yarn_inv_freq,
    "llama3": llama3_inv_freq,
}
METHODS = tuple(SCALING_FUNCTIONS)
# the keyword options each method takes beyond the common ones
METHOD_PARAMS = {
    "default": (),
    "linear": (),
    "ntk": (),
    "dynamic": (),
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim",
             "truncate"),
    "llama3": ("low_freq_factor", "high_freq_factor"),
}


def scaled_inv_freq(method: str, dim: int, *, base: float = DEFAULT_BASE, factor: float = 1.0,
                    original_max_position: int | None = None, seq_len: int | None = None,
                    device=None, dtype=torch.float32, **params) -> tuple[torch.Tensor, float]:
    """Rotation speeds θ'_i for RoPE scaled by ``method``; see the module docstring.

    Args:
        method: one of "default", "linear", "ntk", "dynamic", "yarn", "llama3".
        dim: rotary dimension d (even).
        base: RoPE base of the trained model.
        factor: s ≥ 1, the context extension (target length / trained length).
        original_max_position: L, the trained length (needed by dynamic, yarn, llama3).
        seq_len: the current input length ℓ (dynamic only; default L).
        device, dtype: of the result (float32 or float64; computed in float64).
        **params: method options (yarn: beta_fast, beta_slow, attention_factor, mscale,
            mscale_all_dim, truncate; llama3: low_freq_factor, high_freq_factor).

    Returns:
        ``(inv_freq, attention_factor)``: a ``(dim // 2,)`` tensor for
        :func:`rope_lab.apply_rope` (``inv_freq=``) and the factor for cos and sin.
    """
    if isinstance(method, dict):
        raise TypeError(
            f"method must be a method name, got a dict {method!r}; for a Hugging Face "
            "rope_scaling dict pass its fields: scaled_inv_freq(d['rope_type'], dim, "
            "factor=d['factor'], ...)"
        )
    if not isinstance(method, str) or method not in SCALING_FUNCTIONS:
        choices = ", ".join(repr(m) for m in METHODS)
        raise ValueError(f"method must be one of {choices}, got {method!r}")
    unknown = sorted(set(params) - set(METHOD_PARAMS[method]))
    if unknown:
        allowed = ", ".join(METHOD_PARAMS[method]) or "none"
        raise ValueError(
            f"unknown parameter(s) {unknown} for method {method!r}; its options are: {allowed}"
        )
    return SCALING_FUNCTIONS[method](
        dim, base=base, factor=factor, original_max_position=original_max_position,
        seq_len=seq_len, device=device, dtype=dtype, **params,
    )


def wavelengths(inv_freq: torch.Tensor) -> torch.Tensor:
    """λ_i = 2π/θ_i: how many positions pair i needs to complete one turn."""
    return 2 * math.pi / inv_freq.double()


def _theta(dim: int, base: float, device) -> torch.Tensor:
    """θ_i in float64 (scaling is computed wide and rounded once)."""
    return inv_freq(dim, base, device=device, dtype=torch.float64)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _check_positive_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} of type {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number greater than 0, got {value}")
    return float(value)


def _check_ntk_dim(dim: int) -> None:
    if dim < 4:
        raise ValueError(f"dim must be at least 4 for NTK scaling (exponent d/(d−2)), got {dim}")


def _check_common(dim, base, factor, original_max_position, seq_len, dtype,
                  need_length: bool = False) -> None:
    _validate.check_dim(dim)
    if _validate.check_base(base) <= 1:
        raise ValueError(
            f"base must be greater than 1 for a scaling method (its formulas take log(base) and "
            f"need θ_i to fall with i), got {base}"
        )
    _validate.check_angle_dtype(dtype)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"factor must be a number, got {factor!r} of type {type(factor).__name__}")
    if not math.isfinite(factor) or factor < 1:
        raise ValueError(
            f"factor must be a finite number ≥ 1 (the context extension s = new length / "
            f"trained length), got {factor}"
        )
    if original_max_position is None:
        if need_length:
            raise ValueError(
                "original_max_position is required for this method: pass the trained context "
                "length L, e.g. original_max_position=4096"
            )
    else:
        _validate.check_positive_int(original_max_position, "original_max_position")
    _seq_len(seq_len)


def _seq_len(seq_len) -> int | None:
    """``seq_len`` as an int ≥ 0 (None stays None). transformers' rotary embeddings pass a
    one-element integer tensor (``position_ids.max() + 1``), and an empty input has length 0;
    both are accepted, as its RoPE functions accept them."""
    if seq_len is None:
        return None
    if isinstance(seq_len, torch.Tensor):
        if seq_len.numel() != 1 or seq_len.is_floating_point() or seq_len.is_complex() \
                or seq_len.dtype == torch.bool:
            raise TypeError(f"seq_len must be an int ≥ 0 or a one-element integer tensor, got a "
                            f"{seq_len.dtype} tensor of shape {tuple(seq_len.shape)}")
        seq_len = int(seq_len.item())
    elif isinstance(seq_len, bool) or not hasattr(seq_len, "__index__"):
        raise TypeError(f"seq_len must be an int ≥ 0 (the current input length), got "
                        f"{seq_len!r} of type {type(seq_len).__name__}")
    seq_len = operator.index(seq_len)
    if seq_len < 0:
        raise ValueError(f"seq_len must be ≥ 0 (the current input length), got {seq_len}")
    return seq_len


# --- Why interpolation is safe: the Position Interpolation paper's Figure 2 ---------------

def rope_basis(positions, dim: int, base: float = DEFAULT_BASE) -> torch.Tensor:
    """The d functions an attention score is built from: cos(m·θ_i) and sin(m·θ_i).

    A RoPE score between a fixed query and key at offset m is Σ_i a_i cos(mθ_i) + b_i sin(mθ_i),
    a linear combination of these columns (Chen et al. 2023, eq. 3).

    Returns:
        ``(len(positions), dim)`` float64: the d/2 cosines, then the d/2 sines.
    """
    positions = _validate.as_positions(positions).double()
    angles = positions[:, None] * inv_freq(dim, base, dtype=torch.float64)
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def fit_random_scores(dim: int = 128, base: float = DEFAULT_BASE, length: int = 2048, *,
                      seed: int = 0, rcond: float = 1e-9) -> torch.Tensor:
    """Least-squares coefficients of a score on :func:`rope_basis` that matches random
    targets in [−1, 1] at the integer offsets 0 … length − 1.

    Over [0, L) the slowest pairs barely turn, so their columns are nearly collinear (the
    basis's smallest singular values are ~1e-15 of the largest). Directions below
    ``rcond`` × the largest singular value are dropped; the fit inside [0, L) hardly
    depends on it, the blow-up past L does (smaller rcond, larger blow-up).

    Returns:
        ``(dim,)`` float64 coefficients (minimum-norm solution).
    """
    _validate.check_positive_int(length, "length")
    _validate.check_dim(dim)
    # the float64 basis, its angles and lstsq's copy of it
    _validate.check_table_size("fit_random_scores", f"length={length} × dim={dim}",
                               length * dim * 8 * 3)
    generator = torch.Generator().manual_seed(seed)
    targets = torch.rand(length, 1, generator=generator, dtype=torch.float64) * 2 - 1
    basis = rope_basis(torch.arange(length), dim, base)
    return torch.linalg.lstsq(basis, targets, rcond=rcond, driver="gelsd").solution[:, 0]
