"""Checkers of notebooks 03 and 04 accept right answers, reject wrong ones, never raise."""

import math

import torch

import rope_lab as rl
from rope_lab import exercises


def _not_done(*args):
    raise NotImplementedError("your code here")


def _rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


def test_rotation_matrix(capsys):
    assert exercises.check_rotation_matrix(_rotation)
    assert not exercises.check_rotation_matrix(lambda a: _rotation(a).T)
    assert "clockwise" in capsys.readouterr().out
    assert not exercises.check_rotation_matrix(_not_done)
    assert not exercises.check_rotation_matrix(lambda a: 1 / 0)


def _score(q, k, m, n, theta):
    return (q * complex(math.cos(m * theta), math.sin(m * theta))
            * (k * complex(math.cos(n * theta), math.sin(n * theta))).conjugate()).real


def test_score_2d():
    assert exercises.check_score_2d(_score)
    # the text asks for the real number: a complex one (even with imaginary part 0) is refused
    assert not exercises.check_score_2d(lambda *a: complex(_score(*a), 0.0))
    assert not exercises.check_score_2d(lambda q, k, m, n, t: _score(q, k, m, n, t) + 0.5j)
    assert not exercises.check_score_2d(lambda q, k, m, n, t: _score(q, k, n, m, t))
    assert not exercises.check_score_2d(lambda *a: "one")
    assert not exercises.check_score_2d(_not_done)


def test_rotate_half():
    assert exercises.check_rotate_half(rl.rotate_half)
    assert not exercises.check_rotate_half(lambda x: -rl.rotate_half(x))
    assert not exercises.check_rotate_half(lambda x: x.flip(-1))
    assert not exercises.check_rotate_half(_not_done)


def test_rope_interleaved(capsys):
    def interleaved(x, positions, base):
        return rl.apply_rope(x, positions, base=base, layout="interleaved")

    assert exercises.check_rope_interleaved(interleaved)
    capsys.readouterr()
    assert not exercises.check_rope_interleaved(
        lambda x, positions, base: rl.apply_rope(x, positions, base=base))
    assert "half layout" in capsys.readouterr().out
    assert not exercises.check_rope_interleaved(
        lambda x, positions, base: rl.apply_rope(x, positions, layout="interleaved"))
    assert not exercises.check_rope_interleaved(_not_done)


def test_layout_permutation():
    def permutation(dim):
        return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))

    assert exercises.check_layout_permutation(permutation)
    assert not exercises.check_layout_permutation(lambda d: torch.arange(d))
    assert not exercises.check_layout_permutation(lambda d: torch.argsort(permutation(d)))
    assert not exercises.check_layout_permutation(lambda d: permutation(d).double())
    assert not exercises.check_layout_permutation(lambda d: [0] * d)
    assert not exercises.check_layout_permutation(_not_done)
    assert exercises.summary("04.3") == {"04.3": False}
