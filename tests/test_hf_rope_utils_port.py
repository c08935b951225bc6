"""transformers' own RoPE tests (``tests/utils/test_modeling_rope_utils.py``), rewritten for
rope_lab.hf.

Each case keeps what transformers' test checks: the model is LlamaConfig's default (hidden size
4096, 32 heads, base 10000, 2048 positions); the properties its test asserts (linear is default
/ factor, dynamic changes nothing up to the trained length, YaRN stays between θ/s and θ, …)
are asserted of rope_lab's result; and where transformers' test compares with a stored
snapshot, rope_lab is compared with the installed transformers' function instead, on the same
config (both schemas, as a plain dict). The cases that read ``seq_len`` take it as an int, 0
and a one-element tensor, as transformers' rotary embeddings pass it.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from rope_lab import hf

transformers = pytest.importorskip("transformers")
from hf_compat import VERSION, hf_inv_freq, llama_config  # noqa: E402
from packaging.version import Version  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

HIDDEN, HEADS, BASE, POSITIONS = 4096, 32, 10_000.0, 2048  # LlamaConfig's defaults
DIM = HIDDEN // HEADS


def plain(rope=None, schema="new"):
    """The config.json a Llama with ``rope`` would have, in either schema."""
    config = {"model_type": "llama", "hidden_size": HIDDEN, "num_attention_heads": HEADS,
              "max_position_embeddings": POSITIONS}
    rope = dict(rope or {"rope_type": "default"})
    if schema == "new":
        return {**config, "rope_parameters": {"rope_theta": BASE, **rope}}
    return {**config, "rope_theta": BASE,
            **({"rope_scaling": rope} if rope["rope_type"] != "default" else {})}


def ours(rope=None, seq_len=None, schema="new"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. YaRN without original_max_position_embeddings
        freqs, factor = hf.inv_freq_from_config(plain(rope, schema), seq_len=seq_len)
    return freqs.double(), factor


def theirs(rope=None, seq_len=None):
    rope = dict(rope or {"rope_type": "default"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = llama_config(DIM, BASE, rope, max_position=POSITIONS, n_heads=HEADS)
        freqs, factor = hf_inv_freq(config, rope["rope_type"], seq_len)
    return freqs.double(), factor


def same(rope=None, seq_len=None):
    """rope_lab in both schemas equals transformers' function on the same Llama."""
    reference, reference_factor = theirs(rope, seq_len)
    for schema in ("new", "old"):
        freqs, factor = ours(rope, seq_len, schema)
        torch.testing.assert_close(freqs, reference, rtol=2e-6, atol=0)
        assert factor == pytest.approx(reference_factor, rel=1e-12)


def needs(rope_type):
    if rope_type not in ROPE_INIT_FUNCTIONS:
        pytest.skip(f"transformers {VERSION} has no rope_type {rope_type!r}")


DEFAULT = 10_000.0 ** (-torch.arange(0, DIM, 2, dtype=torch.float64) / DIM)
ROUNDING = 1e-6  # rope_lab returns float32: within an ulp or so of the float64 value


def between(freqs, low, high):
    return bool(((low * (1 - ROUNDING) <= freqs) & (freqs <= high * (1 + ROUNDING))).all())


def test_a_scaling_type_without_its_options_is_refused():
    for rope_type, required in (("linear", "factor"), ("dynamic", "factor"),
                                ("yarn", "factor"), ("longrope", "long_factor"),
                                ("llama3", "factor")):
        with pytest.raises(ValueError, match=f"missing .*'{required}'"):
            hf.inv_freq_from_config(plain({"rope_type": rope_type}))


@pytest.mark.parametrize(("rope_type", "option"), [
    ("linear", "attention_factor"), ("linear", "beta_fast"), ("dynamic", "short_factor"),
    ("llama3", "beta_slow"), ("yarn", "long_factor")])
def test_another_types_option_is_named_in_a_warning(rope_type, option):
    """transformers' test: options are exclusive to their own rope type (it warns; its
    unit test expects the missing required key to raise first)."""
    rope = {"rope_type": rope_type, "factor": 2.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 1024, option: 1.0}
    rope = {k: v for k, v in rope.items() if k in hf.config.ROPE_TYPE_KEYS[rope_type]
            | {"rope_type", option}}
    notes = hf.config_warnings(plain(rope))
    assert any(f"transformers ignores '{option}'" in note for note in notes), notes


