"""Graders of notebooks 00–02: a right answer passes; each common mistake fails with a hint."""

import pytest
import torch

import rope_lab as rl
from rope_lab import absolute, exercises


def _grade(capsys, checker, answer):
    passed = checker(answer)
    return passed, capsys.readouterr().out


def test_not_attempted_is_feedback_not_an_error(capsys):
    def todo(*args):
        raise NotImplementedError("your code here")

    passed, out = _grade(capsys, exercises.check_scaled_dot, todo)
    assert not passed and "not attempted yet" in out


# 00.1
def test_scaled_dot(capsys):
    assert _grade(capsys, exercises.check_scaled_dot,
                  lambda q, k: (q * k).sum(-1) / q.shape[-1] ** 0.5)[0]
    passed, out = _grade(capsys, exercises.check_scaled_dot, lambda q, k: (q * k).sum(-1))
    assert not passed and "did not divide by √d" in out
    passed, out = _grade(capsys, exercises.check_scaled_dot,
                         lambda q, k: (q * k).sum(-1) / q.shape[-1])
    assert not passed and "divided by d" in out


# 01.1
def test_attention(capsys):
    def right(q, k, v):
        return torch.softmax(q @ k.T / q.shape[-1] ** 0.5, dim=-1) @ v

    assert _grade(capsys, exercises.check_attention, right)[0]
    passed, out = _grade(capsys, exercises.check_attention,
                         lambda q, k, v: torch.softmax(q @ k.T, dim=-1) @ v)
    assert not passed and "not divided by √d" in out
    passed, out = _grade(capsys, exercises.check_attention,
                         lambda q, k, v: torch.softmax(q @ k.T / q.shape[-1] ** 0.5, dim=0) @ v)
    assert not passed and "softmax ran over the queries" in out
    passed, out = _grade(capsys, exercises.check_attention,
                         lambda q, k, v: torch.softmax(q @ k.T, dim=-1))
    assert not passed and "weight matrix" in out


# 01.2
def test_inverse_permutation(capsys):
    assert _grade(capsys, exercises.check_inverse_permutation, torch.argsort)[0]
    passed, out = _grade(capsys, exercises.check_inverse_permutation, lambda perm: perm)
    assert not passed and "perm [1, 2, 0]" in out and "undoes only swaps" in out
    passed, out = _grade(capsys, exercises.check_inverse_permutation, lambda perm: perm.float())
    assert not passed and "integer tensor" in out


# 01.3
def _masked_attention(q, k, v, allowed=None):
    scores = q @ k.T / q.shape[-1] ** 0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def test_causal_attention(capsys):
    def causal(q, k, v):
        return _masked_attention(q, k, v, torch.ones(len(q), len(k), dtype=torch.bool).tril())

    assert _grade(capsys, exercises.check_causal_attention, causal)[0]
    passed, out = _grade(capsys, exercises.check_causal_attention, _masked_attention)
    assert not passed and "no mask was applied" in out

    def flipped(q, k, v):
        return _masked_attention(q, k, v, torch.ones(len(q), len(k), dtype=torch.bool).triu())

    passed, out = _grade(capsys, exercises.check_causal_attention, flipped)
    assert not passed and "mask is flipped" in out
    passed, out = _grade(capsys, exercises.check_causal_attention,
                         lambda q, k, v: rl.attention(q, k, v, mask="causal"))
    assert not passed and "without rope_lab.attention" in out
    passed, out = _grade(capsys, exercises.check_causal_attention,
                         lambda q, k, v: _masked_attention(q, k, v, ~rl.causal_mask(len(q))))
    assert not passed and "without rope_lab.causal_mask" in out


# 02.1
def test_sinusoidal_pe(capsys):
    def right(length, dim, base):
        p = torch.arange(length, dtype=torch.float64)[:, None]
        angles = p * base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        return torch.stack((angles.sin(), angles.cos()), -1).flatten(-2)

    assert _grade(capsys, exercises.check_sinusoidal_pe, right)[0]
    passed, out = _grade(capsys, exercises.check_sinusoidal_pe, rl.sinusoidal_pe)
    assert not passed and "without rope_lab.sinusoidal_pe" in out

    def layout(order):
        def pe(length, dim, base):
            p = torch.arange(length, dtype=torch.float64)[:, None]
            omega = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)
            sin, cos = torch.sin(p * omega), torch.cos(p * omega)
            if order == "swapped":
                return torch.stack((cos, sin), -1).flatten(-2)
            return torch.cat((sin, cos), -1)
        return pe

    passed, out = _grade(capsys, exercises.check_sinusoidal_pe, layout("swapped"))
    assert not passed and "swapped" in out
    passed, out = _grade(capsys, exercises.check_sinusoidal_pe, layout("blocks"))
    assert not passed and "all sines first" in out


# 02.2
def _shift_map(dim, k, base):
    omega = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    blocks = torch.stack((torch.stack((c, s), -1), torch.stack((-s, c), -1)), -2)  # (d/2, 2, 2)
    return torch.block_diag(*blocks)


def test_shift_map(capsys):
    assert _grade(capsys, exercises.check_shift_map, _shift_map)[0]
    passed, out = _grade(capsys, exercises.check_shift_map,
                         lambda dim, k, base: _shift_map(dim, k, base).T)
    assert not passed and "PE(p − k)" in out
    for shortcut in (absolute.sinusoidal_shift_map,
                     lambda dim, k, base: absolute.sinusoidal_shift_map(dim, k, base)):
        passed, out = _grade(capsys, exercises.check_shift_map, shortcut)
        assert not passed and "without rope_lab.absolute.sinusoidal_shift_map" in out
    passed, out = _grade(capsys, exercises.check_shift_map,
                         lambda dim, k, base: torch.eye(dim + 1))
    assert not passed and "expected shape (2, 2), got (3, 3)" in out


# 02.3
@pytest.mark.parametrize("wrong, shown", [(lambda p: 1, "p = 1 "),
                                          (lambda p: bin(p).count("1"), "p = 0 ")])
def test_bits_flipped(capsys, wrong, shown):
    def right(p):
        return (p ^ (p + 1)).bit_count()

    assert _grade(capsys, exercises.check_bits_flipped, right)[0]
    passed, out = _grade(capsys, exercises.check_bits_flipped, wrong)
    assert not passed and shown in out and "expected" in out
