"""Read RoPE from a Hugging Face config: the frequencies a real model rotates with.

A model's RoPE lives in its ``config.json`` in one of two schemas:

    old (transformers 4.x)   "rope_theta": 500000.0,
                             "rope_scaling": {"rope_type": "llama3", "factor": 8.0, ...}
                             (very old files say "type" instead of "rope_type")
    new (transformers 5.x)   "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
                                                 "factor": 8.0, ...}
                             or one such block per layer type (Gemma 3):
                             "rope_parameters": {"sliding_attention": {...},
                                                 "full_attention": {...}}

:func:`inv_freq_from_config` reads either (a plain dict from ``config.json`` or a transformers
config object; transformers itself is never imported) and returns what the model's own rotary
embedding computes: ``(inv_freq, attention_factor)``, every formula taken from
:mod:`rope_lab.scaling`. The rotary dimension d comes from ``head_dim`` (else hidden size /
heads) times ``partial_rotary_factor``; GPT-J's ``rotary_dim`` and MLA's ``qk_rope_head_dim``
(DeepSeek-V2/V3) name it directly.

What it cannot reproduce it refuses with one error naming the model type: a few models'
own frequency rules (:data:`MODEL_SPECIFIC`), unknown rope types, odd rotary dimensions. Keys in a
scaling block that transformers ignores are reported with a warning (:func:`config_warnings`
lists them without warning), never silently used or dropped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from rope_lab import scaling

DEFAULT_THETA = 10_000.0

# rope_type → the keys its block may hold besides rope_type / type / partial_rotary_factor
# (transformers' RotaryEmbeddingConfigMixin._validate_<type>_rope_parameters).
ROPE_TYPE_KEYS = {
    "default": {"rope_theta"},
    "linear": {"rope_theta", "factor"},
    "dynamic": {"rope_theta", "factor"},
    "yarn": {"rope_theta", "factor", "original_max_position_embeddings", "attention_factor",
             "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    "longrope": {"rope_theta", "short_factor", "long_factor", "original_max_position_embeddings",
                 "attention_factor", "factor"},
    "llama3": {"rope_theta", "factor", "original_max_position_embeddings", "low_freq_factor",
               "high_freq_factor"},
    "proportional": {"rope_theta", "factor"},
    "axial": {"rope_theta"},
}
ROPE_TYPES = tuple(ROPE_TYPE_KEYS)
ROPE_TYPE_ALIASES = {"mrope": "default"}
REQUIRED_KEYS = {
    "linear": {"factor"},
    "dynamic": {"factor"},
    "yarn": {"factor"},
    "longrope": {"short_factor", "long_factor"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor"},
}
# Keys about positions or the attention logits, not the frequencies: models declare them in
# ignore_keys_at_rope_validation (M-RoPE sections, Llama 4 / Mistral's attention temperature).
POSITION_KEYS = {"mrope_section", "mrope_interleaved", "interleaved", "llama_4_scaling_beta",
                 "max_position_embeddings"}
# Types transformers has whose frequencies depend on more than this module reads.
UNSUPPORTED_TYPES: dict[str, str] = {}
# Model types whose rotary embedding applies a rule of its own to the frequencies.
MODEL_SPECIFIC = {
    "ernie4_5_vl_moe": "its rotary embedding pre-permutes inv_freq for its 3-D M-RoPE layout",
    "ernie4_5_vl_moe_text": "its rotary embedding pre-permutes inv_freq for its 3-D M-RoPE layout",
    "eomt_dinov3": "a 2-D (image rows and columns) RoPE with its own frequency rule",
    "efficientloftr": "a 2-D RoPE for image features with its own frequency rule",
    "pixtral": "axial RoPE with its own split of the frequencies between rows and columns",
    "minimax_m3_vl_vision": "axial RoPE with a frequency rule of its own",
    "qwen2_vl_vision": "axial RoPE whose head dim comes from embed_dim, not hidden_size",
    **dict.fromkeys(("edgetam_video", "sam2_video", "sam3_tracker_video"),
                    "axial RoPE sized by its memory-attention settings"),
}
# Model types whose rotary embedding reads an explicit rotary_dim (others ignore the key).
ROTARY_DIM_MODELS = ("gptj", "codegen")
# Per type, the block keys that need the trained length L.
NEEDS_ORIGINAL = ("yarn", "longrope", "llama3")
_HIDDEN = ("hidden_size", "n_embd", "d_model")
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_POSITIONS = ("max_position_embeddings", "n_positions", "max_sequence_length")
_HEADS = ("num_attention_heads", "n_head", "num_heads")
_ROPE_MARKERS = ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base",
                 "rotary_dim", "rotary_pct", "partial_rotary_factor", "qk_rope_head_dim")


class UnsupportedRopeError(ValueError):
    """A config whose RoPE this module cannot reproduce exactly (named in the message)."""


@dataclass(frozen=True)
class RopeSpec:
    """One layer type's RoPE, resolved from a config.

    rotary_dim is the number of features that rotate (2 × len(inv_freq)), except for
    ``proportional``, where inv_freq covers the whole head (the non-rotating pairs get 0).
    """

    model_type: str | None
    layer_type: str | None
    rope_type: str
    base: float
    head_dim: int
    rotary_dim: int
    partial_rotary_factor: float
    params: dict = field(default_factory=dict)  # the scaling keys used, as in the config
    max_position_embeddings: int | None = None
    original_max_position_embeddings: int | None = None

    @property
    def trained_context(self) -> int | None:
        """L, the context the unscaled frequencies were trained for: the config's
        original_max_position_embeddings; for ``linear`` without one, max_position / factor
        (Gemma 3: 131072 / 8); else max_position_embeddings."""
        if self.original_max_position_embeddings:
            return self.original_max_position_embeddings
        factor = self.params.get("factor")
        if self.rope_type == "linear" and factor and self.max_position_embeddings:
            return round(self.max_position_embeddings / factor)
        return self.max_position_embeddings

    @property
    def scaled_context(self) -> int | None:
        """The context the frequencies were scaled for: L × factor when the block has a
        factor (a scaling type), else max_position_embeddings."""
        factor = self.params.get("factor")
        if self.rope_type in ("linear", "yarn", "llama3") and factor and self.trained_context:
            return round(self.trained_context * factor)
        return self.max_position_embeddings


# --- reading a config ------------------------------------------------------------------


class _Fields:
    """Uniform read access to a dict or a transformers config object (never imported)."""

    def __init__(self, config, name="config"):
        self.obj = None if isinstance(config, Mapping) else config
        if isinstance(config, Mapping):
            self.data = dict(config)
        elif hasattr(config, "to_dict"):
            try:
                self.data = dict(config.to_dict())
            except Exception:  # noqa: BLE001 - a broken to_dict: fall back to attributes
                self.data = {}
        else:
            raise TypeError(f"{name} must be a dict read from config.json or a transformers "
                            f"config object, got {type(config).__name__}")

    def get(self, key, default=None):
        if key in self.data and self.data[key] is not None:
            return self.data[key]
        if self.obj is not None:
            try:
                value = getattr(self.obj, key)
            except Exception:  # noqa: BLE001 - attribute missing or ambiguous per layer
                value = None
            if value is not None and not callable(value):
                return value
        return default

    def has(self, key) -> bool:
        return self.get(key) is not None

    def sub(self, key):
        value = self.obj is not None and getattr(self.obj, key, None)
        if value is not None and value is not False:
            return _Fields(value, key)
        value = self.data.get(key)
        return _Fields(value, key) if isinstance(value, Mapping) else None


def _text_fields(config) -> _Fields:
    fields = _Fields(config)
    if any(fields.has(key) for key in _ROPE_MARKERS):
        return fields
    for key in ("text_config", "llm_config", "language_config", "thinker_config"):
        sub = fields.sub(key)
        if sub is not None:
            inner = _text_fields(sub.obj if sub.obj is not None else sub.data)
            if any(inner.has(k) for k in _ROPE_MARKERS):
                if not inner.has("model_type"):
                    inner.data["model_type"] = fields.get("model_type")
                return inner
    model_type = fields.get("model_type")
    raise ValueError(f"config has no RoPE parameters (model_type={model_type!r}): expected "
                     f"rope_parameters, or rope_theta / rope_scaling (transformers 4 schema), "
                     f"at the top level or in its text_config")


def _blocks(fields: _Fields) -> tuple[dict, bool, str]:
    """The RoPE block(s), whether nested by layer type, and which schema key held them."""
    scaling_block = fields.get("rope_scaling")
    parameters = fields.get("rope_parameters")
    # transformers 5 reads rope_scaling first when a file has both (convert_rope_params_to_dict)
    if scaling_block:
        block, source = scaling_block, "rope_scaling"
    elif parameters:
        block, source = parameters, "rope_parameters"
    else:
        block, source = {}, "rope_theta"
    if not isinstance(block, Mapping):
        raise TypeError(f"{source} must be a dict, got {block!r}")
    block = dict(block)
    layer_types = fields.get("layer_types") or ()
    # Nested blocks are keyed by layer type (Gemma 3) or by a label of their own
    # (DeepSeek-V4: main / compress); a parameter's value is never a dict.
    nested = [key for key in block if isinstance(block[key], Mapping)
              or (block[key] is None and key in set(layer_types))]
    return block, bool(nested), source


def layer_types(config) -> list[str | None]:
    """The layer types with their own RoPE block (e.g. sliding/full attention), or [None]."""
    fields = _text_fields(config)
    block, nested, _ = _blocks(fields)
    if nested:
        return sorted(key for key, value in block.items()
                      if isinstance(value, Mapping) or value is None)
    if fields.has("rope_local_base_freq"):  # transformers 4 Gemma 3: a local base of its own
        return ["full_attention", "sliding_attention"]
    return [None]


def _head_dim(fields: _Fields, layer_type: str | None) -> int:
    override = _per_layer(fields, layer_type, "head_dim")
    if override is not None:
        return override
    head_dim = fields.get("head_dim")
    if fields.has("qk_rope_head_dim") and fields.has("qk_nope_head_dim"):
        # MLA (DeepSeek-V2/V3): q·k runs over a no-position part and a RoPE part
        head_dim = fields.get("qk_nope_head_dim") + fields.get("qk_rope_head_dim")
    if head_dim is None:
        hidden = next((fields.get(k) for k in _HIDDEN if fields.has(k)), None)
        heads = next((fields.get(k) for k in _HEADS if fields.has(k)), None)
        if hidden is None or heads is None:
            raise ValueError(f"config has neither head_dim nor hidden_size and "
                             f"num_attention_heads (model_type={fields.get('model_type')!r}); "
                             f"expected one of them to find the head dimension")
        head_dim = hidden // heads
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0:
        raise ValueError(f"head_dim must be a positive int, got {head_dim!r}")
    return head_dim


def _per_layer(fields: _Fields, layer_type, key):
    """A per-layer-type override of ``key`` (Gemma 4's global layers: a larger head)."""
    if layer_type is None:
        return None
    if fields.obj is not None:
        try:
            view = fields.obj.per_layer_config[layer_type]
            value = getattr(view, key, None)
            if value is not None:
                return value
        except Exception:  # noqa: BLE001 - no per-layer configs in this release or model
            pass
    per_layer = fields.data.get("per_layer_config")
    types = fields.get("layer_types") or []
    if isinstance(per_layer, Mapping) and types:
        values = {entry.get(key) for index, entry in per_layer.items()
                  if isinstance(entry, Mapping) and str(index).isdigit()
                  and int(index) < len(types) and types[int(index)] == layer_type}
        values.discard(None)
        if len(values) > 1:
            raise UnsupportedRopeError(
                f"{fields.get('model_type')}: layers of type {layer_type!r} have different "
                f"{key} values {sorted(values)} in per_layer_config; one RoPE per layer type "
                f"is supported")
        if values:
            return values.pop()
    if key == "head_dim" and layer_type == "full_attention" and fields.has("global_head_dim"):
        return fields.get("global_head_dim")
    return None


def first(fields: _Fields, names):
    """The first of ``names`` (aliases of one field, e.g. n_layer) the config sets."""
    return next((fields.get(name) for name in names if fields.has(name)), None)


def _number(value, name, *, minimum=None, integer=False):
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {expected}, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}")
    return value


