"""Exercises of notebook 12 (what 2024–2026 models changed): p-RoPE speeds, a verdict from
the seed spread."""

from __future__ import annotations

import torch

from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_number,
    check_answer,
    grader,
    log_uniform,
    randint,
)
from rope_lab.models import p_rope_inv_freq

# (dim, base, p) with p·d/2 whole, so "the first round(p·d/2) pairs" is never a tie
_CASES_12_1 = [(16, 10000.0, 0.25), (64, 500000.0, 0.75), (8, 100.0, 0.5), (4, 10000.0, 1.0),
               (32, 10000.0, 0.0625)]


@grader("12.1", "p-RoPE speeds", forbidden=("rope_lab.models.p_rope_inv_freq",))
def check_p_rope_speeds(function: Learner, generator: torch.Generator) -> None:
    """12.1: ``function(dim, base, p)`` → ``(dim // 2,)`` speeds: θ_i = base^(−2i/d) for the
    first round(p·d/2) pairs, 0 for the others."""
    random = []
    for _ in range(3):
        half = randint(generator, 1, 64)
        random.append((2 * half, round(log_uniform(generator, 10.0, 1e6), 1),
                       randint(generator, 1, half) / half))
    for number, (dim, base, fraction) in enumerate(_CASES_12_1 + random):
        function.random = number >= len(_CASES_12_1)
        answer = function(dim, base, fraction)
        expected = p_rope_inv_freq(dim, base, fraction).double()
        kept = round(fraction * dim / 2)
        what = f"dim={dim}, base={base:g}, p={fraction:g} (keep {kept} of {dim // 2} pairs)"
        # relative: the slow pairs' speeds are tiny, an absolute tolerance would hide them
        check_answer(answer, expected, atol=1e-6 * expected + 1e-12, what=what)


_CASES_12_2 = [
    ([0.10, 0.12, 0.11], [0.50, 0.61, 0.55], -1),   # apart: a lower for every seed
    ([0.93, 0.97, 0.95], [0.40, 0.20, 0.31], 1),    # apart: a higher
    ([0.10, 0.30, 0.12], [0.28, 0.40, 0.35], 0),    # means differ, ranges overlap
    ([1.0, 2.0, 1.5], [2.0, 3.0, 2.5], 0),          # ranges touch at 2.0: not apart
    ([0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5], 0),
]


def _verdict(a: torch.Tensor, b: torch.Tensor) -> int:
    if a.max() < b.min():
        return -1
    if a.min() > b.max():
        return 1
    return 0


@grader("12.2", "a verdict from the seed spread")
def check_seed_verdict(function: Learner, generator: torch.Generator) -> None:
    """12.2: ``function(a, b)`` with one value per seed for each of two schemes → −1 if every
    seed of a lies below every seed of b, +1 if above, 0 if the ranges overlap or touch."""
    cases = [(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64), v)
             for a, b, v in _CASES_12_2]
    for _ in range(10):
        seeds = randint(generator, 3, 6)
        a = torch.rand(seeds, generator=generator, dtype=torch.float64)
        shift = 2.0 * float(torch.rand((), generator=generator, dtype=torch.float64)) - 1.0
        b = torch.rand(seeds, generator=generator, dtype=torch.float64) + 1.5 * shift
        cases.append((a, b, _verdict(a, b)))
    for number, (a, b, expected) in enumerate(cases):
        function.random = number >= len(_CASES_12_2)
        where = (f"a = {[round(v, 3) for v in a.tolist()]}, "
                 f"b = {[round(v, 3) for v in b.tolist()]}")
        answer = answer_number(function(a, b), where, integer=True)
        if answer != expected:
            meaning = {-1: "a below b for every seed", 1: "a above b for every seed",
                       0: "no difference within the seed spread"}
            raise Wrong(f"{where}: expected {expected} ({meaning[expected]}), got {answer}")
