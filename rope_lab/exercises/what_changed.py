"""Exercises of notebook 12 (what 2024–2026 models changed): p-RoPE speeds, a verdict from
the seed spread."""

from __future__ import annotations

import math

import torch

from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_number,
    compare,
    grader,
    log_uniform,
    matches,
    randint,
)
from rope_lab.i18n import N_, _
from rope_lab.models import p_rope_inv_freq
from rope_lab.rope import inv_freq

# (dim, base, p): p·d/2 whole (2, 24, 2, 2, 1), with a fraction below and above one half
# (1.25, 2.75: int() and math.ceil part from round there) and at a half, with an odd and an
# even whole part (3.5 → 4, 2.5 → 2: Python's round takes halves to the even neighbour, so
# "halves up" and "halves down" each miss one). Every p is a multiple of 1/32, so p·d/2 is
# exact in floating point and a half is really a half.
_CASES_12_1 = [(16, 10000.0, 0.25), (64, 500000.0, 0.75), (8, 100.0, 0.5), (4, 10000.0, 1.0),
               (32, 10000.0, 0.0625), (16, 10000.0, 5 / 32), (16, 10000.0, 11 / 32),
               (28, 10000.0, 0.25), (20, 10000.0, 0.25)]


def _speeds(dim, base, kept) -> torch.Tensor:
    theta = inv_freq(dim, base, dtype=torch.float64)
    theta[kept:] = 0.0
    return theta


@grader("12.1", N_("p-RoPE speeds"), forbidden=("rope_lab.models.p_rope_inv_freq",),
        answer="p_rope_speeds")
def check_p_rope_speeds(function: Learner, generator: torch.Generator) -> None:
    """12.1: ``function(dim, base, p)`` → ``(dim // 2,)`` speeds: θ_i = base^(−2i/d) for the
    first round(p·d/2) pairs (Python's round: halves to even), 0 for the others."""
    random = []
    for _draw in range(3):
        half = randint(generator, 1, 64)
        random.append((2 * half, round(log_uniform(generator, 10.0, 1e6), 1),
                       randint(generator, 1, 32) / 32))
    for number, (dim, base, fraction) in enumerate(_CASES_12_1 + random):
        function.random = number >= len(_CASES_12_1)
        answer = function(dim, base, fraction)
        expected = p_rope_inv_freq(dim, base, fraction).double()
        exact = fraction * dim / 2
        kept = round(exact)
        what = _("dim={dim}, base={base:g}, p={fraction:g} (p·d/2 = {exact:g}: keep "
                 "round({exact:g}) = {kept} of {pairs} pairs)").format(
                     dim=dim, base=base, fraction=fraction, exact=exact, kept=kept,
                     pairs=dim // 2)
        # relative: the slow pairs' speeds are tiny, an absolute tolerance would hide them
        failure = compare(answer, expected, atol=1e-6 * expected + 1e-12, what=what)
        if failure is None:
            continue
        for other in range(dim // 2 + 1):
            wrong = _speeds(dim, base, other)
            if other != kept and matches(answer, wrong, atol=1e-6 * wrong + 1e-12):
                if exact % 1 == 0.5:
                    how = _("at a half, Python's round goes to the even neighbour "
                            "(round(2.5) = 2, round(3.5) = 4)")
                elif other == math.floor(exact):
                    how = _("that drops the fraction (int() or floor); round to the nearest")
                elif other == math.ceil(exact):
                    how = _("that rounds up; round to the nearest")
                else:
                    how = _("count the pairs again")
                failure = _("{what}: you kept {other} pairs; {how}").format(what=what,
                                                                           other=other, how=how)
                break
        raise Wrong(failure)


_CASES_12_2 = [
    ([0.10, 0.12, 0.11], [0.50, 0.61, 0.55], -1),   # apart: a lower for every seed
    ([0.93, 0.97, 0.95], [0.40, 0.20, 0.31], 1),    # apart: a higher
    ([0.10, 0.30, 0.12], [0.28, 0.40, 0.35], 0),    # means differ, ranges overlap
    ([1.0, 2.0, 1.5], [2.0, 3.0, 2.5], 0),          # ranges touch at 2.0: not apart
    ([0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5], 0),
    ([0.10, 0.12, 0.11, 0.60], [0.50, 0.61, 0.55, 0.58], 0),  # the 4th seed of a overlaps
    ([0.90, 0.95, 0.92, 0.97, 0.30], [0.40, 0.20, 0.31, 0.25, 0.35], 0),  # the 5th of a
    ([0.20, 0.25, 0.22, 0.21], [0.80, 0.70, 0.75, 0.25], 0),  # the 4th of b touches a's top
]


def _verdict(a: torch.Tensor, b: torch.Tensor) -> int:
    if a.max() < b.min():
        return -1
    if a.min() > b.max():
        return 1
    return 0


def _random_seeds(generator):
    """One value per seed for two schemes: apart, or made to overlap (or touch) through one
    seed at a random place, often past the third."""
    seeds = randint(generator, 3, 6)
    a = torch.rand(seeds, generator=generator, dtype=torch.float64)
    b = torch.rand(seeds, generator=generator, dtype=torch.float64) + 1.5
    if randint(generator, 0, 1):
        a, b = b, a
    how = randint(generator, 0, 2)  # 0: apart, 1: one seed crosses, 2: one seed touches
    if how:
        moved, fixed = (a, b) if randint(generator, 0, 1) else (b, a)
        i = randint(generator, 0, seeds - 1)
        below = bool(moved.max() < fixed.min())
        near, far = (fixed.min(), fixed.max()) if below else (fixed.max(), fixed.min())
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        # touch: onto the nearest seed of the other; cross: into its range, or past it
        moved[i] = near if how == 2 else near + u * 1.2 * (far - near)
    return a, b


@grader("12.2", N_("a verdict from the seed spread"), answer="seed_verdict")
def check_seed_verdict(function: Learner, generator: torch.Generator) -> None:
    """12.2: ``function(a, b)`` with one value per seed for each of two schemes → −1 if every
    seed of a lies below every seed of b, +1 if above, 0 if the ranges overlap or touch."""
    cases = [(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
             for a, b, _ in _CASES_12_2]
    cases += [_random_seeds(generator) for _ in range(10)]
    for number, (a, b) in enumerate(cases):
        function.random = number >= len(_CASES_12_2)
        where = (f"a = {[round(v, 3) for v in a.tolist()]}, "
                 f"b = {[round(v, 3) for v in b.tolist()]}")
        answer = answer_number(function(a, b), where, integer=True)
        expected = _verdict(a, b)  # after the answer: nothing to read from this frame before
        if answer == expected:
            continue
        meaning = {-1: _("a below b for every seed"), 1: _("a above b for every seed"),
                   0: _("no difference within the seed spread")}
        failure = _("{where}: expected {expected} ({meaning}), got {answer}").format(
            where=where, expected=expected, meaning=meaning[expected], answer=answer)
        touching = (-1 if a.max() <= b.min() else 1 if a.min() >= b.max() else 0)
        if answer == _verdict(a[:3], b[:3]) and len(a) > 3:
            failure += _("; you looked at the first 3 seeds only, there are {count}").format(
                count=len(a))
        elif answer == touching:
            failure += _("; ranges that touch count as overlapping: compare with < and >")
        elif answer == _verdict(a[:1], b[:1]):
            failure += _("; you compared the first seed only: every seed of a against every "
                         "of b")
        raise Wrong(failure)
