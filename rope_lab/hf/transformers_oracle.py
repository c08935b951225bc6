"""What Hugging Face transformers itself computes for a config: the oracle for rope_lab.hf.

Imports transformers when a function is called (never at import), builds the model's own
config class and rotary embedding from a ``config.json`` dict (no weights, no network), and
returns transformers' numbers for notebook 10 and the tests to compare with
:func:`rope_lab.hf.inv_freq_from_config`. Works with transformers 4.45 to 5.x; a function
that cannot run on the installed release raises :class:`OracleUnavailable` with the reason.
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
    if rotary is None:
        raise OracleUnavailable(f"transformers {version()} has no rotary embedding for "
                                f"{config.get('model_type')} that builds from its config")
    found = tables(rotary)
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
