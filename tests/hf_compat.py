"""Hugging Face transformers 4.45 to 5.x behind one interface, for the oracle tests.

pyproject promises ``transformers>=4.45`` and Google Colab ships 4.x, but transformers 5
changed what the oracle tests touch:

- RoPE configuration: 4.x reads ``rope_theta`` plus ``rope_scaling={"rope_type": ...}``;
  5.x reads one ``rope_parameters={"rope_type": ..., "rope_theta": ...}``.
- Default frequencies: ``ROPE_INIT_FUNCTIONS["default"]`` in 4.x, a static
  ``compute_default_rope_parameters`` on each rotary class in 5.x.
- BLOOM's ALiBi slopes: a function of their own (``_get_alibi_slopes``) only in recent 5.x;
  ``build_alibi_tensor`` in every release.
- YaRN: 4.51 to 4.55 take the factor from the lengths (:data:`YARN_FACTOR_FROM_LENGTHS`).
- Qwen2-VL M-RoPE: older releases pick each section's axis in
  ``apply_multimodal_rotary_pos_emb`` (gone by 5.17), newer ones in the rotary embedding;
  before 5.3 ``get_rope_index`` finds an image by the ``<|vision_start|>`` token before it,
  from 5.3 on it reads ``mm_token_type_ids``; 5.3 to 5.5 number the frames of a video
  wrong (:data:`VIDEO_FRAMES_FLAT`).

Every function here returns what the installed library computed; none recomputes the
maths itself. Where the installed release lacks a feature, the test is skipped with the
release that has it.
"""

import inspect
import math
import types

import pytest
import torch
import transformers
from packaging.version import Version
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.bloom import modeling_bloom
from transformers.models.llama import modeling_llama

VERSION = Version(transformers.__version__)
ROPE_PARAMETERS = VERSION.major >= 5  # the 5.x configuration schema

# Scaling options HF added after 4.45, and the first release that reads them. An older
# release ignores an unknown option with a warning, so the comparison would be unfair.
OPTION_SINCE = {
    "mscale": "4.51.0",  # YaRN's DeepSeek-V3 attention factor
    "mscale_all_dim": "4.51.0",
    "truncate": "4.55.0",  # YaRN without rounding the ramp's ends (gpt-oss)
}


# transformers 4.51.0 to 4.55.x computed YaRN with factor = max_position_embeddings /
# original_max_position_embeddings whenever the block named original_max_position_embeddings
# (its yarn function, "NOTE: DeekSeek-V3 ..."); 4.56 went back to the block's factor. Read
# off those releases' modeling_rope_utils, not from rope_lab.
YARN_FACTOR_FROM_LENGTHS = Version("4.51.0") <= VERSION < Version("4.56.0")


# transformers 5.3.0 to 5.5.x: Qwen2VLModel.get_vision_position_ids fills the temporal
# coordinate of every frame with the start position (torch.full) instead of start + frame;
# 5.6 went back to arange(frames). Images (one frame) are unaffected.
VIDEO_FRAMES_FLAT = Version("5.3.0") <= VERSION < Version("5.6.0")


def yarn_lengths_agree(rope, max_position):
    """``max_position`` for a config with scaling ``rope``; on 4.51 to 4.55 (which took YaRN's
    factor from the lengths) factor × original_max_position_embeddings, so that the release
    computes YaRN with the factor, as every other release does. rope_lab keeps the factor
    whatever the lengths (test_hf_config checks its warning on those releases)."""
    original = rope.get("original_max_position_embeddings")
    if YARN_FACTOR_FROM_LENGTHS and rope.get("rope_type") == "yarn" and original:
        scaled = rope.get("factor", 1.0) * original
        return int(scaled) if float(scaled).is_integer() else scaled
    return max_position


def require(rope):
    """Skip unless the installed transformers reads every option in ``rope``."""
    for option in sorted(rope):
        since = OPTION_SINCE.get(option)
        if since is not None and VERSION < Version(since):
            pytest.skip(f"transformers {VERSION} has no {rope.get('rope_type')} option "
                        f"{option!r}; it arrived in transformers {since}")


def llama_config(head_dim, base, rope=None, *, max_position=2048, n_heads=2):
    """A LlamaConfig with RoPE base ``base`` and scaling ``rope`` in the installed schema.

    ``rope`` is ``{"rope_type": method, **options}`` as HF names them, or None for plain RoPE.
    """
    rope = dict(rope or {"rope_type": "default"})
    require(rope)
    max_position = yarn_lengths_agree(rope, max_position)
    shape = dict(hidden_size=head_dim * n_heads, num_attention_heads=n_heads,
                 num_key_value_heads=n_heads, head_dim=head_dim,
                 max_position_embeddings=max_position)
    if ROPE_PARAMETERS:
        return LlamaConfig(**shape, rope_parameters={"rope_theta": base, **rope})
    scaling = None if rope["rope_type"] == "default" else rope
    return LlamaConfig(**shape, rope_theta=base, rope_scaling=scaling)


