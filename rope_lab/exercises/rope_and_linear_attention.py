"""Exercises of notebook 07 (RoPE and linear attention): the recurrent form, the normalizer."""

from __future__ import annotations

import torch

from rope_lab import linear_attention as la
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_tensor,
    compare,
    grader,
    matches,
    randint,
)


@grader("07.1", "causal linear attention, recurrent form")
def check_recurrent_linear_attention(function: Learner, generator: torch.Generator) -> None:
    """07.1: ``function(q, k, v, rope)`` is causal linear attention as a loop over positions.

    q, k: ``(L, d)``, v: ``(L, d_v)``; returns ``(L, d_v)``. Compared with
    :func:`rope_lab.linear_attention.linear_attention` (causal) without and with RoPE.
    """
    teaching = torch.Generator().manual_seed(7)
    q, k = torch.randn(2, 9, 6, generator=teaching, dtype=torch.float64)
    v = torch.randn(9, 3, generator=teaching, dtype=torch.float64)
    cases = [(q, k, v, False), (q, k, v, True)]
    length, d = randint(generator, 2, 10), 2 * randint(generator, 1, 4)
    q, k = torch.randn(2, length, d, generator=generator, dtype=torch.float64)
    v = torch.randn(length, randint(generator, 1, 4), generator=generator, dtype=torch.float64)
    random = [(q, k, v, True), (q, k, v, False)]
    for number, (q, k, v, rope) in enumerate(cases + random):
        function.random = number >= len(cases)
        answer = function(q, k, v, rope)
        expected = la.linear_attention(q, k, v, causal=True, rope=rope)
        what = f"with rope={rope}, q, k of shape {tuple(q.shape)}"
        failure = compare(answer, expected, atol=1e-9, what=what)
        if failure is None:
            continue
        hints = {
            "includes future tokens (did you sum over all n, not n ≤ m?)":
                la.linear_attention(q, k, v, causal=False, rope=rope),
            "rotates the denominator too; keep Σ φ(q_m)·φ(k_n) unrotated":
                la.linear_attention_weights(q, k, causal=True, rope=True,
                                            rotate_denominator=True) @ v,
        }
        for hint, wrong in hints.items():
            if matches(answer, wrong, atol=1e-9):
                raise Wrong(f"{what}: your answer {hint}")
        raise Wrong(failure)


@grader("07.2", "a rotated normalizer that is not positive")
def check_non_positive_normalizer(function: Learner, generator: torch.Generator) -> None:
    """07.2: ``function()`` returns q, k of shape ``(L, 4)`` with L ≤ 8 whose *rotated*
    causal normalizer (base 10000, φ = elu + 1) is ≤ 0 for some query.

    No inputs, so no random cases: any counterexample the learner finds is an answer.
    """
    answer = function()
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Wrong(f"return a pair (q, k) of tensors, got "
                    f"{'None' if answer is None else type(answer).__name__}"
                    + (f" of length {len(answer)}" if isinstance(answer, (tuple, list)) else ""))
    q, k = (answer_tensor(t, name, kind="real").double()
            for name, t in zip("qk", answer, strict=True))
    if q.ndim != 2 or q.shape != k.shape or q.shape[1] != 4 or not 1 <= q.shape[0] <= 8:
        raise Wrong(f"q and k must both have shape (L, 4) with L ≤ 8, got {tuple(q.shape)} "
                    f"and {tuple(k.shape)}")
    rotated = la.linear_attention_normalizers(q, k, causal=True, rotated=True)
    plain = la.linear_attention_normalizers(q, k, causal=True, rotated=False)
    # NaN ≤ 0 is False and inf − inf is NaN: a normalizer that overflowed proves nothing
    if not bool(torch.isfinite(rotated).all() & torch.isfinite(plain).all()):
        largest = float(torch.cat((q, k)).abs().max())
        raise Wrong(f"with entries up to {largest:.3g} the normalizers overflow to inf or NaN "
                    "(φ(x) = elu(x) + 1 grows like x, and a normalizer multiplies two of them); "
                    "that proves nothing about the rotation: keep the entries moderate")
    broken = rotated <= 0
    if not bool(broken.any()):
        raise Wrong(f"the smallest rotated normalizer is {float(rotated.min()):.4g} > 0. "
                    "Hint: pair 1 (features 1 and 3) turns 100× slower than pair 0; "
                    "make φ small there.")
    if not bool((broken & (plain > 0)).any()):
        m = int(torch.nonzero(broken)[0])
        raise Wrong(f"at query {m} the unrotated normalizer is {float(plain[m]):.3g} too: φ "
                    "underflowed to 0 (φ(x) = e^x for x < 0, which is 0 in float64 below "
                    "x ≈ −745), so the rotation did not make it ≤ 0. Make φ small, not zero "
                    "(x = −30 gives e^−30)")
    m = int(torch.nonzero(broken & (plain > 0))[0])
    print(f"  rotated normalizer at query {m}: {float(rotated[m]):.4g}; unrotated "
          f"{float(plain[m]):.4g} (positive, as always)")
