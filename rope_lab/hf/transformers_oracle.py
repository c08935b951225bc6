"""What Hugging Face transformers itself computes for a config: the oracle for rope_lab.hf.

Imports transformers when a function is called (never at import), builds the model's own
config class and rotary embedding from a ``config.json`` dict (no weights, no network), and
returns transformers' numbers for notebook 10 and the tests to compare with
:func:`rope_lab.hf.inv_freq_from_config`. Works with transformers 4.45 to 5.x; a function
that cannot run on the installed release raises :class:`OracleUnavailable` with the reason.

It also writes the rules rope_lab.hf reads configs with (:func:`model_type_rules`,
``python -m rope_lab.hf.transformers_oracle`` → ``transformers_rules/<version>.json.gz``): per
model type, what its config class does with a config.json, learned by reading the class and
by building it from probe configs, never typed in by hand.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import logging
import math
import warnings

import torch

# rotary classes of encoders a text model does not use (tried last for axial RoPE only)
NOT_TEXT = ("vision", "visual", "audio", "vit", "patch", "image", "2d", "3d", "axial", "speech",
            "video", "encoder", "talker", "code2wav", "mimi", "depth")
SUB_CONFIGS = ("text_config", "llm_config", "language_config", "thinker_config")


class OracleUnavailable(RuntimeError):
    """transformers is missing, or the installed release cannot build what was asked."""


def version() -> str | None:
    """The installed transformers version, or None (without importing it twice)."""
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


def _quiet():
    logging.getLogger("transformers").setLevel(logging.ERROR)


def _transformers():
    try:
        import transformers
    except ImportError:
        raise OracleUnavailable("transformers is not installed (pip install "
                                "'rope_lab[models]')") from None
    _quiet()
    return transformers


def config_object(config: dict):
    """transformers' config object for a config.json dict (its model_type's class)."""
    transformers = _transformers()
    # a deep copy: some config classes rewrite their rope block in place (Qwen2-VL)
    fields = copy.deepcopy({k: v for k, v in config.items() if not k.startswith("_")})
    model_type = fields.pop("model_type")
    if model_type not in transformers.CONFIG_MAPPING:
        raise OracleUnavailable(f"transformers {transformers.__version__} has no model type "
                                f"{model_type!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.CONFIG_MAPPING[model_type](**fields)


def rope_config(config):
    """The config (or sub-config) that carries RoPE, or None."""
    candidates = [config] + [getattr(config, name) for name in SUB_CONFIGS
                             if hasattr(getattr(config, name, None), "to_dict")]
    for candidate in candidates:
        if getattr(candidate, "rope_parameters", None) or \
                getattr(candidate, "rotary_dim", None) is not None or \
                getattr(candidate, "rope_scaling", None) or \
                getattr(candidate, "rope_theta", None) is not None:
            return candidate
    return None


def rotary_classes(config, axial: bool = False) -> list:
    """The ``*RotaryEmbedding`` classes of ``config``'s modeling module, text ones first."""
    module_name = type(config).__module__.replace(".configuration_", ".modeling_")
    try:
        module = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 - optional dependencies of that model
        return []
    classes = [obj for name, obj in vars(module).items()
               if inspect.isclass(obj) and name.endswith("RotaryEmbedding")
               and (axial or not any(word in name.lower() for word in NOT_TEXT))]
    return sorted(classes, key=lambda c: (axial and "vision" not in c.__name__.lower(),
                                          c.__module__ != module.__name__, len(c.__name__)))


def build_rotary(config):
    """The model's own rotary embedding for a RoPE-carrying config object, or None."""
    params = getattr(config, "rope_parameters", None) or {}
    axial = isinstance(params, dict) and params.get("rope_type") == "axial"
    for cls in rotary_classes(config, axial):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return cls(config=config)
        except Exception:  # noqa: BLE001 - a rotary class for another sub-config
            continue
    return None


def tables(rotary) -> dict:
    """{layer_type or None: (inv_freq, attention_scaling)} held by a rotary embedding."""
    found = {}
    for name, buffer in rotary.named_buffers(recurse=False):
        if name.endswith("original_inv_freq") or not name.endswith("inv_freq"):
            continue
        layer_type = None if name == "inv_freq" else name[: -len("_inv_freq")]
        scale = getattr(rotary, f"{layer_type}_attention_scaling" if layer_type else
                        "attention_scaling", getattr(rotary, "attention_scaling", 1.0))
        found[layer_type] = (buffer, float(scale))
    return found


