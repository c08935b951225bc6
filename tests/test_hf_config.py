"""rope_lab.hf.inv_freq_from_config against transformers' own RoPE functions.

Every rope type is computed by transformers (ROPE_INIT_FUNCTIONS, or the model's default
rotary function) from a real config object, and by rope_lab.hf from that object and from the
plain dicts a config.json would hold, in both schemas (transformers 4: rope_theta +
rope_scaling; transformers 5: rope_parameters).
"""

import json
import math
import sys
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lab import hf, scaling
from rope_lab.hf import config as config_module

transformers = pytest.importorskip("transformers")
from hf_compat import ROPE_PARAMETERS, VERSION, hf_inv_freq, llama_config  # noqa: E402
from packaging.version import Version  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

RTOL = 2e-6
HEAD, BASE, L = 64, 10000.0, 2048
# The YaRN cases scale past max_position / L on purpose; rope_lab warns as transformers does
# (test_yarn_factor_that_disagrees_with_the_lengths_is_warned_about checks that warning), or
# says that the installed release reads the factor from the lengths (4.51 to 4.55).
pytestmark = [pytest.mark.filterwarnings("ignore:.*transformers warns and uses the explicit"),
              pytest.mark.filterwarnings("ignore:.*computes YaRN with factor")]


def lists(dim, seed):
    generator = torch.Generator().manual_seed(seed)
    return (1 + 3 * torch.rand(dim // 2, generator=generator, dtype=torch.float64)).tolist()


ROPES = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": L},
    "yarn betas": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 16.0, "beta_slow": 2.0,
                   "original_max_position_embeddings": L},
    "yarn attention_factor": {"rope_type": "yarn", "factor": 4.0, "attention_factor": 0.8,
                              "original_max_position_embeddings": L},
    "yarn mscale": {"rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.7,
                    "original_max_position_embeddings": L},
    "yarn no truncate": {"rope_type": "yarn", "factor": 32.0, "truncate": False,
                         "original_max_position_embeddings": L},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": L},
    "llama3 hard switch": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 1.0, "original_max_position_embeddings": L},
    "longrope": {"rope_type": "longrope", "short_factor": lists(HEAD, 1),
                 "long_factor": lists(HEAD, 2), "factor": 16.0,
                 "original_max_position_embeddings": L},
    "proportional": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
}


def hf_type(rope):
    return rope["rope_type"]


def shape(max_position=L * 16):
    return dict(hidden_size=HEAD * 2, num_attention_heads=2, num_key_value_heads=2,
                head_dim=HEAD, max_position_embeddings=max_position, model_type="llama")


def old_schema(rope, base=BASE, **extra):
    rope = dict(rope)
    config = {**shape(), **extra, "rope_theta": base}
    if rope.get("rope_type", rope.get("type")) != "default":
        config["rope_scaling"] = rope
    return config


def new_schema(rope, base=BASE, **extra):
    return {**shape(), **extra, "rope_parameters": {"rope_theta": base, **rope}}


def assert_same(ours, theirs, rtol=RTOL):
    (freqs, factor), (hf_freqs, hf_factor) = ours, theirs
    assert freqs.shape == hf_freqs.shape
    assert freqs.dtype == torch.float32
    gap = ((freqs.double() - hf_freqs.double()).abs() / hf_freqs.double().abs().clamp_min(1e-30))
    assert gap.max() <= rtol, f"max relative gap {gap.max():.2e}"
    assert float(factor) == pytest.approx(float(hf_factor), rel=1e-7)


def needs(rope_type):
    if rope_type not in ROPE_INIT_FUNCTIONS and rope_type != "default":
        pytest.skip(f"transformers {VERSION} has no rope_type {rope_type!r}")
    if rope_type == "longrope" and VERSION < Version("4.57"):
        pytest.skip(f"transformers {VERSION}'s longrope function picks the long factors whenever "
                    "max_position_embeddings exceeds the original context, whatever seq_len "
                    "(the model's own rotary class switched); 4.57 reads seq_len")


