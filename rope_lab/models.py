"""A small causal transformer whose position encoding is a switch.

    position   where position enters
    "none"     nowhere (the causal mask is the only hint of order)
    "learned"  a trained table row added to each token embedding
    "sinusoidal" sinusoidal_pe(p) added to each token embedding
    "rope"     q and k rotated by apply_rope in every layer
    "alibi"    −slope_h·(m − n) added to the scores in every layer

For RoPE, ``forward`` takes the rotation speeds (``inv_freq``) and ``attention_factor`` as
arguments, so a trained model can be run zero-shot with any method of
:mod:`rope_lab.scaling` without touching its weights.
"""

from __future__ import annotations

import torch
from torch import nn

from rope_lab import _validate
from rope_lab.absolute import LearnedPositionalEmbedding, sinusoidal_pe
from rope_lab.alibi import alibi_bias
from rope_lab.attention import attention, causal_mask
from rope_lab.rope import DEFAULT_BASE, apply_rope, inv_freq

POSITION_ENCODINGS = ("none", "learned", "sinusoidal", "rope", "alibi")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; RoPE or an additive bias applied inside."""

    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, *, mask, inv_freq=None, attention_factor: float = 1.0):
        """x: ``(batch, seq, dim)``; mask: "causal" or an additive ``(heads, seq, seq)`` bias."""
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.n_heads, dim // self.n_heads).permute(
            2, 0, 3, 1, 4)  # each (batch, heads, seq, head_dim)
        if inv_freq is not None:
            # attention_factor scales cos and sin, as in HF: both q and k, logits by its square.
            q = apply_rope(q, inv_freq=inv_freq) * attention_factor
            k = apply_rope(k, inv_freq=inv_freq) * attention_factor
        heads = attention(q, k, v, mask=mask)
        return self.out(heads.transpose(1, 2).reshape(batch, seq, dim))


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attention = CausalSelfAttention(dim, n_heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, **attention_kwargs):
        x = x + self.attention(self.norm1(x), **attention_kwargs)
        return x + self.mlp(self.norm2(x))


class TinyTransformer(nn.Module):
    """A decoder-only language model small enough to train on a CPU in a minute.

    Args:
        vocab_size: number of token ids.
        position: one of :data:`POSITION_ENCODINGS`.
        dim: model width; n_heads divides it and the head dim dim/n_heads must be even.
        n_heads, n_layers: as usual.
        max_len: rows of the learned table (only for ``position="learned"``).
        base: RoPE base for the default rotation speeds.
    """

    def __init__(self, vocab_size: int, *, position: str = "rope", dim: int = 64,
                 n_heads: int = 4, n_layers: int = 2, max_len: int = 1024,
                 base: float = DEFAULT_BASE):
        super().__init__()
        _validate.check_positive_int(vocab_size, "vocab_size")
        if position not in POSITION_ENCODINGS:
            choices = ", ".join(repr(p) for p in POSITION_ENCODINGS)
            raise ValueError(f"position must be one of {choices}, got {position!r}")
        _validate.check_positive_int(dim, "dim")
        _validate.check_positive_int(n_heads, "n_heads")
        _validate.check_positive_int(n_layers, "n_layers")
        if dim % n_heads or (dim // n_heads) % 2:
            raise ValueError(
                f"dim = {dim} must split into n_heads = {n_heads} heads of even size "
                "(RoPE rotates pairs)"
            )
        self.position, self.dim, self.n_heads = position, dim, n_heads
        self.head_dim = dim // n_heads
        self.tokens = nn.Embedding(vocab_size, dim)
        if position == "learned":
            self.learned = LearnedPositionalEmbedding(max_len, dim)
        self.base = base
        self.register_buffer("inv_freq", inv_freq(self.head_dim, base), persistent=False)
        self.blocks = nn.ModuleList(Block(dim, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)

    def _apply(self, fn, recurse=True):
        # .half() / .to(torch.bfloat16) must not round the rotation speeds: rebuild in float32.
        super()._apply(fn, recurse)
        self.inv_freq = inv_freq(self.head_dim, self.base, device=self.inv_freq.device)
        return self

    def forward(self, tokens: torch.Tensor, *, inv_freq: torch.Tensor | None = None,
                attention_factor: float = 1.0) -> torch.Tensor:
        """Next-token logits.

        Args:
            tokens: ``(batch, seq)`` integer ids.
            inv_freq: ``(head_dim // 2,)`` rotation speeds to use instead of the trained
                ones (RoPE only), e.g. from :func:`rope_lab.scaling.scaled_inv_freq`.
            attention_factor: multiplies the rotated q and k (RoPE only; YaRN's factor).

        Returns:
            ``(batch, seq, vocab_size)`` logits; position t sees tokens 0 … t only.
        """
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
            raise ValueError(
                "tokens must be an integer tensor of shape (batch, seq), got "
                f"{getattr(tokens, 'dtype', type(tokens).__name__)} of shape "
                f"{tuple(getattr(tokens, 'shape', ()))}"
            )
        if self.position != "rope" and (inv_freq is not None or attention_factor != 1.0):
            raise ValueError(
                f"inv_freq and attention_factor apply to position='rope' only, this model "
                f"uses position={self.position!r}"
            )
        seq = tokens.shape[1]
        x = self.tokens(tokens)
        if self.position == "learned":
            x = x + self.learned(torch.arange(seq, device=tokens.device))
        elif self.position == "sinusoidal":
            x = x + sinusoidal_pe(seq, self.dim).to(x.device)
        kwargs = {"mask": "causal"}
        if self.position == "rope":
            kwargs["inv_freq"] = self.inv_freq if inv_freq is None else inv_freq.to(x.device)
            kwargs["attention_factor"] = attention_factor
        elif self.position == "alibi":
            blocked = ~causal_mask(seq, device=x.device)
            bias = alibi_bias(seq, self.n_heads, device=x.device)
            kwargs["mask"] = bias.masked_fill(blocked, float("-inf"))
        for block in self.blocks:
            x = block(x, **kwargs)
        return self.head(self.norm(x))
