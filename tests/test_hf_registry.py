"""rope_lab.hf against every model family transformers knows, in every form a config takes.

Walks transformers' config registry (CONFIG_MAPPING). For each model type whose default config,
or its text sub-config, has RoPE parameters, it builds that model's own rotary embedding class
(``*RotaryEmbedding`` in its modeling module) and compares its ``inv_freq`` and attention
scaling with :func:`rope_lab.hf.inv_freq_from_config`, for every layer type the rotary
embedding holds, given:

    object    the config object
    dict      its ``to_dict()`` through JSON (every key written out)
    diff      ``to_diff_dict()``: what ``save_pretrained`` writes (class defaults left out)
    legacy    the transformers 4 schema: rope_theta + rope_scaling at the top level
    partial   plain RoPE with a top-level partial_rotary_factor the block does not have
    bare      every RoPE key removed: the config class's defaults decide
    flat      a per-layer-type model given an older flat file (rope_theta, Gemma 3's
              rope_local_base_freq, ModernBERT's global/local_rope_theta, a rope_scaling)

For the last four, transformers builds its rotary embedding from the edited dict (a form it
refuses is skipped). Each comparison lands in one bucket:

    equal         same frequencies (relative gap ≤ 1e-5, float32) and attention factor
    unsupported   rope_lab.hf raised UnsupportedRopeError naming the model type
    generic       a model type the rules of this transformers release do not list: rope_lab
                  read it with the generic rule and said so in a warning
    different     anything else: a wrong answer, a missing warning, an unexpected error

The invariant, on every transformers pyproject.toml allows: nothing is different.
Run this file as a script to print the table.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import warnings
from functools import lru_cache

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402

from rope_lab.hf import UnsupportedRopeError, inv_freq_from_config  # noqa: E402
from rope_lab.hf import config as hf_config  # noqa: E402
from rope_lab.hf import transformers_oracle as oracle  # noqa: E402

RTOL = 1e-5
ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor",
             "rotary_pct", "rotary_emb_base", "rope_local_base_freq", "global_rope_theta",
             "local_rope_theta")
FORMS = ("object", "dict", "diff", "legacy", "partial", "bare", "flat")


def _quiet():
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")


def _rotary(rope_config):
    params = getattr(rope_config, "rope_parameters", None) or {}
    axial = isinstance(params, dict) and params.get("rope_type") == "axial"
    for cls in oracle.rotary_classes(rope_config, axial):
        try:
            return cls(config=rope_config)
        except Exception:  # noqa: BLE001 - a rotary class for another sub-config
            continue
    return None


def _ours(data, layer_type):
    """rope_lab's answer and whether it warned that it used the generic rule."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = inv_freq_from_config(data, layer_type=layer_type)
    generic = any("generic rule" in str(w.message) for w in caught)
    return result, generic


def compare_tables(data, theirs, model_type):
    """(bucket, detail) of rope_lab on ``data`` against transformers' ``theirs``."""
    generic = False
    for layer_type, (their_freqs, their_scale) in theirs.items():
        try:
            (ours, our_scale), warned = _ours(data, layer_type)
        except UnsupportedRopeError as error:
            named = {model_type, hf_config.spec_model(data)}
            if not any(name and str(error).startswith(f"{name}:") for name in named):
                return "different", f"unsupported error does not name the model: {error}"
            return "unsupported", str(error)
        except Exception as error:  # noqa: BLE001 - any other error is a failure
            return "different", f"{layer_type}: {type(error).__name__}: {error}"
        generic |= warned
        if ours.shape != their_freqs.shape:
            detail = f"{layer_type}: shape {tuple(ours.shape)} vs {tuple(their_freqs.shape)}"
            return ("generic", detail) if warned else ("different", detail)
        gap = ((ours.double() - their_freqs.double()).abs()
               / their_freqs.double().abs().clamp_min(1e-30)).max().item()
        if gap > RTOL or not math.isclose(float(our_scale), float(their_scale), rel_tol=1e-6):
            detail = (f"{layer_type}: inv_freq relative gap {gap:.2e}, attention factor "
                      f"{our_scale} vs {their_scale}")
            return ("generic", detail) if warned else ("different", detail)
    return ("generic", "equal, with the generic-rule warning") if generic else ("equal", "")


def _text_key(config, rope_config):
    for key in oracle.SUB_CONFIGS:
        if getattr(config, key, None) is rope_config:
            return key
    return None


