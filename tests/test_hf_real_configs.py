"""rope_lab.hf on real published config.json files, with transformers' own classes as the oracle.

``tests/fixtures/configs/`` holds config.json files as they were published (vendored copies in
public repositories; ``SOURCES.json`` names the repository, path and commit of each, and what
the copier changed). For every file, and the sixteen fixtures of notebook 10:

- a model type transformers knows and can build: ``inv_freq_from_config`` on the plain dict
  equals the model's own rotary embedding (``transformers_oracle.rotary_tables``) for every
  layer type, attention factor included;
- transformers cannot build it (a model type it does not know, remote code, no RoPE):
  rope_lab refuses with one clear error, or answers with a warning that names the rule used.

Run as a script for the verdict table.
"""

from __future__ import annotations

import json
import math
import warnings
from importlib import resources
from pathlib import Path

import pytest
import torch

from rope_lab import hf

FOLDER = Path(__file__).parent / "fixtures" / "configs"
SOURCES = json.loads((FOLDER / "SOURCES.json").read_text(encoding="utf-8"))
COLLECTED = sorted(path for path in FOLDER.glob("*.json") if path.name != "SOURCES.json")
BUNDLED = sorted(Path(str(resources.files("rope_lab.hf") / "fixtures")).glob("*.json"))


def load(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {key: value for key, value in data.items() if not key.startswith("_")}


def ours(config):
    """{layer_type: (inv_freq, attention_factor)} and the warnings, or the error raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = {layer_type: hf.inv_freq_from_config(config, layer_type=layer_type)
                      for layer_type in hf.layer_types(config)}
        except (ValueError, TypeError) as error:
            return error, [str(w.message) for w in caught]
    return result, [str(w.message) for w in caught]


def theirs(config):
    """transformers' {layer_type: (inv_freq, attention_scaling)}, or why it has none."""
    from rope_lab.hf import transformers_oracle as oracle

    try:
        return oracle.rotary_tables(config)
    except oracle.OracleUnavailable as error:
        return error
    except Exception as error:  # noqa: BLE001 - transformers refuses the file
        return RuntimeError(f"transformers refuses it: {type(error).__name__}: {error}")


def verdict(config) -> tuple[str, str]:
    """("equal" | "refused" | "generic" | "unchecked" | "release differs" | "different",
    detail); "release differs": rope_lab warned that the installed release computes another
    YaRN (4.51 to 4.55), and that release computes exactly what the warning says."""
    mine, notes = ours(config)
    reference = theirs(config)
    newer = (isinstance(reference, Exception) and "has no model type" in str(reference)
             and hf.config._rules(config.get("model_type")) is not None)
    if newer or isinstance(reference, Exception) and ("has no rotary embedding" in str(reference)
                                                      or "refuses it" in str(reference)):
        # a model type only a later release knows (DeepSeek-V3 on 4.45: rope_lab reads it
        # with that release's rules, checked where that release is installed), or
        # a model type the installed transformers knows, whose rotary class does not build
        # from a config in this release (4.45's Gemma takes dim and base), or a file this
        # release refuses (4.45 and Phi-4-mini's partial LongRoPE): nothing to compare
        return "unchecked", str(reference)
    if isinstance(reference, Exception):
        if isinstance(mine, Exception):
            return "refused", f"{type(mine).__name__}: {mine}"
        rule = [note for note in notes if "generic rule" in note or "never reads" in note]
        if rule:
            return "generic", rule[0]
        return "different", f"transformers cannot build it ({reference}) and rope_lab said nothing"
    if isinstance(mine, Exception):
        return "different", f"transformers builds it; rope_lab refused: {mine}"
    gap = _gap(mine, reference)
    if gap is None:
        return "equal", "; ".join(notes)
    said = [note for note in notes if FACTOR_FROM_LENGTHS in note]
    if said:
        # transformers 4.51 to 4.55 take YaRN's factor from the lengths; rope_lab keeps the
        # factor and said so. The release must compute exactly that: the file with its factor
        # replaced by the ratio, read by rope_lab, equals transformers
        as_release, _ = ours(_factor_from_lengths(config))
        if not isinstance(as_release, Exception) and _gap(as_release, reference) is None:
            return "release differs", said[0]
    return "different", gap


FACTOR_FROM_LENGTHS = "computes YaRN with factor = max_position_embeddings"


def _factor_from_lengths(config: dict) -> dict:
    """``config`` with each YaRN block's factor replaced by max_position_embeddings /
    original_max_position_embeddings: what transformers 4.51 to 4.55 compute."""
    config = json.loads(json.dumps(config))
    for key in ("rope_scaling", "rope_parameters"):
        block = config.get(key)
        if isinstance(block, dict) and block.get("original_max_position_embeddings"):
            block["factor"] = (config["max_position_embeddings"]
                               / block["original_max_position_embeddings"])
    return config


def _gap(mine: dict, reference: dict) -> str | None:
    """None where rope_lab's tables equal transformers' (every layer type), else how not."""
    for layer_type, (freqs, factor) in reference.items():
        if layer_type not in mine:
            return f"layer types {sorted(map(str, reference))} vs {sorted(map(str, mine))}"
        got, got_factor = mine[layer_type]
        if got.shape != freqs.shape:
            return f"{layer_type}: shape {tuple(got.shape)} vs {tuple(freqs.shape)}"
        gap = ((got.double() - freqs.double()).abs()
               / freqs.double().abs().clamp_min(1e-30)).max().item()
        if gap > 1e-5 or not math.isclose(got_factor, factor, rel_tol=1e-6):
            return (f"{layer_type}: relative gap {gap:.1e}, attention factor "
                    f"{got_factor:.6g} vs {factor:.6g}")
    return None


def test_every_collected_config_has_a_source_note():
    names = {path.stem for path in COLLECTED}
    assert names == set(SOURCES), names ^ set(SOURCES)
    for name, source in SOURCES.items():
        assert source["repo"].count("/") == 1 and source["path"], name
        assert len(source["commit"]) == 40 and source["note"], name
    assert len(COLLECTED) >= 60


@pytest.mark.parametrize("path", COLLECTED + BUNDLED, ids=lambda path: path.stem)
def test_real_config_is_read_right_or_refused_clearly(path):
    pytest.importorskip("transformers")
    bucket, detail = verdict(load(path))
    assert bucket != "different", detail
    if bucket == "unchecked":
        pytest.skip(detail)


FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
            "phi", "phi3", "deepseek_v2", "deepseek_v3", "gpt_oss", "olmo2", "cohere",
            "stablelm", "starcoder2", "gptj", "gpt_neox", "exaone4", "llava", "minicpm3")