def _resolve(config, layer_type=None) -> tuple[RopeSpec | None, list[str]]:
    """The RopeSpec for ``layer_type`` (None for a NoPE layer type) and warnings."""
    fields = _text_fields(config)
    model_type = fields.get("model_type")
    if model_type in MODEL_SPECIFIC:
        raise UnsupportedRopeError(f"{model_type}: not supported, {MODEL_SPECIFIC[model_type]}")
    block, nested, source = _blocks(fields)
    notes: list[str] = []
    if nested:
        if layer_type is None:
            raise ValueError(f"{model_type}: rope parameters are per layer type "
                             f"{sorted(block)}; expected layer_type= one of them")
        if not isinstance(block.get(layer_type, {}), (Mapping, type(None))) or \
                layer_type not in block:
            raise ValueError(f"layer_type must be one of {layer_types(config)}, got "
                             f"{layer_type!r}")
        block = block[layer_type]
        if block is None:
            return None, notes
        block = dict(block)
    elif layer_type is not None:
        declared = sorted(set(fields.get("layer_types") or []))
        if fields.has("rope_local_base_freq"):
            declared = sorted(set(declared) | {"full_attention", "sliding_attention"})
        if layer_type not in declared:
            expected = f"one of {declared} or None" if declared else "None (one RoPE for all)"
            raise ValueError(f"layer_type must be {expected}, got {layer_type!r}")
        if layer_type == "sliding_attention" and fields.has("rope_local_base_freq"):
            # transformers 4's Gemma 3: sliding layers use plain RoPE with their own base
            block = {"rope_type": "default", "rope_theta": fields.get("rope_local_base_freq")}
    where = f"{source}[{layer_type!r}]" if nested else source

    rope_type = block.get("rope_type", block.get("type", "default"))
    # Qwen2-VL's config class turns "mrope" into default RoPE; M-RoPE changes positions only
    rope_type = ROPE_TYPE_ALIASES.get(rope_type, rope_type)
    if "type" in block and "rope_type" in block and block["type"] != block["rope_type"]:
        notes.append(f"{where} has type={block['type']!r} and rope_type="
                     f"{block['rope_type']!r}; transformers uses rope_type")
    if rope_type in UNSUPPORTED_TYPES:
        raise UnsupportedRopeError(f"{model_type}: rope_type {rope_type!r} is not supported: "
                                   f"{UNSUPPORTED_TYPES[rope_type]}")
    if rope_type not in ROPE_TYPE_KEYS:
        raise UnsupportedRopeError(f"{model_type}: rope_type {rope_type!r} in {where} is not "
                                   f"one of the supported types {', '.join(ROPE_TYPES)}")
    # Keys transformers would not read: misspellings, another type's options.
    known = ROPE_TYPE_KEYS[rope_type] | {"rope_type", "type", "partial_rotary_factor"}
    ignored = sorted(set(block) - known - POSITION_KEYS)
    if ignored:
        hints = []
        for key in ignored:
            owner = [t for t, keys in ROPE_TYPE_KEYS.items() if key in keys]
            hints.append(f"{key!r}" + (f" (a {'/'.join(owner)} option)" if owner else ""))
        notes.append(f"{where} (rope_type {rope_type!r}): transformers ignores "
                     f"{', '.join(hints)}")
    missing = sorted(REQUIRED_KEYS.get(rope_type, set()) - set(block))
    if missing:
        raise ValueError(f"{model_type}: {where} with rope_type {rope_type!r} is missing "
                         f"{missing}; expected {sorted(REQUIRED_KEYS[rope_type])}")

    base = block.get("rope_theta", fields.get("rope_theta", fields.get("rotary_emb_base")))
    if base is None and model_type in ROTARY_DIM_MODELS:
        base = DEFAULT_THETA  # GPT-J and CodeGen fix the base in code
    if base is None:
        base = DEFAULT_THETA
        notes.append(f"no rope_theta: assuming {DEFAULT_THETA:g} (transformers uses the model "
                     f"class's default_theta, 10000 for most models)")
    base = float(_number(base, "rope_theta", minimum=1))
    partial = block.get("partial_rotary_factor",
                        fields.get("partial_rotary_factor", fields.get("rotary_pct", 1.0)))
    partial = float(_number(partial, "partial_rotary_factor"))
    if partial > 1:
        raise UnsupportedRopeError(f"{model_type}: partial_rotary_factor {partial} > 1 is a "
                                   f"model-specific rule; expected a fraction in (0, 1]")
    if partial <= 0:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial}")

    head_dim = _head_dim(fields, layer_type)
    explicit = fields.get("qk_rope_head_dim")  # MLA: only these features rotate
    if model_type in ROTARY_DIM_MODELS:
        explicit = fields.get("rotary_dim", explicit)
        if explicit is None:  # GPT-J's default: the whole head
            explicit = head_dim
    elif fields.has("rotary_dim") and fields.get("rotary_dim") != int(head_dim * partial):
        notes.append(f"rotary_dim={fields.get('rotary_dim')} is not read by transformers for "
                     f"model_type {model_type!r}; it rotates head_dim × partial_rotary_factor "
                     f"= {int(head_dim * partial)} features")
    if rope_type in ("proportional", "axial"):
        rotary_dim = head_dim
    elif explicit is not None:
        rotary_dim = _number(explicit, "rotary_dim", minimum=1, integer=True)
    else:
        rotary_dim = int(head_dim * partial)
    if rotary_dim % 2:
        raise UnsupportedRopeError(
            f"{model_type}: the rotary dimension is odd, {rotary_dim} (head_dim {head_dim} × "
            f"partial_rotary_factor {partial}); RoPE rotates pairs of features, expected an "
            f"even number")

    max_position = first(fields, _POSITIONS)
    original = None
    if rope_type in NEEDS_ORIGINAL:
        # transformers gives a top-level original_max_position_embeddings priority (Phi-3)
        original = (None if nested else fields.get("original_max_position_embeddings"))
        original = original or block.get("original_max_position_embeddings")
        if original is None:
            original = max_position
            notes.append(f"{where} (rope_type {rope_type!r}) has no "
                         f"original_max_position_embeddings: transformers falls back to "
                         f"max_position_embeddings={max_position}, the scaled length, so the "
                         f"frequencies are scaled as if the model had been trained that long")
        if original is None:
            raise ValueError(f"{model_type}: rope_type {rope_type!r} needs the trained length: "
                             f"expected original_max_position_embeddings or "
                             f"max_position_embeddings in the config")
        original = _number(original, "original_max_position_embeddings", minimum=1,
                           integer=True)
    if rope_type == "dynamic" and max_position is None:
        raise ValueError(f"{model_type}: rope_type 'dynamic' needs max_position_embeddings "
                         f"(its trained length)")
    params = {key: block[key] for key in sorted(ROPE_TYPE_KEYS[rope_type] - {"rope_theta"})
              if key in block}
    if nested and rope_type == "yarn" and "truncate" in params:
        # transformers reads truncate from the top level of rope_parameters, not the block
        notes.append(f"{where}: transformers ignores 'truncate' inside a per-layer-type block "
                     f"and truncates; so does this result")
        params.pop("truncate")
    factor = params.get("factor")
    if factor is not None:
        _number(factor, f"{where}['factor']", minimum=1)
    spec = RopeSpec(model_type=model_type, layer_type=layer_type, rope_type=rope_type,
                    base=base, head_dim=head_dim, rotary_dim=rotary_dim,
                    partial_rotary_factor=partial, params=params,
                    max_position_embeddings=max_position,
                    original_max_position_embeddings=original)
    return spec, notes


