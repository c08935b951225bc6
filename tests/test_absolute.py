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


# --- shift maps and the five properties (notebook 02's table) ----------------------------

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rope_lab import absolute  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(half=st.integers(1, 16), k=st.integers(-50, 50), base=st.floats(2.0, 1e5))
def test_sinusoidal_shift_map_moves_every_position_by_k(half, k, base):
    dim = 2 * half
    positions = torch.arange(60, 80, dtype=torch.float64)[:, None]
    omega = base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)

    def pe(p):  # float64 reference, the same layout as sinusoidal_pe
        return torch.stack((torch.sin(p * omega), torch.cos(p * omega)), -1).flatten(-2)

    shift = absolute.sinusoidal_shift_map(dim, k, base)
    torch.testing.assert_close(pe(positions) @ shift.T, pe(positions + k), atol=1e-9, rtol=0)
    # a rotation: orthogonal, and W_{-k} undoes W_k
    torch.testing.assert_close(shift @ shift.T, torch.eye(dim, dtype=torch.float64))
    torch.testing.assert_close(absolute.sinusoidal_shift_map(dim, -k, base), shift.T)


def test_fitted_shift_map_is_the_rotation_and_independent_of_p():
    dim, k = 8, 3
    pe = rl.sinusoidal_pe(256, dim)
    early, late = absolute.shift_map(pe[:128], k), absolute.shift_map(pe[128:], k)
    exact = absolute.sinusoidal_shift_map(dim, k)
    torch.testing.assert_close(early, exact, atol=1e-4, rtol=0)
    torch.testing.assert_close(late, exact, atol=1e-4, rtol=0)


def test_shift_residual_separates_exact_from_impossible():
    assert absolute.shift_map_residual(rl.sinusoidal_pe(128, 16), 5) < 1e-6
    assert absolute.shift_map_residual(rl.sin_only_pe(128, 16), 5) > 0.1
    # integer PE has PE(0) = 0, which no linear map can send to PE(k) ≠ 0
    assert absolute.shift_map_residual(rl.integer_pe(64, 4), 1) > 1e-3


def test_min_distance():
    assert absolute.min_distance(rl.binary_pe(16, 4)) == 1.0
    clash = torch.tensor([[0.0, 1.0], [2.0, 3.0], [0.0, 1.0]])
    assert absolute.min_distance(clash) == 0.0


def test_property_table_matches_the_notebook_story():
    table = absolute.property_table()
    assert list(table) == list(absolute.ENCODINGS)
    assert all(table[name]["unique"] for name in table)
    assert table["sinusoidal"] == dict.fromkeys(absolute.PROPERTIES, True)
    for name in ("integer", "normalized integer", "binary", "sin-only", "learned (BERT-style)"):
        assert not table[name]["linear shift map"], name
    assert not table["integer"]["past training length"]  # values outgrow the trained range
    assert not table["normalized integer"]["fixed pattern"]  # the code depends on L
    assert not table["learned (BERT-style)"]["past training length"]  # no row past the table
    assert not table["learned (BERT-style)"]["fixed pattern"]  # each run learns another table
    text = absolute.property_table_markdown(table)
    assert len(text.splitlines()) == 2 + len(table)
    assert text.splitlines()[-2] == "| sinusoidal | ✔ | ✔ | ✔ | ✔ | ✔ |"


def test_encoding_properties_on_a_clashing_encoding():
    def constant(length, dim):
        return torch.ones(length, dim)

    found = absolute.encoding_properties(constant, length=32, dim=4)
    assert not found["unique"] and not found["extends to 2D"]
    assert found["linear shift map"]  # the identity maps a constant to itself


def test_learned_pe_shape_and_fresh_tables():
    first, second = absolute.learned_pe(10, 4), absolute.learned_pe(10, 4)
    assert first.shape == (10, 4) and not torch.equal(first, second)


def test_learned_table_has_nothing_past_its_last_row():
    table = rl.LearnedPositionalEmbedding(512, 8)
    with pytest.raises(IndexError, match=r"position 512 is outside the learned table"):
        table(torch.tensor([0, 512]))


def test_shift_helpers_validate_their_arguments():
    pe = rl.sinusoidal_pe(10, 4)
    with pytest.raises(ValueError, match="k must be smaller than the table's length 10, got 10"):
        absolute.shift_map(pe, 10)
    with pytest.raises(ValueError, match=r"k must be a positive integer, got 0"):
        absolute.shift_map(pe, 0)
    with pytest.raises(ValueError, match=r"pe must be a \(length, dim\) table, got shape \(10,\)"):
        absolute.shift_map(pe[:, 0], 1)
    with pytest.raises(TypeError, match="floating-point"):
        absolute.min_distance(torch.ones(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="positive even integer"):
        absolute.sinusoidal_shift_map(5, 1)
    with pytest.raises(TypeError, match="k must be an int, got 1.5"):
        absolute.sinusoidal_shift_map(4, 1.5)
    with pytest.raises(ValueError, match="length must be at least 2·dim = 32"):
        absolute.encoding_properties(rl.sinusoidal_pe, length=20, dim=16)


def test_learned_table_reads_a_numpy_integer_as_a_length():
    import numpy as np

    table = rl.LearnedPositionalEmbedding(4, 2)
    assert table(np.int64(3)).shape == (3, 2)
