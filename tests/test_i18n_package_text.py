"""Text the package shows that reached Chinese readers in English (issue 31's review): the
claims summary, the environment report's keys, the course map's links, the RoPE config
report, check_rotary's verdict, the config warnings and ps.compare's verdicts.

Each: the English edition prints exactly what it printed before (the literals below), and
the Chinese edition prints no English word but names (identifiers, libraries, the course's
terms kept in English)."""

from __future__ import annotations

import importlib.metadata
import re
import warnings

import pytest
import torch

import rope_lab as rl
from rope_lab import about, claims, course, hf
from rope_lab.experiments import position_schemes as ps
from rope_lab.hf import report

# Names a Chinese sentence keeps in English: libraries, the field's terms kept untranslated
# (terms_zh.csv: RoPE, NoPE, base, logits …) and the functions' own words for tensors.
NAMES = {"rope_lab", "transformers", "torch", "python", "RoPE", "NoPE", "GPU", "CPU", "MLA",
         "DeepSeek", "base", "logits", "softmax", "cos", "sin", "dtype", "float32", "default",
         "yarn", "linear", "function", "config", "json", "phi", "llama", "Linux", "glibc",
         "fc", "cpu", "with", "gt", "all", "minilm", "numpy", "matplotlib", "ipywidgets",
         "safetensors", "models", "apply_rotary", "rope", "YaRN"}


def english_words(text: str, names=()) -> list[str]:
    """The English words of ``text`` a translation left behind: words of two letters or more
    that are not an identifier (with ``_``, a digit, or ``=``), not in quotes ('…', `…`) and
    not one of ``NAMES`` or ``names``."""
    text = re.sub(r"'[^'\n]*'|`[^`\n]*`", " ", text)
    text = re.sub(r"\S*[_\d=]\S*", " ", text)
    allowed = NAMES | set(names)
    return [word for word in re.findall(r"[A-Za-z]{2,}", text) if word not in allowed]


def test_the_helper_finds_english_and_spares_names():
    assert english_words("80 true, 30 false") == ["true", "false"]
    assert english_words("对 80 个，rope_type 'default'，RoPE 的 head_dim=16") == []


# --- notebook 00: the claims summary and the claims check ---------------------------------------

COUNTS = {"true": 80, "false": 30, "true under a stated condition": 13, "unverifiable": 7}


def test_claims_summary_and_counts_english_unchanged(english):
    lines = claims.summary_markdown().splitlines()
    assert lines[:2] == ["| verdict | claims | checked in a notebook | not taught (reason given) |",
                         "|---|---|---|---|"]
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| true", "| false", "| true under a stated condition", "| unverifiable", "| **all**"]
    assert claims.counts_line(COUNTS) == ("80 true, 30 false, 13 true under a stated "
                                          "condition, 7 unverifiable")


def test_claims_summary_and_counts_speak_chinese(chinese):
    table = claims.summary_markdown()
    assert table.startswith("| 结论 | 论断数 |") and not english_words(table)
    # the notebook reads the counts from the second column, whatever the language
    counts = [line.split(" | ")[1] for line in table.splitlines()[2:]]
    assert counts == [str(n) for n in claims.counts().values()][:4] + [
        str(len(claims.load_claims()))]
    line = claims.counts_line(COUNTS)
    assert line == "对 80 个，错 30 个，在所述条件下成立 13 个，无法检验 7 个"
    assert not english_words(line)


# --- notebook 00: the environment report and the course map -----------------------------------

def test_environment_keys_stay_english_for_code_and_show_chinese(chinese):
    report_ = about.environment()
    assert "device" in report_ and "platform" in report_  # what code reads
    shown = {line.split(" : ")[0].strip() for line in about.environment_report().splitlines()}
    assert {"设备", "平台"} <= shown
    assert not english_words(" ".join(shown), names=about.REPORTED_PACKAGES)


def _course(tmp_path, twins):
    (tmp_path / "zh_CN").mkdir()
    for name in twins:
        (tmp_path / "zh_CN" / name).write_text("{}")
    (tmp_path / "zh_CN" / ".ipynb_checkpoints").mkdir()  # JupyterLab's copies never count
    (tmp_path / "zh_CN" / ".ipynb_checkpoints" / course.NOTEBOOKS[1].filename).write_text("{}")
    return tmp_path


def _links(markdown: str) -> dict[str, str]:
    return {row.split(" | ")[0].strip("| "): re.search(r"\]\(([^)]*)\) \|$", row)[1]
            for row in markdown.splitlines()[2:-1]}


