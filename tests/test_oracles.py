"""apply_rope equals the implementations people actually run.

- Hugging Face transformers: LlamaRotaryEmbedding (cos/sin) + apply_rotary_pos_emb, the
  half layout.
- lucidrains' rotary-embedding-torch: pairs (2i, 2i+1), the interleaved layout.
"""

import pytest
import torch

import rope_lab as rl

llama = pytest.importorskip("transformers.models.llama.modeling_llama")
rotary_embedding_torch = pytest.importorskip("rotary_embedding_torch")
from hf_compat import llama_rotary  # noqa: E402


@pytest.mark.parametrize("head_dim, base", [(64, 10000.0), (128, 500000.0), (32, 1e6), (8, 10.0)])
def test_matches_hugging_face_llama(head_dim, base):
    batch, heads, seq = 2, 4, 257
    q, k = torch.randn(2, batch, heads, seq, head_dim)
    position_ids = torch.stack((torch.arange(seq), torch.arange(seq) + 1000))
    rotary = llama_rotary(head_dim, base, n_heads=heads)
    cos, sin = rotary(q, position_ids)
    hf_q, hf_k = llama.apply_rotary_pos_emb(q, k, cos, sin)

    positions = position_ids[:, None, :]  # (batch, 1, seq) broadcasts over heads
    # Same frequencies in: the same float32 arithmetic, so agreement to float32 rounding.
    same_q = rl.apply_rope(q, positions, inv_freq=rotary.inv_freq, layout="half")
    same_k = rl.apply_rope(k, positions, inv_freq=rotary.inv_freq, layout="half")
    torch.testing.assert_close(same_q, hf_q, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(same_k, hf_k, rtol=1e-6, atol=1e-6)

    # Our own frequencies: HF's float32 θ_i can be one ulp off ours, which moves the angle
    # at position m by up to m·ulp(θ_i) plus the angle's own float32 rounding.
    float32_angle_noise = 4 * int(position_ids.max()) * torch.finfo(torch.float32).eps
    ours_q = rl.apply_rope(q, positions, base=base, layout="half")
    ours_k = rl.apply_rope(k, positions, base=base, layout="half")
    torch.testing.assert_close(ours_q, hf_q, rtol=0, atol=float32_angle_noise * 5)
    torch.testing.assert_close(ours_k, hf_k, rtol=0, atol=float32_angle_noise * 5)

    module = rl.RotaryEmbedding(head_dim, base=base)
    module_q, module_k = module(q, k, positions)
    torch.testing.assert_close(module_q, ours_q, rtol=0, atol=1e-6)
    torch.testing.assert_close(module_k, ours_k, rtol=0, atol=1e-6)


def test_matches_hugging_face_inv_freq():
    rotary = llama_rotary(128, 500000.0, n_heads=8)
    torch.testing.assert_close(rl.inv_freq(128, 500000.0), rotary.inv_freq, rtol=1e-6, atol=0)


def test_matches_hugging_face_rotate_half():
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(rl.rotate_half(x), llama.rotate_half(x), rtol=0, atol=0)


@pytest.mark.parametrize("dim, base", [(64, 10000.0), (32, 500.0), (16, 1e5)])
def test_matches_rotary_embedding_torch(dim, base):
    rotary = rotary_embedding_torch.RotaryEmbedding(dim=dim, theta=base)
    q = torch.randn(2, 4, 300, dim)
    theirs = rotary.rotate_queries_or_keys(q)
    same = rl.apply_rope(q, inv_freq=rotary.freqs.detach(), layout="interleaved")
    torch.testing.assert_close(same, theirs, rtol=1e-6, atol=1e-6)
    float32_angle_noise = 4 * 300 * torch.finfo(torch.float32).eps
    ours = rl.apply_rope(q, base=base, layout="interleaved")
    torch.testing.assert_close(ours, theirs, rtol=0, atol=float32_angle_noise * 5)
    complex_form = rl.apply_rope_complex(q, base=base)
    torch.testing.assert_close(complex_form, theirs, rtol=0, atol=float32_angle_noise * 5)


def test_rotary_embedding_torch_partial_rotary():
    """rotary-embedding-torch rotates the first `dim` features and passes the rest through."""
    rotary = rotary_embedding_torch.RotaryEmbedding(dim=16)
    q = torch.randn(1, 2, 50, 40)
    theirs = rotary.rotate_queries_or_keys(q)
    ours = rl.apply_rope(q, layout="interleaved", rotary_dim=16)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=2e-5)
