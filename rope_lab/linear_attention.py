"""Linear attention, and where RoPE goes in it.

Softmax attention weighs every pair (m, n), so its cost grows as L². Linear attention
(Katharopoulos et al. 2020) replaces exp(q·k) by a dot product of positive features
φ(q)·φ(k), here φ(x) = elu(x) + 1:

    out_m = Σ_n (φ(q_m)·φ(k_n)) v_n / Σ_n φ(q_m)·φ(k_n)
          = φ(q_m)ᵀ (Σ_n φ(k_n) v_nᵀ)  /  φ(q_m)ᵀ (Σ_n φ(k_n))

The sums over n no longer involve m: compute them once (or as running prefix sums over
n ≤ m when causal) and the cost grows as L.

RoPE (RoFormer, Su et al. 2021, §3.3) rotates the features in the numerator only:

    out_m = Σ_n (R_m φ(q_m))ᵀ (R_n φ(k_n)) v_n  /  Σ_n φ(q_m)ᵀ φ(k_n)

The numerator still factorizes (R_m φ(q_m) belongs to token m alone) and sees only n − m.
The denominator stays a sum of positive numbers. Rotated, it becomes Σ_n φ(q_m)ᵀ R_{n−m} φ(k_n),
a sum of cosine-weighted terms that can be zero or negative.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from rope_lab import _validate, timing
from rope_lab.attention import attention, causal_mask
from rope_lab.rope import DEFAULT_BASE, apply_rope


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1: positive everywhere (x + 1 for x > 0, eˣ for x ≤ 0)."""
    return F.elu(x) + 1


def _check_qkv(q, k, v, feature_map) -> None:
    _validate.check_qkv(q, k, v)
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError(
            "q, k and v must have the same number of positions (self-attention), got "
            f"{q.shape[-2]}, {k.shape[-2]} and {v.shape[-2]}"
        )
    if not callable(feature_map):
        raise TypeError(f"feature_map must be a function, got {type(feature_map).__name__}")


def _check_features(feature_map, x, name):
    """φ(x), refused unless it has x's shape and is ≥ 0 everywhere: the denominator
    φ(q)ᵀ Σ φ(k) is a sum of products of features, and a negative feature can make it 0 or
    negative, turning the weights into nonsense with no error."""
    phi = feature_map(x)
    if not isinstance(phi, torch.Tensor) or phi.shape != x.shape:
        got = tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__
        raise ValueError(
            f"feature_map must return a tensor of the same shape as {name} "
            f"{tuple(x.shape)}, got {got}"
        )
    if phi.numel() and not bool((phi >= 0).all()):
        raise ValueError(
            f"feature_map must return non-negative features (e.g. elu(x) + 1), but "
            f"feature_map({name}) has a minimum of {float(phi.min()):g}"
        )
    return phi


def _features(q, k, feature_map, rope, positions, base):
    """φ(q), φ(k) and their rotated copies R_m φ(q_m), R_n φ(k_n) (the same when rope=False)."""
    phi_q, phi_k = _check_features(feature_map, q, "q"), _check_features(feature_map, k, "k")
    if not rope:
        return phi_q, phi_k, phi_q, phi_k
    return (phi_q, phi_k, apply_rope(phi_q, positions, base=base),
            apply_rope(phi_k, positions, base=base))


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    rope: bool = False,
    positions=None,
    base: float = DEFAULT_BASE,
    feature_map=elu_feature_map,
) -> torch.Tensor:
    """Linear attention in its O(L) form, with RoPE in the numerator when ``rope=True``.

    Non-causal, with S = Σ_n R_n φ(k_n) v_nᵀ and z = Σ_n φ(k_n) summed once:
        out_m = (R_m φ(q_m))ᵀ S / φ(q_m)ᵀ z
    Causal, the same with prefix sums S_m = Σ_{n ≤ m} …, z_m = Σ_{n ≤ m} … (a cumsum).

    Args:
        q, k: ``(..., L, d)`` queries and keys (d even when rope=True).
        v: ``(..., L, d_v)`` values.
        causal: query m sees keys n ≤ m only.
        rope: rotate φ(q), φ(k) in the numerator (never in the denominator).
        positions: positions m of the L tokens, default ``arange(L)``.
        base: RoPE base.
        feature_map: φ, a function returning positive features of the same shape.

    Returns:
        ``(..., L, d_v)`` outputs. Memory: ``(..., d, d_v, L)`` for the causal prefix sums.
    """
    _check_qkv(q, k, v, feature_map)
    for name, flag in (("causal", causal), ("rope", rope)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    out_dtype = q.dtype
    if q.element_size() < 4:
        # The sums over L overflow 16-bit floats (fp16 tops out at 65504): accumulate in fp32.
        q, k, v = q.float(), k.float(), v.float()
    phi_q, phi_k, rot_q, rot_k = _features(q, k, feature_map, rope, positions, base)
    if causal:
        # S_m = Σ_{n ≤ m} R_n φ(k_n) v_nᵀ for every m at once, kept as (..., d, d_v, L) so the
        # prefix sum runs along the last axis. Memory grows as L·d·d_v: the price of no loop.
        outer = rot_k.transpose(-2, -1)[..., :, None, :] * v.transpose(-2, -1)[..., None, :, :]
        state = outer.cumsum(dim=-1)
        normalizer = phi_k.cumsum(dim=-2)  # z_m: (..., L, d)
        # (R_m φ(q_m))ᵀ S_m for every m: multiply and sum over d.
        numerator = (rot_q.transpose(-2, -1)[..., :, None, :] * state).sum(dim=-3)
        numerator = numerator.transpose(-2, -1)
    else:
        state = rot_k.transpose(-2, -1) @ v  # S: (..., d, d_v)
        normalizer = phi_k.sum(dim=-2, keepdim=True)  # z: (..., 1, d)
        numerator = rot_q @ state
    denominator = (phi_q * normalizer).sum(dim=-1, keepdim=True)
    return (numerator / denominator).to(out_dtype)


def linear_attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    causal: bool = False,
    rope: bool = False,
    positions=None,
    base: float = DEFAULT_BASE,
    feature_map=elu_feature_map,
    rotate_denominator: bool = False,
) -> torch.Tensor:
    """The explicit (L × L) weights of linear attention: the O(L²) form, for checking.

        w_mn = (R_m φ(q_m))ᵀ (R_n φ(k_n)) / Σ_{n'} φ(q_m)ᵀ φ(k_n')     (n, n' ≤ m if causal)

    ``rotate_denominator=True`` rotates the denominator too (the tempting mistake): it is
    then Σ_{n'} (R_m φ(q_m))ᵀ (R_{n'} φ(k_n')), which can be zero or negative.

    Returns:
        ``(..., L, L)`` weights; ``weights @ v`` is the attention output.
    """
    _check_qkv(q, k, k, feature_map)
    phi_q, phi_k, rot_q, rot_k = _features(q, k, feature_map, rope, positions, base)
    scores = rot_q @ rot_k.transpose(-2, -1)
    plain = (rot_q, rot_k) if rotate_denominator else (phi_q, phi_k)
    denominator_scores = plain[0] @ plain[1].transpose(-2, -1)
    if causal:
        keep = causal_mask(q.shape[-2], device=q.device)
        scores = scores.masked_fill(~keep, 0.0)
        denominator_scores = denominator_scores.masked_fill(~keep, 0.0)
    return scores / denominator_scores.sum(dim=-1, keepdim=True)