def rope_spec(config, layer_type: str | None = None) -> RopeSpec | None:
    """The resolved RoPE of one layer type (None: that layer type has no RoPE)."""
    return _resolve(config, layer_type)[0]


def config_warnings(config) -> list[str]:
    """What transformers would silently ignore or guess in this config's RoPE, one line each."""
    notes: list[str] = []
    for layer_type in layer_types(config):
        for note in _resolve(config, layer_type)[1]:
            if note not in notes:
                notes.append(note)
    return notes


def inv_freq_from_config(config, layer_type: str | None = None, seq_len: int | None = None,
                         *, device=None, dtype=torch.float32) -> tuple[torch.Tensor, float]:
    """The rotation speeds θ_i and attention factor a model's rotary embedding computes.

    Args:
        config: a dict read from ``config.json`` or a transformers config object, in the
            transformers 4 schema (``rope_theta`` + ``rope_scaling``) or the 5 schema
            (``rope_parameters``, flat or per layer type); a multimodal config's
            ``text_config`` is used when the top level has no RoPE.
        layer_type: for per-layer-type RoPE (Gemma 3: ``"sliding_attention"`` /
            ``"full_attention"``); see :func:`layer_types`.
        seq_len: the current sequence length, for the types that depend on it: ``dynamic``
            (the base grows past max_position_embeddings) and ``longrope`` (the long factors
            once seq_len exceeds original_max_position_embeddings; None: the short ones).
        device, dtype: of the result (computed in float64, rounded once).

    Returns:
        ``(inv_freq, attention_factor)``: a ``(rotary_dim // 2,)`` tensor (``proportional``:
        ``(head_dim // 2,)`` with zeros for the pairs that do not rotate; ``axial``, a vision
        encoder's: ``(head_dim // 4,)``, the speeds of each image axis, which rotates half the
        head) and the factor that multiplies cos and sin.

    Raises:
        UnsupportedRopeError: axial RoPE, unknown rope types, odd rotary dims (names the
            model type). ValueError / TypeError: missing or bad parameters (names them).

    Keys transformers would ignore (typos, another type's options) raise a warning.
    """
    spec, notes = _resolve(config, layer_type)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    if spec is None:
        raise ValueError(f"{layer_type!r} layers of {spec_model(config)} have no RoPE "
                         f"(their rope parameters are null)")
    return inv_freq_from_spec(spec, seq_len=seq_len, device=device, dtype=dtype)


