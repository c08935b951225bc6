"""RoPE as real models configure it: Hugging Face configs, position ids and checks.

Nothing here imports transformers: a plain dict read from ``config.json`` works as well as a
transformers config object.
"""

from rope_lab.hf.check import RotaryVerdict, check_rotary
from rope_lab.hf.config import (
    ROPE_TYPES,
    ReleaseDiffersWarning,
    RopeSpec,
    UnsupportedRopeError,
    config_warnings,
    inv_freq_from_config,
    inv_freq_from_spec,
    layer_types,
    rope_spec,
)
from rope_lab.hf.positions import (
    decode_position_ids,
    packed_position_ids,
    position_ids_from_attention_mask,
)
from rope_lab.hf.tables import rotary_tables

__all__: list[str] = [
    "ROPE_TYPES",
    "ReleaseDiffersWarning",
    "RopeSpec",
    "UnsupportedRopeError",
    "config_warnings",
    "inv_freq_from_config",
    "inv_freq_from_spec",
    "layer_types",
    "rope_spec",
    # position ids and the rotary check (notebook 11)
    "RotaryVerdict",
    "check_rotary",
    "decode_position_ids",
    "packed_position_ids",
    "position_ids_from_attention_mask",
    # a model's cos/sin tables, for apply_rope(q, cos=..., sin=...)
    "rotary_tables",
]