def hf_inv_freq(config, method, seq_len=None):
    """HF's ``(inv_freq, attention_factor)`` for ``config`` scaled by ``method``."""
    if method == "default" and "default" not in ROPE_INIT_FUNCTIONS:  # 5.x
        compute = modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters
    else:
        compute = ROPE_INIT_FUNCTIONS[method]
    return compute(config, device=torch.device("cpu"), seq_len=seq_len)


def llama_rotary(head_dim, base, *, max_position=4096, n_heads=2):
    """HF's LlamaRotaryEmbedding for plain RoPE with base ``base``."""
    config = llama_config(head_dim, base, max_position=max_position, n_heads=n_heads)
    # By keyword: 4.45's first positional parameter is the old ``dim``.
    return modeling_llama.LlamaRotaryEmbedding(config=config)


def bloom_alibi_slopes(n_heads):
    """BLOOM's ALiBi slopes, shape (n_heads,), read off its ``build_alibi_tensor``.

    Every release has ``build_alibi_tensor``; the bare slopes function (``_get_alibi_slopes``)
    only late 5.x ones. The bias at key position 1 of an unpadded sequence is slope × 1.
    """
    bias = modeling_bloom.build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)
    return bias[:, 0, 1]  # bias: (batch · n_heads, 1, seq)


# --- Qwen2-VL M-RoPE ---------------------------------------------------------------------


def _qwen2_vl():
    from transformers.models.qwen2_vl import configuration_qwen2_vl, modeling_qwen2_vl

    return configuration_qwen2_vl, modeling_qwen2_vl


def qwen2_vl_rotate(x, position_ids, base, mrope_section):
    """Qwen2-VL's M-RoPE of ``x`` (batch, heads, seq, head_dim) at ``position_ids``.

    position_ids: (3, batch, seq), the temporal, height and width position of each token.
    """
    configuration, modeling = _qwen2_vl()
    heads, head_dim = x.shape[1], x.shape[-1]
    rope = {"rope_type": "default", "mrope_section": list(mrope_section)}
    # 4.52+ splits out a text config; before, the one config is flat.
    config_class = getattr(configuration, "Qwen2VLTextConfig", configuration.Qwen2VLConfig)
    shape = dict(hidden_size=heads * head_dim, num_attention_heads=heads,
                 num_key_value_heads=heads, num_hidden_layers=1)
    if ROPE_PARAMETERS:
        config = config_class(**shape, rope_parameters={"rope_theta": base, **rope})
    else:
        config = config_class(**shape, rope_theta=base, rope_scaling=rope)
    rotary = modeling.Qwen2VLRotaryEmbedding(config=config)
    cos, sin = rotary(x, position_ids)
    if hasattr(modeling, "apply_multimodal_rotary_pos_emb"):
        # Older releases: cos, sin per axis, (3, batch, seq, head_dim); the sections picked here.
        rotated, _ = modeling.apply_multimodal_rotary_pos_emb(x, x, cos, sin,
                                                              list(mrope_section))
    else:  # the rotary embedding already picked each section's axis
        rotated, _ = modeling.apply_rotary_pos_emb(x, x, cos, sin)
    return rotated


def _mrope_text_model(package, config_name, module_name, rotary_name, release):
    """A vision-language model's text config class, modeling module and rotary class, or a
    skip naming the first release that has them."""
    try:
        configuration = __import__(f"transformers.models.{package}.configuration_{package}",
                                   fromlist=[config_name])
        modeling = __import__(f"transformers.models.{package}.modeling_{package}",
                              fromlist=[rotary_name])
    except ImportError:
        pytest.skip(f"transformers {VERSION} has no {package} (added in {release})")
    return getattr(configuration, config_name), modeling, getattr(modeling, rotary_name)


def qwen3_vl_rotate(x, position_ids, base, mrope_section):
    """Qwen3-VL's interleaved M-RoPE of ``x`` (batch, heads, seq, head_dim) at
    ``position_ids`` (3, batch, seq); returns the rotated x and the module's inv_freq."""
    config_class, modeling, rotary_class = _mrope_text_model(
        "qwen3_vl", "Qwen3VLTextConfig", "modeling_qwen3_vl", "Qwen3VLTextRotaryEmbedding",
        "4.57")
    if not ROPE_PARAMETERS:
        pytest.skip(f"transformers {VERSION}: the test builds the 5.x configuration schema")
    heads, head_dim = x.shape[1], x.shape[-1]
    config = config_class(hidden_size=heads * head_dim, num_attention_heads=heads,
                          num_key_value_heads=heads, num_hidden_layers=1, head_dim=head_dim,
                          rope_parameters={"rope_type": "default", "rope_theta": base,
                                           "mrope_section": list(mrope_section),
                                           "mrope_interleaved": True})
    rotary = rotary_class(config=config)
    cos, sin = rotary(x, position_ids)
    rotated, _ = modeling.apply_rotary_pos_emb(x, x, cos, sin)
    return rotated, rotary.inv_freq


