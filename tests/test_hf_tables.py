"""rope_lab.hf.rotary_tables against transformers' own code, on every model of the atlas.

For each bundled config.json (rope_lab.hf.report.atlas: default, partial rotary, GPT-J's and
Llama 4's interleaved pairs, linear, llama3, YaRN with DeepSeek's MLA, LongRoPE, proportional,
M-RoPE text) and each of its layer types: transformers builds the model's rotary embedding
from the config and applies it with the model's own function; rope_lab computes the tables
from the config alone and applies them with apply_rope(q, cos=..., sin=...). Two
comparisons:

- the model's own tables through apply_rope equal the model's own function to float32
  rounding (the tables-in convention, partial rotary and the attention factor);
- rope_lab's tables equal the model's within the difference of the two θ_i (transformers'
  float32 formula is an ulp off for some pairs: up to m·θ·2^-23 at position m), and so do
  the rotated q and k.
"""

import copy
import importlib
import inspect
import warnings

import pytest
import torch

import rope_lab as rl
from rope_lab import hf
from rope_lab.hf import report

transformers = pytest.importorskip("transformers")
from rope_lab.hf import transformers_oracle as oracle  # noqa: E402

ATLAS = [(name, layer_type) for name, _, _, config in report.atlas()
         for layer_type in hf.layer_types(config) if hf.rope_spec(config, layer_type)]


def _modeling(text_config):
    return importlib.import_module(type(text_config).__module__.replace(".configuration_",
                                                                       ".modeling_"))


