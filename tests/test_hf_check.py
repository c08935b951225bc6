"""rope_lab.hf.check_rotary against transformers' own rotary embeddings.

A pass means transformers' module and rope_lab (reading the config, computing in float64)
agree; a fail must come for each bug notebook 11 shows: bf16 frequencies, an ignored
scaling block, partial rotary ignored, a re-implementation that pairs the wrong features.
"""

from __future__ import annotations

import pytest
import torch

from rope_lab import hf

transformers = pytest.importorskip("transformers")
import hf_compat  # noqa: E402

from rope_lab.hf import tiny  # noqa: E402

tiny.quiet()

SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 4.0},
    # transformers 4.45's YaRN takes L from max_position_embeddings, whatever the block says
    # (later releases read original_max_position_embeddings): keep the two equal here
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 1024},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 256},
]


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: (s or {}).get("rope_type", "default"))
def test_transformers_llama_matches_rope_lab_for_its_config(scaling):
    # 4.51 to 4.55 take YaRN's factor from the lengths: there they must agree with it
    max_position = hf_compat.yarn_lengths_agree(scaling or {}, 1024)
    config = tiny.tiny_config("llama", rope=scaling, max_position=max_position, layers=1)
    model = tiny.tiny_model(config)
    verdict = hf.check_rotary(model, config)
    assert verdict.ok, verdict
    assert verdict.positions == (0, max_position - 1)
    assert verdict.rows[0].dtype == torch.float32 and verdict.rows[0].rotary_dim == 16


@pytest.mark.skipif(not hf_compat.YARN_FACTOR_FROM_LENGTHS,
                    reason="only transformers 4.51 to 4.55 take YaRN's factor from the lengths")
def test_a_release_that_ignores_the_yarn_factor_fails_the_check():
    """On those releases a YaRN file whose lengths disagree with its factor (Qwen2.5: both
    32768, factor 4) runs with other frequencies: the check says so, and the warning why."""
    scaling = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 1024}
    config = tiny.tiny_config("llama", rope=scaling, max_position=1024, layers=1)
    verdict = hf.check_rotary(tiny.tiny_model(config), config)
    assert not verdict.ok, verdict
    assert any("computes YaRN with factor = max_position_embeddings" in note
               and "1024 / 1024 = 1," in note for note in verdict.notes), verdict.notes


def test_dynamic_ntk_past_the_trained_length():
    config = tiny.tiny_config("llama", rope={"rope_type": "dynamic", "factor": 4.0},
                              max_position=64, layers=1)
    verdict = hf.check_rotary(tiny.tiny_model(config), config, positions=torch.arange(300))
    assert verdict.ok, verdict


def test_partial_rotary_phi_and_its_application():
    config = tiny.tiny_config("phi", partial_rotary_factor=0.25, hidden_size=128, layers=1)
    model = tiny.tiny_model(config)
    from transformers.models.phi import modeling_phi

    def phi_apply(q, k, cos, sin):  # what PhiAttention does around apply_rotary_pos_emb
        r = cos.shape[-1]
        q_rot, k_rot = modeling_phi.apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
        return torch.cat((q_rot, q[..., r:]), -1), torch.cat((k_rot, k[..., r:]), -1)

    verdict = hf.check_rotary(model, config, apply_rotary=phi_apply)
    assert verdict.ok, verdict
    assert verdict.rows[0].rotary_dim == 8 and verdict.rows[0].head_dim == 32
    assert verdict.rows[0].max_apply_error is not None


def test_a_model_that_ignores_partial_rotary_fails():
    config = tiny.tiny_config("phi", partial_rotary_factor=0.25, hidden_size=128, layers=1)
    everything = tiny.tiny_model(tiny.tiny_config("phi", partial_rotary_factor=1.0,
                                                  hidden_size=128, layers=1))
    verdict = hf.check_rotary(everything, config)
    assert not verdict.ok
    assert "rotates 32 features per head, the config says 8" in repr(verdict)
    assert verdict.max_error == float("inf")


