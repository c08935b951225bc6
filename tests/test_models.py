"""The tiny transformer: shapes and causality for every position encoding, RoPE options."""

import math

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


# ---- the 2024–2026 RoPE options ----------------------------------------------------------

def theta_oracle(rotary_dim, base, fraction=1.0):
    """θ_i = base^(−2i/r) written out in float64; the slowest (1 − p) of the pairs set to 0."""
    half = rotary_dim // 2
    return torch.tensor([base ** (-2 * i / rotary_dim) if i < round(fraction * half) else 0.0
                         for i in range(half)], dtype=torch.float64)


def attention_oracle(layer, x, theta, rotary_dim, factor=1.0, window=None):
    """One CausalSelfAttention in float64 with the rotation written out pair by pair (half
    layout over the first rotary_dim features) and the mask built from the offsets."""
    batch, seq, dim = x.shape
    heads = layer.n_heads
    qkv = x.double() @ layer.qkv.weight.double().T
    q, k, v = qkv.view(batch, seq, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
    half = rotary_dim // 2

    def rotate(t):
        out = t.clone()
        for m in range(seq):
            for i in range(half):
                c, s = math.cos(m * theta[i]), math.sin(m * theta[i])
                a, b = t[..., m, i], t[..., m, i + half]
                out[..., m, i], out[..., m, i + half] = a * c - b * s, a * s + b * c
        out[..., :rotary_dim] *= factor
        return out

    q, k = rotate(q), rotate(k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dim // heads)
    for m in range(seq):
        for n in range(seq):
            if n > m or (window is not None and m - n >= window):
                scores[..., m, n] = float("-inf")
    out = torch.softmax(scores, -1) @ v
    return out.transpose(1, 2).reshape(batch, seq, dim) @ layer.out.weight.double().T


@pytest.mark.parametrize(("rotary_dim", "fraction", "factor"),
                         [(8, 1.0, 1.0), (2, 1.0, 1.0), (8, 0.25, 1.0), (8, 0.75, 1.3),
                          (4, 0.5, 0.9)])
def test_attention_layer_matches_a_written_out_rotation(rotary_dim, fraction, factor):
    """Partial rotary, p-RoPE and the attention factor against a pair-by-pair oracle."""
    model = models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=1, base=100.0,
                                   rotary_dim=rotary_dim, rotating_fraction=fraction).eval()
    theta = theta_oracle(rotary_dim, 100.0, fraction)
    torch.testing.assert_close(model.inv_freq.double(), theta, rtol=1e-6, atol=0)
    x = torch.randn(2, 7, 16)
    layer = model.blocks[0].attention
    with torch.no_grad():
        got = layer(x, mask=models.attention_mask(7), inv_freq=model.inv_freq,
                    attention_factor=factor, rotary_dim=rotary_dim)
    expected = attention_oracle(layer, x, theta.tolist(), rotary_dim, factor)
    torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)


def test_p_rope_keeps_the_fastest_pairs_and_stops_the_rest():
    speeds = models.p_rope_inv_freq(16, 10_000.0, 0.75)
    torch.testing.assert_close(speeds.double(), theta_oracle(16, 10_000.0, 0.75), rtol=1e-6,
                               atol=0)
    assert int((speeds == 0).sum()) == 2 and bool((speeds[:6] > 0).all())
    torch.testing.assert_close(models.p_rope_inv_freq(16, 500.0), rl_inv_freq(16, 500.0))


def rl_inv_freq(dim, base):
    from rope_lab import rope
    return rope.inv_freq(dim, base)


def test_local_and_global_layers_use_their_own_base_and_window():
    model = models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=2, base=100.0,
                                   local_layers=(0,), window=3, global_base=1e6).eval()
    assert model.layer_kinds() == ["local", "global"]
    torch.testing.assert_close(model.global_inv_freq.double(), theta_oracle(8, 1e6),
                               rtol=1e-6, atol=0)
    x = torch.randn(1, 9, 16)
    layer = model.blocks[0].attention
    local = models.attention_mask(9) & models.attention_mask(9, window=3)
    with torch.no_grad():
        got = layer(x, mask=local, inv_freq=model.inv_freq, rotary_dim=8)
    expected = attention_oracle(layer, x, theta_oracle(8, 100.0).tolist(), 8, window=3)
    torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)


def one_layer(**options):
    torch.manual_seed(0)
    return models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=1, max_len=32,
                                  **options).eval()


