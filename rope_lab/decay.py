"""Long-range decay: what shrinks with distance under RoPE, what does not, and the base.

Notation (as in every notebook): q sits at position m, k at position n, Δ = n − m is their
relative distance, d the head dimension, θ_i = base^(−2i/d) for pairs i = 0 … d/2 − 1.
RoPE makes the score depend on Δ only:

    s(Δ) = ⟨R_m q, R_n k⟩ = qᵀ R_Δ k

Writing pair i of q and k as complex numbers q_i, k_i and h_i = q_i·conj(k_i),

    s(Δ) = Re Σ_i h_i · e^{−iΔθ_i}                                        (1)

Four facts this module lets a notebook check:

* q = k = all-ones gives s(Δ) = 2·Σ_i cos(Δθ_i) — a fixed curve, not a law for every q, k.
* RoFormer's bound (Abel summation of (1)): |s(Δ)| ≤ max_j |h_{j−1} − h_j| · Σ_{j=1}^{d/2} |S_j|
  with S_j = Σ_{i<j} e^{iΔθ_i}, h_{d/2} = 0. Its distance-dependent part,
  (1/(d/2))·Σ_j |S_j|, is what decays.
* Independent random q, k: E[s(Δ)] = 0 at every Δ. Correlated k = q + noise:
  E[s(Δ)] = tr(R_Δ) = 2·Σ_i cos(Δθ_i) — decay holds in expectation only.
* The base criterion of kexue.fm post 10122 (Men et al. 2024, "Base of RoPE Bounds Context
  Length"): Σ_i cos(mθ_i) ≥ 0 for every m ≤ L, and the smallest base meeting it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rope_lab import _validate, timing
from rope_lab._angles import outer_angles
from rope_lab.rope import DEFAULT_BASE, apply_rope, inv_freq, rope_angles, rope_pairs

MODES = ("ones", "random", "correlated")

# minimum_base refuses a search estimated to take longer than this (see _search_seconds),
# and shows a progress bar for one estimated to take longer than PROGRESS_SECONDS.
MINIMUM_BASE_MAX_SECONDS = 20.0
PROGRESS_SECONDS = 2.0


# --- validation -----------------------------------------------------------------------------

def _distances(distances, device=None) -> torch.Tensor:
    """A 1-D tensor of relative distances Δ (integers or floats)."""
    distances = _validate.as_positions(distances, device=device, name="distances")
    if distances.ndim != 1:
        raise ValueError(
            f"distances must be 1-D, shape (D,), got shape {tuple(distances.shape)}"
        )
    return distances


def _angles(function: str, distances, dim: int, base: float, bytes_per_entry: int):
    """Validated Δ·θ_i in float64, ``(D, d/2)``, after checking that ``bytes_per_entry`` bytes
    for each of the D × d/2 entries (the angles and what the caller builds from them) fit."""
    distances = _distances(distances)
    theta = inv_freq(dim, base, dtype=torch.float64)
    _validate.check_table_size(
        function, f"{len(distances)} distances × dim={dim}",
        len(distances) * (dim // 2) * bytes_per_entry)
    return outer_angles(distances, theta)


def _check_mode(mode) -> str:
    if mode not in MODES:
        choices = ", ".join(repr(m) for m in MODES)
        raise ValueError(f"mode must be one of {choices}, got {mode!r}")
    return mode


def _check_noise(noise) -> float:
    if isinstance(noise, bool) or not isinstance(noise, (int, float)):
        raise TypeError(f"noise must be a number, got {noise!r} of type {type(noise).__name__}")
    if not math.isfinite(noise) or noise < 0:
        raise ValueError(f"noise must be a finite number ≥ 0, got {noise}")
    return float(noise)


def _check_pair(q, k) -> int:
    _validate.check_float_tensor(q, "q")
    _validate.check_float_tensor(k, "k")
    if q.ndim == 0 or k.ndim == 0:
        raise ValueError("q and k must have a feature dimension, shape (..., d); got a scalar")
    dim = _validate.check_dim(q.shape[-1], "q.shape[-1]")
    if k.shape[-1] != dim:
        raise ValueError(
            f"q and k must have the same head dimension, got q.shape[-1] = {dim} and "
            f"k.shape[-1] = {k.shape[-1]}"
        )
    return dim


# --- scores over distance ---------------------------------------------------------------------

def score_curve(q: torch.Tensor, k: torch.Tensor, distances, *, base: float = DEFAULT_BASE,
                layout: str = "half") -> torch.Tensor:
    """s(Δ) = ⟨R_0 q, R_Δ k⟩: q at position 0, k moved to each distance Δ.

    Args:
        q, k: ``(..., d)`` query and key (batch shapes broadcast).
        distances: ``(D,)`` relative distances Δ.
        base, layout: as in :func:`rope_lab.apply_rope`.

    Returns:
        ``(..., D)`` scores, in the promoted dtype of q and k.
    """
    dim = _check_pair(q, k)
    _validate.check_layout(layout)
    dtype = torch.promote_types(q.dtype, k.dtype)
    distances = _distances(distances, device=k.device)
    pairs = torch.broadcast_shapes(q.shape[:-1], k.shape[:-1]).numel()
    # rotated keys and their products with q: two (..., D, d) tensors; cos, sin, angles
    _validate.check_table_size(
        "score_curve", f"{len(distances)} distances × dim={dim} × {pairs} (q, k) pairs",
        len(distances) * dim * (2 * pairs * dtype.itemsize + 6))
    q, k = torch.broadcast_tensors(q.to(dtype), k.to(dtype))
    rotated_q = apply_rope(q[..., None, :], [0], base=base, layout=layout)
    keys = k[..., None, :].expand(*k.shape[:-1], len(distances), k.shape[-1])
    rotated_k = apply_rope(keys, distances, base=base, layout=layout)
    return (rotated_q * rotated_k).sum(-1)


def cos_sum(distances, dim: int, *, base: float = DEFAULT_BASE) -> torch.Tensor:
    """Σ_i cos(Δθ_i), in float64: source post 000's "bound" and the base criterion's sum.

    Args:
        distances: ``(D,)`` relative distances Δ.
        dim: head dimension d.

    Returns:
        ``(D,)`` float64. Equals s(Δ) when q = k and every pair of q has unit length.
    """
    return _angles("cos_sum", distances, dim, base, 16).cos().sum(-1)


def _partial_sums(distances, dim: int, base: float, function: str) -> torch.Tensor:
    """|S_j| for j = 1 … d/2, S_j = Σ_{i<j} e^{iΔθ_i}: ``(D, d/2)`` float64."""
    # angles, ones (8 bytes each), e^{iΔθ} and its cumsum (16 each), |S_j| (8)
    angles = _angles(function, distances, dim, base, 56)
    return torch.polar(torch.ones_like(angles), angles).cumsum(-1).abs()


def abel_curve(distances, dim: int, *, base: float = DEFAULT_BASE) -> torch.Tensor:
    """RoFormer's relative upper bound (1/(d/2))·Σ_{j=1}^{d/2} |S_j|, S_j = Σ_{i<j} e^{iΔθ_i}.

    Returns:
        ``(D,)`` float64; (d/2 + 1)/2 at Δ = 0, decaying (with ripples) as Δ grows.
    """
    return _partial_sums(distances, dim, base, "abel_curve").mean(-1)


def abel_bound(q: torch.Tensor, k: torch.Tensor, distances, *, base: float = DEFAULT_BASE,
               layout: str = "half") -> torch.Tensor:
    """The full Abel-summation bound on |s(Δ)| for this q, k: max_j |h_{j−1} − h_j|·Σ_j |S_j|.

    h_i = q_i·conj(k_i) for pair i (pairs as in :func:`rope_lab.rope_pairs`), h_{d/2} = 0.

    Args:
        q, k: ``(..., d)``; distances: ``(D,)``.

    Returns:
        ``(..., D)`` float64, never smaller than ``score_curve(q, k, distances).abs()``.
    """
    dim = _check_pair(q, k)
    first, second = rope_pairs(dim, _validate.check_layout(layout))
    q, k = q.double(), k.double()
    h = torch.complex(q[..., first], q[..., second]) * torch.complex(
        k[..., first], -k[..., second]
    )
    h = torch.cat((h, torch.zeros_like(h[..., :1])), dim=-1)
    step = (h[..., :-1] - h[..., 1:]).abs().amax(-1, keepdim=True)
    return step * _partial_sums(distances, dim, base, "abel_bound").to(step.device).sum(-1)


# --- random and correlated q, k -----------------------------------------------------------

def sample_qk(dim: int, *, mode: str = "correlated", noise: float = 1.0, samples: int = 1,
              generator: torch.Generator | None = None, dtype=torch.float64):
    """Draw queries and keys for the three experiments.

    "ones": q = k = all-ones (source post 002). "random": q, k independent N(0, I).
    "correlated": q ~ N(0, I), k = q + noise·ε with ε ~ N(0, I) independent.

    Returns:
        q, k: two ``(samples, dim)`` tensors.
    """
    _validate.check_dim(dim)
    _check_mode(mode)
    noise = _check_noise(noise)
    _validate.check_positive_int(samples, "samples")
    _validate.check_table_size("sample_qk", f"samples={samples} × dim={dim}",
                               3 * samples * dim * dtype.itemsize)  # q, the noise, k
    if mode == "ones":
        ones = torch.ones(samples, dim, dtype=dtype)
        return ones, ones.clone()
    q = torch.randn(samples, dim, generator=generator, dtype=dtype)
    other = torch.randn(samples, dim, generator=generator, dtype=dtype)
    return (q, other) if mode == "random" else (q, q + noise * other)


def expected_score(distances, dim: int, *, base: float = DEFAULT_BASE,
                   mode: str = "correlated", noise: float = 1.0) -> torch.Tensor:
    """E[s(Δ)] for q, k drawn as in :func:`sample_qk` (exact, not simulated).

    random:  E[qᵀR_Δk] = E[q]ᵀ R_Δ E[k] = 0.
    correlated, ones:  E[qᵀR_Δ(q + noise·ε)] = tr(R_Δ) = 2·Σ_i cos(Δθ_i).

    Returns:
        ``(D,)`` float64.
    """
    _check_mode(mode)
    _check_noise(noise)
    sums = cos_sum(distances, dim, base=base)
    return torch.zeros_like(sums) if mode == "random" else 2 * sums


def score_std(distances, dim: int, *, base: float = DEFAULT_BASE, mode: str = "correlated",
              noise: float = 1.0) -> torch.Tensor:
    """Standard deviation of s(Δ) for q, k drawn as in :func:`sample_qk` (exact).

    random:  Var = E[qᵀ(R k)(R k)ᵀq] = d, since R_Δ k is again N(0, I).
    correlated:  Var = Var(qᵀA q) + noise²·d with A = (R_Δ + R_Δᵀ)/2, and for Gaussian q
        Var(qᵀAq) = 2·tr(A²) = 4·Σ_i cos²(Δθ_i).
    ones:  0 (nothing is random).

    Returns:
        ``(D,)`` float64.
    """
    _check_mode(mode)
    noise = _check_noise(noise)
    cos = _angles("score_std", distances, dim, base, 16).cos()
    if mode == "ones":
        return torch.zeros(cos.shape[0], dtype=torch.float64)
    if mode == "random":
        return torch.full((cos.shape[0],), math.sqrt(dim), dtype=torch.float64)
    return (4 * (cos**2).sum(-1) + noise**2 * dim).sqrt()


# --- the base criterion ----------------------------------------------------------------------

class _SearchProgress:
    """minimum_base's progress bar, built only for a search long enough to show one.

    tqdm writes to stderr (where a notebook cell counts as failed), and even a disabled bar
    takes tqdm's lock and starts its monitor thread: a process forked while the monitor held
    that lock would wait for it forever. Imported here: in a notebook
    ``tqdm.auto`` loads ipywidgets, which math modules never do.
    """

    def __init__(self, shown: bool):
        self.bar = None
        if shown:
            from tqdm.auto import tqdm

            self.bar = tqdm(desc="minimum_base", unit=" full evaluations")

    def step(self, base: float) -> None:
        if self.bar is not None:
            self.bar.update()
            self.bar.set_postfix_str(f"base ≥ {base:.4g}", refresh=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False


def _one_thread():
    # The search runs thousands of tiny operations; on a shared 2-core machine extra
    # threads only add hand-off cost (a 100× slowdown measured under load).
    return timing.cpu_threads(1)


def _cos_sums_up_to(context_length: int, theta: torch.Tensor) -> torch.Tensor:
    """B(m) = Σ_i cos(mθ_i) for m = 0 … L, by angle addition: ``(L + 1,)`` float64.

    Write m = a·C + r with C ≈ √L; cos(aCθ + rθ) = cos·cos − sin·sin, so the whole table is
    two (L/C × d/2) @ (d/2 × C) matrix products instead of L·d/2 cosines.
    """
    block = math.isqrt(context_length) + 1
    rows = context_length // block + 1
    coarse = rope_angles(torch.arange(rows, dtype=torch.float64) * block, theta)
    fine = rope_angles(torch.arange(block, dtype=torch.float64), theta)
    table = coarse.cos() @ fine.cos().T - coarse.sin() @ fine.sin().T
    return table.flatten()[: context_length + 1]


def lowest_cos_sum(base: float, context_length: int, dim: int = 128) -> float:
    """min over m = 0 … L of Σ_i cos(mθ_i); the criterion holds when this is ≥ 0."""
    _validate.check_positive_int(context_length, "context_length")
    _check_sums_size("lowest_cos_sum", context_length)
    theta = inv_freq(dim, base, dtype=torch.float64)
    with _one_thread():
        return float(_cos_sums_up_to(context_length, theta).min())


def _check_sums_size(function: str, context_length: int) -> None:
    # the table of L + 1 sums, the angles of its two factors, and the ratios minimum_base forms
    _validate.check_table_size(function, f"context_length={context_length}",
                               3 * (context_length + 1) * 8)


def satisfies_base_criterion(base: float, context_length: int, dim: int = 128) -> bool:
    """True when Σ_i cos(mθ_i) ≥ 0 for every m = 0 … context_length."""
    return lowest_cos_sum(base, context_length, dim) >= 0


def _search_seconds(context_length: int) -> float:
    """minimum_base's running time, estimated from runs on one core of a 2-core machine (d = 64
    and 128 alike): 0.1 s at L = 1024, 1.6–1.9 s at 32 768, 9–11 s at 131 072, 37–41 s at
    262 144, 74 s at 524 288. The count of full evaluations and each one's cost both grow
    with L; 11 s·(L/131 072)^1.6 fits the long runs."""
    return 11.0 * (context_length / 131072) ** 1.6


# Below this many units of log(base) the search stops trying to prove a gap invalid.
_RESOLUTION = 1e-9
_WITNESSES = 12
_LARGEST_LOG_BASE = math.log(1e30)


def minimum_base(context_length: int, dim: int = 128) -> float:
    """The smallest base ≥ 1 with Σ_i cos(mθ_i) ≥ 0 for every m = 0 … context_length.

    The condition is not monotone in the base: for L = 4096, d = 128 it holds on a band about
    0.1 % wide, from 26 952 to about 26 975, yet fails again at 27 000, 28 200 and 39 800. So
    neither bisection nor a coarse grid is safe. The search walks up u = ln(base) from 0 and
    proves every base it passes invalid:

    * A witness is a distance m with B(m, u) = Σ_i cos(m·e^{−u·x_i}) < 0, x_i = 2i/d.
    * |∂B(m, u)/∂u| = |Σ_i sin(mθ_i)·mθ_i·x_i| ≤ m·Σ_i x_i θ_i = m·S(u), and S decreases
      with u. So B(m, u') < 0 for every u' < u + (−B(m, u))/(m·S(u)): skip that far.
    * When no stored witness is negative, all m = 0 … L are evaluated (two small matrix
      products, see ``_cos_sums_up_to``): either the base is valid — the answer, since all
      smaller bases were proven invalid — or the most useful new witnesses are stored.

    Gaps narrower than 1e-9 in ln(base) are stepped over unproven; nothing else is.

    The work grows faster than L (more evaluations, each over all L distances): the search
    is refused (``ValueError``) when estimated to take longer than
    :data:`MINIMUM_BASE_MAX_SECONDS` (about L = 190 000), and shows a progress bar when
    estimated to take longer than :data:`PROGRESS_SECONDS` (about L = 45 000).

    Args:
        context_length: L, the largest distance m that must satisfy the criterion.
        dim: head dimension d.

    Returns:
        The base, a float (for d = 128: about 4.3e3 at L = 1024 and 6.3e5 at L = 32768).
    """
    _validate.check_positive_int(context_length, "context_length")
    _validate.check_dim(dim)
    seconds = _search_seconds(context_length)
    if seconds > MINIMUM_BASE_MAX_SECONDS:
        raise ValueError(
            f"minimum_base: context_length={context_length} needs about {seconds:.3g} s of "
            f"search (estimate; limit {MINIMUM_BASE_MAX_SECONDS:g} s, "
            "rope_lab.decay.MINIMUM_BASE_MAX_SECONDS, about context_length ≤ 190000); "
            "expected a smaller context_length"
        )
    _check_sums_size("minimum_base", context_length)
    if dim == 2 and context_length >= 2:
        # One pair, θ_0 = base⁰ = 1 for every base, and cos(2) < 0.
        raise ValueError(
            f"with dim = 2 no base meets the criterion for context_length ≥ 2 (the only "
            f"frequency is θ_0 = 1 whatever the base); got context_length = {context_length}"
        )
    # The walk runs ~10⁴ steps on 12 witnesses × d/2 numbers: NumPy has less per-call cost
    # than torch for arrays this small. Full evaluations use the package's inv_freq.
    x = np.arange(0, dim, 2) / dim
    distances = torch.arange(1, context_length + 1, dtype=torch.float64)
    witnesses = np.empty(0)
    u = 0.0
    progress = _SearchProgress(seconds > PROGRESS_SECONDS)
    with _one_thread(), progress:
        while True:
            theta = np.exp(-u * x)  # = inv_freq(dim, e^u), checked in the tests
            speed = float(x @ theta)  # S(u)
            skip = 0.0
            if len(witnesses):
                sums = np.cos(np.multiply.outer(witnesses, theta)).sum(-1)
                skip = float((-sums / witnesses).max()) / speed
            if skip < _RESOLUTION:
                sums = _cos_sums_up_to(
                    context_length, inv_freq(dim, math.exp(u), dtype=torch.float64)
                )
                progress.step(math.exp(u))
                if float(sums.min()) >= 0:
                    return math.exp(u)
                reach = -sums[1:] / distances
                best = distances[torch.topk(reach, min(4, context_length)).indices]
                witnesses = np.concatenate([best.numpy(), witnesses])[:_WITNESSES]
                skip = max(float(reach.max()) / speed, _RESOLUTION)
            u += skip
            if u > _LARGEST_LOG_BASE:
                raise ValueError(
                    f"no base up to 1e{_LARGEST_LOG_BASE / math.log(10):.0f} meets the "
                    f"criterion for context_length = {context_length}, dim = {dim}"
                )