def spec_model(config) -> str | None:
    return _text_fields(config).get("model_type")


def inv_freq_from_spec(spec: RopeSpec, seq_len: int | None = None, *, device=None,
                       dtype=torch.float32) -> tuple[torch.Tensor, float]:
    """``(inv_freq, attention_factor)`` for a resolved :class:`RopeSpec`."""
    p = spec.params
    factor = p.get("factor")
    common = dict(base=spec.base, device=device, dtype=dtype)
    dim = spec.rotary_dim
    kind = spec.rope_type
    if kind == "default":
        return scaling.default_inv_freq(dim, **common)
    if kind == "axial":
        # Vision encoders: rows and columns each rotate half the head with plain RoPE.
        if dim % 4:
            raise UnsupportedRopeError(f"{spec.model_type}: axial RoPE needs head_dim divisible "
                                       f"by 4 (two axes of pairs), got {dim}")
        return scaling.default_inv_freq(dim // 2, **common)
    if kind == "linear":
        return scaling.linear_inv_freq(dim, factor=factor, **common)
    if kind == "dynamic":
        return scaling.dynamic_inv_freq(dim, factor=factor, seq_len=seq_len,
                                        original_max_position=spec.max_position_embeddings,
                                        **common)
    if kind == "proportional":
        return scaling.proportional_inv_freq(dim, factor=factor or 1.0,
                                             partial_rotary_factor=spec.partial_rotary_factor,
                                             **common)
    original = spec.original_max_position_embeddings
    if kind == "llama3":
        return scaling.llama3_inv_freq(dim, factor=factor, original_max_position=original,
                                       low_freq_factor=p["low_freq_factor"],
                                       high_freq_factor=p["high_freq_factor"], **common)
    if factor is None:  # Phi-3, DeepSeek: the factor is the ratio of the two lengths
        if spec.max_position_embeddings is None:
            raise ValueError(f"{spec.model_type}: rope_type {kind!r} has no factor and no "
                             f"max_position_embeddings to derive it from")
        factor = spec.max_position_embeddings / original
    if kind == "longrope":
        return scaling.longrope_inv_freq(
            dim, factor=max(factor, 1.0), original_max_position=original, seq_len=seq_len,
            short_factor=list(p["short_factor"]), long_factor=list(p["long_factor"]),
            attention_factor=p.get("attention_factor"), **common)
    # yarn; transformers replaces a missing or zero beta by its default (`or 32`, `or 1`)
    options = dict(beta_fast=p.get("beta_fast") or 32.0, beta_slow=p.get("beta_slow") or 1.0,
                   attention_factor=p.get("attention_factor"), mscale=p.get("mscale"),
                   mscale_all_dim=p.get("mscale_all_dim"))
    truncate = p.get("truncate", True)
    return scaling.yarn_inv_freq(dim, factor=factor, original_max_position=original,
                                 truncate=truncate, **options, **common)
