"""rope_lab.scaling against Hugging Face transformers' ROPE_INIT_FUNCTIONS, plus properties."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lab import inv_freq, scaling

pytest.importorskip("transformers")
from hf_compat import hf_inv_freq, llama_config  # noqa: E402

# (head dim, base, factor, trained length L)
CONFIGS = [
    (64, 10000.0, 4.0, 2048),
    (128, 10000.0, 8.0, 4096),
    (128, 500000.0, 8.0, 8192),  # Llama 3.1
    (32, 1000.0, 2.5, 512),
    (16, 10000.0, 1.0, 64),
]
RTOL = 1e-6


def hf_config(dim, base, L, **rope):
    """A LlamaConfig with head dim ``dim``, trained length ``L`` and scaling ``rope``."""
    return llama_config(dim, base, rope or None, max_position=L)


def assert_matches(ours, theirs):
    (freqs, factor), (hf_freqs, hf_factor) = ours, theirs
    assert freqs.dtype == hf_freqs.dtype == torch.float32
    relative = ((freqs.double() - hf_freqs.double()).abs() / hf_freqs.double()).max()
    assert relative <= RTOL, f"max relative gap {float(relative):.2e}"
    assert factor == pytest.approx(hf_factor, rel=1e-12)


@pytest.mark.parametrize(("dim", "base", "factor", "L"), CONFIGS)
def test_default_matches_hf(dim, base, factor, L):
    theirs = hf_inv_freq(hf_config(dim, base, L), "default")
    assert_matches(scaling.scaled_inv_freq("default", dim, base=base, factor=factor), theirs)


@pytest.mark.parametrize(("dim", "base", "factor", "L"), CONFIGS)
def test_linear_matches_hf(dim, base, factor, L):
    config = hf_config(dim, base, L, rope_type="linear", factor=factor)
    theirs = hf_inv_freq(config, "linear")
    assert_matches(scaling.scaled_inv_freq("linear", dim, base=base, factor=factor), theirs)


@pytest.mark.parametrize(("dim", "base", "factor", "L"), CONFIGS)
@pytest.mark.parametrize("stretch", [0.5, 1.0, 1.5, 3.0, 8.0])
def test_dynamic_matches_hf(dim, base, factor, L, stretch):
    seq_len = int(stretch * L)
    config = hf_config(dim, base, L, rope_type="dynamic", factor=factor)
    theirs = hf_inv_freq(config, "dynamic", seq_len)
    ours = scaling.scaled_inv_freq("dynamic", dim, base=base, factor=factor,
                                   original_max_position=L, seq_len=seq_len)
    assert_matches(ours, theirs)


@pytest.mark.parametrize(("dim", "base", "factor", "L"), CONFIGS)
def test_static_ntk_is_hf_default_with_a_larger_base_and_hf_dynamic_at_factor_times_L(
        dim, base, factor, L):
    ours = scaling.scaled_inv_freq("ntk", dim, base=base, factor=factor)
    larger_base = hf_config(dim, base * factor ** (dim / (dim - 2)), L)
    assert_matches(ours, hf_inv_freq(larger_base, "default"))
    if float(factor).is_integer():
        # HF "dynamic" with its own factor 1 grows the base by (ℓ/L)^(d/(d−2)).
        dynamic = hf_config(dim, base, L, rope_type="dynamic", factor=1.0)
        theirs = hf_inv_freq(dynamic, "dynamic", int(factor * L))
        assert_matches(ours, theirs)


YARN_OPTIONS = [
    {},
    {"beta_fast": 16.0, "beta_slow": 2.0},
    {"beta_fast": 64.0, "beta_slow": 0.5, "truncate": False},
    {"attention_factor": 1.25},
    {"mscale": 1.0, "mscale_all_dim": 0.707},
]


@pytest.mark.parametrize(("dim", "base", "factor", "L"), CONFIGS)
@pytest.mark.parametrize("options", YARN_OPTIONS)
def test_yarn_matches_hf(dim, base, factor, L, options):
    config = hf_config(dim, base, L, rope_type="yarn", factor=factor,
                       original_max_position_embeddings=L, **options)
    theirs = hf_inv_freq(config, "yarn")
    ours = scaling.scaled_inv_freq("yarn", dim, base=base, factor=factor,
                                   original_max_position=L, **options)
    assert_matches(ours, theirs)


@pytest.mark.parametrize(("dim", "base", "factor", "L"), CONFIGS)
@pytest.mark.parametrize(("low", "high"), [(1.0, 4.0), (2.0, 8.0), (0.5, 1.5)])
def test_llama3_matches_hf(dim, base, factor, L, low, high):
    config = hf_config(dim, base, L, rope_type="llama3", factor=factor, low_freq_factor=low,
                       high_freq_factor=high, original_max_position_embeddings=L)
    theirs = hf_inv_freq(config, "llama3")
    ours = scaling.scaled_inv_freq("llama3", dim, base=base, factor=factor,
                                   original_max_position=L, low_freq_factor=low,
                                   high_freq_factor=high)
    assert_matches(ours, theirs)


def test_yarn_default_attention_factor_is_0_1_ln_s_plus_1():
    _, factor = scaling.scaled_inv_freq("yarn", 64, factor=16.0, original_max_position=1024)
    assert factor == pytest.approx(0.1 * math.log(16.0) + 1)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(2, 64), factor=st.floats(1.0, 64.0),
       log_base=st.floats(math.log(100.0), math.log(1e6)))
def test_every_method_keeps_or_slows_each_pair_by_at_most_the_factor(half, factor, log_base):
    """θ_i/s ≤ θ'_i ≤ θ_i; for dynamic at length ℓ, s is its effective s·ℓ/L − (s − 1)."""
    dim, base, L = 2 * half, math.exp(log_base), 1024
    theta = inv_freq(dim, base, dtype=torch.float64)
    seq_len = int(L * factor)
    for method in scaling.METHODS:
        freqs, _ = scaling.scaled_inv_freq(method, dim, base=base, factor=factor,
                                           original_max_position=L, seq_len=seq_len,
                                           dtype=torch.float64)
        slowest = factor * max(seq_len, L) / L - (factor - 1) if method == "dynamic" else factor
        assert bool((freqs <= theta * (1 + 1e-12)).all()), method
        assert bool((freqs >= theta / slowest * (1 - 1e-12)).all()), method