def test_the_english_course_map_is_unchanged(english, tmp_path, monkeypatch):
    folder = _course(tmp_path, [course.NOTEBOOKS[0].filename])
    links = _links(about.course_map_markdown(notebook_dir=folder))
    assert links == {n.filename[:2]: n.filename for n in course.NOTEBOOKS}
    monkeypatch.setattr(course, "REPOSITORY", "https://github.com/teacher/course")
    monkeypatch.setattr(course, "REF", "v2")
    links = _links(about.course_map_markdown(notebook_dir=folder))
    assert links["00"] == ("https://colab.research.google.com/github/teacher/course/blob/v2/"
                           "notebooks/00_start_here.ipynb")


def test_the_chinese_course_map_links_twins_and_english_originals(chinese, tmp_path,
                                                                  monkeypatch):
    first, second, third = (n.filename for n in course.NOTEBOOKS[:3])
    folder = _course(tmp_path, [first, third])
    links = _links(about.course_map_markdown(course.NOTEBOOKS[:3], notebook_dir=folder))
    assert links == {"00": first, "01": f"../{second}", "02": third}
    monkeypatch.setattr(course, "REPOSITORY", "https://github.com/teacher/course")
    monkeypatch.setattr(course, "REF", "v2")
    links = _links(about.course_map_markdown(course.NOTEBOOKS[:3], notebook_dir=folder))
    colab = "https://colab.research.google.com/github/teacher/course/blob/v2/notebooks/"
    assert links == {"00": f"{colab}zh_CN/{first}", "01": f"{colab}{second}",
                     "02": f"{colab}zh_CN/{third}"}
    # no translated notebooks at hand (an installed package): every link is the English one
    links = _links(about.course_map_markdown(course.NOTEBOOKS[:3], notebook_dir=tmp_path / "x"))
    assert links == {"00": f"{colab}{first}", "01": f"{colab}{second}", "02": f"{colab}{third}"}


def test_the_course_map_in_this_checkout_links_only_files_that_exist(chinese):
    here = about.NOTEBOOK_DIR / "zh_CN"
    for number, link in _links(about.course_map_markdown()).items():
        assert (here / link).resolve().is_file(), (number, link)


# --- notebooks 10 and 11: the config report, its warnings and check_rotary ---------------------

CONFIG = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "num_hidden_layers": 1, "max_position_embeddings": 512, "rope_theta": 10000.0}


def _module(base, width=16):
    def rotary(x, position_ids):  # a bare rotary module, as transformers' are called
        angles = position_ids.double()[..., None] * rl.inv_freq(width, base=base,
                                                                dtype=torch.float64)
        table = torch.cat((angles, angles), -1)
        return table.cos().float(), table.sin().float()
    return rotary


HEADER = ("  layer type  module(s)  dtype    rotary dims  max |Δcos|  max |Δsin|  "
          "max |Δ rotated|  tolerance")
VERDICTS = [
    (_module(10000.0),
     "✔ rotary embedding matches rope_lab for this config (positions 0 … 448)\n" + HEADER +
     "\n  all         function   float32  16 of 16     2.9e-08     3.0e-08     —                "
     "2.1e-04"),
    (_module(500.0),
     "✘ rotary embedding does NOT match rope_lab for this config (positions 0 … 448)\n" + HEADER
     + "\n  all         function   float32  16 of 16     1.9e+00     1.9e+00     —                "
     "2.1e-04\n  ✘ all: cos/sin differ by up to 1.9 (tolerance 0.0002); worst at position 320 "
     "— the model's frequencies are not the config's"),
    (_module(10000.0, 8),
     "✘ rotary embedding does NOT match rope_lab for this config (positions 0 … 448)\n" + HEADER
     + "\n  all         function   float32  8 of 16      —           —           —                "
     "2.1e-04\n  ✘ all: the model rotates 8 features per head, the config says 16 of head_dim "
     "16 (rope_type 'default', partial_rotary_factor 1)"),
]
PHI_2 = ("'phi-2 config.json': model_type='phi', 32 layers\n\n[all layers]\n"
         "  rotary dims      32 of head_dim 80\n  base             10000\n"
         "  rope type        default\n"
         "  attention factor 1 (multiplies cos and sin; logits × 1)\n"
         "  wavelengths      6.283 … 3.533e+04 positions\n"
         "  critical dim     22 (11 of 16 pairs of the unscaled θ_i turn fully within the "
         "trained 2048 positions)\n  context          2048 positions")
