"""Exercise of notebook 00 (start here): the scaled dot product."""

from __future__ import annotations

import torch

from rope_lab.exercises.grading import Learner, Wrong, compare, grader, matches, randint
from rope_lab.i18n import N_, _


def _scaled_dot_reference(q, k):
    return (q * k).sum(-1) / q.shape[-1] ** 0.5


@grader("00.1", N_("the scaled dot product"), answer="scaled_dot")
def check_scaled_dot(scaled_dot: Learner, generator: torch.Generator) -> None:
    """00.1 — ``scaled_dot(q, k)``: the attention score q·k / √d over the last dimension.

    q, k: ``(..., d)``; returns ``(...)``.
    """
    teaching = torch.Generator().manual_seed(1)
    cases = [torch.randn(2, *shape, generator=teaching) for shape in ((8,), (3, 16), (2, 5, 4))]
    random = [torch.randn(2, *[randint(generator, 1, 4) for _ in range(randint(generator, 0, 2))],
                          randint(generator, 2, 32), generator=generator) for _ in range(2)]
    for number, (q, k) in enumerate(cases + random):
        scaled_dot.random = number >= len(cases)
        answer = scaled_dot(q, k)
        expected = _scaled_dot_reference(q, k)
        failure = compare(answer, expected, atol=1e-5,
                          what=_("q, k of shape {shape}").format(shape=tuple(q.shape)))
        if failure is not None:
            d = q.shape[-1]
            if matches(answer, expected * d**0.5, atol=1e-5):
                failure += _(" — you did not divide by √d")
            elif matches(answer, expected / d**0.5, atol=1e-5):
                failure += _(" — you divided by d; divide by √d")
            raise Wrong(failure)
