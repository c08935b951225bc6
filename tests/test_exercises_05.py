"""Notebook 05's checkers accept right answers, reject wrong ones, and never raise."""

import math

import numpy as np
import torch

import rope_lab as rl
from rope_lab import decay, exercises


def _score_curve(q, k, distances, base):
    rotated = rl.apply_rope(k.expand(len(distances), -1), distances, base=base)
    return rotated @ q


def _not_done(*args):
    raise NotImplementedError("your code here")


def test_score_curve_checker(capsys):
    assert exercises.check_score_curve(_score_curve)
    assert not exercises.check_score_curve(_not_done)
    assert "not attempted" in capsys.readouterr().out
    interleaved = lambda q, k, d, base: decay.score_curve(q, k, d, base=base,  # noqa: E731
                                                          layout="interleaved")
    assert not exercises.check_score_curve(interleaved)
    assert "half layout" in capsys.readouterr().out
    assert not exercises.check_score_curve(lambda q, k, d, base: torch.zeros(3))


def test_bound_breaker_checker(capsys):
    assert exercises.check_bound_breaker(
        lambda q, distance, base: rl.apply_rope(q[None], [-distance], base=base)[0])
    assert not exercises.check_bound_breaker(lambda q, distance, base: q)  # k = q obeys it
    assert "aim for the largest" in capsys.readouterr().out
    assert not exercises.check_bound_breaker(
        lambda q, distance, base: 2 * rl.apply_rope(q[None], [-distance], base=base)[0])
    assert "length 1" in capsys.readouterr().out
    assert not exercises.check_bound_breaker(lambda q, distance, base: "k")


def bisection(length, dim):
    """A plausible wrong 05.3: bisection assumes the criterion is monotone in the base, so it
    lands above the smallest base that satisfies it (also used by the grader battery)."""
    low, high = 0.0, math.log(1e9)
    for _ in range(60):
        middle = (low + high) / 2
        if decay.satisfies_base_criterion(math.exp(middle), length, dim):
            high = middle
        else:
            low = middle
    return math.exp(high)


def test_minimum_base_checker(capsys):
    assert exercises.check_minimum_base(lambda length, dim: decay.minimum_base(length, dim))
    assert not exercises.check_minimum_base(lambda length, dim: 10.0)
    assert "fails the criterion" in capsys.readouterr().out

    assert bisection(100, 16) > decay.minimum_base(100, 16) * 1.01
    assert not exercises.check_minimum_base(bisection)
    assert "not monotone" in capsys.readouterr().out
    assert not exercises.check_minimum_base(lambda length, dim: np.array([1.0, 2.0]))