def test_default_rope_numerically():
    freqs, factor = ours()
    torch.testing.assert_close(freqs, DEFAULT, rtol=1e-7, atol=0)
    assert factor == 1.0
    same()


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_linear_rope_divides_every_frequency(factor):
    freqs, attention = ours({"rope_type": "linear", "factor": factor})
    torch.testing.assert_close(freqs, DEFAULT / factor, rtol=1e-7, atol=0)
    assert attention == 1.0
    same({"rope_type": "linear", "factor": factor})


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
@pytest.mark.parametrize("seq_len", [None, 0, 1, POSITIONS, torch.tensor(1)])
def test_dynamic_rope_changes_nothing_up_to_the_trained_length(factor, seq_len):
    needs("dynamic")
    freqs, attention = ours({"rope_type": "dynamic", "factor": factor}, seq_len=seq_len)
    torch.testing.assert_close(freqs, DEFAULT, rtol=1e-7, atol=0)
    assert attention == 1.0
    same({"rope_type": "dynamic", "factor": factor}, seq_len)


@pytest.mark.parametrize("seq_len", [16384, torch.tensor(16384)])
def test_dynamic_rope_past_the_trained_length_is_not_linear(seq_len):
    rope = {"rope_type": "dynamic", "factor": 10.0}
    freqs, _ = ours(rope, seq_len=seq_len)
    assert not torch.allclose(freqs, DEFAULT / 10.0)
    assert freqs[0] == 1.0 and (freqs[1:] < DEFAULT[1:]).all()
    same(rope, seq_len)


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_yarn_attention_factor(factor):
    needs("yarn")
    _, attention = ours({"rope_type": "yarn", "factor": factor})
    assert attention == pytest.approx(0.1 * math.log(factor) + 1.0, rel=1e-15)
    _, given = ours({"rope_type": "yarn", "factor": factor, "attention_factor": 0.5},
                    seq_len=1)
    assert given == 0.5
    same({"rope_type": "yarn", "factor": factor})


def test_yarn_stays_between_the_scaled_and_the_original_frequencies():
    needs("yarn")
    factor = 10.0
    rope = {"rope_type": "yarn", "factor": factor, "beta_fast": 32, "beta_slow": 1}
    freqs, _ = ours(rope)
    assert between(freqs, DEFAULT / factor, DEFAULT)
    same(rope)
    # a huge beta_fast interpolates every pair but the first; the slowest 20 fully
    rope = {"rope_type": "yarn", "factor": factor, "beta_fast": 1000, "beta_slow": 1}
    freqs, _ = ours(rope)
    assert freqs[0] == DEFAULT[0]
    assert (freqs[1:] < DEFAULT[1:] * (1 - ROUNDING)).all()
    torch.testing.assert_close(freqs[-20:], DEFAULT[-20:] / factor, rtol=1e-6, atol=0)
    same(rope)


def longrope(factor, **extra):
    return {"rope_type": "longrope", "factor": factor, "short_factor": [2.0] * (DIM // 2),
            "long_factor": [float(i) for i in range(1, DIM // 2 + 1)], **extra}


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_longrope_attention_factor(factor):
    needs("longrope")
    _, attention = ours(longrope(factor))
    assert attention == pytest.approx(math.sqrt(1 + math.log(factor) / math.log(POSITIONS)))
    _, given = ours(longrope(factor, attention_factor=0.5), seq_len=1)
    assert given == 0.5


@pytest.mark.parametrize("seq_len", [None, 0, 1, POSITIONS, torch.tensor(POSITIONS)])
def test_longrope_uses_the_short_factors_up_to_the_trained_length(seq_len):
    needs("longrope")
    freqs, _ = ours(longrope(10.0), seq_len=seq_len)
    torch.testing.assert_close(freqs, DEFAULT / 2.0, rtol=1e-7, atol=0)
    if VERSION >= Version("4.57"):  # older releases switch on max_position, not seq_len
        same(longrope(10.0), seq_len)


@pytest.mark.parametrize("seq_len", [POSITIONS + 1, torch.tensor(4 * POSITIONS)])
def test_longrope_uses_the_long_factors_past_it(seq_len):
    needs("longrope")
    freqs, _ = ours(longrope(10.0), seq_len=seq_len)
    long = torch.arange(1, DIM // 2 + 1, dtype=torch.float64)
    torch.testing.assert_close(freqs, DEFAULT / long, rtol=1e-7, atol=0)
    if VERSION >= Version("4.57"):
        same(longrope(10.0), seq_len)


LLAMA3 = {"rope_type": "llama3", "original_max_position_embeddings": 2048,
          "low_freq_factor": 1, "high_freq_factor": 4}


@pytest.mark.parametrize("factor", [2.0, 10.0, 20.0])
def test_llama3_attention_factor_is_one_and_frequencies_stay_in_range(factor):
    needs("llama3")
    freqs, attention = ours({**LLAMA3, "factor": factor})
    assert attention == 1.0
    assert between(freqs, DEFAULT / factor, DEFAULT)
    same({**LLAMA3, "factor": factor})


def test_llama3_with_a_huge_high_freq_factor_scales_every_pair():
    needs("llama3")
    rope = {**LLAMA3, "factor": 10.0, "high_freq_factor": 1000}
    freqs, _ = ours(rope)
    assert (freqs < DEFAULT * (1 - ROUNDING)).all()
    same(rope)
