"""A model's cos/sin tables from its config, laid out as its rotary embedding returns them.

transformers' rotary embeddings return ``cos, sin`` of shape ``(batch, seq, r)``: one value per
rotated feature, each pair's value twice (``cat((c, c))`` for the half layout), times the
model's attention factor (YaRN's mscale, LongRoPE's scale), in x's dtype. :func:`rotary_tables`
computes the same tables from a config alone (a dict read from ``config.json`` or a
transformers config object; transformers is not imported), for
``rope_lab.apply_rope(q, cos=cos[:, None], sin=sin[:, None], rotary_dim=r)``.

Where they differ from a model's own: rope_lab's θ_i is correctly rounded, transformers' is
computed in float32 (one unit in the last place off for about a third of the pairs), so at
position m the angles differ by up to m·θ_i·2^-23 (see :func:`rope_lab.apply_rope`), and
rope_lab's cos and sin are correctly rounded where PyTorch's float32 ``cos`` is an ulp off in
about 5 % of them.
"""

from __future__ import annotations

import torch

from rope_lab import _angles, _validate
from rope_lab.hf.config import UnsupportedRopeError, inv_freq_from_config, rope_spec


def rotary_tables(config, position_ids, *, layer_type: str | None = None,
                  layout: str = "half", dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for ``position_ids``, as the model's rotary embedding returns them.

    Args:
        config: a dict read from ``config.json`` or a transformers config object (either
            schema; see :func:`rope_lab.hf.inv_freq_from_config`).
        position_ids: integer positions ``(seq,)`` or ``(batch, seq)``, transformers'
            ``position_ids``.
        layer_type: for per-layer-type RoPE (Gemma 3, Gemma 4); see
            :func:`rope_lab.hf.layer_types`.
        layout: the pairing the tables are duplicated in: "half" (``cat((c, c))``, what
            transformers' rotary embeddings return) or "interleaved" (each value twice in a
            row, as GLM's and Cohere's do).
        dtype: of the tables (transformers returns x's dtype).

    Returns:
        ``(cos, sin)``, each ``(batch, seq, r)`` (``(1, seq, r)`` for ``(seq,)`` positions),
        r the rotary dimension (:attr:`rope_lab.hf.RopeSpec.rotary_dim`; the whole head for
        ``proportional`` RoPE, whose still pairs get cos 1 and sin 0). The angles follow
        :func:`rope_lab.apply_rope`'s rule (the float32 product m·θ_i, cos and sin correctly
        rounded), then the attention factor multiplies them in float32, as transformers
        does. ``dynamic`` and ``longrope`` read the sequence length as the rotary embeddings
        do: the largest position + 1.

    M-RoPE models (Qwen2-VL, Qwen3-VL, GLM-4.1V) given text positions rotate as plain RoPE
    (t = h = w = m), which these tables are; for vision tokens use
    :func:`rope_lab.nd.mrope_freqs` and :func:`rope_lab.nd.apply_rope_nd`.

    Raises ``ValueError`` / ``TypeError`` for bad positions or a layer type without RoPE, and
    :class:`~rope_lab.hf.UnsupportedRopeError` for a vision encoder's axial RoPE.
    """
    _validate.check_layout(layout)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    positions = _position_ids(position_ids)
    spec = rope_spec(config, layer_type)
    if spec is not None and spec.rope_type == "axial":
        raise UnsupportedRopeError(
            f"{spec.model_type}: axial RoPE rotates image rows and columns (a vision encoder); "
            "build its tables with rope_lab.nd.axial_freqs and apply_rope_nd")
    if spec is not None:  # (a layer type without RoPE is refused just below)
        _validate.check_table_size("rotary_tables", f"{positions.numel()} positions × "
                                   f"rotary_dim={spec.rotary_dim}",
                                   4 * positions.numel() * spec.rotary_dim * 4)
    seq_len = int(positions.max()) + 1
    inv, factor = inv_freq_from_config(config, layer_type, seq_len=seq_len)  # warns as it does
    cos, sin = _angles.cos_sin_table(positions, inv)
    if factor != 1:
        cos, sin = cos * factor, sin * factor
    if layout == "half":
        cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    else:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
    return cos.to(dtype), sin.to(dtype)


def _position_ids(position_ids) -> torch.Tensor:
    """Integer positions as a ``(batch, seq)`` tensor, checked."""
    if not isinstance(position_ids, torch.Tensor):
        try:
            position_ids = torch.as_tensor(position_ids)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"position_ids must be integer positions (seq,) or (batch, seq), "
                            f"got {position_ids!r}") from error
    if position_ids.is_floating_point() or position_ids.is_complex() \
            or position_ids.dtype == torch.bool:
        raise TypeError(f"position_ids must be integers (transformers' position_ids), got "
                        f"dtype {position_ids.dtype}")
    if position_ids.ndim == 1:
        position_ids = position_ids[None]
    if position_ids.ndim != 2 or position_ids.numel() == 0:
        raise ValueError(f"position_ids must have shape (seq,) or (batch, seq) with at least one "
                         f"position, got shape {tuple(position_ids.shape)}")
    if bool((position_ids < 0).any()):
        raise ValueError(f"position_ids must be ≥ 0 (transformers' position_ids), got "
                         f"{int(position_ids.min())}")
    return position_ids.long()