# seq_len matters only for dynamic (the base grows past L) and longrope (long factors past L)
CASES = [(name, None) for name in ROPES] + [
    (name, seq_len) for name in ("dynamic", "longrope") for seq_len in (L // 2, L + 1, 5 * L)]


@pytest.mark.parametrize(("name", "seq_len"), CASES)
def test_every_rope_type_matches_transformers_in_both_schemas(name, seq_len):
    rope = ROPES[name]
    needs(hf_type(rope))
    # transformers 4.x read YaRN's and LongRoPE's L from max_position_embeddings (the block's
    # original_max_position_embeddings came with 5.0): make the two lengths agree there.
    length = L if VERSION.major < 5 and hf_type(rope) in ("yarn", "longrope") else L * 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = llama_config(HEAD, BASE, rope, max_position=length)
        theirs = hf_inv_freq(config, hf_type(rope), seq_len)
    configs = [config, old_schema(rope, max_position_embeddings=length),
               new_schema(rope, max_position_embeddings=length)]
    for each in configs:
        assert_same(hf.inv_freq_from_config(each, seq_len=seq_len), theirs)


def test_longrope_switches_at_the_original_context():
    rope = ROPES["longrope"]
    config = new_schema(rope)
    short, factor = hf.inv_freq_from_config(config, seq_len=L)
    long, _ = hf.inv_freq_from_config(config, seq_len=L + 1)
    theta = scaling.default_inv_freq(HEAD)[0].double()
    assert torch.allclose(short.double(), theta / torch.tensor(rope["short_factor"]), rtol=1e-6)
    assert torch.allclose(long.double(), theta / torch.tensor(rope["long_factor"]), rtol=1e-6)
    assert factor == pytest.approx(math.sqrt(1 + math.log(16) / math.log(L)))


def test_old_type_key_and_phi3_top_level_original_length():
    rope = {"type": "linear", "factor": 4.0}
    ours = hf.inv_freq_from_config(old_schema(rope))[0]
    assert torch.allclose(ours, scaling.default_inv_freq(HEAD)[0] / 4)
    # Phi-3 keeps original_max_position_embeddings at the top level; it wins over the block's
    long = dict(ROPES["longrope"], original_max_position_embeddings=999)
    config = old_schema(long, original_max_position_embeddings=L)
    assert hf.rope_spec(config).original_max_position_embeddings == L


def test_phi3_longrope_config_matches_its_rotary_embedding():
    needs("longrope")
    from transformers.models.phi3 import configuration_phi3, modeling_phi3

    rope = {"rope_type": "longrope", "short_factor": lists(96, 3), "long_factor": lists(96, 4)}
    kwargs = dict(hidden_size=96 * 4, num_attention_heads=4, num_key_value_heads=4,
                  max_position_embeddings=131072, original_max_position_embeddings=4096)
    rope_kwargs = ({"rope_parameters": {"rope_theta": BASE, **rope}} if ROPE_PARAMETERS else
                   {"rope_theta": BASE, "rope_scaling": {"type": "longrope",
                                                         "short_factor": rope["short_factor"],
                                                         "long_factor": rope["long_factor"]}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = configuration_phi3.Phi3Config(**kwargs, **rope_kwargs)
        rotary = modeling_phi3.Phi3RotaryEmbedding(config=config)
    theirs = (rotary.inv_freq, rotary.attention_scaling)
    assert_same(hf.inv_freq_from_config(config), theirs)
    as_dict = {**kwargs, "model_type": "phi3", **rope_kwargs}
    assert_same(hf.inv_freq_from_config(json.loads(json.dumps(as_dict))), theirs)


def test_partial_rotary_gptj_and_mla_dims():
    phi2 = {"model_type": "phi", "hidden_size": 2560, "num_attention_heads": 32,
            "partial_rotary_factor": 0.4, "rope_theta": 10000.0}
    assert hf.rope_spec(phi2).rotary_dim == 32
    assert hf.inv_freq_from_config(phi2)[0].shape == (16,)
    gptj = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64}
    spec = hf.rope_spec(gptj)
    assert (spec.head_dim, spec.rotary_dim, spec.base) == (256, 64, 10000.0)
    neox = {"model_type": "gpt_neox", "hidden_size": 6144, "num_attention_heads": 64,
            "rotary_pct": 0.25, "rotary_emb_base": 10000}
    assert hf.rope_spec(neox).rotary_dim == 24
    mla = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
           "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "rope_theta": 10000}
    assert hf.rope_spec(mla).rotary_dim == 64


@pytest.mark.skipif(VERSION < Version("4.50"), reason="Gemma 3 arrived in transformers 4.50")
def test_per_layer_types_match_gemma3_rotary_embeddings():
    from transformers.models.gemma3 import configuration_gemma3, modeling_gemma3

    rope = {"rope_type": "linear", "factor": 8.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if ROPE_PARAMETERS:
            config = configuration_gemma3.Gemma3TextConfig(rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {**rope, "rope_theta": 1e6}})
            rotary = modeling_gemma3.Gemma3RotaryEmbedding(config=config)
            theirs = {t: (getattr(rotary, f"{t}_inv_freq"),
                          getattr(rotary, f"{t}_attention_scaling")) for t in rotary.layer_types}
        else:
            config = configuration_gemma3.Gemma3TextConfig(rope_theta=1e6, rope_scaling=rope,
                                                           rope_local_base_freq=10000.0)
            full = modeling_gemma3.Gemma3RotaryEmbedding(config=config)
            # 4.x builds the local rotary from a copy with rope_local_base_freq, no scaling
            config_local = configuration_gemma3.Gemma3TextConfig(rope_theta=10000.0)
            local = modeling_gemma3.Gemma3RotaryEmbedding(config=config_local)
            theirs = {"full_attention": (full.inv_freq, full.attention_scaling),
                      "sliding_attention": (local.inv_freq, local.attention_scaling)}
    assert sorted(hf.layer_types(config)) == ["full_attention", "sliding_attention"]
    for layer_type, table in theirs.items():
        assert_same(hf.inv_freq_from_config(config, layer_type=layer_type), table)
    nested = {"model_type": "gemma3_text", "head_dim": 256, "hidden_size": 2560,
              "num_attention_heads": 8, "rope_parameters": {
                  "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                  "full_attention": {**rope, "rope_theta": 1e6}}}
    assert_same(hf.inv_freq_from_config(nested, layer_type="full_attention"),
                theirs["full_attention"])


def test_text_config_of_a_multimodal_config_is_used():
    config = {"model_type": "llava", "text_config": new_schema(ROPES["linear"])}
    assert torch.equal(hf.inv_freq_from_config(config)[0],
                       hf.inv_freq_from_config(new_schema(ROPES["linear"]))[0])


def test_axial_gives_the_speeds_of_one_image_axis():
    config = {"model_type": "qwen3_vl_vision", "hidden_size": 1152, "num_attention_heads": 16,
              "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}
    freqs, _ = hf.inv_freq_from_config(config)
    assert torch.allclose(freqs.double(), 10000.0 ** (-torch.arange(0, 36, 2).double() / 36))


@settings(max_examples=30, deadline=None)
@given(half=st.integers(4, 64), log_base=st.floats(2, 7), factor=st.floats(1, 64),
       kind=st.sampled_from(["linear", "yarn", "llama3"]))
def test_random_configs_match_transformers(half, log_base, factor, kind):
    head, base = 2 * half, 10.0 ** log_base
    rope = {"rope_type": kind, "factor": factor}
    if kind != "linear":
        rope["original_max_position_embeddings"] = L
    if kind == "llama3":
        rope.update(low_freq_factor=1.0, high_freq_factor=4.0)
    length = L if VERSION.major < 5 and kind == "yarn" else L * 64  # see the test above
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = llama_config(head, base, rope, max_position=length)
        theirs = hf_inv_freq(config, kind)
    assert_same(hf.inv_freq_from_config(config), theirs, rtol=5e-6)


# --- what the module refuses or warns about -------------------------------------------------

BAD = [
    (lambda: hf.inv_freq_from_config([1, 2]), TypeError, "config must be a dict"),
    (lambda: hf.inv_freq_from_config({"model_type": "bert", "hidden_size": 8}), ValueError,
     "no RoPE parameters"),
    (lambda: hf.inv_freq_from_config(new_schema({"rope_type": "linear", "factor": 0.5})),
     ValueError, "factor"),
    (lambda: hf.inv_freq_from_config(new_schema({"rope_type": "linear"})), ValueError,
     "missing \\['factor'\\]"),
    (lambda: hf.inv_freq_from_config(new_schema({"rope_type": "fancy"})), hf.UnsupportedRopeError,
     "llama: rope_type 'fancy'"),
    (lambda: hf.inv_freq_from_config({**shape(), "head_dim": 63, "rope_theta": 1e4}),
     hf.UnsupportedRopeError, "odd"),
    (lambda: hf.inv_freq_from_config(new_schema(ROPES["default"], partial_rotary_factor=0)),
     ValueError, "partial_rotary_factor"),
    (lambda: hf.inv_freq_from_config(new_schema({**ROPES["longrope"], "short_factor": [1.0]})),
     ValueError, "short_factor"),
    (lambda: hf.inv_freq_from_config(new_schema(ROPES["default"]), layer_type="global"),
     ValueError, "layer_type"),
    (lambda: hf.inv_freq_from_config({"model_type": "pixtral", "rope_theta": 1e4}),
     hf.UnsupportedRopeError, "pixtral"),
    (lambda: hf.inv_freq_from_config(new_schema(ROPES["default"], base="1e4")),
     TypeError, "rope_theta"),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD)
def test_bad_config_gets_one_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_keys_transformers_ignores_are_warned_about():
    typo = new_schema({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": L,
                       "beta_fast": 32})
    with pytest.warns(UserWarning, match="transformers ignores 'beta_fast' \\(a yarn option\\)"):
        hf.inv_freq_from_config(typo)
    missing = new_schema({"rope_type": "yarn", "factor": 4.0})
    notes = hf.config_warnings(missing)
    assert any("no original_max_position_embeddings" in note for note in notes)
    quiet = new_schema({"rope_type": "default", "mrope_section": [16, 24, 24]})
    assert hf.config_warnings(quiet) == []


@pytest.mark.slow
def test_importing_rope_lab_hf_does_not_import_transformers():
    import subprocess

    code = "import rope_lab.hf, sys; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


# --- the two multi-knob formulas in rope_lab.scaling, called directly ------------------------


@pytest.mark.parametrize("seq_len", [None, L, L + 1])
def test_scaling_longrope_matches_transformers(seq_len):
    needs("longrope")
    rope = ROPES["longrope"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        length = L if VERSION.major < 5 else L * 16  # 4.x reads L from max_position
        theirs = hf_inv_freq(llama_config(HEAD, BASE, rope, max_position=length), "longrope",
                             seq_len)
    ours = scaling.longrope_inv_freq(HEAD, base=BASE, factor=16.0, original_max_position=L,
                                     seq_len=seq_len, short_factor=rope["short_factor"],
                                     long_factor=rope["long_factor"])
    assert_same(ours, theirs)


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.3, 1.0])
def test_scaling_proportional_matches_transformers(fraction):
    needs("proportional")
    rope = {"rope_type": "proportional", "partial_rotary_factor": fraction, "factor": 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = hf_inv_freq(llama_config(HEAD, BASE, rope), "proportional")
    ours = scaling.proportional_inv_freq(HEAD, base=BASE, factor=2.0,
                                         partial_rotary_factor=fraction)
    assert_same(ours, theirs)
    assert int((ours[0] == 0).sum()) == HEAD // 2 - int(fraction * HEAD // 2)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: scaling.longrope_inv_freq(8, original_max_position=64, short_factor=[1.0] * 4,
                                       long_factor=[1.0] * 3), "long_factor must have one"),
    (lambda: scaling.longrope_inv_freq(8, original_max_position=64, short_factor=None,
                                       long_factor=[1.0] * 4), "short_factor must be a list"),
    (lambda: scaling.longrope_inv_freq(8, original_max_position=64, short_factor=[0.0] * 4,
                                       long_factor=[1.0] * 4), "greater than 0"),
    (lambda: scaling.longrope_inv_freq(8, short_factor=[1.0] * 4, long_factor=[1.0] * 4),
     "original_max_position is required"),
    (lambda: scaling.proportional_inv_freq(8, partial_rotary_factor=0.0),
     "partial_rotary_factor must be in"),
    (lambda: scaling.proportional_inv_freq(8, partial_rotary_factor="1/4"),
     "partial_rotary_factor must be a number"),
])
def test_scaling_multi_knob_bad_inputs(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_truncate_inside_a_layer_type_block_is_ignored_as_transformers_does():
    yarn = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": L,
            "rope_theta": BASE}
    nested = {**shape(), "layer_types": ["full_attention"],
              "rope_parameters": {"full_attention": {**yarn, "truncate": False}}}
    with pytest.warns(UserWarning, match="ignores 'truncate' inside a per-layer-type block"):
        ours, _ = hf.inv_freq_from_config(nested, layer_type="full_attention")
    assert torch.equal(ours, hf.inv_freq_from_config(new_schema(yarn))[0])


# --- issue 27's findings, each against the model's own classes ------------------------------

from rope_lab.hf import transformers_oracle as oracle  # noqa: E402


def assert_tables(config, *, expect_warning=None):
    """rope_lab on the plain dict = transformers' rotary class built from it, every layer
    type (attention factor included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = oracle.rotary_tables(config)
    assert sorted(map(str, theirs)) == sorted(map(str, hf.layer_types(config)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for layer_type, table in theirs.items():
            assert_same(hf.inv_freq_from_config(config, layer_type=layer_type), table)
    notes = [str(w.message) for w in caught]
    if expect_warning:
        assert any(expect_warning in note for note in notes), notes
    return notes


@pytest.mark.skipif(VERSION < Version("5.17"), reason="DeepSeek-V4 arrived in transformers 5")
def test_deepseek_v4_flat_file_is_two_tables_as_its_config_class_builds():
    """A file shaped like the released ones (their RoPE keys: rope_theta, compress_rope_theta,
    compress_ratios and a YaRN rope_scaling with factor 16 from 65536; the published
    config.json itself was not found in a public repository, so this dict is built here)
    becomes main (plain, base 10000) and compress (YaRN at 160000, attention factor 1), as
    DeepseekV4Config.__post_init__ does."""
    if "deepseek_v4" not in transformers.CONFIG_MAPPING:
        pytest.skip(f"transformers {VERSION} has no deepseek_v4")
    config = {"model_type": "deepseek_v4", "hidden_size": 4096, "num_attention_heads": 64,
              "head_dim": 512, "num_hidden_layers": 5, "qk_rope_head_dim": 64,
              "rope_theta": 10000, "compress_rope_theta": 160000,
              "compress_ratios": [0, 0, 4, 128, 0], "max_position_embeddings": 1048576,
              "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                               "original_max_position_embeddings": 65536, "type": "yarn"}}
    assert hf.layer_types(config) == ["compress", "main"]
    assert_tables(config)
    main, compress = hf.rope_spec(config, "main"), hf.rope_spec(config, "compress")
    assert (main.rope_type, main.base, main.rotary_dim) == ("default", 10000.0, 64)
    assert (compress.rope_type, compress.base) == ("yarn", 160000.0)
    assert hf.inv_freq_from_config(config, layer_type="compress")[1] == 1.0


@pytest.mark.skipif(not ROPE_PARAMETERS, reason="transformers 4 applies partial_rotary_factor "
                    "to every model's plain RoPE; 5 lets each model's rotary class decide")
@pytest.mark.parametrize(("model_type", "rotary"), [("llama", 64), ("phi", 16)])
def test_partial_rotary_factor_applies_where_the_models_rotary_reads_it(model_type, rotary):
    config = {"model_type": model_type, "hidden_size": 256, "num_attention_heads": 2,
              "max_position_embeddings": 2048, "rope_theta": 10000.0,
              "partial_rotary_factor": 0.25}
    notes = assert_tables(config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hf.inv_freq_from_config(config)[0].shape == (rotary,)
    assert any("is not read by its rotary embedding" in note for note in notes) == (
        rotary == 64)
    assert any("is not read by its rotary embedding" in str(w.message) for w in caught) == (
        rotary == 64)
    # a scaling type reads it in every model
    scaled = {**config, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    assert_tables(scaled)
    assert hf.inv_freq_from_config(scaled)[0].shape == (16,)


def test_class_defaults_fill_what_the_file_leaves_out():
    llama2 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
              "max_position_embeddings": 4096, "rope_scaling": None}  # no rope_theta
    assert_tables(llama2)
    if "llava" in transformers.CONFIG_MAPPING and ROPE_PARAMETERS:
        # llava-1.5's text_config: the LlamaConfig defaults give head size and base
        assert_tables({"model_type": "llava", "text_config": {
            "model_type": "llama", "max_position_embeddings": 4096, "vocab_size": 32064}})


def test_key_aliases_of_the_config_class_are_followed():
    if not ROPE_PARAMETERS:
        pytest.skip("the aliases are those of transformers 5's JetMoE and Zamba2 classes")
    jetmoe = {"model_type": "jetmoe", "hidden_size": 2048, "num_attention_heads": 16,
              "kv_channels": 128, "rope_theta": 10000.0, "max_position_embeddings": 4096}
    assert_tables(jetmoe)
    assert hf.rope_spec(jetmoe).head_dim == 128


def test_gptj_ignores_a_rope_block_as_transformers_does():
    gptj = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64,
            "n_positions": 2048, "rope_scaling": {"rope_type": "gptj"}}
    notes = assert_tables(gptj)
    assert any("never reads rope_scaling" in note for note in notes), notes


@pytest.mark.parametrize("seq_len", [0, torch.tensor(1), torch.tensor(5 * L)])
@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_seq_len_zero_and_tensor_are_accepted_like_transformers(name, seq_len):
    needs(name)
    rope = ROPES[name]
    # transformers 4 read LongRoPE's L from max_position_embeddings: make the lengths agree
    length = L if VERSION.major < 5 and name == "longrope" else L * 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = llama_config(HEAD, BASE, rope, max_position=length)
        theirs = hf_inv_freq(config, name, seq_len)
    ours = hf.inv_freq_from_config(new_schema(rope, max_position_embeddings=length),
                                   seq_len=seq_len)
    assert_same(ours, theirs)


@pytest.mark.parametrize("installed", ["4.50.3", "4.56.0", "5.23.0"])
def test_yarn_factor_that_disagrees_with_the_lengths_is_warned_about(installed, monkeypatch):
    monkeypatch.setattr(config_module, "installed_transformers", lambda: installed)
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": L}
    notes = hf.config_warnings(new_schema(rope, max_position_embeddings=L * 8))
    assert any("factor=4 but max_position_embeddings / original_max_position_embeddings" in n
               for n in notes), notes
    assert not hf.config_warnings(new_schema(rope, max_position_embeddings=L * 4))


@pytest.mark.parametrize("installed", ["4.51.0", "4.53.3", "4.55.4"])
def test_yarn_keeps_its_factor_and_warns_where_transformers_took_the_lengths(installed,
                                                                             monkeypatch):
    """transformers 4.51 to 4.55 replaced YaRN's factor by max_position_embeddings /
    original_max_position_embeddings (hf_compat.YARN_FACTOR_FROM_LENGTHS): a Qwen2.5 file
    (factor 4, both lengths 32768) got plain RoPE. rope_lab keeps the factor (the numbers
    of 4.56 and later, compared with transformers in test_hf_real_configs) and warns that
    the installed release computes something else."""
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": L}
    same = new_schema(rope, max_position_embeddings=L)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from a release after the window
        monkeypatch.setattr(config_module, "installed_transformers", lambda: "4.56.0")
        expected = hf.inv_freq_from_config(same)
    monkeypatch.setattr(config_module, "installed_transformers", lambda: installed)
    with pytest.warns(hf.ReleaseDiffersWarning, match=rf"installed transformers {installed} "
                      rf"computes YaRN with factor = .* = {L} / {L} = 1, not the config's "
                      rf"factor=4.0") as said:
        freqs, attention = hf.inv_freq_from_config(same)
    # its own class (notebook 10 tells it from the notes on keys so), still a UserWarning
    assert [w.category for w in said] == [hf.ReleaseDiffersWarning]
    assert issubclass(hf.ReleaseDiffersWarning, UserWarning)
    with pytest.warns(UserWarning) as keys:  # a note on the config's keys keeps the base class
        hf.inv_freq_from_config(new_schema({**rope, "factr": 2.0}, max_position_embeddings=L * 4))
    assert keys and all(w.category is UserWarning for w in keys)
    assert torch.equal(freqs, expected[0]) and attention == expected[1]
    assert attention == pytest.approx(0.1 * math.log(4) + 1)  # YaRN's formula, factor 4
    plain = 1e4 ** (-torch.arange(0, HEAD, 2, dtype=torch.float64) / HEAD)
    assert (freqs.double() < plain * (1 - 1e-3)).any()  # scaled: not plain RoPE
    assert not hf.config_warnings(new_schema(rope, max_position_embeddings=L * 4))


@pytest.mark.skipif(not ROPE_PARAMETERS, reason="ignore_keys_at_rope_validation is 5.x")
def test_a_models_own_rope_keys_are_not_warned_about_and_a_frequency_rule_is_refused():
    qwen = {"model_type": "qwen2_vl_text", "hidden_size": 256, "num_attention_heads": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                "mrope_section": [16, 24, 24]}}
    assert hf.config_warnings(qwen) == []
    if "hunyuan_vl_text" in transformers.CONFIG_MAPPING:
        hunyuan = {"model_type": "hunyuan_vl_text", "hidden_size": 256, "num_attention_heads": 2,
                   "head_dim": 128, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0,
                                                        "alpha": 1000.0, "rope_theta": 1e4}}
        with pytest.raises(hf.UnsupportedRopeError, match="'alpha', which its rotary"):
            hf.inv_freq_from_config(hunyuan)


def test_the_warning_names_the_key_the_config_used():
    config = llama_config(HEAD, BASE, {"rope_type": "linear", "factor": 2.0})
    if ROPE_PARAMETERS:
        config.rope_parameters["beta_fast"] = 3.0
        assert any(n.startswith("rope_parameters (rope_type 'linear')")
                   for n in hf.config_warnings(config))
    typo = new_schema({"rope_type": "linear", "factor": 2.0, "beta_fast": 3.0})
    assert any(n.startswith("rope_parameters ") for n in hf.config_warnings(typo))


@pytest.mark.parametrize(("config", "error", "match"), [
    ({**shape(), "num_attention_heads": 0, "head_dim": None, "rope_theta": 1e4}, ValueError,
     "num_attention_heads must be > 0, got 0"),
    ({**shape(), "hidden_size": "64", "head_dim": None, "rope_theta": 1e4}, TypeError,
     "hidden_size must be an int, got '64'"),
    ({**shape(), "rope_theta": 10**400}, ValueError,
     "rope_theta must be a finite number within float range, got an int of 401 digits"),
    ({**shape(), "rope_theta": float("inf")}, ValueError, "rope_theta must be a finite"),
    ({**shape(), "rope_theta": 1e4, "max_position_embeddings": 0}, ValueError,
     "max_position_embeddings must be > 0"),
])
def test_malformed_numbers_get_one_error_naming_the_key(config, error, match):
    with pytest.raises(error, match=match):
        hf.inv_freq_from_config(config)


def test_text_config_loops_and_towers_get_one_clear_error():
    looped = {"model_type": "llava"}
    looped["text_config"] = looped
    with pytest.raises(ValueError, match="contains itself"):
        hf.inv_freq_from_config(looped)
    deep = {"model_type": "llama", "rope_theta": 1e4, "head_dim": 64}
    for _ in range(5000):
        deep = {"model_type": "llava", "text_config": deep}
    with pytest.raises(ValueError, match="nested more than 8 levels deep"):
        hf.inv_freq_from_config(deep)


@pytest.mark.parametrize(("model_type", "inside", "outside"), [
    ("zamba2", "4.53.3", "4.54.1"), ("musicflamingo", "5.5.4", "5.6.2"),
    ("cosmos3_edge_text", "5.16.1", "5.17.0")])
def test_a_model_type_one_release_builds_its_own_way_is_refused_there(model_type, inside,
                                                                        outside, monkeypatch):
    """The release sweep (scripts/transformers_releases.py) found them: Zamba2 before 4.54
    sizes its rotary embedding by attention_head_dim, 5.5's MusicFlamingo reads its top-level
    config, Cosmos3-Edge before 5.17 masks its frequencies per axis. There one clear error
    names the release; the next release reads them again."""
    config = {"model_type": model_type, "hidden_size": 128, "num_attention_heads": 2}
    monkeypatch.setattr(config_module, "installed_transformers", lambda: inside)
    with pytest.raises(hf.UnsupportedRopeError,
                       match=rf"^{model_type}: not supported with transformers {inside}, "):
        hf.inv_freq_from_config(config)
    monkeypatch.setattr(config_module, "installed_transformers", lambda: outside)
    freqs, _ = hf.inv_freq_from_config(config)
    assert freqs.ndim == 1 and len(freqs) > 0


def test_a_model_type_that_is_not_a_string_gets_the_clear_error():
    """The in-release refusals look the type up first: a list there must still meet the
    one error that names the key (not Python's "unhashable type")."""
    with pytest.raises(TypeError, match=r"\['model_type'\] must be a string, got \['llama'\]"):
        hf.inv_freq_from_config({"model_type": ["llama"], "hidden_size": 64,
                                 "num_attention_heads": 2})


def test_each_release_reads_with_the_rules_of_its_closest_release():
    """A patch release takes its minor release's file, a release past the files the newest
    of its major series, and a major series without files the nearest end: transformers 6
    must not read with 5.0's rules because both minors are small (it did)."""
    from packaging.version import Version

    files = sorted(config_module.available_rules(), key=Version)
    fives = [v for v in files if Version(v).major == 5]
    minor_10 = next(v for v in files if v.startswith("5.10."))
    assert config_module.rules_version("5.10.0") == minor_10
    assert config_module.rules_version("5.99.0") == fives[-1]
    assert config_module.rules_version("6.0.0") == files[-1]
    assert config_module.rules_version("6.3.1") == files[-1]
    assert config_module.rules_version("3.9.0") == files[0]
    assert all(config_module.rules_version(v) == v for v in files)
    # a pre-release reads as the release it leads to (5.0.0rc1 read as 5.0.1 before)
    assert config_module._version_key("5.0.0rc1") == (5, 0, 0)
    assert config_module._version_key("4.57.0.dev0") == (4, 57, 0)
    assert config_module._version_key("5.1") == (5, 1)


def test_the_pinned_release_is_the_one_constraints_txt_pins():
    """Without transformers, configs read with the pinned release's rules, and notebook 04
    prints the pin: both follow constraints.txt, which has a rules file."""
    from test_project import constraints

    pinned = constraints()["transformers"]
    assert config_module.PINNED_TRANSFORMERS == pinned
    assert pinned in config_module.available_rules()