def rotary_tables(config: dict) -> dict:
    """transformers' ``{layer_type or None: (inv_freq, attention_scaling)}`` for a dict.

    transformers 4's Gemma 3 keeps its sliding layers' base in ``rope_local_base_freq`` and
    builds a second rotary embedding from a copy of the config; that one is returned as
    ``"sliding_attention"`` and the main one as ``"full_attention"``.
    """
    text = rope_config(config_object(config))
    if text is None:
        raise OracleUnavailable(f"{config.get('model_type')}: no RoPE config in transformers")
    rotary = build_rotary(text)
    found = tables(rotary) if rotary is not None else {}
    if not found:
        module = importlib.import_module(type(text).__module__.replace(".configuration_",
                                                                       ".modeling_"))
        make = getattr(module, "create_sinusoidal_positions", None)
        if make is not None and getattr(text, "rotary_dim", None):  # GPT-J, CodeGen
            table = make(2, text.rotary_dim)
            return {None: (torch.asin(table[1, : text.rotary_dim // 2].double()).float(), 1.0)}
        raise OracleUnavailable(f"transformers {version()} has no rotary embedding for "
                                f"{config.get('model_type')} that builds from its config")
    local = getattr(text, "rope_local_base_freq", None)
    if set(found) == {None} and local is not None:  # transformers 4.x Gemma 3
        copied = copy.deepcopy(text)
        copied.rope_theta, copied.rope_scaling = local, {"rope_type": "default"}
        found = {"full_attention": found[None],
                 "sliding_attention": tables(type(rotary)(config=copied))[None]}
    return found


def gptj_inv_freq(config: dict) -> torch.Tensor:
    """GPT-J's θ_i, read back from its ``create_sinusoidal_positions`` table (GPT-J has no
    rotary embedding class): the sines at position 1 are sin θ_i, and θ_i ≤ 1."""
    _transformers()
    from transformers.models.gptj import modeling_gptj

    table = modeling_gptj.create_sinusoidal_positions(2, config["rotary_dim"])
    return torch.asin(table[1, : config["rotary_dim"] // 2].double()).float()


def inv_freq_after_forward(config: dict, seq_len: int) -> torch.Tensor:
    """The rotary embedding's inv_freq after a forward pass over positions 0 … seq_len − 1:
    what a model uses for a sequence of that length (LongRoPE switches, dynamic grows)."""
    text = rope_config(config_object(config))
    rotary = build_rotary(text)
    if rotary is None:
        raise OracleUnavailable(f"transformers {version()} builds no rotary embedding for "
                                f"{config.get('model_type')}")
    x = torch.zeros(1, 1, seq_len, 8)
    rotary(x, torch.arange(seq_len)[None])
    return tables(rotary)[None][0].clone()


def mla_softmax_scale(config: dict) -> float:
    """DeepSeek-V3's attention softmax scale ÷ 1/√(q·k dim): the mscale² its attention
    applies under YaRN, read from a small DeepseekV3Attention with the same RoPE settings."""
    transformers = _transformers()
    try:
        from transformers.models.deepseek_v3 import modeling_deepseek_v3
    except ImportError:
        raise OracleUnavailable(f"transformers {transformers.__version__} has no "
                                f"DeepSeek-V3") from None
    small = {**{k: v for k, v in config.items() if not k.startswith("_")},
             "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
             "q_lora_rank": 16, "kv_lora_rank": 16, "num_hidden_layers": 1,
             "n_routed_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 8,
             "intermediate_size": 8}
    attention = modeling_deepseek_v3.DeepseekV3Attention(config_object(small), layer_idx=0)
    return attention.scaling * math.sqrt(config["qk_nope_head_dim"]
                                         + config["qk_rope_head_dim"])


def nope_layers(config: dict) -> list[int]:
    """The layers transformers builds without RoPE (Llama 4's ``no_rope_layers`` zeros)."""
    text = rope_config(config_object(config))
    flags = getattr(text, "no_rope_layers", None)
    if flags is None:
        raise OracleUnavailable(f"transformers {version()}'s {type(text).__name__} has no "
                                f"no_rope_layers")
    return [index for index, flag in enumerate(flags) if not flag]


# --- the rules rope_lab.hf reads without transformers, learned from its classes ------------

RULES_DIR = "transformers_rules"  # one <version>.json.gz per transformers release
# The keys rope_lab.hf reads; their class defaults and aliases (attribute_map) are recorded.
READ_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "num_hidden_layers",
             "rope_local_base_freq",
             "max_position_embeddings", "original_max_position_embeddings", "rope_theta",
             "partial_rotary_factor", "rotary_dim", "qk_rope_head_dim", "qk_nope_head_dim",
             "layer_types", "global_head_dim", "compress_rope_theta", "no_rope_layers",
             "no_rope_layer_interval")


def _literal_defaults(cls) -> dict:
    """The defaults a config class declares for READ_KEYS (dataclass fields in transformers 5;
    ``__init__`` parameters in 4.x), before ``__post_init__`` derives anything."""
    import dataclasses

    if dataclasses.is_dataclass(cls):
        found = {f.name: f.default for f in dataclasses.fields(cls)
                 if f.default is not dataclasses.MISSING}
    else:
        found = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
                 if p.default is not inspect.Parameter.empty}
    return {key: found[key] for key in READ_KEYS
            if found.get(key) is not None and isinstance(found[key], (int, float, str))}


def _json_safe(value):
    import json

    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


def _block(config):
    """A config object's RoPE block as transformers 5 standardizes it; for 4.x objects
    (rope_theta + rope_scaling + partial_rotary_factor attributes) the same block built from
    those attributes."""
    block = getattr(config, "rope_parameters", None)
    if block is not None or not hasattr(config, "rope_theta"):
        return _json_safe(block)
    scaling = dict(getattr(config, "rope_scaling", None) or {})
    block = {**scaling, "rope_type": scaling.get("rope_type", scaling.get("type", "default")),
             "rope_theta": config.rope_theta}
    block.pop("type", None)
    if getattr(config, "partial_rotary_factor", None) is not None:
        block["partial_rotary_factor"] = config.partial_rotary_factor
    return _json_safe(block)


def _default_rotary_reads_partial(config) -> bool | None:
    """Whether the model's rotary embedding applies ``partial_rotary_factor`` for the default
    rope type: its ``compute_default_rope_parameters`` mentions the key (transformers 5). None
    when the model has no rotary class with that method."""
    for cls in rotary_classes(config):
        method = getattr(cls, "compute_default_rope_parameters", None)
        if method is None:
            continue
        try:
            source = inspect.getsource(method)
        except (OSError, TypeError):
            return None
        return "partial_rotary_factor" in source
    return None


def model_type_rules(model_types=None) -> dict:
    """Per model type, what rope_lab.hf needs to read a config.json the way transformers does.

    For every model type in transformers' registry: the aliases of the keys rope_lab reads
    (``attribute_map``), the defaults its config class fills in for an absent key (class
    fields, and the RoPE block a default config ends up with after ``__post_init__``), the
    class attributes of RoPE validation (``default_theta``, ``default_rope_type``,
    ``ignore_keys_at_rope_validation``, ``_rope_type_labels``), the model type of each
    sub-config, and whether the model's default RoPE applies ``partial_rotary_factor``.
    """
    transformers = _transformers()
    import huggingface_hub.constants as hub

    offline, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, True
    rules, known = {}, []
    try:
        for model_type in sorted(transformers.CONFIG_MAPPING):
            try:
                cls = transformers.CONFIG_MAPPING[model_type]
            except Exception:  # noqa: BLE001 - a lazily imported config that fails
                continue
            if model_types is not None and model_type not in model_types:
                known.append(model_type)
                continue
            entry: dict = {}
            aliases = {key: value for key, value in getattr(cls, "attribute_map", {}).items()
                       if key in READ_KEYS and key != value}
            if aliases:
                entry["attribute_map"] = aliases
            defaults = _literal_defaults(cls)
            if defaults:
                entry["defaults"] = defaults
            theta = getattr(cls, "default_theta", 10_000.0)
            if theta != 10_000.0:
                entry["default_theta"] = theta
            if getattr(cls, "default_rope_type", "default") != "default":
                entry["default_rope_type"] = cls.default_rope_type
            ignored = sorted(getattr(cls, "ignore_keys_at_rope_validation", None) or ())
            if ignored:
                entry["ignore_keys"] = ignored
            labels = getattr(cls, "_rope_type_labels", None)
            if labels:
                entry["labels"] = list(labels)
            entry["rope_parameters_field"] = "rope_parameters" in _literal_defaults_all(cls)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    default = cls()
                except Exception:  # noqa: BLE001 - a config that needs arguments
                    default = None
            if default is not None:
                subs = {key: getattr(default, key).model_type for key in SUB_CONFIGS
                        if hasattr(getattr(default, key, None), "model_type")}
                if subs:
                    entry["sub_configs"] = subs
                for key, sub_type in subs.items():
                    absent, given = _sub_defaults(cls, default, key, sub_type)
                    if absent:
                        entry.setdefault("sub_defaults", {})[key] = absent
                    if given:
                        entry.setdefault("sub_defaults_given", {})[key] = given
                block = _block(default)
                # a block that is its text_config's, read through (4.x Qwen2-VL), is not its own
                delegated = any(block == _block(getattr(default, key)) for key in SUB_CONFIGS
                                if hasattr(getattr(default, key, None), "to_dict"))
                if block and not delegated:
                    entry["rope_parameters"] = block
                    entry.update(_nested_sources(cls, block))
                reads = _default_rotary_reads_partial(default)
                if reads is not None:
                    entry["partial_in_default"] = reads
                legacy = _legacy_keys_read(cls, default)
                if legacy:
                    entry["legacy_keys"] = legacy
                mla = _mla_head_dim(cls, default)
                if mla:
                    entry["mla_head_dim"] = mla
                read = _ignored_keys_read(cls, default, ignored)
                if read:
                    entry["ignore_keys_read"] = read
            known.append(model_type)
            relevant = ("rope_parameters", "partial_in_default", "sub_configs", "legacy_keys",
                        "labels")
            if any(key in entry for key in relevant) or "rotary_dim" in entry.get("defaults", {}):
                rules[model_type] = entry
    finally:
        hub.HF_HUB_OFFLINE = offline
    return {"transformers": transformers.__version__, "known": known, "model_types": rules}


# Keys of older config.json files that some config classes turn into rope_parameters entries
# (GPT-NeoX: rotary_pct, rotary_emb_base; Gemma 3: rope_local_base_freq; MiniMax-M2:
# rotary_dim), with a value to probe each with.
LEGACY_KEYS = {"rotary_pct": 0.375, "rotary_emb_base": 12345.0, "rope_local_base_freq": 23456.0,
               "rotary_dim": 8}


def _legacy_keys_read(cls, default) -> list[str]:
    """The LEGACY_KEYS a config class reads: giving one changes its rope_parameters."""
    before = _block(default)
    if not before:
        return []
    read = []
    for key, value in LEGACY_KEYS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                after = _block(cls(**{key: value}))
            except Exception:  # noqa: BLE001 - the class refuses the key or the value
                continue
        if after != before:
            read.append(key)
    return read


# Top-level keys a per-layer-type config class may turn into one layer type's rope_theta.
THETA_KEYS = ("rope_theta", "rope_local_base_freq", "global_rope_theta", "local_rope_theta",
              "swa_rope_theta")


def _nested_sources(cls, block) -> dict:
    """For a class whose default RoPE is per layer type (Gemma 3, ModernBERT, OLMo 3 …):
    which top-level key of an older, flat file sets each layer type's rope_theta
    (``theta_keys``; ``theta_keys_scaled`` when the file also has a rope_scaling block, which
    Dots 3 then copies to every layer type), and which layer types a flat ``rope_scaling``
    block lands in (``scaling_labels``), all found by building the class from such files."""
    labels = sorted(key for key, value in block.items() if isinstance(value, dict))
    if not labels:
        return {}
    scaling = {"rope_type": "linear", "factor": 3.0}
    found = {}
    for name, extra in (("theta_keys", {}), ("theta_keys_scaled", {"rope_scaling": scaling})):
        theta_keys = {label: [] for label in labels}
        for offset, key in enumerate(THETA_KEYS):
            value = 12345.0 + offset
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    probe = _block(cls(**{key: value}, **copy.deepcopy(extra))) or {}
                except Exception:  # noqa: BLE001 - refused
                    continue
            for label in labels:
                if (probe.get(label) or {}).get("rope_theta") == value:
                    theta_keys[label].append(key)
        found[name] = {k: v for k, v in theta_keys.items() if v}
    scaling_labels = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            probe = _block(cls(rope_scaling=dict(scaling))) or {}
            scaling_labels = [label for label in labels
                              if (probe.get(label) or {}).get("factor") == 3.0]
        except Exception:  # noqa: BLE001 - refused
            pass
    return {**found, "scaling_labels": scaling_labels}


def _rope_values(config) -> dict:
    """The READ_KEYS values and the RoPE block of a config object (head_dim only where it is
    not hidden_size // num_attention_heads)."""
    values = {}
    for key in READ_KEYS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                value = getattr(config, key, None)
            except Exception:  # noqa: BLE001 - per-layer attributes
                value = None
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            values[key] = value
    try:
        if values.get("head_dim") == values["hidden_size"] // values["num_attention_heads"]:
            values.pop("head_dim")
    except (KeyError, ZeroDivisionError, TypeError):
        pass
    block = _block(config)
    if block:
        values["rope_parameters"] = block
    return values


def _sub_defaults(cls, default, key, model_type) -> tuple[dict, dict]:
    """What a multimodal class gives its ``key`` sub-config beyond that sub-config class's own
    defaults: when the file has no such sub-config (its default one), and when the file has one
    that names only its model_type (Voxtral fills in its own defaults; most classes do not)."""
    try:
        own = _rope_values(CONFIG_MAPPING_class(model_type)())
    except Exception:  # noqa: BLE001 - not in the registry (4.x Emu3's text config): all of it
        own = {}
    absent = _rope_values(getattr(default, key))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            given = _rope_values(getattr(cls(**{key: {"model_type": model_type}}), key))
        except Exception:  # noqa: BLE001 - refused
            given = own
    return ({k: v for k, v in absent.items() if own.get(k) != v},
            {k: v for k, v in given.items() if own.get(k) != v})


def CONFIG_MAPPING_class(model_type):  # noqa: N802 - transformers' registry, by model type
    return _transformers().CONFIG_MAPPING[model_type]


# Keys of ignore_keys_at_rope_validation about positions, not frequencies (never probed).
POSITION_ONLY = ("mrope_section", "mrope_interleaved", "interleaved", "xdrope_section")


def _ignored_keys_read(cls, default, ignored) -> list[str]:
    """The keys a model lists in ``ignore_keys_at_rope_validation`` that its rotary embedding
    does read for the frequencies (HunYuan-VL: ``alpha`` turns dynamic RoPE into its own NTK
    rule), found by building the rotary embedding with and without each (set to 2) on plain
    and dynamic RoPE."""
    block = _block(default)
    if not block or any(isinstance(v, dict) for v in block.values()):
        return []
    read = []
    shape = {}
    if getattr(default, "head_dim", 0) is None:  # HunYuan-VL's default: its rotary needs one
        try:
            shape = {"head_dim": default.hidden_size // default.num_attention_heads}
        except (AttributeError, TypeError, ZeroDivisionError):
            pass
    for key in ignored:
        if key in POSITION_ONLY or key == "max_position_embeddings":
            continue
        for rope in ({"rope_type": "default"}, {"rope_type": "dynamic", "factor": 2.0}):
            base = {**{k: v for k, v in block.items() if k in ("rope_theta",
                                                                  "partial_rotary_factor")},
                    **rope}
            tables_ = []
            for extra in ({}, {key: 2.0}):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        config = cls(rope_parameters={**base, **extra}, **shape)
                        rotary = build_rotary(rope_config(config) or config)
                        tables_.append({k: (v[0].tolist(), v[1])
                                        for k, v in tables(rotary).items()} if rotary else None)
                    except Exception:  # noqa: BLE001 - refused
                        tables_.append(None)
            if tables_[0] is not None and tables_[1] is not None and tables_[0] != tables_[1]:
                read.append(key)
                break
    return read


def _mla_head_dim(cls, default) -> str | None:
    """For a multi-head latent attention config (qk_rope_head_dim + qk_nope_head_dim): what
    its class makes ``head_dim``, the dimension the RoPE functions read: ``"rope"`` (DeepSeek-V2/
    V3: qk_rope_head_dim) or ``"nope+rope"`` (Mistral 4: the whole q·k head, with
    partial_rotary_factor = qk_rope_head_dim / head_dim). None: not MLA, or not uniform."""
    try:
        if getattr(default, "qk_rope_head_dim", None) is None:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = cls(qk_rope_head_dim=12, qk_nope_head_dim=36)
            head_dim = probe.head_dim
    except Exception:  # noqa: BLE001 - per-layer (heterogeneous) or refused
        return None
    return {12: "rope", 48: "nope+rope"}.get(head_dim)  # else its own head_dim


def _literal_defaults_all(cls) -> set:
    import dataclasses

    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set(inspect.signature(cls.__init__).parameters)


def write_rules(path=None) -> str:
    """Write :func:`model_type_rules` of the installed transformers as JSON:
    ``transformers_rules/<version>.json.gz`` next to this module (or ``path``), gzipped."""
    import gzip
    import json
    from pathlib import Path

    from rope_lab import _atomic
    from rope_lab.hf.config import RULES_SUFFIX

    rules = model_type_rules()
    path = Path(path) if path else (Path(__file__).with_name(RULES_DIR)
                                    / f"{rules['transformers']}{RULES_SUFFIX}")
    text = json.dumps(rules, sort_keys=True, separators=(",", ":")).replace(',"', ',\n"') + "\n"
    # mtime=0: the same rules give the same bytes (a re-run leaves git status clean)
    _atomic.write_bytes(path, gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return str(path)


if __name__ == "__main__":
    print("wrote", write_rules())
