"""The tiny transformer: shapes and causality for every position encoding, RoPE options."""

import pytest
import torch

from rope_lab import models, scaling

VOCAB = 11


def tiny(position, **kwargs):
    torch.manual_seed(0)
    return models.TinyTransformer(VOCAB, position=position, dim=16, n_heads=2, n_layers=2,
                                  max_len=32, **kwargs).eval()


@pytest.mark.parametrize("position", models.POSITION_ENCODINGS)
def test_forward_shape_for_every_encoding(position, device):
    model = tiny(position).to(device)
    tokens = torch.randint(0, VOCAB, (3, 9), device=device)
    logits = model(tokens)
    assert logits.shape == (3, 9, VOCAB) and logits.device.type == device.type
    assert bool(torch.isfinite(logits).all())


@pytest.mark.parametrize("position", models.POSITION_ENCODINGS)
def test_output_at_t_ignores_tokens_after_t(position):
    model = tiny(position)
    tokens = torch.randint(0, VOCAB, (2, 12))
    changed = tokens.clone()
    t = 5
    changed[:, t + 1:] = (tokens[:, t + 1:] + 1 + torch.randint(0, VOCAB - 1, (2, 6))) % VOCAB
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-6)
    assert not torch.allclose(after[:, t + 1:], before[:, t + 1:])


@pytest.mark.parametrize("position", models.POSITION_ENCODINGS)
def test_one_layer_sees_order_only_through_a_position_encoding(position):
    """Swapping two earlier tokens changes the last output of a 1-layer model iff it encodes
    position; with two layers even "none" sees order (through the causal mask)."""
    tokens = torch.tensor([[1, 2, 3, 4, 5, 6]])
    swapped = torch.tensor([[2, 1, 3, 4, 5, 6]])
    for layers in (1, 2):
        torch.manual_seed(0)
        model = models.TinyTransformer(VOCAB, position=position, dim=16, n_heads=2,
                                       n_layers=layers).eval()
        with torch.no_grad():
            same = torch.allclose(model(tokens)[0, -1], model(swapped)[0, -1], atol=1e-6)
        assert same == (position == "none" and layers == 1)


def test_rope_default_inv_freq_equals_explicit_and_scaling_changes_output():
    model = tiny("rope")
    tokens = torch.randint(0, VOCAB, (2, 20))
    with torch.no_grad():
        plain = model(tokens)
        explicit = model(tokens, inv_freq=scaling.scaled_inv_freq("default", 8)[0])
        freqs, factor = scaling.scaled_inv_freq("yarn", 8, factor=4.0, original_max_position=8)
        scaled = model(tokens, inv_freq=freqs, attention_factor=factor)
    torch.testing.assert_close(explicit, plain)
    assert not torch.allclose(scaled, plain)


def test_learned_table_rejects_positions_past_it():
    with pytest.raises(IndexError, match="outside the learned table"):
        tiny("learned")(torch.zeros(1, 40, dtype=torch.long))


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: models.TinyTransformer(10, position="t5"), ValueError,
     r"position must be one of 'none', 'learned', 'sinusoidal', 'rope', 'alibi', got 't5'"),
    (lambda: models.TinyTransformer(10, dim=12, n_heads=4), ValueError,
     r"dim = 12 must split into n_heads = 4 heads of even size"),
    (lambda: models.TinyTransformer(0), ValueError, r"vocab_size must be a positive integer"),
    (lambda: tiny("alibi")(torch.zeros(1, 4, dtype=torch.long), attention_factor=2.0),
     ValueError, r"apply to position='rope' only, this model uses position='alibi'"),
    (lambda: tiny("rope")(torch.zeros(4)), ValueError,
     r"tokens must be an integer tensor of shape \(batch, seq\)"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_bfloat16_model_keeps_float32_rotation_speeds():
    model = models.TinyTransformer(10, position="rope").to(torch.bfloat16)
    assert model.inv_freq.dtype == torch.float32
