"""Exercises of notebook 05 (long-range decay): the score curve, the bound, the minimum base."""

from __future__ import annotations

import torch

from rope_lab import decay
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_number,
    answer_tensor,
    compare,
    context,
    grader,
    log_uniform,
    matches,
    randint,
)
from rope_lab.i18n import N_, _
from rope_lab.rope import rope_pairs


@grader("05.1", N_("the score curve"))
def check_score_curve(score_curve: Learner, generator: torch.Generator) -> None:
    """05.1: ``score_curve(q, k, distances, base) -> (D,)``: q at position 0, k at each Δ.

    Compared with :func:`rope_lab.decay.score_curve` (half layout) on all-ones and on random
    q, k, for several bases.
    """
    teaching = torch.Generator().manual_seed(51)
    fixed = torch.tensor([0, 1, 2, 5, 17, 100, 1000])
    cases = [(torch.ones(8), torch.ones(8), fixed, 10000.0)]
    for dim, base in ((8, 100.0), (64, 10000.0), (128, 5e5)):
        cases.append((torch.randn(dim, generator=teaching),
                      torch.randn(dim, generator=teaching), fixed, base))
    random = []
    for _draw in range(2):
        dim = 2 * randint(generator, 2, 64)
        distances = torch.randint(0, 3000, (randint(generator, 1, 8),), generator=generator)
        random.append((torch.randn(dim, generator=generator), torch.randn(dim, generator=generator),
                       distances, round(log_uniform(generator, 10.0, 1e6), 1)))
    for number, (q, k, distances, base) in enumerate(cases + random):
        score_curve.random = number >= len(cases)
        answer = score_curve(q, k, distances, base)
        expected = decay.score_curve(q, k, distances, base=base)
        atol = 1e-3 * (1 + float(expected.abs().max()))
        failure = compare(answer, expected, atol=atol,
                          what=_("d = {dim}, base {base:g}, distances {distances}").format(
                              dim=q.shape[0], base=base, distances=distances.tolist()))
        if failure is not None:
            interleaved = decay.score_curve(q, k, distances, base=base, layout="interleaved")
            if matches(answer, interleaved, atol=1e-3 * (1 + float(interleaved.abs().max()))):
                failure += _(" (you paired features (2i, 2i+1); use the half layout, the "
                             "default of rl.apply_rope)")
            raise Wrong(failure)


def _unit_pair_query(generator, dim):
    first, second = rope_pairs(dim, "half")
    angles = 2 * torch.pi * torch.rand(dim // 2, generator=generator, dtype=torch.float64)
    q = torch.empty(dim, dtype=torch.float64)
    q[first], q[second] = angles.cos(), angles.sin()  # every pair of q has length 1
    return q


@grader("05.2", N_("a key that breaks the Σcos “bound”"))
def check_bound_breaker(make_key: Learner, generator: torch.Generator) -> None:
    """05.2: ``make_key(q, distance, base) -> k`` with unit pairs whose score at ``distance``
    beats source post 000's "bound" Σ_i cos(Δθ_i) (q also has unit pairs, half layout)."""
    teaching = torch.Generator().manual_seed(52)
    cases = [(_unit_pair_query(teaching, dim), distance, base)
             for dim, distance, base in ((64, 1000, 10000.0), (128, 300, 10000.0),
                                         (32, 1777, 500.0))]
    random = []
    while len(random) < 2:  # only where the best key, score d/2, clears the bound by 2
        dim, distance = 2 * randint(generator, 8, 64), randint(generator, 50, 5000)
        base = round(log_uniform(generator, 100.0, 1e6), 1)
        if dim / 2 - float(decay.cos_sum([distance], dim, base=base)[0]) >= 2:
            random.append((_unit_pair_query(generator, dim), distance, base))
    for number, (q, distance, base) in enumerate(cases + random):
        make_key.random = number >= len(cases)
        dim = len(q)
        where = _("d = {dim}, Δ = {distance}, base {base:g}").format(dim=dim, distance=distance,
                                                                    base=base)
        k = answer_tensor(make_key(q, distance, base), where, shape=(dim,)).double()
        first, second = rope_pairs(dim, "half")
        lengths = torch.sqrt(k[first] ** 2 + k[second] ** 2)
        bound = float(decay.cos_sum([distance], dim, base=base)[0])
        score = float(decay.score_curve(q, k, [distance], base=base)[0])
        if not bool(torch.allclose(lengths, torch.ones_like(lengths), atol=1e-4)):
            i = int((lengths - 1).abs().argmax())
            raise Wrong(context(where) + _("pair {pair} of k has length {length:.4f}; the bound "
                                           "is about unit pairs, so every pair of k must have "
                                           "length 1").format(pair=i, length=float(lengths[i])))
        if score <= bound + 1:
            raise Wrong(context(where) + _("your k scores {score:.3f}, the “bound” is "
                                           "{bound:.3f}; aim for the largest possible score, d/2 "
                                           "(hint: undo the rotation)").format(score=score,
                                                                               bound=bound))


@grader("05.3", N_("the minimum base for a context length"), time_factor=3.0)
def check_minimum_base(minimum_base: Learner, generator: torch.Generator) -> None:
    """05.3: ``minimum_base(context_length, dim) -> base``: the smallest base ≥ 1 with
    Σ_i cos(mθ_i) ≥ 0 for every m = 0 … L. Accepted within 1 % above the exact answer.

    An honest scan takes seconds, so this grader allows 3 × the usual time.
    """
    cases = [(100, 16), (512, 64)]
    random = [(randint(generator, 40, 250), 2 ** randint(generator, 3, 5))]
    for number, (length, dim) in enumerate(cases + random):
        minimum_base.random = number >= len(cases)
        where = f"L = {length}, d = {dim}"
        base = answer_number(minimum_base(length, dim), where)
        exact = decay.minimum_base(length, dim)
        if not base >= 1 or not decay.satisfies_base_criterion(base, length, dim):
            lowest = decay.lowest_cos_sum(base, length, dim) if base > 0 else float("nan")
            raise Wrong(context(where) + _("base {base:.6g} fails the criterion (the smallest "
                                           "sum over m ≤ L is {lowest:.4f} < 0)").format(
                                               base=base, lowest=lowest))
        if base > exact * 1.01:
            raise Wrong(context(where) + _("base {base:.6g} works, but so does the smaller "
                                           "{exact:.6g}. The condition is not monotone in the "
                                           "base: bisection can land on a later crossing; scan "
                                           "upward instead").format(base=base, exact=exact))
