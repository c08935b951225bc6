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

The RoPE options of 2023–2026 models, each a keyword of :class:`TinyTransformer` (RoPE only):

    option                      what it does                              as in
    base=5e5                    slower pairs, a longer reach              Llama 3, Xiong et al. 2023
    rotary_dim=head_dim // 4    rotate the first quarter of each head,    GPT-NeoX, Phi
                                θ_i spread over those features only
    rotating_fraction=p         p-RoPE: the slowest (1 − p) of the pairs  Barbero et al. 2024,
                                get θ_i = 0 (they carry content only)     Gemma 4 "proportional"
    nope_layers=(1,)            no rotation in those layers (NoPE)        Llama 4 (every 4th layer)
    local_layers=(0,), window,  those layers see only the last ``window`` Gemma 3 (local base
    global_base=1e6             tokens; the others use ``global_base``    1e4, global base 1e6)

``forward(..., attention_window=w)`` limits every layer to offsets < w: an ablation that asks
whether a failure comes from offsets the model never met in training.
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


def p_rope_inv_freq(dim: int, base: float = DEFAULT_BASE, rotating_fraction: float = 1.0,
                    *, device=None) -> torch.Tensor:
    """p-RoPE speeds: θ_i = base^(−2i/d) for the fastest round(p·d/2) pairs, 0 for the rest.

    Barbero et al. 2024 ("Round and Round We Go! What makes Rotary Positional Encodings
    useful?") find that the slowest pairs act as semantic channels and that removing their
    rotation (p < 1) helps; ``rotating_fraction`` is their p. p = 1 is plain RoPE.

    Returns:
        ``(dim // 2,)`` float32 tensor for :func:`rope_lab.apply_rope` (``inv_freq=``).
    """
    _check_fraction(rotating_fraction)
    speeds = inv_freq(dim, base, device=device)
    speeds[round(rotating_fraction * (dim // 2)):] = 0.0
    return speeds


def _check_fraction(rotating_fraction) -> None:
    if isinstance(rotating_fraction, bool) or not isinstance(
            rotating_fraction, (int, float)) or not 0 < rotating_fraction <= 1:
        raise ValueError(f"rotating_fraction must be a number in (0, 1], "
                         f"got {rotating_fraction!r}")


def attention_mask(seq: int, *, window: int | None = None, device=None) -> torch.Tensor:
    """Bool ``(seq, seq)``: query m may see key n iff 0 ≤ m − n < window (causal if None)."""
    allowed = causal_mask(seq, device=device)
    if window is not None:
        offsets = torch.arange(seq, device=device)
        allowed &= (offsets[:, None] - offsets[None, :]) < window
    return allowed


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; RoPE or an additive bias applied inside."""

    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x, *, mask, inv_freq=None, attention_factor: float = 1.0,
                rotary_dim: int | None = None):
        """x: ``(batch, seq, dim)``; mask: "causal", a bool ``(seq, seq)`` (True: may attend)
        or an additive ``(heads, seq, seq)`` bias; no rotation when ``inv_freq`` is None."""
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.n_heads, dim // self.n_heads).permute(
            2, 0, 3, 1, 4)  # each (batch, heads, seq, head_dim)
        if inv_freq is not None:
            # attention_factor scales cos and sin, as in HF: both q and k, logits by its square.
            # Partial rotary only changes the rotated part: the rest is passed through.
            q = apply_rope(q, inv_freq=inv_freq, rotary_dim=rotary_dim)
            k = apply_rope(k, inv_freq=inv_freq, rotary_dim=rotary_dim)
            if attention_factor != 1.0:
                r = q.shape[-1] if rotary_dim is None else rotary_dim
                scale = torch.ones(q.shape[-1], device=q.device, dtype=q.dtype)
                scale[:r] = attention_factor
                q, k = q * scale, k * scale
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

    RoPE only (see the module docstring for which model does what):

    Args:
        rotary_dim: rotate the first ``rotary_dim`` features of each head (partial rotary);
            default all of them.
        rotating_fraction: p-RoPE's p in (0, 1]: the slowest 1 − p of the pairs do not turn.
        nope_layers: indices of layers that apply no rotation (RoPE/NoPE hybrid).
        local_layers: indices of sliding-window layers (they see the last ``window`` tokens
            and use ``base``); every other RoPE layer attends globally with ``global_base``.
        window: the sliding window, in tokens (needed with ``local_layers``).
        global_base: base of the global layers (default ``base``).
    """

    def __init__(self, vocab_size: int, *, position: str = "rope", dim: int = 64,
                 n_heads: int = 4, n_layers: int = 2, max_len: int = 1024,
                 base: float = DEFAULT_BASE, rotary_dim: int | None = None,
                 rotating_fraction: float = 1.0, nope_layers: tuple = (),
                 local_layers: tuple = (), window: int | None = None,
                 global_base: float | None = None):
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
        self._check_rope_options(position, n_layers, rotary_dim, rotating_fraction, nope_layers,
                                 local_layers, window, global_base)
        self.tokens = nn.Embedding(vocab_size, dim)
        if position == "learned":
            self.learned = LearnedPositionalEmbedding(max_len, dim)
        self.base = _validate.check_base(base)
        self.rotary_dim = _validate.check_rotary_dim(rotary_dim, self.head_dim)
        self.rotating_fraction = float(rotating_fraction)
        self.nope_layers, self.local_layers = tuple(nope_layers), tuple(local_layers)
        self.window = window
        self.global_base = self.base if global_base is None else _validate.check_base(
            global_base, "global_base")
        self.register_buffer("inv_freq", self._speeds(self.base), persistent=False)
        self.register_buffer("global_inv_freq", self._speeds(self.global_base),
                             persistent=False)
        self.blocks = nn.ModuleList(Block(dim, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)

    @staticmethod
    def _check_rope_options(position, n_layers, rotary_dim, rotating_fraction, nope_layers,
                            local_layers, window, global_base):
        given = {name: value for name, value, default in (
            ("rotary_dim", rotary_dim, None), ("rotating_fraction", rotating_fraction, 1.0),
            ("nope_layers", tuple(nope_layers), ()), ("local_layers", tuple(local_layers), ()),
            ("window", window, None), ("global_base", global_base, None)) if value != default}
        if given and position != "rope":
            raise ValueError(f"{', '.join(given)} apply to position='rope' only, "
                             f"got position={position!r}")
        _check_fraction(rotating_fraction)
        for name, layers in (("nope_layers", nope_layers), ("local_layers", local_layers)):
            if tuple(layers):
                _validate.check_indices(tuple(layers), n_layers, name, "n_layers")
        if set(nope_layers) & set(local_layers):
            raise ValueError(f"a layer cannot be both NoPE and local: nope_layers = "
                             f"{tuple(nope_layers)}, local_layers = {tuple(local_layers)}")
        if tuple(local_layers) and window is None:
            raise ValueError("local_layers need a window (in tokens), got window=None")
        if window is not None:
            _validate.check_positive_int(window, "window")
            if not tuple(local_layers):
                raise ValueError(f"window = {window} applies to local_layers, but "
                                 "local_layers is empty")
        if global_base is not None and not tuple(local_layers):
            raise ValueError(f"global_base = {global_base} is the base of the layers that are "
                             "not local, but local_layers is empty (use base= for every layer)")

    def _speeds(self, base: float) -> torch.Tensor:
        return p_rope_inv_freq(self.rotary_dim, base, self.rotating_fraction)

    def _apply(self, fn, recurse=True):
        # .half() / .to(torch.bfloat16) must not round the rotation speeds: rebuild in float32.
        super()._apply(fn, recurse)
        device = self.inv_freq.device
        self.inv_freq = self._speeds(self.base).to(device)
        self.global_inv_freq = self._speeds(self.global_base).to(device)
        return self

    def layer_kinds(self) -> list[str]:
        """What each layer does with position: "rope", "nope", "local" or "global" for a RoPE
        model (global: full attention with ``global_base``), else the encoding's name."""
        if self.position != "rope":
            return [self.position] * len(self.blocks)
        if not self.local_layers:
            return ["nope" if i in self.nope_layers else "rope" for i in range(len(self.blocks))]
        return ["nope" if i in self.nope_layers else "local" if i in self.local_layers
                else "global" for i in range(len(self.blocks))]

    def forward(self, tokens: torch.Tensor, *, inv_freq: torch.Tensor | None = None,
                attention_factor: float = 1.0,
                attention_window: int | None = None) -> torch.Tensor:
        """Next-token logits.

        Args:
            tokens: ``(batch, seq)`` integer ids.
            inv_freq: ``(rotary_dim // 2,)`` rotation speeds to use instead of the trained
                ones in every rotating layer (RoPE only), e.g. from
                :func:`rope_lab.scaling.scaled_inv_freq`.
            attention_factor: multiplies the rotated q and k (RoPE only; YaRN's factor).
            attention_window: if given, every layer sees only offsets m − n < this
                (an ablation; any encoding).

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
        if attention_window is not None:
            _validate.check_positive_int(attention_window, "attention_window")
        seq = tokens.shape[1]
        x = self.tokens(tokens)
        if self.position == "learned":
            x = x + self.learned(torch.arange(seq, device=tokens.device))
        elif self.position == "sinusoidal":
            x = x + sinusoidal_pe(seq, self.dim).to(x.device)
        allowed = attention_mask(seq, window=attention_window, device=x.device)
        if self.position == "alibi":
            bias = alibi_bias(seq, self.n_heads, device=x.device)
            allowed = bias.masked_fill(~allowed, float("-inf"))
        for kind, block in zip(self.layer_kinds(), self.blocks, strict=True):
            kwargs = {"mask": allowed}
            if kind in ("rope", "local", "global"):
                trained = self.global_inv_freq if kind == "global" else self.inv_freq
                kwargs["inv_freq"] = trained if inv_freq is None else inv_freq.to(x.device)
                kwargs["attention_factor"] = attention_factor
                kwargs["rotary_dim"] = self.rotary_dim
            if kind == "local":
                kwargs["mask"] = allowed & attention_mask(seq, window=self.window,
                                                          device=x.device)
            x = block(x, **kwargs)
        return self.head(self.norm(x))
