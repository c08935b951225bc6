"""Absolute encodings: shapes and the properties notebook 02 relies on."""

import torch

import rope_lab as rl


def test_integer_and_normalized():
    pe = rl.integer_pe(6, 4)
    assert pe.shape == (6, 4) and pe[5].tolist() == [5.0] * 4
    short, long = rl.normalized_integer_pe(10, 2), rl.normalized_integer_pe(20, 2)
    assert short[5, 0] == 0.5 and long[5, 0] == 0.25  # same position, different code


def test_binary_bits_lsb_first_and_unique():
    pe = rl.binary_pe(8, 3)
    assert pe[6].tolist() == [0.0, 1.0, 1.0]  # 6 = 0b110
    assert len({tuple(row.tolist()) for row in pe}) == 8
    assert (pe[1:, 0] != pe[:-1, 0]).all()  # feature 0 flips at every step


def test_sinusoidal_layout_and_shift_is_a_rotation():
    length, dim, base, k = 200, 16, 10000.0, 7
    pe = rl.sinusoidal_pe(length, dim, base).double()
    omega = rl.inv_freq(dim, base, dtype=torch.float64)
    torch.testing.assert_close(pe[:, 0::2], torch.sin(torch.arange(length)[:, None] * omega))
    torch.testing.assert_close(pe[:, 1::2], torch.cos(torch.arange(length)[:, None] * omega))
    # (sin, cos)(p + k) = [[cos kω, sin kω], [−sin kω, cos kω]] (sin, cos)(p), for every p.
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    sin_p, cos_p = pe[:-k, 0::2], pe[:-k, 1::2]
    torch.testing.assert_close(pe[k:, 0::2], c * sin_p + s * cos_p, atol=1e-6, rtol=0)
    torch.testing.assert_close(pe[k:, 1::2], -s * sin_p + c * cos_p, atol=1e-6, rtol=0)


def test_sin_only_has_no_exact_shift_map():
    pe = rl.sin_only_pe(256, 8).double()
    shift = torch.linalg.lstsq(pe[:-3], pe[3:]).solution
    residual = (pe[:-3] @ shift - pe[3:]).norm() / pe[3:].norm()
    assert residual > 1e-3


def test_learned_table_shape():
    table = rl.LearnedPositionalEmbedding(512, 768)
    assert table(torch.arange(10)).shape == (10, 768)
    assert table.table.weight.shape == (512, 768)
