"""``python -m rope_lab.hf``: the offline config inspector, and rope_lab.hf.report."""

import json
import math
import subprocess
import sys
from importlib import resources

import pytest
import torch

from rope_lab.hf import __main__ as cli
from rope_lab.hf import report

FIXTURES = resources.files("rope_lab.hf") / "fixtures"
NAMES = sorted(path.name for path in FIXTURES.iterdir() if path.name.endswith(".json"))


def run(capsys, *args):
    code = cli.main([str(arg) for arg in args])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return path


LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
         "num_hidden_layers": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}


def test_every_fixture_has_a_source_and_is_inspected(capsys):
    assert len(NAMES) >= 12
    for name in NAMES:
        config = json.loads((FIXTURES / name).read_text())
        assert config["_source"]["source"], name
        code, out, err = run(capsys, FIXTURES / name)
        assert code == 0, (name, err)
        assert "rotary dims" in out and "wavelengths" in out and "base" in out


@pytest.mark.parametrize(("name", "expected"), [
    ("llama_3_1_8b.json", ["llama3 (factor=8", "trained context  8192", "× 8 → 65536"]),
    ("llama_4_scout.json", ["NoPE layers (12): 3, 7, 11"]),
    ("phi_3_5_mini.json", ["longrope", "short_factor up to 4096", "48 values"]),
    ("deepseek_v3.json", ["rotary dims      64 of head_dim 192", "softmax scale    × 1.87"]),
    ("gemma_3_4b.json", ["[full_attention]", "[sliding_attention]", "base             10000"]),
    ("gemma_4_text.json", ["128 of head_dim 512 (proportional: 192 pairs have θ = 0)"]),
    ("phi_2.json", ["rotary dims      32 of head_dim 80"]),
    ("gpt_neox_20b.json", ["rotary dims      24 of head_dim 96"]),
])
def test_report_lines(capsys, name, expected):
    code, out, _ = run(capsys, FIXTURES / name)
    assert code == 0
    for text in expected:
        assert text in out, text


def test_attention_factor_is_yarns_formula(capsys):
    _, out, _ = run(capsys, FIXTURES / "qwen2_5_7b_yarn.json")
    assert f"attention factor {0.1 * math.log(4) + 1:.6g}" in out


def test_critical_dimension_matches_the_closed_form():
    # pair i turns within L when 2π·base^(2i/d) ≤ L, i.e. i ≤ (d/2)·log_base(L/2π)
    for name in ("llama_2_7b.json", "llama_3_8b.json", "mistral_7b.json", "phi_2.json"):
        config = json.loads((FIXTURES / name).read_text())
        (entry,) = report.describe(config).values()
        d, base, length = entry.spec.rotary_dim, entry.spec.base, entry.spec.trained_context
        expected = math.floor(d / 2 * math.log(length / (2 * math.pi)) / math.log(base)) + 1
        assert entry.critical_pairs == min(expected, d // 2), name


def test_plot_writes_a_png(capsys, tmp_path):
    png = tmp_path / "spectrum.png"
    code, out, _ = run(capsys, FIXTURES / "gemma_3_4b.json", "--plot", png)
    assert code == 0 and f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(tmp_path.iterdir()) == [png]


@pytest.mark.parametrize(("target", "message"), [
    ("myplot", "--plot must name a .png file, got"),
    ("adir", "is a folder"),
    ("missing/rope.png", "does not exist"),
])
def test_plot_never_writes_another_file_than_it_says(capsys, tmp_path, target, message):
    (tmp_path / "adir").mkdir()
    before = sorted(tmp_path.rglob("*"))
    code, out, err = run(capsys, FIXTURES / "gemma_3_4b.json", "--plot", tmp_path / target)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize(("change", "warning"), [
    (lambda c: c.update(rope_scailing=c.pop("rope_scaling")), "'rope_scailing' looks like a "
     "misspelling of 'rope_scaling'"),
    (lambda c: c["rope_scaling"].update(low_freq_factr=1.0), "transformers ignores "
     "'low_freq_factr'"),
    (lambda c: c["rope_scaling"].update(beta_fast=32), "'beta_fast' (a yarn option)"),
    (lambda c: c["rope_scaling"].pop("original_max_position_embeddings"),
     "no original_max_position_embeddings"),
    (lambda c: c["rope_scaling"].pop("rope_type"), "rope_scaling has no rope_type"),
    (lambda c: c.update(rope_parameters={"rope_type": "default", "rope_theta": 1e4}),
     "rope_scaling and rope_parameters are both set and differ: transformers 5 reads "
     "rope_scaling"),
])
def test_warnings_for_what_transformers_ignores(capsys, tmp_path, change, warning):
    config = json.loads(json.dumps(LLAMA))
    change(config)
    code, out, _ = run(capsys, write(tmp_path, config))
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("warning:") and warning in line for line in lines), out
    # warnings come first: before the first layer-type block
    first_block = next(i for i, line in enumerate(lines) if line.startswith("["))
    assert all(i < first_block for i, line in enumerate(lines) if line.startswith("warning:"))
    code, _, _ = run(capsys, write(tmp_path, config), "--strict")
    assert code == 1