def _full_head_pairs(q, k, cos, sin):  # pairs (i, i + d/2) over the whole head
    d, r = q.shape[-1], cos.shape[-1]
    ones = cos.new_ones(*cos.shape[:-1], (d - r) // 2)
    cos = torch.cat((cos[..., : r // 2], ones, cos[..., : r // 2], ones), -1).unsqueeze(1)
    sin = torch.cat((sin[..., : r // 2], 0 * ones, sin[..., : r // 2], 0 * ones), -1).unsqueeze(1)
    half = d // 2

    def rotate_half(x):
        return torch.cat((-x[..., half:], x[..., :half]), -1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def test_an_application_that_pairs_the_wrong_features_fails():
    config = tiny.tiny_config("phi", partial_rotary_factor=0.25, hidden_size=128, layers=1)
    verdict = hf.check_rotary(tiny.tiny_model(config), config, apply_rotary=_full_head_pairs)
    assert not verdict.ok
    assert "apply_rotary differs from RoPE on the first 8 features" in repr(verdict)


def test_bf16_buffers_fail_and_bf16_parameters_pass():
    config = tiny.tiny_config("llama", layers=1)
    loaded = tiny.tiny_model(config, dtype=torch.bfloat16)  # as from_pretrained(dtype=...)
    verdict = hf.check_rotary(loaded, config)
    assert verdict.ok and verdict.rows[0].dtype == torch.bfloat16, verdict
    cast = tiny.tiny_model(config).to(torch.bfloat16)  # casts the inv_freq buffer too
    verdict = hf.check_rotary(cast, config)
    assert not verdict.ok and "worst at position" in repr(verdict)


def test_a_misspelled_scaling_key_is_caught_against_the_intended_config():
    scaling = {"rope_type": "linear", "factor": 4.0}
    intended = tiny.tiny_config("llama", rope=scaling, layers=1)
    typo = tiny.tiny_config("llama", rope_scalling=scaling, layers=1)
    assert hf.check_rotary(tiny.tiny_model(intended), intended).ok
    assert not hf.check_rotary(tiny.tiny_model(typo), intended).ok


def test_a_bare_rotary_module_and_a_dict_config():
    config = tiny.tiny_config("llama", base=500_000.0, layers=1)
    rotary = tiny.tiny_model(config).model.rotary_emb
    as_dict = config.to_dict()
    verdict = hf.check_rotary(rotary, as_dict, positions=[0, 5, 4000])
    assert verdict.ok and verdict.positions == (0, 4000)
    wrong = hf.check_rotary(rotary, {**as_dict, "rope_theta": 10_000.0,
                                     "rope_parameters": {"rope_type": "default",
                                                         "rope_theta": 10_000.0}})
    assert not wrong.ok


def test_per_layer_type_rope():
    """Gemma 3: sliding layers base 1e4, full layers 1e6 (one module with a layer_type
    argument in transformers 5, two modules in 4.x); both rows are checked."""
    gemma3 = pytest.importorskip("transformers.models.gemma3.configuration_gemma3",
                                 reason="transformers before 4.50 has no Gemma 3")
    config = gemma3.Gemma3TextConfig(
        vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        attn_implementation="eager")
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    verdict = hf.check_rotary(model, config)
    assert verdict.ok, verdict
    assert {row.layer_type for row in verdict.rows} == {"sliding_attention", "full_attention"}


def test_the_verdict_reads_as_a_table():
    config = tiny.tiny_config("llama", layers=1)
    text = repr(hf.check_rotary(tiny.tiny_model(config), config))
    first, header, row = text.splitlines()[:3]
    assert first.startswith("✔ rotary embedding matches rope_lab")
    assert header.split()[:4] == ["layer", "type", "module(s)", "dtype"]
    assert "float32" in row and "16 of 16" in row


BAD = [
    (lambda model, config: hf.check_rotary(42, config), TypeError,
     r"model_or_module must be a transformers model or a rotary module"),
    (lambda model, config: hf.check_rotary(torch.nn.Linear(2, 2), config), ValueError,
     r"model_or_module \(Linear\) holds no rotary embedding module"),
    (lambda model, config: hf.check_rotary(model, config, positions=[0.5, 2.0]), TypeError,
     r"positions must be integers"),
    (lambda model, config: hf.check_rotary(model, config, positions=[-3, 2]), ValueError,
     r"positions must be ≥ 0, got -3"),
    (lambda model, config: hf.check_rotary(model, config, positions=torch.zeros(2, 2, 2).long()),
     ValueError, r"positions must have shape \(seq,\) or \(batch, seq\)"),
    (lambda model, config: hf.check_rotary(model, config, dtype="float32"), TypeError,
     r"dtype must be a floating torch.dtype"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD,
                         ids=[f"bad-{i}" for i in range(len(BAD))])
def test_bad_input_gets_one_clear_error(call, error, message):
    config = tiny.tiny_config("llama", layers=1)
    with pytest.raises(error, match=message):
        call(tiny.tiny_model(config), config)


def test_interleaved_rotation_helper_equals_rope_lab_interleaved():
    """The §1 reference: transformers' cos/sin, pairs (2i, 2i+1), = rope_lab's interleaved."""
    import rope_lab as rl

    config = tiny.tiny_config("llama", layers=1)
    rotary = tiny.tiny_model(config).model.rotary_emb
    positions = torch.tensor([[0, 3, 50, 900]])
    cos, sin = rotary(torch.zeros(1), positions)
    q = torch.randn(1, 2, 4, 16, generator=torch.Generator().manual_seed(0))
    rotated, _ = tiny.apply_rotary_interleaved(q, q, cos, sin)
    expected = rl.apply_rope(q.double(), positions[:, None], layout="interleaved")
    assert (rotated.double() - expected).abs().max() < 1e-4


def test_block_diagonal_mask():
    mask = tiny.block_diagonal_mask([2, 1])[0, 0]
    allowed = (mask == 0).int().tolist()
    assert allowed == [[1, 0, 0], [1, 1, 0], [0, 0, 1]]