TYPO = {**CONFIG, "rope_scalling": {"rope_type": "linear", "factor": 2.0}}
def _transformers_major() -> int:
    """The installed transformers' major version (0: not installed)."""
    try:
        return int(importlib.metadata.version("transformers").split(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return 0


WARNINGS = [  # (config, what config_warnings or schema_warnings says in English)
    (TYPO, "'rope_scalling' looks like a misspelling of 'rope_scaling': transformers ignores it"),
    (report.load_fixture("qwen3_8b_yarn"),
     "rope_scaling: factor=4 but max_position_embeddings / original_max_position_embeddings = "
     "40960 / 32768 = 1.25; transformers warns and uses the explicit factor, so does this "
     "result"),
]
# transformers 4 applies partial_rotary_factor to every model's plain RoPE (no note then);
# 5 lets each model's rotary class decide, and Llama's ignores it
if not 0 < _transformers_major() < 5:
    WARNINGS.append((
        {**CONFIG, "partial_rotary_factor": 0.5},
        "llama: partial_rotary_factor=0.5 is not read by its rotary embedding for plain RoPE "
        "(transformers rotates all 16 features of the head); a scaling rope_type would read it"))


def _warnings(config) -> list[str]:
    return report.schema_warnings(config) + hf.config_warnings(config)


def _verdict(module):
    return repr(hf.check_rotary(module, CONFIG, positions=torch.arange(0, 512, 64)))


@pytest.fixture
def yarn_reads_its_factor(monkeypatch):
    """The words of the YaRN warning depend on the installed release (transformers 4.51 to
    4.55 took the factor from the lengths: rope_lab.hf.config.YARN_FACTOR_FROM_LENGTHS);
    these tests pin the words of 4.56 and later."""
    from rope_lab.hf import config

    monkeypatch.setattr(config, "_yarn_factor_from_lengths", lambda: False)


def test_the_config_report_and_warnings_english_unchanged(english, yarn_reads_its_factor):
    assert report.format_report(report.load_fixture("phi_2"), name="phi-2 config.json") == PHI_2
    for config, expected in WARNINGS:
        assert _warnings(config) == [expected]
    for module, expected in VERDICTS:
        assert _verdict(module) == expected


def test_the_config_report_and_warnings_speak_chinese(chinese, yarn_reads_its_factor):
    text = report.format_report(report.load_fixture("phi_2"), name="phi-2 config.json")
    assert "  旋转维数         head_dim 80 中的 32 维" in text.splitlines()
    assert not english_words(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hf.inv_freq_from_config(WARNINGS[1][0])
    assert [str(w.message) for w in caught] == _warnings(WARNINGS[1][0])  # the same words
    for config, _english in WARNINGS:
        notes = _warnings(config)
        assert len(notes) == 1 and not english_words(notes[0]), notes
    typo = report.format_report(TYPO)
    assert "警告：'rope_scalling' 像是 'rope_scaling' 的拼写错误" in typo
    for module, _english in VERDICTS:
        text = _verdict(module)
        assert text.splitlines()[0][:1] in "✔✘" and not english_words(text), text
    # the 4.51-to-4.55 reading of YaRN's factor, in Chinese too
    from rope_lab.hf import config as config_module

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config_module, "_yarn_factor_from_lengths", lambda: True)
        patch.setattr(config_module, "installed_transformers", lambda: "4.53.3")
        (note,) = hf.config_warnings(report.load_fixture("qwen3_8b_yarn"))
    assert "已安装的 transformers 4.53.3 计算 YaRN 时用" in note and "40960 / 32768 = 1.25" in note
    assert not english_words(note), note
    # the numbers stay where code and readers find them
    verdict = hf.check_rotary(_module(500.0), CONFIG, positions=torch.arange(0, 512, 64))
    assert not verdict.ok and "位置 320" in verdict.rows[0].problem


# --- notebook 12: ps.compare --------------------------------------------------------------------

def _results():
    results = {"config": {"seeds": [0, 1, 2]}, "units": {}}
    for scheme, values in (("a", (1.0, 1.2, 1.1)), ("b", (2.0, 2.5, 2.2)), ("c", (1.15, 3, 2))):
        for seed, value in enumerate(values):
            results["units"][f"{scheme}|{seed}"] = {"copy": {scheme: {"loss": {"8": value}}}}
    return results


def test_compare_english_unchanged_and_its_relation(english):
    results = _results()
    below, above = (ps.compare(results, x, y, "copy", "loss", 8) for x, y in ("ab", "ba"))
    same = ps.compare(results, "a", "c", "copy", "loss", 8)
    assert below == "a < b for every seed (1.00–1.20 vs 2.00–2.50)" and below.relation == "<"
    assert above == "b > a for every seed (2.00–2.50 vs 1.00–1.20)" and above.relation == ">"
    assert same == "a vs c: no difference within the seed spread (1.00–1.20 vs 1.15–3.00)"
    assert same.relation is None


def test_compare_speaks_chinese_with_the_same_relation(chinese):
    results = _results()
    below = ps.compare(results, "a", "b", "copy", "loss", 8)
    same = ps.compare(results, "a", "c", "copy", "loss", 8)
    assert below == "a < b，每个随机种子都如此（1.00–1.20 对 2.00–2.50）" and below.relation == "<"
    assert same.relation is None and "分不出差别" in same
    assert not english_words(below) and not english_words(same)