def test_a_clean_config_has_no_warnings(capsys, tmp_path):
    code, out, _ = run(capsys, write(tmp_path, LLAMA), "--strict")
    assert "warning" not in out and code == 0


def test_disagreeing_schemas_say_and_do_the_same(capsys, tmp_path):
    """rope_scaling wins (transformers 5): the report uses its block and the top-level theta,
    and says so; it never claims rope_parameters' theta is used."""
    config = {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
              "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    code, out, _ = run(capsys, write(tmp_path, config))
    assert code == 0
    assert "base             500000" in out and "linear (factor=2)" in out
    assert "drops rope_parameters" in out and "block's value is used" not in out


def test_unknown_model_type_is_named_and_its_rotary_dim_read(capsys, tmp_path):
    phi_msft = {"model_type": "phi-msft", "n_embd": 2560, "n_head": 32, "n_layer": 32,
                "n_positions": 2048, "rotary_dim": 32}
    code, out, _ = run(capsys, write(tmp_path, phi_msft), "--strict")
    assert code == 1
    assert "rotary dims      32 of head_dim 80" in out
    assert "'phi-msft' is not one transformers" in out and "generic rule" in out


@pytest.mark.parametrize("key", ["model_type", "layer"])
def test_terminal_escapes_from_the_config_are_printed_escaped(capsys, tmp_path, key):
    hostile = "\x1b]0;pwned\x07\x1b[2J\r\u202eall checks passed\nfake"
    config = dict(LLAMA)
    if key == "model_type":
        config["model_type"] = hostile
    else:
        config["layer_types"] = [hostile]
        config["rope_parameters"] = {hostile: {"rope_type": "default", "rope_theta": 1e4}}
        del config["rope_scaling"]
    code, out, err = run(capsys, write(tmp_path, config))
    assert code == 0
    for char in ("\x1b", "\x07", "\r", "\u202e"):
        assert char not in out + err
    assert "\\x1b" in out
    assert not any(line.startswith("fake") for line in out.splitlines())


def test_report_printable_escapes_every_control_character():
    assert report.printable("a\x1b[2Jb\nc\x9bd\u200f") == "a\\x1b[2Jb\nc\\x9bd\\u200f"


@pytest.mark.parametrize(("config", "message"), [
    ("{not json", "is not JSON"),
    ("[1, 2]", "holds a JSON list"),
    ({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12}, "no RoPE parameters"),
    ({**LLAMA, "head_dim": 127}, "odd"),
    ({**LLAMA, "rope_scaling": {**LLAMA["rope_scaling"], "factor": 0.5}}, "factor"),
    ({**LLAMA, "rope_scaling": {"rope_type": "magic"}}, "rope_type 'magic'"),
    # malformed numbers name their key
    ({**LLAMA, "num_attention_heads": 0}, "num_attention_heads must be > 0, got 0"),
    ({**LLAMA, "hidden_size": "64"}, "hidden_size must be an int, got '64'"),
    ({**LLAMA, "rope_theta": 10**400}, "rope_theta must be a finite number within float"),
    ({**LLAMA, "rope_scaling": {**LLAMA["rope_scaling"], "factor": "8"}}, "['factor'] must be"),
    ({**LLAMA, "max_position_embeddings": -5}, "max_position_embeddings must be > 0"),
    ({**LLAMA, "rope_scaling": {"rope_type": ["yarn"]}}, "['rope_type'] must be a string"),
    ({"model_type": "llava", "text_config": [1, 2]}, "['text_config'] must be a dict"),
    ({**LLAMA, "model_type": 7}, "model_type'] must be a string"),
])
def test_bad_input_gets_one_clear_error(capsys, tmp_path, config, message):
    code, out, err = run(capsys, write(tmp_path, config))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err


def test_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "absent.json")
    assert code == 2 and "is not a file" in err