def _their_rotation(config, text, layer_type, q, k, position_ids):
    """(cos, sin) as the model's code holds them ((batch, seq, ·)), the rotated q and k, and
    how rope_lab matches them: (layout of the tables' duplication, layout of the rotation,
    tables per pair, output in the half layout's order)."""
    modeling = _modeling(text)
    model_type = config["model_type"]
    if model_type == "gptj":  # no rotary module: a sin/cos table and rotate_every_two
        r = text.rotary_dim
        table = modeling.create_sinusoidal_positions(text.max_position_embeddings, r)
        sin, cos = torch.split(table[position_ids], r // 2, dim=-1)  # per pair
        rotate = lambda t: torch.cat((modeling.apply_rotary_pos_emb(  # noqa: E731
            t[..., :r].transpose(1, 2), sin, cos).transpose(1, 2), t[..., r:]), -1)
        return cos, sin, rotate(q), rotate(k), ("interleaved", "interleaved", True, False)
    rotary = oracle.build_rotary(text)
    if rotary is None:  # transformers before ~4.48: some rotary classes take (dim, base), no config
        pytest.skip(f"transformers {transformers.__version__}: {model_type}'s rotary embedding "
                    "is not built from its config")
    kwargs = {"layer_type": layer_type} if layer_type and "layer_type" in \
        inspect.signature(rotary.forward).parameters else {}
    local = getattr(text, "rope_local_base_freq", None)
    if layer_type == "sliding_attention" and not kwargs and local is not None:
        # transformers 4's Gemma 3: the sliding layers' rotary is a second module, built from a
        # copy of the config with the local base and no scaling (as the model builds it)
        copied = copy.deepcopy(text)
        copied.rope_theta, copied.rope_scaling = local, {"rope_type": "default"}
        rotary = type(rotary)(config=copied)
    with torch.no_grad():
        try:
            tables = rotary(q, position_ids, **kwargs)
        except IndexError:  # transformers 4.45's Qwen2-VL rotary wants (3, batch, seq) ids
            if not model_type.startswith("qwen2_vl") or int(
                    transformers.__version__.split(".")[0]) >= 5:
                raise
            pytest.skip(f"transformers {transformers.__version__}: qwen2_vl's rotary embedding "
                        "takes position ids of shape (3, batch, seq) only")
    if model_type.startswith("llama4"):  # complex e^{imθ}, pairs (2i, 2i + 1)
        cos, sin = tables.real, tables.imag
        q_out, k_out = modeling.apply_rotary_emb(q.transpose(1, 2), k.transpose(1, 2), tables)
        return cos, sin, q_out.transpose(1, 2), k_out.transpose(1, 2), (
            "interleaved", "interleaved", True, False)
    cos, sin = tables
    if model_type == "deepseek_v3":  # only the rope part of each head; interleaved weights
        r = text.qk_rope_head_dim
        q_out, k_out = modeling.apply_rotary_pos_emb_interleave(q[..., :r], k[..., :r], cos, sin)
        return cos, sin, q_out, k_out, ("half", "interleaved", False, True)
    if model_type.startswith("gemma4"):  # one tensor at a time
        return (cos, sin, modeling.apply_rotary_pos_emb(q, cos, sin),
                modeling.apply_rotary_pos_emb(k, cos, sin), ("half", "half", False, False))
    r = cos.shape[-1]
    # the attention splits off the rotated part itself where the function does not (Phi)
    q_out, k_out = modeling.apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
    q_out, k_out = torch.cat((q_out, q[..., r:]), -1), torch.cat((k_out, k[..., r:]), -1)
    return cos, sin, q_out, k_out, ("half", "half", False, False)


def _our_rotation(t, cos, sin, how, head):
    """apply_rope with tables in the model's convention; (batch, seq, ·) → [:, None]."""
    _, layout, per_pair, to_half = how
    r = cos.shape[-1] * (2 if per_pair else 1)
    if to_half:  # DeepSeek: q's rope part, rotated, in the half layout's order
        pairs_cos, pairs_sin = cos[..., : r // 2], sin[..., : r // 2]
        rotated = rl.apply_rope(t[..., :r], cos=pairs_cos[:, None], sin=pairs_sin[:, None],
                                layout="interleaved")
        return rl.interleaved_to_half(rotated)
    return rl.apply_rope(t, cos=cos[:, None], sin=sin[:, None], layout=layout, rotary_dim=r)


@pytest.mark.slow
@pytest.mark.versions
@pytest.mark.parametrize("name, layer_type", ATLAS, ids=[f"{n}-{t}" if t else n for n, t in ATLAS])
def test_apply_rope_with_tables_equals_transformers(name, layer_type):
    config = report.load_fixture(name)
    try:
        text = oracle.rope_config(oracle.config_object(config))
    except oracle.OracleUnavailable as why:
        pytest.skip(str(why))
    spec = hf.rope_spec(config, layer_type)
    generator = torch.Generator().manual_seed(0)
    last = min(4096, spec.max_position_embeddings or 4096) - 1
    position_ids = torch.randint(0, last, (2, 9), generator=generator)
    position_ids[0, -1] = last
    q, k = torch.randn(2, 2, 2, 9, spec.head_dim, generator=generator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        their_cos, their_sin, their_q, their_k, how = _their_rotation(
            config, text, layer_type, q, k, position_ids)
    # 1. the model's own tables through apply_rope: its own function, to float32 rounding
    for t, theirs in ((q, their_q), (k, their_k)):
        torch.testing.assert_close(_our_rotation(t, their_cos, their_sin, how, spec.head_dim),
                                   theirs, rtol=0, atol=2e-6 * float(t.abs().max()))
    # 2. rope_lab's tables from the config: the model's, within the two θ's difference
    table_layout, _, per_pair, _ = how
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cos, sin = hf.rotary_tables(config, position_ids, layer_type=layer_type,
                                    layout=table_layout)
    if per_pair:
        cos, sin = cos[..., 0::2], sin[..., 0::2]
    assert cos.shape == their_cos.shape, (cos.shape, their_cos.shape)
    _, factor = hf.inv_freq_from_spec(spec, seq_len=int(position_ids.max()) + 1)
    theta = hf.inv_freq_from_spec(spec, seq_len=int(position_ids.max()) + 1,
                                  dtype=torch.float64)[0]
    budget = (last * float(theta.max()) * 2**-22 + 2**-23) * max(abs(factor), 1.0)
    assert float((cos - their_cos).abs().max()) <= budget
    assert float((sin - their_sin).abs().max()) <= budget
    for t, theirs in ((q, their_q), (k, their_k)):
        ours = _our_rotation(t, cos, sin, how, spec.head_dim)
        assert float((ours - theirs).abs().max()) <= 2 * budget * float(t.abs().max())


def test_rotary_tables_shape_layout_and_refusals():
    config = report.load_fixture("llama_3_8b")
    cos, sin = hf.rotary_tables(config, torch.arange(5), dtype=torch.bfloat16)
    assert cos.shape == (1, 5, 128) and cos.dtype == torch.bfloat16
    cos, sin = hf.rotary_tables(config, [[0, 1, 2], [7, 8, 9]], layout="interleaved")
    assert cos.shape == (2, 3, 128) and torch.equal(cos[..., 0::2], cos[..., 1::2])
    x = torch.randn(2, 4, 3, 128)
    torch.testing.assert_close(
        rl.apply_rope(x, cos=cos[:, None], sin=sin[:, None], layout="interleaved"),
        rl.apply_rope(x, torch.tensor([[0, 1, 2], [7, 8, 9]])[:, None], base=5e5,
                      layout="interleaved"), rtol=0, atol=1e-6)
    with pytest.raises(TypeError, match="position_ids must be integers"):
        hf.rotary_tables(config, torch.arange(3.0))
    with pytest.raises(ValueError, match="position_ids must be ≥ 0"):
        hf.rotary_tables(config, torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match=r"position_ids must have shape \(seq,\) or "):
        hf.rotary_tables(config, torch.zeros(2, 2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="layout must be one of"):
        hf.rotary_tables(config, torch.arange(3), layout="pairs")
