"""rope_lab.hf against every model family transformers knows.

Walks transformers' config registry (CONFIG_MAPPING). For each model type whose default
config, or its text sub-config, has RoPE parameters, it builds that model's own rotary
embedding class (``*RotaryEmbedding`` in its modeling module) from the config and compares
its ``inv_freq`` and attention scaling with :func:`rope_lab.hf.inv_freq_from_config` — for
every layer type the rotary embedding holds. Each model type lands in one bucket:

    equal         same frequencies (relative gap ≤ 1e-5, float32) and attention factor
    unsupported   rope_lab.hf raised UnsupportedRopeError naming the model type
    different     anything else: a wrong answer or an unexpected error (the test fails)

Model types whose modeling module does not import (missing optional dependencies) or whose
rotary class cannot be built from the default config are counted as skipped. Run this file
as a script to print the table.
"""

from __future__ import annotations

import logging
import math
import warnings
from functools import lru_cache

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import CONFIG_MAPPING  # noqa: E402

from rope_lab.hf import UnsupportedRopeError, inv_freq_from_config  # noqa: E402
from rope_lab.hf import transformers_oracle as oracle  # noqa: E402

RTOL = 1e-5
# the registry walk uses the oracle's lookups, and only its own "unsupported" bookkeeping
_rope_config, _rotary_classes, _their_tables = (oracle.rope_config, oracle.rotary_classes,
                                                oracle.tables)


def _quiet():
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")


def compare(model_type):
    """('equal' | 'unsupported' | 'different' | 'skipped' | 'no rope', detail)."""
    _quiet()
    if "timm" in model_type:  # its default config asks the Hub for a checkpoint
        return "skipped", "default config needs the network"
    try:
        config = CONFIG_MAPPING[model_type]()
    except Exception as error:  # noqa: BLE001 - a config that needs arguments
        return "skipped", f"default config fails: {type(error).__name__}"
    rope_config = _rope_config(config)
    if rope_config is None:
        return "no rope", ""
    rotary = None
    params = getattr(rope_config, "rope_parameters", None) or {}
    axial = isinstance(params, dict) and params.get("rope_type") == "axial"
    for cls in _rotary_classes(rope_config, axial):
        try:
            rotary = cls(config=rope_config)
            break
        except Exception:  # noqa: BLE001 - a rotary class for another sub-config
            continue
    if rotary is None:
        try:
            inv_freq_from_config(rope_config)
        except UnsupportedRopeError as error:
            return "unsupported", str(error)
        except Exception:  # noqa: BLE001
            pass
        return "skipped", "no text rotary embedding class builds from the default config"
    tables = _their_tables(rotary)
    if not tables:
        return "skipped", f"{type(rotary).__name__} holds no inv_freq buffer"
    for layer_type, (theirs, their_scale) in tables.items():
        try:
            ours, our_scale = inv_freq_from_config(rope_config, layer_type=layer_type)
        except UnsupportedRopeError as error:
            named = {model_type, getattr(rope_config, "model_type", model_type)}
            if not any(name and str(error).startswith(f"{name}:") for name in named):
                return "different", f"unsupported error does not name the model: {error}"
            return "unsupported", str(error)
        except Exception as error:  # noqa: BLE001 - any other error is a failure
            return "different", f"{layer_type}: {type(error).__name__}: {error}"
        if ours.shape != theirs.shape:
            return "different", f"{layer_type}: shape {tuple(ours.shape)} vs {tuple(theirs.shape)}"
        gap = ((ours.double() - theirs.double()).abs()
               / theirs.double().abs().clamp_min(1e-30)).max().item()
        if gap > RTOL:
            return "different", f"{layer_type}: inv_freq relative gap {gap:.2e}"
        if not math.isclose(float(our_scale), float(their_scale), rel_tol=1e-6):
            return "different", f"{layer_type}: attention factor {our_scale} vs {their_scale}"
    return "equal", type(rotary).__name__


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


def counts(results):
    table = {}
    for bucket, _ in results.values():
        table[bucket] = table.get(bucket, 0) + 1
    return table


def test_every_registered_model_type_matches_or_is_refused_clearly():
    results = survey()
    table = counts(results)
    print(f"\ntransformers {transformers.__version__}: {table}")
    different = {k: v for k, v in results.items() if v[0] == "different"}
    assert not different, different
    rope = table.get("equal", 0) + table.get("unsupported", 0)
    assert rope > 0
    assert table.get("equal", 0) >= 0.95 * rope, table


if __name__ == "__main__":
    import sys
    results = survey()
    for model_type, (bucket, detail) in sorted(results.items(), key=lambda kv: kv[1][0]):
        if bucket != "no rope" and (bucket != "equal" or "-v" in sys.argv):
            print(f"{bucket:12s} {model_type:28s} {detail[:150]}")
    print(transformers.__version__, counts(results))
