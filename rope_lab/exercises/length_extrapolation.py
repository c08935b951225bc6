"""Exercises of notebook 06 (length extrapolation): PI speeds, the NTK base, pairs that turn."""

from __future__ import annotations

import math

import torch

from rope_lab import scaling
from rope_lab.exercises.grading import (
    FLOAT32_ROUNDING,
    Learner,
    Wrong,
    answer_number,
    compare,
    grader,
    log_uniform,
    precision_note,
    randint,
    tell_apart,
    values_differ,
)
from rope_lab.i18n import N_, _
from rope_lab.rope import inv_freq

_CASES_06 = [(64, 10000.0, 4.0), (128, 500000.0, 8.0), (16, 100.0, 2.5), (4, 10000.0, 1.0)]
# 06.1 also: the slowest pairs of a long-context model turn at 4e-8 rad per token, yet turn
_CASES_06_1 = _CASES_06 + [(256, 1e6, 32.0)]


def _random_cases(generator, count=2):
    return [(2 * randint(generator, 2, 128), round(log_uniform(generator, 10.0, 1e6), 1),
             round(log_uniform(generator, 1.0, 32.0), 3)) for _ in range(count)]


@grader("06.1", N_("position interpolation"), answer="pi_inv_freq")
def check_position_interpolation(function: Learner, generator: torch.Generator) -> None:
    """06.1: ``function(dim, base, factor)`` → the ``(dim // 2,)`` PI rotation speeds θ_i/s.

    Relative tolerance per speed (the slowest are tiny, and not 0): float32 rounding of
    base^(−2i/d), about 2⁻²³·|ln θ_i| relative, is allowed with margin.
    """
    random = _random_cases(generator)
    for number, (dim, base, factor) in enumerate(_CASES_06_1 + random):
        function.random = number >= len(_CASES_06_1)
        answer = function(dim, base, factor)
        expected = scaling.linear_inv_freq(dim, base=base, factor=factor,
                                           dtype=torch.float64)[0]
        atol = FLOAT32_ROUNDING * ((expected * factor).log().abs() + 2) * expected
        what = f"dim={dim}, base={base:g}, factor={factor:g}"
        failure = compare(answer, expected, atol=atol, what=what)
        if failure is None:
            continue
        if values_differ(answer, expected, atol=atol):
            tensor = torch.as_tensor(answer).detach().cpu().double()
            if bool(((tensor == 0) & (expected > 0)).any()):
                failure += _(" (the slowest pairs still turn: θ_i/s is tiny, never 0)")
        raise Wrong(failure)


@grader("06.2", N_("NTK-aware base"), answer="ntk_base")
def check_ntk_base(function: Learner, generator: torch.Generator) -> None:
    """06.2: ``function(base, dim, factor)`` → the static NTK-aware base base·s^(d/(d−2))."""
    random = _random_cases(generator)
    for number, (dim, base, factor) in enumerate(_CASES_06 + random):
        function.random = number >= len(_CASES_06)
        where = f"dim={dim}, base={base:g}, factor={factor:g}"
        answer = answer_number(function(base, dim, factor), where)
        expected = base * factor ** (dim / (dim - 2))
        if not abs(answer - expected) <= 1e-6 * expected:
            slowest = (answer / base) ** (-(dim - 2) / dim) if answer > 0 else float("nan")
            shown_expected, shown_answer = tell_apart(expected, answer)
            raise Wrong(_("{where}: expected {expected}, got {answer}{note} — with your base "
                          "the slowest pair slows by {slowest:.4g}, it should slow by exactly "
                          "1/factor = {inverse:.4g}").format(
                              where=where, expected=shown_expected, answer=shown_answer,
                              note=precision_note(None, expected, answer, 1e-6 * expected),
                              slowest=slowest, inverse=1 / factor))


def _full_turns(dim, base, length):
    wavelengths = 2 * math.pi / inv_freq(dim, base, dtype=torch.float64)
    return wavelengths, int((wavelengths <= length).sum())


@grader("06.3", N_("pairs that turn"), answer="full_turn_pairs")
def check_full_turn_pairs(function: Learner, generator: torch.Generator) -> None:
    """06.3: ``function(dim, base, length)`` → how many pairs complete a turn (λ_i ≤ L)."""
    cases = [(64, 10000.0, 2048), (128, 500000.0, 8192), (16, 10000.0, 64), (8, 10.0, 3)]
    random = []
    while len(random) < 3:
        dim, base = 2 * randint(generator, 1, 128), round(log_uniform(generator, 2.0, 1e6), 1)
        length = int(log_uniform(generator, 1.0, 1e5))
        wavelengths = _full_turns(dim, base, length)[0]
        # a wavelength within rounding of L could be counted either way in float32: skip it
        if bool(((wavelengths - length).abs() > 1e-4 * length).all()):
            random.append((dim, base, length))
    for number, (dim, base, length) in enumerate(cases + random):
        function.random = number >= len(cases)
        where = f"dim={dim}, base={base:g}, L={length}"
        answer = answer_number(function(dim, base, length), where, integer=True)
        expected = _full_turns(dim, base, length)[1]
        if answer != expected:
            raise Wrong(_("{where}: expected {expected} of {pairs} pairs, got {answer}").format(
                where=where, expected=expected, pairs=dim // 2, answer=repr(answer)))