def test_the_families_the_issue_names_are_compared_not_only_refused():
    """Every family the installed release can compare is compared with it and equal, not
    only refused. Not comparable: a family the release does not have yet (minicpm3, gpt_oss
    arrive in later releases) or whose rotary class it cannot build from a config (4.45's
    Mistral, Gemma, Phi-3: every verdict "unchecked")."""
    transformers = pytest.importorskip("transformers")
    verdicts = {}
    for path in COLLECTED + BUNDLED:
        config = load(path)
        verdicts.setdefault(config.get("model_type"), set()).add(verdict(config)[0])
    comparable = [model_type for model_type in FAMILIES
                  if model_type in transformers.CONFIG_MAPPING
                  and verdicts.get(model_type, {"unchecked"}) != {"unchecked"}]
    assert [model_type for model_type in comparable if "equal" not in verdicts[model_type]] == []
    assert {"llama", "qwen2", "gpt_neox"} <= set(comparable)  # every supported release


def test_remote_code_types_are_named_as_such():
    phi2 = load(FOLDER / "mlc_phi_2.json")  # model_type phi-msft: remote code, rotary_dim 32
    (freqs, _), = ours(phi2)[0].values()
    assert freqs.shape == (16,)
    assert any("'phi-msft' is not one transformers" in note and "generic rule" in note
               for note in ours(phi2)[1])


def test_llama2_without_rope_theta_and_llava_text_config_take_the_class_defaults():
    llama2 = load(FOLDER / "mlc_llama2_7b.json")  # "rope_scaling": null, no rope_theta
    assert "rope_theta" not in llama2 and llama2["rope_scaling"] is None
    freqs, factor = hf.inv_freq_from_config(llama2)
    assert torch.allclose(freqs.double(), 10_000.0 ** (-torch.arange(0, 128, 2) / 128).double())
    llava = load(FOLDER / "mlc_llava.json")  # text_config: model_type llama and few keys
    assert "hidden_size" not in llava["text_config"]
    assert hf.rope_spec(llava).head_dim == 128  # LlamaConfig's 4096 / 32


if __name__ == "__main__":
    for path in COLLECTED + BUNDLED:
        config = load(path)
        bucket, detail = verdict(config)
        print(f"{path.stem:30s} {str(config.get('model_type')):16s} {bucket:9s} {detail[:110]}")