def test_ntk_keeps_the_fastest_pair_and_interpolates_the_slowest():
    theta = inv_freq(64, dtype=torch.float64)
    freqs, _ = scaling.scaled_inv_freq("ntk", 64, factor=4.0, dtype=torch.float64)
    assert freqs[0] == theta[0]
    assert float(freqs[-1]) == pytest.approx(float(theta[-1]) / 4.0, rel=1e-12)


def test_dynamic_is_default_up_to_the_trained_length():
    theta, _ = scaling.scaled_inv_freq("default", 64)
    for seq_len in (1, 100, 2048):
        freqs, _ = scaling.scaled_inv_freq("dynamic", 64, factor=8.0,
                                           original_max_position=2048, seq_len=seq_len)
        assert torch.equal(freqs, theta)


def test_factor_one_changes_nothing():
    theta, _ = scaling.scaled_inv_freq("default", 64)
    for method in scaling.METHODS:
        freqs, factor = scaling.scaled_inv_freq(method, 64, factor=1.0,
                                                original_max_position=2048)
        torch.testing.assert_close(freqs, theta, rtol=1e-7, atol=0)
        assert factor == 1.0


def test_result_follows_device_and_dtype(device):
    freqs, _ = scaling.scaled_inv_freq("yarn", 32, factor=4.0, original_max_position=256,
                                       device=device, dtype=torch.float64)
    assert freqs.device.type == device.type and freqs.dtype == torch.float64
    assert freqs.shape == (16,)


