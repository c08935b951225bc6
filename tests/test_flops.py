"""rope_lab.flops: counting by running, checked against hand counts of small cases."""

import pytest
import torch

import rope_lab as rl
from rope_lab.flops import count_flops


def test_matmul_counts_two_per_multiply_add():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    assert count_flops(torch.mm, a, b) == 2 * 3 * 4 * 5
    assert count_flops(lambda: torch.randn(7, 8, 8) @ torch.randn(7, 8, 1)) == 2 * 7 * 8 * 8


def test_elementwise_ops_count_one_per_output_element():
    x, y = torch.randn(6, 4), torch.randn(4)
    assert count_flops(lambda: x * y) == 24
    assert count_flops(lambda: x + y - x) == 48
    assert count_flops(lambda: -x / 2) == 48
    assert count_flops(lambda: x.cos().reshape(4, 6)[0]) == 0  # no arithmetic counted


def test_rope_dense_versus_sparse_costs():
    length, dim = 5, 16
    x = torch.randn(length, dim)
    matrices = rl.rope_matrix(torch.arange(length), dim)
    angles = rl.rope_angles(torch.arange(length), rl.inv_freq(dim))
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    dense = count_flops(lambda: matrices @ x[..., None])
    sparse = count_flops(lambda: x * cos + rl.rotate_half(x) * sin)
    assert dense == 2 * length * dim * dim
    assert sparse == length * (3 * dim + dim // 2)  # 2 products, 1 sum, d/2 negations


def test_rejects_non_callables():
    with pytest.raises(TypeError, match="function must be callable, got int"):
        count_flops(3)
