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
:mod:`rope_lab.scaling`.

A ``config.json`` says less than the model uses: transformers' config class for its
``model_type`` fills in what the file leaves out, and renames or converts a few keys. rope_lab
reads those per-model-type rules, one file per transformers release
(``transformers_rules/<version>.json.gz``: every minor release from 4.45 on), written from its
own classes by :func:`rope_lab.hf.transformers_oracle.write_rules` (see
:func:`transformers_rules`): the defaults of each config class (Llama 2's file has no
``rope_theta``; llava's ``text_config`` has no hidden size), its key aliases
(``attribute_map``: JetMoE's ``kv_channels`` is its head dim), the older keys it converts
(GPT-NeoX's ``rotary_pct``, Gemma 3's ``rope_local_base_freq``, MiniMax-M2's ``rotary_dim``),
and whether its rotary embedding applies ``partial_rotary_factor`` to plain RoPE (Phi and
GPT-NeoX do; Llama and most others rotate the whole head whatever the key says). The rotary
dimension d is then ``head_dim`` (else hidden size / heads), times ``partial_rotary_factor``
where the model applies it; GPT-J's and CodeGen's modeling code reads ``rotary_dim`` itself, and
MLA's ``qk_rope_head_dim`` (DeepSeek-V2/V3) names it directly.

A ``model_type`` transformers does not know (remote code such as ``phi-msft``, ``qwen``,
``internlm2``) is read with the generic rule, the keys as their names say (an explicit
``rotary_dim`` included), and a warning says so. What rope_lab cannot reproduce it refuses with
one error naming the model type: a few models' own frequency rules (:data:`MODEL_SPECIFIC`),
unknown rope types, odd rotary dimensions. Keys in a scaling block that transformers ignores
are reported with a warning (:func:`config_warnings` lists them without warning), never
silently used or dropped.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

import torch

from rope_lab import scaling
from rope_lab.i18n import _

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
# Model types some releases size or place in a way of their own: (first, end) releases, why.
MODEL_SPECIFIC_IN = {
    "zamba2": ("4.49.0", "4.54.0", "transformers before 4.54 builds its rotary embedding with "
                                   "dim = attention_head_dim (2 × hidden_size / heads), which "
                                   "its config does not name as head_dim"),
    **dict.fromkeys(("cosmos3_edge", "cosmos3_edge_text"), (
        "5.0.0", "5.17.0", "transformers before 5.17 builds its inverse frequencies as an "
                           "axis-masked (3, d/2) matrix for its 3-D M-RoPE")),
    "musicflamingo": ("5.5.0", "5.6.0", "its rotary time embedding reads the top-level config "
                                        "(head_dim 1280), whose RoPE defaults equal its text "
                                        "model's in this release, so a file without RoPE keys "
                                        "cannot tell which one is meant"),
}
# Per type, the block keys that need the trained length L.
NEEDS_ORIGINAL = ("yarn", "longrope", "llama3")
_HIDDEN = ("hidden_size", "n_embd", "d_model")
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")
_POSITIONS = ("max_position_embeddings", "n_positions", "max_sequence_length")
_HEADS = ("num_attention_heads", "n_head", "num_heads")
_ROPE_MARKERS = ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base",
                 "rotary_dim", "rotary_pct", "partial_rotary_factor", "qk_rope_head_dim")
# Where multimodal configs keep their language model's config.
SUB_CONFIGS = ("text_config", "llm_config", "language_config", "thinker_config")
MAX_NESTING = 8  # text_config inside text_config …: deeper than any real config


class UnsupportedRopeError(ValueError):
    """A config whose RoPE this module cannot reproduce exactly (named in the message)."""


class ReleaseDiffersWarning(UserWarning):
    """The installed transformers runs this config with other frequencies than the result
    (which follows the model's meaning): YaRN's factor in releases 4.51 to 4.55. Its own
    class, so a caller can tell it from the warnings about the config's keys."""


class _Note(str):
    """A warning's text with the category :func:`inv_freq_from_config` warns it with."""

    category: type[Warning] = UserWarning


class _ReleaseNote(_Note):
    category = ReleaseDiffersWarning


# The transformers release the course pins (constraints.txt): its rules are used when
# transformers is not installed.
PINNED_TRANSFORMERS = "5.24.0"

# transformers 4.51.0 up to 4.56.0 (not included) computed YaRN with factor =
# max_position_embeddings / original_max_position_embeddings whenever the scaling block named
# original_max_position_embeddings, whatever its "factor" said (written for DeepSeek-V3, where
# the two agree; a Qwen2.5 file with factor 4 and both lengths 32768 got no YaRN at all).
# 4.56 went back to the explicit factor and warns when the two disagree. rope_lab reads
# the factor (the model's meaning) and, with such a release installed, warns that it runs
# the model with other frequencies (hf.check_rotary then finds the difference).
YARN_FACTOR_FROM_LENGTHS = ("4.51.0", "4.56.0")


def _installed_between(first: str, end: str) -> bool:
    """Whether the installed transformers is release ``first`` or later, before ``end``."""
    installed = installed_transformers()
    return installed is not None and (
        _version_key(first) <= _version_key(installed) < _version_key(end))


def _yarn_factor_from_lengths() -> bool:
    """Whether the installed transformers takes YaRN's factor from the lengths
    (:data:`YARN_FACTOR_FROM_LENGTHS`)."""
    return _installed_between(*YARN_FACTOR_FROM_LENGTHS)


def _version_key(version: str) -> tuple[int, ...]:
    """(major, minor, patch) from a release's leading numbers: a pre-release or a dev build
    ("5.0.0rc1", "4.57.0.dev0") reads as the release it leads to, not as a later patch."""
    parts = []
    for part in version.split(".")[:3]:
        digits = re.match(r"\d*", part).group()
        parts.append(int(digits or 0))
    return tuple(parts)


@cache
def installed_transformers() -> str | None:
    """The installed transformers' version, read from its metadata (nothing imported), once
    per process: every config read asks (0.6 ms a lookup; notebook 10's widget reads the
    atlas on every change)."""
    from importlib import metadata

    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def rules_version(installed: str | None = None) -> str:
    """Which release's rules describe ``installed`` (default: the installed transformers):
    the closest release with a rules file in the same major series, so a patch release
    reads with its minor release's rules (5.10.0 with 5.10.4's) and a release newer than
    every file with the newest of its series (5.30 with 5.24's); a major series with no file
    reads with the nearest end (6.x with the newest, 3.x with the oldest). Without
    transformers, the pinned release."""
    available = available_rules()
    installed = installed or installed_transformers() or PINNED_TRANSFORMERS
    if installed in available:
        return installed
    key = _version_key(installed)
    same = [v for v in available if _version_key(v)[0] == key[0]]
    if not same:  # minor numbers of another major series say nothing about distance
        return available[-1] if key > _version_key(available[-1]) else available[0]
    return min(same, key=lambda v: (abs(_version_key(v)[1] - key[1]), _version_key(v)))


RULES_SUFFIX = ".json.gz"  # one gzipped JSON per release: about a tenth of the bytes


def available_rules() -> list[str]:
    """The transformers releases rope_lab has rules for (``transformers_rules/<version>
    .json.gz``), oldest first."""
    from importlib import resources

    folder = resources.files("rope_lab.hf") / "transformers_rules"
    return sorted((p.name[:-len(RULES_SUFFIX)] for p in folder.iterdir()
                   if p.name.endswith(RULES_SUFFIX)), key=_version_key)


@cache
def transformers_rules(version: str | None = None) -> dict:
    """The per-model-type rules rope_lab reads configs with: those of the installed
    transformers release (:func:`rules_version`), or of ``version``.

    ``{"transformers": version, "known": [every model type], "model_types": {model_type:
    rules}}``, written from that release's own classes by
    :func:`rope_lab.hf.transformers_oracle.write_rules`
    (``transformers_rules/<version>.json.gz``);
    ``tests/test_hf_registry.py`` checks rope_lab against those classes. Each entry may hold
    ``attribute_map`` (the config's own name of a standard key), ``defaults`` (the config
    class's defaults), ``rope_parameters`` (the RoPE block a default config ends with),
    ``default_theta``, ``default_rope_type``, ``ignore_keys``
    (``ignore_keys_at_rope_validation``), ``labels`` (keys of a nested block that are not
    layer types), ``theta_keys`` / ``scaling_labels`` (how a per-layer-type class reads a flat
    file), ``sub_configs`` / ``sub_defaults`` / ``sub_defaults_merged`` (a multimodal class's
    text_config: its default model type and the defaults it gives), ``legacy_keys`` (older
    keys the class converts), ``mla_head_dim`` (what multi-head latent attention makes
    head_dim) and ``partial_in_default`` (whether plain RoPE applies
    ``partial_rotary_factor``).
    """
    from importlib import resources

    version = version or rules_version()
    if version not in available_rules():
        raise ValueError(f"version must be one of {available_rules()}, got {version!r}")
    path = resources.files("rope_lab.hf") / "transformers_rules" / f"{version}{RULES_SUFFIX}"
    data = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    data["known"] = frozenset(data["known"])
    return data


def _rules(model_type, other_releases: bool = True) -> dict | None:
    """The rules of ``model_type``: those of the installed release (:func:`rules_version`),
    else of the closest release rope_lab has rules for that knows it (DeepSeek-V3 with
    transformers 4.45 installed: the installed release cannot build it at all, a later one
    can); {} for a known type with no rules of its own; None if no release knows it."""
    if not isinstance(model_type, str):
        return None
    table = transformers_rules()
    if model_type in table["known"]:
        return table["model_types"].get(model_type, {})
    if not other_releases:
        return None
    here = _version_key(table["transformers"])
    for version in sorted(available_rules(), key=lambda v: (
            abs(_version_key(v)[0] - here[0]), abs(_version_key(v)[1] - here[1]))):
        other = transformers_rules(version)
        if model_type in other["known"]:
            return other["model_types"].get(model_type, {})
    return None


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


def _number(value, name, *, minimum=None, integer=False, positive=False):
    """``value`` checked to be a finite number (an int if ``integer``), ≥ ``minimum``."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {expected}, got {value!r} of type "
                        f"{type(value).__name__}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int past float's range: no frequency survives it
        finite = False
    if not finite:
        shown = value if isinstance(value, float) else f"an int of {len(str(abs(value)))} digits"
        raise ValueError(f"{name} must be a finite number within float range, got {shown}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}")
    return value


class _Fields:
    """Read access to a dict or a transformers config object (never imported) as its
    config class would see it: aliases followed, class defaults filled in."""

    def __init__(self, config, name="config", model_type=None, parent_defaults=None,
                 parent_known=False, parent_partial=None):
        self.name = name
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
        own = self.raw("model_type")
        if own is not None and not isinstance(own, str):
            raise TypeError(f"{name}['model_type'] must be a string, got {own!r}")
        self.model_type = own if own is not None else model_type
        self.rules = _rules(self.model_type, other_releases=False)
        if self.rules is None and (parent_known or type(config).__module__.startswith(
                "transformers.models.")):
            # a text config only its (known) multimodal class defines (5.0's emu3 text
            # model): whether plain RoPE applies partial_rotary_factor is the class's answer
            self.rules = ({} if parent_partial is None
                          else {"partial_in_default": parent_partial})
        if self.rules is None:
            self.rules = _rules(self.model_type)  # a type only another release knows
        rules = self.rules or {}
        self.aliases = rules.get("attribute_map", {})
        # a config object has its class defaults already; a dict gets them from the table
        self.defaults = ({**rules.get("defaults", {}), **(parent_defaults or {})}
                         if self.obj is None else {})

    @property
    def known(self) -> bool:
        """Whether transformers knows this config's model_type."""
        return self.rules is not None

    def raw(self, key):
        """The value the config itself gives for ``key`` (or its alias), else None."""
        if self.obj is not None:
            try:
                value = getattr(self.obj, key)
            except Exception:  # noqa: BLE001 - attribute missing or ambiguous per layer
                value = None
            if value is not None and not callable(value):
                return value
        alias = getattr(self, "aliases", {}).get(key)
        if alias is not None and self.data.get(alias) is not None:
            return self.data[alias]
        value = self.data.get(key)
        return value

    def get(self, key, default=None):
        value = self.raw(key)
        if value is None:
            value = self.defaults.get(key)
        return default if value is None else value

    def has(self, key) -> bool:
        return self.get(key) is not None

    def sub(self, key):
        value = self.obj is not None and getattr(self.obj, key, None)
        if value is not None and value is not False and not isinstance(value, Mapping) \
                and hasattr(value, "to_dict"):
            return value
        value = self.data.get(key)
        return value if isinstance(value, Mapping) else None

    def label(self) -> str:
        return repr(self.model_type)


def _carries_rope(fields: _Fields) -> bool:
    if any(fields.raw(key) is not None for key in _ROPE_MARKERS):
        return True
    rules = fields.rules or {}
    return bool(rules.get("rope_parameters") or fields.defaults.get("rope_theta")
                or fields.defaults.get("rope_parameters")) or _rotary_dim_in_code(fields)


def _rotary_dim_in_code(fields: _Fields) -> bool:
    """GPT-J and CodeGen: the modeling code rotates ``rotary_dim`` features at base 10000 and
    the config class has no RoPE block (the table: a rotary_dim default, no rope_parameters)."""
    rules = fields.rules or {}
    return "rotary_dim" in rules.get("defaults", {}) and not rules.get("rope_parameters_field")


class NoRopeError(ValueError):
    """The config (and its sub-configs) has no RoPE."""


def _text_fields(config, name="config", depth=0, seen=None, model_type=None,
                 parent_defaults=None, parent_known=False, parent_partial=None) -> _Fields:
    """The (sub-)config that carries the language model's RoPE."""
    seen = set() if seen is None else seen
    if id(config) in seen:
        raise ValueError(f"{name} contains itself; expected a tree of configs")
    if depth > MAX_NESTING:
        raise ValueError(f"{name} is nested more than {MAX_NESTING} levels deep; expected a "
                         f"text_config inside at most a few multimodal configs")
    seen.add(id(config))
    fields = _Fields(config, name, model_type, parent_defaults, parent_known, parent_partial)
    if _carries_rope(fields):  # RoPE keys of its own, or a class whose model reads its own
        return fields
    rules = fields.rules or {}
    defaults = rules.get("sub_configs", {})
    # what a multimodal config class gives its text_config: always (Voxtral merges its own
    # defaults in), or only when the file has none (the class builds its default one)
    given_defaults, absent_defaults = rules.get("sub_defaults_given", {}), \
        rules.get("sub_defaults", {})
    missing = []
    for key in SUB_CONFIGS:
        sub = fields.sub(key)
        if sub is None and fields.obj is None and fields.data.get(key) is not None:
            raise TypeError(f"{name}['{key}'] must be a dict (a config), got "
                            f"{fields.data[key]!r}")
        if sub is None:
            if key in defaults and fields.obj is None:
                missing.append(key)
            continue
        try:
            return _text_fields(sub, f"{name}['{key}']", depth + 1, seen,
                                defaults.get(key) or fields.model_type, given_defaults.get(key),
                                fields.known, rules.get("partial_in_default"))
        except NoRopeError:
            continue
    for key in missing:
        try:
            return _text_fields({"model_type": defaults[key]}, f"{name}['{key}']", depth + 1,
                                seen, None, absent_defaults.get(key), fields.known,
                                rules.get("partial_in_default"))
        except NoRopeError:
            continue
    known = ("" if fields.known or fields.model_type is None else
             ", a model type transformers does not know")
    raise NoRopeError(f"config has no RoPE parameters (model_type={fields.model_type!r}{known}): "
                  f"expected rope_parameters, or rope_theta / rope_scaling (transformers 4 "
                  f"schema), at the top level or in its text_config")


def _nested_keys(fields: _Fields, block: Mapping) -> list[str]:
    """The keys of a per-layer-type (or per-label) block: their values are blocks (or null
    for a NoPE layer type)."""
    declared = set(fields.get("layer_types") or ()) | set((fields.rules or {}).get("labels", ()))
    return [key for key in block if isinstance(block[key], Mapping)
            or (block[key] is None and key in declared)]


def _default_block(fields: _Fields, label=None) -> dict:
    """The RoPE block the config class ends with when the file gives none (its rope_type and
    the options the class sets; rope_theta / partial_rotary_factor come separately)."""
    block = fields.defaults.get("rope_parameters") or (fields.rules or {}).get(
        "rope_parameters") or {}
    if label is not None:
        block = block.get(label) or {}
    elif _nested_keys(fields, block):
        return {}
    return {k: v for k, v in block.items() if k not in ("rope_theta", "partial_rotary_factor")}


def _class_default(fields: _Fields, key, label=None):
    """The config class's default for a block key (rope_theta, partial_rotary_factor)."""
    if fields.defaults.get(key) is not None:
        return fields.defaults[key]
    block = fields.defaults.get("rope_parameters") or (fields.rules or {}).get(
        "rope_parameters") or {}
    nested = _nested_keys(fields, block)
    if label is not None and label in nested:
        block = block[label] or {}
    elif nested:
        values = {json.dumps(block[k].get(key)) for k in nested if block[k]}
        block = {key: block[nested[0]].get(key)} if len(values) == 1 else {}
    value = block.get(key)
    if value is None and key == "rope_theta":
        theta = (fields.rules or {}).get("default_theta", DEFAULT_THETA)
        value = theta if not isinstance(theta, Mapping) else None
    return value


def _blocks(fields: _Fields) -> tuple[dict, bool, str]:
    """The RoPE block(s) as the config class reads them, whether nested by layer type (or by
    a label of its own), and which key of the file held them.

    transformers 5 takes ``rope_scaling`` when a file has both it and ``rope_parameters``
    (``convert_rope_params_to_dict``), and a config object's ``rope_scaling`` is an alias of
    its ``rope_parameters``.
    """
    rewrite = MODEL_REWRITES.get(fields.model_type)
    if rewrite is not None:
        converted = rewrite(fields)
        if converted is not None:
            return converted
    if fields.obj is not None and hasattr(fields.obj, "rope_parameters"):
        scaling_block, parameters = None, fields.raw("rope_parameters")
    else:
        scaling_block, parameters = fields.raw("rope_scaling"), fields.raw("rope_parameters")
    if scaling_block:
        block, source = scaling_block, "rope_scaling"
    elif parameters:
        block, source = parameters, "rope_parameters"
    else:
        block, source = None, "rope_theta"
    if block is not None and not isinstance(block, Mapping):
        raise TypeError(f"{source} must be a dict, got {block!r}")
    nested = block is not None and bool(_nested_keys(fields, block))
    if not nested and fields.obj is None:
        per_layer = _per_layer_default(fields, scaling_block if block is not None else None)
        if per_layer is not None:
            return per_layer, True, source if block is not None else "rope_parameters"
    block = dict(block or {})
    return block, nested, source


def _per_layer_default(fields: _Fields, scaling_block) -> dict | None:
    """A flat file for a model whose config class keeps RoPE per layer type (Gemma 3,
    ModernBERT, OLMo 3 …): the blocks the class builds from it. Each layer type starts from
    the class's default block; a ``rope_scaling`` block lands in the layer types the table
    lists (``scaling_labels``) and each layer type's rope_theta comes from the first of its
    ``theta_keys`` the file sets (Gemma 3: rope_theta for full attention,
    rope_local_base_freq for sliding; ``theta_keys_scaled`` with a rope_scaling block), else
    the class default. None: not such a model."""
    rules = fields.rules or {}
    default = fields.defaults.get("rope_parameters") or rules.get("rope_parameters") or {}
    labels = _nested_keys(fields, default)
    if not labels:
        return None
    theta_keys = rules.get("theta_keys_scaled" if scaling_block else "theta_keys", {})
    if scaling_block and not rules.get("scaling_labels"):
        raise UnsupportedRopeError(
            f"{fields.model_type}: its config class keeps RoPE per layer type {sorted(labels)} "
            f"and does not read a flat rope_scaling block; expected rope_parameters with one "
            f"block per layer type")
    blocks = {}
    for label in labels:
        if default[label] is None:
            blocks[label] = None
            continue
        block = {k: v for k, v in default[label].items() if k != "rope_theta"}
        if scaling_block and label in rules.get("scaling_labels", ()):
            block.update(scaling_block)
        theta = next((fields.raw(key) for key in theta_keys.get(label, ())
                      if fields.raw(key) is not None), default[label].get("rope_theta"))
        if theta is not None:
            block.setdefault("rope_theta", theta)
        blocks[label] = block
    return blocks


def _deepseek_v4_blocks(fields: _Fields):
    """DeepseekV4Config.__post_init__ (transformers 5): a flat block (the released files: a
    YaRN ``rope_scaling``, ``rope_theta``, ``compress_rope_theta``) becomes two, keyed by the
    labels ``main`` and ``compress``: main is plain RoPE at ``rope_theta``; compress is the
    file's block at ``compress_rope_theta`` with YaRN's ``attention_factor`` fixed to 1 (the
    reference does not scale cos and sin). Both rotate ``partial_rotary_factor`` of the head,
    by default ``qk_rope_head_dim / head_dim``. A file already keyed main / compress is read
    as it is."""
    given = fields.raw("rope_scaling") or fields.raw("rope_parameters") or {}
    if not isinstance(given, Mapping):
        raise TypeError(f"rope_scaling must be a dict, got {given!r}")
    if isinstance(given.get("main"), Mapping) and isinstance(given.get("compress"), Mapping):
        return {"main": dict(given["main"]), "compress": dict(given["compress"])}, True, \
            "rope_parameters"
    partial = fields.raw("partial_rotary_factor")
    if partial is None:
        legacy = fields.raw("qk_rope_head_dim")
        head_dim = _number(fields.get("head_dim"), "head_dim", integer=True, positive=True)
        partial = (legacy / head_dim if legacy is not None
                   else _class_default(fields, "partial_rotary_factor", "main"))
    main = {"rope_type": "default", "rope_theta": fields.get("rope_theta", DEFAULT_THETA),
            "partial_rotary_factor": partial}
    compress = {**{k: v for k, v in given.items() if k not in ("main", "compress")},
                "rope_theta": fields.get("compress_rope_theta",
                                         _class_default(fields, "rope_theta", "compress")),
                "partial_rotary_factor": partial}
    compress.setdefault("rope_type", compress.pop("type", "default"))
    if compress["rope_type"] == "yarn":
        compress.setdefault("attention_factor", 1.0)
    source = "rope_scaling" if fields.raw("rope_scaling") else "rope_parameters"
    return {"main": main, "compress": compress}, True, source


# Config classes that rebuild the RoPE block in their own code, in the order transformers
# runs it; each function cites the class it follows.
MODEL_REWRITES = {"deepseek_v4": _deepseek_v4_blocks}


def layer_types(config) -> list[str | None]:
    """The layer types with their own RoPE block (e.g. sliding/full attention), or [None]."""
    fields = _text_fields(config)
    if _rotary_dim_in_code(fields):
        return [None]
    block, nested, _ = _blocks(fields)
    if nested:
        return sorted(key for key in _nested_keys(fields, block))
    if fields.has("rope_local_base_freq"):  # transformers 4 Gemma 3: a local base of its own
        return ["full_attention", "sliding_attention"]
    return [None]


def _head_dim(fields: _Fields, layer_type: str | None) -> int:
    override = _per_layer(fields, layer_type, "head_dim")
    if override is not None:
        return _number(override, "head_dim", integer=True, positive=True)
    head_dim = fields.get("head_dim")
    if fields.has("qk_rope_head_dim") and fields.has("qk_nope_head_dim"):
        # MLA (DeepSeek-V2/V3): q·k runs over a no-position part and a RoPE part
        head_dim = (_number(fields.get("qk_nope_head_dim"), "qk_nope_head_dim", integer=True,
                            minimum=0)
                    + _number(fields.get("qk_rope_head_dim"), "qk_rope_head_dim", integer=True,
                              positive=True))
    if head_dim is None:
        hidden_key = next((k for k in _HIDDEN if fields.has(k)), None)
        heads_key = next((k for k in _HEADS if fields.has(k)), None)
        if hidden_key is None or heads_key is None:
            raise ValueError(f"config has neither head_dim nor hidden_size and "
                             f"num_attention_heads (model_type={fields.model_type!r}); "
                             f"expected one of them to find the head dimension")
        hidden = _number(fields.get(hidden_key), hidden_key, integer=True, positive=True)
        heads = _number(fields.get(heads_key), heads_key, integer=True, positive=True)
        head_dim = hidden // heads
        if head_dim == 0:
            raise ValueError(f"{hidden_key} // {heads_key} = {hidden} // {heads} = 0: expected "
                             f"at least one feature per head")
    return _number(head_dim, "head_dim", integer=True, positive=True)


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
                f"{fields.model_type}: layers of type {layer_type!r} have different "
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


# The deepest published models have a few hundred layers; a count past this is a typo or a
# crafted file, refused before a list of that many layers is built.
MAX_LAYERS = 100_000


def layer_count(fields: _Fields) -> int | None:
    """The number of layers the config gives (num_hidden_layers or an alias), checked: a
    positive int no larger than :data:`MAX_LAYERS`; None when it gives none."""
    name = next((name for name in _LAYERS if fields.has(name)), None)
    if name is None or fields.get(name) is None:
        return None
    count = _number(fields.get(name), name, integer=True, positive=True)
    if count > MAX_LAYERS:
        raise ValueError(f"{name} is {count}, more than {MAX_LAYERS} "
                         "(rope_lab.hf.config.MAX_LAYERS); expected the number of layers of a "
                         "model")
    return count


def _generic_note(fields: _Fields) -> str:
    releases = available_rules()
    versions = f"transformers {releases[0]} … {releases[-1]}"
    what = (_("model_type {model_type!r} is not one transformers knows ({versions}; remote "
              "code defines its RoPE)").format(model_type=fields.model_type, versions=versions)
            if fields.model_type is not None else _("the config has no model_type"))
    return _("{what}: read with the generic rule (rope_theta, default 10000; rotary_dim, else "
             "head_dim × partial_rotary_factor / rotary_pct; the rope block as transformers "
             "reads it), not one transformers applies to this model").format(what=what)


def _refuse_in_release(model_type) -> None:
    """One clear error where the installed release builds ``model_type`` its own way
    (:data:`MODEL_SPECIFIC_IN`)."""
    if not isinstance(model_type, str):  # None, or a bad value _text_fields names
        return
    since, until, why = MODEL_SPECIFIC_IN.get(model_type, ("0", "0", ""))
    if _installed_between(since, until):
        raise UnsupportedRopeError(f"{model_type}: not supported with transformers "
                                   f"{installed_transformers()}, {why}")


def _resolve(config, layer_type=None) -> tuple[RopeSpec | None, list[str]]:
    """The RopeSpec for ``layer_type`` (None for a NoPE layer type) and warnings."""
    _refuse_in_release(config.get("model_type") if isinstance(config, Mapping)
                       else getattr(config, "model_type", None))  # the file's own type
    fields = _text_fields(config)
    model_type = fields.model_type
    notes: list[str] = []
    if not fields.known:
        notes.append(_generic_note(fields))
    if model_type in MODEL_SPECIFIC:
        raise UnsupportedRopeError(f"{model_type}: not supported, {MODEL_SPECIFIC[model_type]}")
    _refuse_in_release(model_type)  # the type of the text config read from it
    rules = fields.rules or {}
    in_code = _rotary_dim_in_code(fields)
    if in_code:
        ignored = [key for key in ("rope_scaling", "rope_parameters", "rope_theta")
                   if fields.raw(key)]
        if ignored:
            notes.append(_("{model_type}: transformers' model rotates rotary_dim features at "
                           "base 10000 in its own code and never reads {keys}").format(
                model_type=model_type, keys=", ".join(ignored)))
        block, nested, source = {"rope_type": "default", "rope_theta": DEFAULT_THETA}, False, \
            "rotary_dim"
    else:
        block, nested, source = _blocks(fields)
    label = None
    if nested:
        labels = _nested_keys(fields, block)
        if layer_type is None:
            raise ValueError(f"{model_type}: rope parameters are per layer type "
                             f"{sorted(labels)}; expected layer_type= one of them")
        if layer_type not in labels:
            raise ValueError(f"layer_type must be one of {sorted(labels)}, got {layer_type!r}")
        label = layer_type
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
            # Gemma 3's config class: sliding layers use plain RoPE at rope_local_base_freq
            block = {"rope_type": "default", "rope_theta": fields.get("rope_local_base_freq")}
    where = f"{source}[{layer_type!r}]" if nested else source
    if not block.get("rope_type") and not block.get("type"):
        block = {**_default_block(fields, label), **block}

    rope_type = block.get("rope_type", block.get("type", "default"))
    if not isinstance(rope_type, str):
        raise TypeError(f"{where}['rope_type'] must be a string such as 'yarn', got "
                        f"{rope_type!r}")
    if rope_type == "default" and rules.get("default_rope_type"):
        rope_type = rules["default_rope_type"]  # vision encoders: axial by default
    # Qwen2-VL's config class turns "mrope" into default RoPE; M-RoPE changes positions only
    rope_type = ROPE_TYPE_ALIASES.get(rope_type, rope_type)
    if "type" in block and "rope_type" in block and block["type"] != block["rope_type"]:
        notes.append(_("{where} has type={type!r} and rope_type={rope_type!r}; transformers "
                       "uses rope_type").format(where=where, type=block["type"],
                                                rope_type=block["rope_type"]))
    if rope_type in UNSUPPORTED_TYPES:
        raise UnsupportedRopeError(f"{model_type}: rope_type {rope_type!r} is not supported: "
                                   f"{UNSUPPORTED_TYPES[rope_type]}")
    if rope_type not in ROPE_TYPE_KEYS:
        raise UnsupportedRopeError(f"{model_type}: rope_type {rope_type!r} in {where} is not "
                                   f"one of the supported types {', '.join(ROPE_TYPES)}")
    # A key the model declares its own (ignore_keys_at_rope_validation) that its rotary
    # embedding reads for the frequencies: a rule rope_lab does not reproduce.
    own = sorted(set(block) & set(rules.get("ignore_keys_read", ())))
    if own:
        raise UnsupportedRopeError(
            f"{model_type}: {where} sets {', '.join(map(repr, own))}, which its rotary "
            f"embedding reads with a frequency rule of its own; not supported")
    # Keys transformers would not read: misspellings, another type's options. A model's
    # ignore_keys_at_rope_validation are its own (M-RoPE sections …), never warned about.
    known = ROPE_TYPE_KEYS[rope_type] | {"rope_type", "type", "partial_rotary_factor"}
    ignored = sorted(set(block) - known - POSITION_KEYS - set(rules.get("ignore_keys", ())))
    if ignored:
        hints = []
        for key in ignored:
            owner = [t for t, keys in ROPE_TYPE_KEYS.items() if key in keys]
            hints.append(_("{key!r} (a {owner} option)").format(key=key, owner="/".join(owner))
                         if owner else repr(key))
        notes.append(_("{where} (rope_type {rope_type!r}): transformers ignores {keys}").format(
            where=where, rope_type=rope_type, keys=", ".join(hints)))
    missing = sorted(REQUIRED_KEYS.get(rope_type, set()) - set(block))
    if missing:
        raise ValueError(f"{model_type}: {where} with rope_type {rope_type!r} is missing "
                         f"{missing}; expected {sorted(REQUIRED_KEYS[rope_type])}")

    legacy = set(rules.get("legacy_keys", ())) if fields.known else {"rotary_emb_base",
                                                                      "rotary_pct"}
    base = block.get("rope_theta")
    if base is None:
        base = fields.raw("rope_theta")
    if base is None and "rotary_emb_base" in legacy:
        base = fields.raw("rotary_emb_base")
    if base is None:
        base = _class_default(fields, "rope_theta", label)
        if not fields.known or fields.model_type is None:
            base = DEFAULT_THETA  # the generic rule says so in its note
    base = float(_number(base, f"{where}['rope_theta']" if "rope_theta" in block
                         else "rope_theta", minimum=1))

    head_dim = _head_dim(fields, layer_type)
    partial = block.get("partial_rotary_factor")
    if partial is None:
        partial = fields.raw("partial_rotary_factor")
    if partial is None and "rotary_pct" in legacy:
        partial = fields.raw("rotary_pct")
    if partial is None and "rotary_dim" in legacy and fields.raw("rotary_dim") is not None:
        # MiniMax-M2's config class: partial_rotary_factor = rotary_dim / head_dim
        partial = _number(fields.raw("rotary_dim"), "rotary_dim", integer=True,
                          positive=True) / head_dim
    if partial is None and rules.get("mla_head_dim") == "nope+rope" and \
            fields.has("qk_rope_head_dim"):
        # Mistral 4's config class: partial_rotary_factor = qk_rope_head_dim / head_dim
        partial = fields.get("qk_rope_head_dim") / head_dim
    if partial is None:
        partial = _class_default(fields, "partial_rotary_factor", label)
    partial = 1.0 if partial is None else float(_number(partial, "partial_rotary_factor"))
    if partial > 1:
        raise UnsupportedRopeError(f"{model_type}: partial_rotary_factor {partial} > 1 is a "
                                   f"model-specific rule; expected a fraction in (0, 1]")
    if partial <= 0:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial}")
    applied = partial
    if rope_type == "default" and rules.get("partial_in_default") is False and partial != 1:
        # the model's compute_default_rope_parameters never reads the key (Llama, JetMoE …)
        applied = 1.0
        notes.append(_("{model_type}: partial_rotary_factor={partial:g} is not read by its "
                       "rotary embedding for plain RoPE (transformers rotates all {head_dim} "
                       "features of the head); a scaling rope_type would read it").format(
            model_type=model_type, partial=partial, head_dim=head_dim))

    explicit = None
    if fields.has("qk_rope_head_dim"):
        # Multi-head latent attention: transformers' RoPE functions rotate
        # config.head_dim × partial_rotary_factor, and what head_dim is depends on the class:
        # the file's (or a layer type's) head_dim where it gives one; else DeepSeek-V2/V3 make
        # it qk_rope_head_dim and Mistral 4 qk_nope + qk_rope (the table's mla_head_dim)
        given = _per_layer(fields, layer_type, "head_dim")
        given = given if given is not None else fields.raw("head_dim")
        if given is not None:
            rope_head = _number(given, "head_dim", integer=True, positive=True)
        elif rules.get("mla_head_dim") == "nope+rope":
            rope_head = head_dim
        else:
            rope_head = _number(fields.get("qk_rope_head_dim"), "qk_rope_head_dim",
                                integer=True, positive=True)
        explicit = int(rope_head * applied)
    if in_code or (not fields.known and fields.raw("rotary_dim") is not None):
        explicit = fields.get("rotary_dim", head_dim)  # GPT-J's default: the whole head
        if isinstance(explicit, int) and not isinstance(explicit, bool) and explicit > head_dim:
            raise ValueError(f"rotary_dim is {explicit}, more than head_dim {head_dim} (hidden "
                             "size / heads); expected at most the head dimension: a model "
                             "cannot rotate more features than a head has")
    elif fields.raw("rotary_dim") is not None and "rotary_dim" not in legacy and \
            fields.raw("rotary_dim") != int(head_dim * applied):
        notes.append(_("rotary_dim={rotary_dim} is not read by transformers for model_type "
                       "{model_type!r}; it rotates head_dim × partial_rotary_factor = {used} "
                       "features").format(rotary_dim=fields.raw("rotary_dim"),
                                          model_type=model_type, used=int(head_dim * applied)))
    if model_type == "deepseek_v4":
        explicit = None  # partial_rotary_factor carries qk_rope_head_dim / head_dim
    if rope_type in ("proportional", "axial"):
        rotary_dim = head_dim
    elif explicit is not None:
        rotary_dim = _number(explicit, "rotary_dim", minimum=1, integer=True)
    else:
        rotary_dim = int(head_dim * applied)
    if rotary_dim % 2:
        raise UnsupportedRopeError(
            f"{model_type}: the rotary dimension is odd, {rotary_dim} (head_dim {head_dim} × "
            f"partial_rotary_factor {applied}); RoPE rotates pairs of features, expected an "
            f"even number")

    max_position = first(fields, _POSITIONS)
    if max_position is not None:
        # a number of positions; a few configs write it as a float (1200.0)
        max_position = _number(max_position, "max_position_embeddings", positive=True)
    original = None
    if rope_type in NEEDS_ORIGINAL:
        # transformers gives a top-level original_max_position_embeddings priority (Phi-3)
        original = (None if nested else fields.raw("original_max_position_embeddings"))
        original = original or block.get("original_max_position_embeddings")
        if original is None:
            original = max_position
            notes.append(_("{where} (rope_type {rope_type!r}) has no "
                           "original_max_position_embeddings: transformers falls back to "
                           "max_position_embeddings={max_position}, the scaled length, so the "
                           "frequencies are scaled as if the model had been trained that "
                           "long").format(where=where, rope_type=rope_type,
                                          max_position=max_position))
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
        notes.append(_("{where}: transformers ignores 'truncate' inside a per-layer-type block "
                       "and truncates; so does this result").format(where=where))
        params.pop("truncate")
    factor = params.get("factor")
    if factor is not None:
        _number(factor, f"{where}['factor']", minimum=1)
    for key in ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                "low_freq_factor", "high_freq_factor"):
        if params.get(key) is not None:
            _number(params[key], f"{where}[{key!r}]")
    if (rope_type == "yarn" and max_position and "original_max_position_embeddings" in block
            and _yarn_factor_from_lengths()):
        # transformers 4.51.0 to 4.55.x replaced the factor by the ratio (see the constant), a
        # bug 4.56 reverted: the result keeps the factor, the model's meaning, and says so
        implicit = max_position / _number(block["original_max_position_embeddings"],
                                          "original_max_position_embeddings", minimum=1)
        if implicit != factor:
            note = _("{where}: the installed transformers {version} computes YaRN with "
                           "factor = max_position_embeddings / "
                           "original_max_position_embeddings = {max_position} / {original} = "
                           "{implicit:g}, not the config's factor={factor} (releases 4.51 to "
                           "4.55 do; 4.56 went back to the factor). This result uses the "
                           "factor, as the model's authors and later releases do: that "
                           "transformers runs the model with other frequencies").format(
                               where=where, version=installed_transformers(),
                               max_position=max_position, original=original,
                               implicit=implicit, factor=factor)
            notes.append(_ReleaseNote(note))
    elif rope_type == "yarn" and factor is not None and max_position and original:
        implicit = max_position / original
        if implicit not in (factor, 1):
            notes.append(_("{where}: factor={factor:g} but max_position_embeddings / "
                           "original_max_position_embeddings = {max_position} / {original} = "
                           "{implicit:g}; transformers warns and uses the explicit factor, so "
                           "does this result").format(where=where, factor=factor,
                                                      max_position=max_position,
                                                      original=original, implicit=implicit))
    spec = RopeSpec(model_type=model_type, layer_type=layer_type, rope_type=rope_type,
                    base=base, head_dim=head_dim, rotary_dim=rotary_dim,
                    partial_rotary_factor=applied, params=params,
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
            ``text_config`` is used when the top level has no RoPE. What the file leaves out
            its model type's config class fills in (:func:`transformers_rules`).
        layer_type: for per-layer-type RoPE (Gemma 3: ``"sliding_attention"`` /
            ``"full_attention"``); see :func:`layer_types`.
        seq_len: the current sequence length, for the types that depend on it: ``dynamic``
            (the base grows past max_position_embeddings) and ``longrope`` (the long factors
            once seq_len exceeds original_max_position_embeddings; None: the short ones). An
            int ≥ 0 or a one-element integer tensor, as transformers' rotary embeddings pass.
        device, dtype: of the result (computed in float64, rounded once).

    Returns:
        ``(inv_freq, attention_factor)``: a ``(rotary_dim // 2,)`` tensor (``proportional``:
        ``(head_dim // 2,)`` with zeros for the pairs that do not rotate; ``axial``, a vision
        encoder's: ``(head_dim // 4,)``, the speeds of each image axis, which rotates half the
        head) and the factor that multiplies cos and sin.

    Raises:
        UnsupportedRopeError: a model's own frequency rule, unknown rope types, odd rotary
            dims (names the model type). ValueError / TypeError: missing or malformed
            parameters (names them), a config with no RoPE.

    Warns (UserWarning, one line each, as :func:`config_warnings` lists them): keys
    transformers would ignore (typos, another type's options, a partial_rotary_factor the
    model's plain RoPE never reads), values it guesses (no original_max_position_embeddings,
    a YaRN factor its lengths contradict), and a model type transformers does not know, read
    with the generic rule. :class:`ReleaseDiffersWarning` (a UserWarning): the installed
    transformers release runs the model with other frequencies (YaRN in 4.51 to 4.55).
    """
    spec, notes = _resolve(config, layer_type)
    for note in notes:
        warnings.warn(note, getattr(note, "category", UserWarning), stacklevel=2)
    if spec is None:
        raise ValueError(f"{layer_type!r} layers of {spec_model(config)} have no RoPE "
                         f"(their rope parameters are null)")
    return inv_freq_from_spec(spec, seq_len=seq_len, device=device, dtype=dtype)


def spec_model(config) -> str | None:
    return _text_fields(config).model_type


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
            short_factor=p["short_factor"], long_factor=p["long_factor"],
            attention_factor=p.get("attention_factor"), **common)
    # yarn; transformers replaces a missing or zero beta by its default (`or 32`, `or 1`)
    options = dict(beta_fast=p.get("beta_fast") or 32.0, beta_slow=p.get("beta_slow") or 1.0,
                   attention_factor=p.get("attention_factor"), mscale=p.get("mscale"),
                   mscale_all_dim=p.get("mscale_all_dim"))
    truncate = p.get("truncate", True)
    return scaling.yarn_inv_freq(dim, factor=factor, original_max_position=original,
                                 truncate=truncate, **options, **common)
