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
from rope_lab.i18n import N_, _


@grader("07.1", N_("causal linear attention, recurrent form"),
        answer="recurrent_linear_attention")
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
        what = _("with rope={rope}, q, k of shape {shape}").format(rope=rope,
                                                                    shape=tuple(q.shape))
        failure = compare(answer, expected, atol=1e-9, what=what)
        if failure is None:
            continue
        hints = {
            _("{what}: your answer includes future tokens (did you sum over all n, not "
              "n ≤ m?)"):
                la.linear_attention(q, k, v, causal=False, rope=rope),
            _("{what}: your answer rotates the denominator too; keep Σ φ(q_m)·φ(k_n) "
              "unrotated"):
                la.linear_attention_weights(q, k, causal=True, rope=True,
                                            rotate_denominator=True) @ v,
        }
        for hint, wrong in hints.items():
            if matches(answer, wrong, atol=1e-9):
                raise Wrong(hint.format(what=what))
        raise Wrong(failure)


@grader("07.2", N_("a rotated normalizer that is not positive"),
        answer="non_positive_normalizer")
def check_non_positive_normalizer(function: Learner, generator: torch.Generator) -> None:
    """07.2: ``function()`` returns q, k of shape ``(L, 4)`` with L ≤ 8 whose *rotated*
    causal normalizer (base 10000, φ = elu + 1) is ≤ 0 for some query.

    No inputs, so no random cases: any counterexample the learner finds is an answer.
    """
    answer = function()
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        kind = "None" if answer is None else type(answer).__name__
        raise Wrong(_("return a pair (q, k) of tensors, got {type} of length {length}").format(
            type=kind, length=len(answer)) if isinstance(answer, (tuple, list)) else
                    _("return a pair (q, k) of tensors, got {type}").format(type=kind))
    q, k = (answer_tensor(t, name, kind="real").double()
            for name, t in zip("qk", answer, strict=True))
    if q.ndim != 2 or q.shape != k.shape or q.shape[1] != 4 or not 1 <= q.shape[0] <= 8:
        raise Wrong(_("q and k must both have shape (L, 4) with L ≤ 8, got {q} and {k}").format(
            q=tuple(q.shape), k=tuple(k.shape)))
    rotated = la.linear_attention_normalizers(q, k, causal=True, rotated=True)
    plain = la.linear_attention_normalizers(q, k, causal=True, rotated=False)
    # NaN ≤ 0 is False and inf − inf is NaN: a normalizer that overflowed proves nothing
    if not bool(torch.isfinite(rotated).all() & torch.isfinite(plain).all()):
        largest = float(torch.cat((q, k)).abs().max())
        raise Wrong(_("with entries up to {largest:.3g} the normalizers overflow to inf or NaN "
                      "(φ(x) = elu(x) + 1 grows like x, and a normalizer multiplies two of "
                      "them); that proves nothing about the rotation: keep the entries "
                      "moderate").format(largest=largest))
    broken = rotated <= 0
    if not bool(broken.any()):
        raise Wrong(_("the smallest rotated normalizer is {smallest:.4g} > 0. Hint: pair 1 "
                      "(features 1 and 3) turns 100× slower than pair 0; make φ small "
                      "there.").format(smallest=float(rotated.min())))
    if not bool((broken & (plain > 0)).any()):
        m = int(torch.nonzero(broken)[0])
        raise Wrong(_("at query {query} the unrotated normalizer is {plain:.3g} too: φ "
                      "underflowed to 0 (φ(x) = e^x for x < 0, which is 0 in float64 below "
                      "x ≈ −745), so the rotation did not make it ≤ 0. Make φ small, not zero "
                      "(x = −30 gives e^−30)").format(query=m, plain=float(plain[m])))
    m = int(torch.nonzero(broken & (plain > 0))[0])
    print(_("  rotated normalizer at query {query}: {rotated:.4g}; unrotated {plain:.4g} "
            "(positive, as always)").format(query=m, rotated=float(rotated[m]),
                                            plain=float(plain[m])))