def edited_forms(config, rope_config) -> dict:
    """The dict forms of ``config`` (see the module docstring); the edited ones change the
    RoPE-carrying (sub-)config."""
    base = json.loads(config.to_json_string(use_diff=False))
    forms = {"dict": base}
    try:
        forms["diff"] = json.loads(config.to_json_string(use_diff=True))
    except Exception:  # noqa: BLE001 - 4.57 cannot diff a few configs with a None sub-config
        pass
    key = _text_key(config, rope_config)
    if key is None and not any(name in base for name in ROPE_KEYS):
        # transformers 4 Qwen2-VL: the top config reads its text_config's RoPE through
        key = next((name for name in oracle.SUB_CONFIGS if isinstance(base.get(name), dict)
                    and any(k in base[name] for k in ROPE_KEYS)), None)

    def edit(change):
        data = copy.deepcopy(base)
        target = data[key] if key else data
        return data if change(target) is not False else None

    def flat_block(target):
        block = target.get("rope_parameters")
        if not isinstance(block, dict) or any(isinstance(v, dict) for v in block.values()):
            return None
        return dict(block)

    def legacy(target):
        block = flat_block(target)
        if block is None:
            return False
        target.pop("rope_parameters")
        for moved in ("rope_theta", "partial_rotary_factor"):
            if moved in block:
                target[moved] = block.pop(moved)
        if block.get("rope_type", "default") != "default":
            target["rope_scaling"] = block

    def partial(target):
        block = flat_block(target) if "rope_parameters" in target else dict(
            target.get("rope_scaling") or {})  # transformers 4: rope_scaling, or none
        if block is None or block.get("rope_type", block.get("type", "default")) != "default" \
                or "partial_rotary_factor" in block or "partial_rotary_factor" in target:
            return False
        target["partial_rotary_factor"] = 0.5

    def bare(target):
        for name in ROPE_KEYS:
            target.pop(name, None)

    def flat(target):
        block = target.get("rope_parameters")
        if not isinstance(block, dict) or not any(isinstance(v, dict) for v in block.values()):
            return False
        bare(target)
        for offset, name in enumerate(oracle.THETA_KEYS):
            target[name] = 20_000.0 + 1000 * offset
        target["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}

    for name, change in (("legacy", legacy), ("partial", partial), ("bare", bare),
                         ("flat", flat)):
        data = edit(change)
        if data is not None:
            forms[name] = data
    return forms


def compare(model_type):
    """{form: (bucket, detail)} for one model type ({"object": ("skipped" | "no rope", …)}
    when there is nothing to compare)."""
    _quiet()
    if "timm" in model_type:  # its default config asks the Hub for a checkpoint
        return {"object": ("skipped", "default config needs the network")}
    try:
        config = CONFIG_MAPPING[model_type]()
    except Exception as error:  # noqa: BLE001 - a config that needs arguments
        return {"object": ("skipped", f"default config fails: {type(error).__name__}")}
    rope_config = oracle.rope_config(config)
    if rope_config is None:
        return {"object": ("no rope", "")}
    rotary = _rotary(rope_config)
    if rotary is None:
        try:
            inv_freq_from_config(rope_config)
        except UnsupportedRopeError as error:
            return {"object": ("unsupported", str(error))}
        except Exception:  # noqa: BLE001
            pass
        return {"object": ("skipped", "no text rotary embedding class builds from the default "
                                      "config")}
    theirs = oracle.tables(rotary)
    if not theirs:
        return {"object": ("skipped", f"{type(rotary).__name__} holds no inv_freq buffer")}
    results = {"object": compare_tables(rope_config, theirs, model_type)}
    for form, data in edited_forms(config, rope_config).items():
        data.setdefault("model_type", model_type)
        if form not in ("dict", "diff"):  # transformers reads the edited dict itself
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    form_theirs = oracle.rotary_tables(data)
            except Exception:  # noqa: BLE001 - transformers refuses this form
                continue
        else:
            form_theirs = theirs
        results[form] = compare_tables(data, form_theirs, model_type)
    return results


@lru_cache(maxsize=1)
def survey():
    torch.set_num_threads(1)
    # some default configs (EdgeTAM's timm backbone in 4.x) ask the Hub for a file: refuse at
    # once instead of retrying for half a minute
    import huggingface_hub.constants as hub

    offline, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, True
    try:
        return {model_type: compare(model_type) for model_type in sorted(CONFIG_MAPPING)}
    finally:
        hub.HF_HUB_OFFLINE = offline


def counts(results, form="object"):
    table = {}
    for forms in results.values():
        if form in forms:
            bucket = forms[form][0]
            table[bucket] = table.get(bucket, 0) + 1
    return table


@pytest.mark.slow
@pytest.mark.versions
def test_every_registered_model_type_matches_or_is_refused_clearly():
    results = survey()
    for form in FORMS:
        print(f"\ntransformers {transformers.__version__} {form:8s}: {counts(results, form)}")
    different = {(model_type, form): detail for model_type, forms in results.items()
                 for form, (bucket, detail) in forms.items() if bucket == "different"}
    assert not different, different
    table = counts(results)
    assert table.get("equal", 0) > 20, table  # the walk found the rotary classes
    # the plain dict was compared wherever the object was
    assert counts(results, "dict").get("equal", 0) + counts(results, "dict").get(
        "generic", 0) >= table.get("equal", 0), counts(results, "dict")


@pytest.mark.slow
@pytest.mark.versions
def test_the_rules_file_matches_the_classes_it_was_written_from():
    """The committed rules of the installed release are what its classes say now (a sample
    of the model types: every one with a rule beyond plain defaults, and every fifth)."""
    version = transformers.__version__
    if version not in hf_config.available_rules():
        pytest.skip(f"no rules file for transformers {version}: rope_lab reads configs with "
                    f"{hf_config.rules_version()}'s rules (and warns for a model type those do "
                    f"not list); `python -m rope_lab.hf.transformers_oracle` writes one")
    committed = hf_config.transformers_rules(version)
    special = ("legacy_keys", "theta_keys", "sub_defaults", "sub_defaults_given",
               "mla_head_dim", "attribute_map", "labels", "default_rope_type")
    sample = sorted(model_type for index, (model_type, entry) in
                    enumerate(sorted(committed["model_types"].items()))
                    if index % 5 == 0 or any(key in entry for key in special))
    fresh = oracle.model_type_rules(sample)
    for model_type in sample:
        assert fresh["model_types"].get(model_type) == committed["model_types"][model_type], \
            model_type
    assert set(fresh["known"]) == set(committed["known"])


if __name__ == "__main__":
    import sys
    results = survey()
    for model_type, forms in sorted(results.items()):
        for form, (bucket, detail) in forms.items():
            if bucket not in ("no rope", "equal") or "-v" in sys.argv:
                print(f"{bucket:12s} {model_type:28s} {form:8s} {detail[:140]}")
    for form in FORMS:
        print(transformers.__version__, form, counts(results, form))