@pytest.mark.parametrize("model_and_window", [
    (lambda: one_layer(local_layers=(0,), window=4), {}),
    (lambda: one_layer(), {"attention_window": 4}),
    (lambda: one_layer(position="alibi"), {"attention_window": 4}),
    (lambda: one_layer(position="learned"), {"attention_window": 4}),
])
def test_a_window_of_w_hides_tokens_w_or_more_back(model_and_window):
    """The last output of a one-layer model ignores token t − 4 and sees token t − 3."""
    make, options = model_and_window
    model = make()
    tokens = torch.randint(0, VOCAB, (1, 10))
    with torch.no_grad():
        base = model(tokens, **options)[0, -1]
        for back, seen in ((4, False), (6, False), (3, True)):
            changed = tokens.clone()
            changed[0, 9 - back] = (changed[0, 9 - back] + 1) % VOCAB
            moved = not torch.allclose(model(changed, **options)[0, -1], base, atol=1e-6)
            assert moved == seen, (back, seen)


def test_nope_layers_everywhere_is_the_model_without_position():
    torch.manual_seed(0)
    hybrid = models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=2,
                                    nope_layers=(0, 1)).eval()
    plain = models.TinyTransformer(VOCAB, position="none", dim=16, n_heads=2,
                                   n_layers=2).eval()
    plain.load_state_dict(hybrid.state_dict())
    tokens = torch.randint(0, VOCAB, (2, 12))
    with torch.no_grad():
        torch.testing.assert_close(hybrid(tokens), plain(tokens))
    assert models.TinyTransformer(VOCAB, n_layers=4, nope_layers=(3,)).layer_kinds() == [
        "rope", "rope", "rope", "nope"]


def test_a_nope_layer_changes_the_output_of_a_rope_model():
    torch.manual_seed(0)
    rope_model = models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=2).eval()
    hybrid = models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=2,
                                    nope_layers=(1,)).eval()
    hybrid.load_state_dict(rope_model.state_dict())
    tokens = torch.randint(0, VOCAB, (1, 12))
    with torch.no_grad():
        assert not torch.allclose(hybrid(tokens), rope_model(tokens))


@pytest.mark.parametrize(("options", "error", "match"), [
    ({"rotating_fraction": 0.0}, ValueError, r"rotating_fraction must be a number in \(0, 1\], "
                                             r"got 0.0"),
    ({"rotating_fraction": 1.5}, ValueError, r"rotating_fraction must be .* got 1.5"),
    ({"rotary_dim": 3}, ValueError, r"rotary_dim must be an even integer between 2 and the "
                                    r"feature size 8, got 3"),
    ({"nope_layers": (2,)}, ValueError, r"nope_layers must lie in \[0, n_layers\) = \[0, 2\), "
                                        r"got 2"),
    ({"nope_layers": (0,), "local_layers": (0,), "window": 4}, ValueError,
     r"a layer cannot be both NoPE and local"),
    ({"local_layers": (0,)}, ValueError, r"local_layers need a window \(in tokens\), got "
                                         r"window=None"),
    ({"window": 4}, ValueError, r"window = 4 applies to local_layers, but local_layers is empty"),
    ({"local_layers": (0,), "window": 0}, ValueError, r"window must be a positive integer, got 0"),
    ({"local_layers": (0,), "window": 4, "global_base": -1.0}, ValueError,
     r"global_base must be a finite number greater than 0"),
    ({"global_base": 1e6}, ValueError, r"global_base = 1000000.0 is the base of the layers that "
                                       r"are not local, but local_layers is empty"),
    ({"position": "alibi", "rotary_dim": 4}, ValueError,
     r"rotary_dim apply to position='rope' only, got position='alibi'"),
])
def test_bad_rope_options(options, error, match):
    with pytest.raises(error, match=match):
        models.TinyTransformer(VOCAB, dim=16, n_heads=2, n_layers=2,
                               **{"position": "rope", **options})


def test_bad_attention_window():
    with pytest.raises(ValueError, match=r"attention_window must be a positive integer, got 0"):
        tiny("rope")(torch.zeros(1, 4, dtype=torch.long), attention_window=0)


def test_bfloat16_model_keeps_float32_speeds_of_every_layer_kind():
    model = models.TinyTransformer(10, local_layers=(0,), window=4, global_base=1e6,
                                   rotating_fraction=0.5).to(torch.bfloat16)
    assert model.inv_freq.dtype == model.global_inv_freq.dtype == torch.float32
    torch.testing.assert_close(model.global_inv_freq.double(), theta_oracle(16, 1e6, 0.5),
                               rtol=1e-6, atol=0)


@pytest.mark.parametrize("fraction", [0, -0.5, 1.01, True, "0.5"])
def test_p_rope_rejects_a_fraction_outside_0_1(fraction):
    with pytest.raises(ValueError, match=r"rotating_fraction must be a number in \(0, 1\]"):
        models.p_rope_inv_freq(16, 10_000.0, fraction)