def test_wavelengths():
    theta = inv_freq(8)
    torch.testing.assert_close(scaling.wavelengths(theta), 2 * math.pi / theta.double())


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: scaling.scaled_inv_freq("rope", 64), ValueError,
     r"method must be one of 'default', 'linear', 'ntk', 'dynamic', 'yarn', 'llama3', "
     r"got 'rope'"),
    (lambda: scaling.scaled_inv_freq("linear", 64, factor=0.5), ValueError,
     r"factor must be a finite number ≥ 1 .* got 0.5"),
    (lambda: scaling.scaled_inv_freq("linear", 64, factor="2"), TypeError,
     r"factor must be a number, got '2'"),
    (lambda: scaling.scaled_inv_freq("yarn", 64, factor=2.0), ValueError,
     r"original_max_position is required"),
    (lambda: scaling.scaled_inv_freq("dynamic", 64, factor=2.0), ValueError,
     r"original_max_position is required"),
    (lambda: scaling.scaled_inv_freq("llama3", 64, factor=2.0), ValueError,
     r"original_max_position is required"),
    (lambda: scaling.scaled_inv_freq("yarn", 64, factor=2.0, original_max_position=512,
                                     beta_fast=1.0, beta_slow=1.0), ValueError,
     r"beta_fast must be greater than beta_slow.*beta_fast=1.0 and beta_slow=1.0"),
    (lambda: scaling.scaled_inv_freq("yarn", 64, factor=2.0, original_max_position=512,
                                     beta_slow=-1.0), ValueError,
     r"beta_slow must be a finite number greater than 0, got -1.0"),
    (lambda: scaling.scaled_inv_freq("llama3", 64, factor=2.0, original_max_position=512,
                                     low_freq_factor=4.0, high_freq_factor=1.0), ValueError,
     r"high_freq_factor must be greater than low_freq_factor"),
    (lambda: scaling.scaled_inv_freq("linear", 64, factor=2.0, beta_fast=8.0), ValueError,
     r"unknown parameter\(s\) \['beta_fast'\] for method 'linear'; its options are: none"),
    (lambda: scaling.scaled_inv_freq("yarn", 64, factor=2.0, original_max_position=512,
                                     beta_fats=8.0), ValueError,
     r"unknown parameter\(s\) \['beta_fats'\] for method 'yarn'; its options are: beta_fast"),
    (lambda: scaling.scaled_inv_freq("linear", 63), ValueError, r"dim must be a positive even"),
    (lambda: scaling.scaled_inv_freq("ntk", 2, factor=2.0), ValueError,
     r"dim must be at least 4 for NTK scaling"),
    (lambda: scaling.scaled_inv_freq("linear", 64, base=-1.0), ValueError,
     r"base must be a finite number greater than 0"),
    (lambda: scaling.scaled_inv_freq("dynamic", 64, original_max_position=512, seq_len=-1),
     ValueError, r"seq_len must be ≥ 0 \(the current input length\), got -1"),
    (lambda: scaling.scaled_inv_freq("dynamic", 64, original_max_position=512, seq_len=2.0),
     TypeError, r"seq_len must be an int ≥ 0"),
    (lambda: scaling.scaled_inv_freq("dynamic", 64, original_max_position=512,
                                     seq_len=torch.tensor([3, 4])),
     TypeError, r"seq_len must be an int ≥ 0 or a one-element integer tensor"),
    (lambda: scaling.scaled_inv_freq("yarn", 64, original_max_position=2.5), TypeError,
     r"original_max_position must be an int"),
    (lambda: scaling.scaled_inv_freq("linear", 64, dtype=torch.float16), ValueError,
     r"dtype must be torch.float32 or torch.float64"),
])
def test_bad_parameters_raise_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_base_at_most_one_and_bad_mscale_are_refused():
    with pytest.raises(ValueError, match="base must be greater than 1 for a scaling method"):
        scaling.yarn_inv_freq(8, base=1.0, factor=2.0, original_max_position=64)
    with pytest.raises(ValueError, match="mscale must be a finite number greater than 0, got -1"):
        scaling.yarn_inv_freq(8, factor=2.0, original_max_position=64, mscale=-1,
                              mscale_all_dim=1)