def glm4v_rotate(x, position_ids, base, mrope_section, partial_rotary_factor=0.5):
    """GLM-4.1V's M-RoPE of ``x`` (batch, heads, seq, head_dim) at ``position_ids``
    (3, batch, seq): the first ``partial_rotary_factor`` of each head, interleaved pairs,
    sections in blocks; returns the rotated x and the module's inv_freq."""
    config_class, modeling, rotary_class = _mrope_text_model(
        "glm4v", "Glm4vTextConfig", "modeling_glm4v", "Glm4vTextRotaryEmbedding", "4.53")
    if not ROPE_PARAMETERS:
        pytest.skip(f"transformers {VERSION}: the test builds the 5.x configuration schema")
    heads, head_dim = x.shape[1], x.shape[-1]
    config = config_class(hidden_size=heads * head_dim, num_attention_heads=heads,
                          num_key_value_heads=heads, num_hidden_layers=1,
                          rope_parameters={"rope_type": "default", "rope_theta": base,
                                           "mrope_section": list(mrope_section),
                                           "partial_rotary_factor": partial_rotary_factor})
    rotary = rotary_class(config=config)
    cos, sin = rotary(x, position_ids)
    rotated, _ = modeling.apply_rotary_pos_emb(x, x, cos, sin)
    return rotated, rotary.inv_freq


# Made-up token ids: get_rope_index only compares ids with these.
TEXT, VISION_START, IMAGE, VIDEO = 0, 1, 2, 3


def qwen2_vl_position_ids(text_before, grid_thw, text_after):
    """Qwen2-VL's ``get_rope_index`` for text, one image or video, text; (3, 1, seq).

    ``grid_thw`` = (frames, rows, columns) of the vision tokens (after merging patches);
    one frame is an image, more a video.
    """
    _, modeling = _qwen2_vl()
    # 4.52+ has it on Qwen2VLModel; before, on the ForConditionalGeneration head.
    get_rope_index = getattr(modeling.Qwen2VLModel, "get_rope_index", None)
    if get_rope_index is None:
        get_rope_index = modeling.Qwen2VLForConditionalGeneration.get_rope_index
    kind = "image" if grid_thw[0] == 1 else "video"
    if kind == "video" and VIDEO_FRAMES_FLAT:
        pytest.skip(f"transformers {VERSION}'s get_vision_position_ids gives every frame of a "
                    "video the first frame's temporal position (and orders the rows of later "
                    "frames differently); 5.6 fixed it, so there is no video rule to compare")
    grids = {f"{kind}_grid_thw": torch.tensor([grid_thw])}
    vision = math.prod(grid_thw)
    # A stand-in for ``self``: get_rope_index reads only the config (and in 5.x one method).
    fake = types.SimpleNamespace(config=types.SimpleNamespace(
        vision_config=types.SimpleNamespace(spatial_merge_size=1), image_token_id=IMAGE,
        video_token_id=VIDEO, vision_start_token_id=VISION_START))
    if "mm_token_type_ids" in inspect.signature(get_rope_index).parameters:
        # 5.3+: the modality of each token comes as mm_token_type_ids (0 text, 1 image, 2 video).
        fake.get_vision_position_ids = (
            lambda *args, **kwargs: modeling.Qwen2VLModel.get_vision_position_ids(
                fake, *args, **kwargs))
        token_types = torch.tensor([[0] * text_before + [1 if kind == "image" else 2] * vision
                                    + [0] * text_after])
        position_ids, _ = get_rope_index(fake, torch.zeros_like(token_types), token_types,
                                         **grids)
        return position_ids
    # Before 5.3: an image is found by the <|vision_start|> token right before it, which
    # counts as text, so a sequence cannot open with an image.
    if text_before == 0:
        pytest.skip(f"transformers {VERSION}'s Qwen2-VL get_rope_index finds an image or video "
                    "by the <|vision_start|> token before it, so a sequence cannot open with "
                    "one; get_rope_index takes mm_token_type_ids from transformers 5.3.0")
    ids = ([TEXT] * (text_before - 1) + [VISION_START] + [IMAGE if kind == "image" else VIDEO]
           * vision + [TEXT] * text_after)
    ids = torch.tensor([ids])
    # Before 4.48 get_rope_index indexes the mask even when none is given.
    position_ids, _ = get_rope_index(fake, ids, attention_mask=torch.ones_like(ids), **grids)
    return position_ids