def linear_attention_normalizers(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    causal: bool = True,
    rotated: bool = False,
    positions=None,
    base: float = DEFAULT_BASE,
    feature_map=elu_feature_map,
) -> torch.Tensor:
    """The denominators Σ_n φ(q_m)ᵀ φ(k_n) per query m, optionally with both sides rotated.

        rotated=False:  Σ_n φ(q_m)ᵀ φ(k_n)                > 0 always
        rotated=True:   Σ_n (R_m φ(q_m))ᵀ (R_n φ(k_n))    = Σ_n φ(q_m)ᵀ R_{n−m} φ(k_n), any sign

    Returns:
        ``(..., L)``.
    """
    _check_qkv(q, k, k, feature_map)
    _, _, rot_q, rot_k = _features(q, k, feature_map, rotated, positions, base)
    # Factorized like the attention itself: a query meets the (prefix) sum of the keys.
    keys = rot_k.cumsum(dim=-2) if causal else rot_k.sum(dim=-2, keepdim=True)
    return (rot_q * keys).sum(dim=-1)


def measure_seconds(
    lengths,
    *,
    dim: int = 32,
    repeats: int = 5,
    causal: bool = True,
    device=None,
) -> dict[str, list[float]]:
    """Best-of-``repeats`` wall-clock seconds of softmax and linear attention per length L.

    One head, q, k, v of shape ``(L, dim)``, random normal, on ``device`` (default CPU).
    Softmax attention does O(L²·d) work; linear attention O(L·d²). On the CPU torch runs
    one thread while timing: the figure then compares work, not how well each kernel
    spreads over cores (and a busy machine cannot stall a second thread).

    Returns:
        ``{"softmax": [...], "linear": [...]}``, one time per length. The fastest run is
        kept: on a shared machine the slower runs measure the neighbours, not the method.
    """
    dim = _validate.check_dim(dim)
    repeats = _validate.check_positive_int(repeats, "repeats")
    lengths = [_validate.check_positive_int(length, "length") for length in lengths]
    device = torch.device("cpu") if device is None else torch.device(device)
    methods = {
        "softmax": lambda q, k, v: attention(q, k, v, mask="causal" if causal else None),
        "linear": lambda q, k, v: linear_attention(q, k, v, causal=causal),
    }
    seconds = {name: [] for name in methods}
    generator = torch.Generator().manual_seed(0)
    threads = 1 if device.type == "cpu" else torch.get_num_threads()
    with timing.cpu_threads(threads), torch.inference_mode():
        for length in lengths:
            q, k, v = torch.randn(3, length, dim, generator=generator).to(device)
            runs = timing.time_in_turns(
                {name: functools.partial(method, q, k, v) for name, method in methods.items()},
                device=device, warmup=1, repeats=repeats)
            for name, times in runs.items():
                seconds[name].append(min(times))
    return seconds