@pytest.mark.slow
def test_module_entry_point_prints_no_traceback(tmp_path):
    bad = write(tmp_path, "{oops")
    result = subprocess.run([sys.executable, "-m", "rope_lab.hf", str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "is not JSON" in result.stderr


def nested(depth):
    config = {"model_type": "llama", "rope_theta": 1e4, "head_dim": 64}
    for _ in range(depth):
        config = {"model_type": "llava", "text_config": config}
    return config


@pytest.mark.parametrize(("depth", "message"), [(5000, "nested too deeply to read"),
                                                (50, "nested more than 8 levels deep")])
def test_a_deep_text_config_gets_one_line(capsys, tmp_path, depth, message):
    path = tmp_path / "deep.json"
    text = json.dumps(nested(depth)) if depth < 500 else (
        '{"model_type": "llava", "text_config": ' * depth + "{}" + "}" * depth)
    path.write_text(text)
    code, out, err = run(capsys, path)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_nope_layers_default_interval_and_null_blocks():
    llama4 = {"model_type": "llama4_text", "num_hidden_layers": 8, "head_dim": 64,
              "rope_theta": 5e5, "no_rope_layers": []}
    assert report.nope_layers(llama4) == [3, 7]
    nested = {"model_type": "x", "head_dim": 64, "num_hidden_layers": 4,
              "layer_types": ["sliding_attention", "full_attention"] * 2,
              "rope_parameters": {"sliding_attention": {"rope_theta": 1e4},
                                  "full_attention": None}}
    assert report.nope_layers(nested) == [1, 3]
    assert report.describe(nested)["full_attention"] is None


def test_wavelengths_skip_pairs_that_never_turn():
    freqs = torch.tensor([1.0, 0.5, 0.0], dtype=torch.float64)
    assert torch.allclose(report.wavelengths(freqs), 2 * math.pi / freqs[:2])
    assert report.critical_pairs(freqs, 7) == 1


# --- checks before work (issue 35) --------------------------------------------------------------

@pytest.mark.parametrize(("config", "expected"), [
    # built a 250-million-entry list (2.5 GB), then "MemoryError: " with no reason
    ({**LLAMA, "num_hidden_layers": 10**9, "no_rope_layer_interval": 4},
     "num_hidden_layers is 1000000000, more than 100000 (rope_lab.hf.config.MAX_LAYERS)"),
    ({**LLAMA, "num_hidden_layers": -3}, "num_hidden_layers must be > 0, got -3"),
    # GPT-J rotating 512 features of a 64-wide head returned 256 speeds, exit 0
    ({"model_type": "gptj", "n_embd": 4096, "n_head": 64, "rotary_dim": 512, "n_layer": 28,
      "n_positions": 2048}, "rotary_dim is 512, more than head_dim 64"),
])
def test_an_impossible_config_gets_one_line_and_status_2(capsys, tmp_path, config, expected):
    code, out, err = run(capsys, write(tmp_path, config))
    assert (code, out) == (2, "") and err.count("\n") == 1 and expected in err, err
