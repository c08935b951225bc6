"""Work and memory are bounded up front: a number that would need more than the documented
limit is refused with one sentence naming the parameter, the limit and the estimate, before
anything big is allocated or run."""

import pytest
import torch

import rope_lab as rl
from rope_lab import _validate, decay

GIB = r"\d[\d.]* [GT]iB of memory \(limit 1 GiB"


@pytest.mark.parametrize("call, message", [
    (lambda: rl.rope_matrix(0, 200_000, dtype=torch.float64),
     r"rope_matrix: dim=200000 needs 298 GiB of memory \(limit 1 GiB"),
    (lambda: rl.rope_matrix(0, 1_000_000, dtype=torch.float64),  # 8 TB
     r"rope_matrix: dim=1000000 needs 7.28 TiB"),
    (lambda: rl.rope_matrix(torch.arange(5000), 256),
     rf"rope_matrix: dim=256 at 5000 positions needs {GIB}"),
    (lambda: rl.apply_rope_dense(torch.zeros(1, 4096).expand(100_000, 4096)),
     rf"apply_rope_dense: x of shape \(100000, 4096\) \(100000 tokens × dim² = 4096²\) "
     rf"needs {GIB}"),
    (lambda: rl.inv_freq(2**40), rf"inv_freq: dim={2**40} needs {GIB}"),
    (lambda: rl.rope_pairs(2**40), rf"rope_pairs: dim={2**40} needs {GIB}"),
    (lambda: rl.rope_angles(torch.arange(10**6), rl.inv_freq(1024)),
     rf"rope_angles: 1000000 positions × 512 frequencies needs {GIB}"),
    (lambda: rl.RotaryEmbedding(128, max_seq_len=10**8),
     rf"RotaryEmbedding: max_seq_len=100000000 needs {GIB}"),
    (lambda: decay.cos_sum(torch.arange(10**7), 128),
     rf"cos_sum: 10000000 distances × dim=128 needs {GIB}"),
    (lambda: decay.abel_curve(torch.arange(10**6), 128), rf"abel_curve: .* needs {GIB}"),
    (lambda: decay.score_std(torch.arange(10**7), 128), rf"score_std: .* needs {GIB}"),
    (lambda: decay.score_curve(torch.ones(128), torch.ones(128), torch.arange(10**7)),
     rf"score_curve: 10000000 distances × dim=128 × 1 \(q, k\) pairs needs {GIB}"),
    (lambda: decay.sample_qk(128, samples=10**8),
     rf"sample_qk: samples=100000000 × dim=128 needs {GIB}"),
    (lambda: decay.lowest_cos_sum(1e4, 10**9), rf"lowest_cos_sum: context_length=1000000000 "
     rf"needs {GIB}"),
])
def test_tables_past_the_limit_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_limit_is_a_module_constant(monkeypatch):
    monkeypatch.setattr(_validate, "MAX_TABLE_BYTES", 1000)
    with pytest.raises(ValueError, match=r"rope_matrix: dim=16 needs 1 KiB of memory \(limit "
                                         r"1000 bytes"):
        rl.rope_matrix(0, 16)
    monkeypatch.setattr(_validate, "MAX_TABLE_BYTES", 1 << 30)
    assert rl.rope_matrix(0, 16).shape == (16, 16)


def test_ordinary_sizes_pass():
    assert rl.rope_matrix(torch.arange(4), 64).shape == (4, 64, 64)
    assert rl.apply_rope_dense(torch.randn(2, 8, 16)).shape == (2, 8, 16)
    assert rl.rope_angles(torch.arange(1000), rl.inv_freq(64)).shape == (1000, 32)
    assert rl.RotaryEmbedding(128, max_seq_len=1 << 16).cos_cached.shape == (1 << 16, 64)


@pytest.mark.parametrize("context_length", [10**6, 10**8])
def test_minimum_base_refuses_a_search_estimated_past_the_limit(context_length):
    with pytest.raises(ValueError, match=rf"minimum_base: context_length={context_length} "
                                         r"needs about [\d.e+]+ s of search \(estimate; "
                                         r"limit 20 s"):
        decay.minimum_base(context_length)


def test_minimum_base_limit_matches_its_estimate():
    assert decay._search_seconds(45_000) < decay.PROGRESS_SECONDS < decay._search_seconds(
        50_000)
    assert decay._search_seconds(190_000) < decay.MINIMUM_BASE_MAX_SECONDS
    assert decay._search_seconds(200_000) > decay.MINIMUM_BASE_MAX_SECONDS


def test_minimum_base_quiet_when_short_progress_bar_when_long(capsys, monkeypatch):
    assert round(decay.minimum_base(1024)) == 4293
    assert capsys.readouterr().err == ""  # notebooks fail on anything written to stderr
    monkeypatch.setattr(decay, "PROGRESS_SECONDS", 0.0)
    assert round(decay.minimum_base(1024)) == 4293
    assert "minimum_base" in capsys.readouterr().err
