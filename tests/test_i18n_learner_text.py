"""What a learner of the Chinese edition still met in English (issue 36): the package's
errors, the docstrings show_source prints, the method dropdown and its legend, the claims
page, notebook 00's ways to run. Each: English unchanged, Chinese translated, a test that
fails on the English original."""

from __future__ import annotations

import ast
import inspect

import pytest
import torch

import rope_lab as rl
from rope_lab import about, claims, course, utils, widgets
from rope_lab.i18n import errors
from rope_lab.plots import length_extrapolation
from rope_lab.translations import catalogs

# --- errors --------------------------------------------------------------------------------------

def _binary_error() -> ValueError:
    with pytest.raises(ValueError) as caught:
        rl.binary_pe(33, 5)
    return caught.value


def test_an_error_stays_english_in_the_english_edition(english):
    error = _binary_error()
    assert errors.error_message(error) == str(error)
    assert errors.translate_error(str(error)) is None


def test_an_error_reads_chinese_with_its_english_kept(chinese):
    error = _binary_error()
    message = errors.error_message(error)
    first, second = message.splitlines()
    assert first == ("dim = 5 位的 binary_pe 最多只能为 2 的 5 次方（32）个位置编号，"
                     "收到的是 length = 33")
    assert second == f"（英文原文：{error}）"


def test_every_error_of_the_modules_a_learner_calls_is_translated():
    """Every refusal of the modules in errors.MODULES has a template in the catalog, and every
    template a translation that keeps its {fields}; a new raise in English fails here."""
    catalog = catalogs.read_catalog(catalogs.PACKAGE_PO)
    missing = [t for t in errors.templates() if not catalogs.translation(catalog, t)]
    assert not missing, missing
    assert len(errors.templates()) > 80


@pytest.mark.parametrize("make_error", [
    lambda: rl.apply_rope(torch.randn(4, 5)),  # odd feature size
    lambda: rl.apply_rope(torch.randn(2, 3, 4, 8), positions=torch.arange(5)),
    lambda: rl.inv_freq(8, base="10000"),
    lambda: rl.attention(torch.randn(3, 4), torch.randn(3, 5), torch.randn(3, 4)),
], ids=["odd dim", "positions", "base type", "qk sizes"])
def test_the_errors_a_learner_meets_match_their_templates(make_error, chinese):
    with pytest.raises((ValueError, TypeError)) as caught:
        make_error()
    translated = errors.translate_error(str(caught.value))
    assert translated is not None, str(caught.value)
    assert not any(word in translated for word in (" must ", " got ", "expected"))


def test_a_notebook_cell_shows_the_translation_under_the_traceback(chinese, capsys):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.set_custom_exc((ValueError, TypeError, IndexError), errors.show_translated)
    try:
        shell.run_cell("import rope_lab as rl\nrl.binary_pe(33, 5)")
    finally:
        shell.set_custom_exc((), None)
    shown = capsys.readouterr()
    text = shown.out + shown.err
    assert "got length = 33" in text and "最多只能为 2 的 5 次方（32）个位置编号" in text


def test_a_grader_quotes_the_package_error_in_chinese_and_english(chinese):
    from rope_lab.exercises import grading

    error = _binary_error()
    line = grading._describe_crash(error, lambda: None)
    assert "最多只能为" in line and "（英文原文：binary_pe with dim = 5 bits" in line


# --- show_source ---------------------------------------------------------------------------------

def test_every_docstring_a_notebook_shows_is_translated():
    catalog = catalogs.read_catalog(catalogs.PACKAGE_PO)
    shown = catalogs.shown_docstrings()
    assert len(shown) >= 25
    missing = [where for docstring, where in shown
               if not catalogs.translation(catalog, docstring)]
    assert not missing, missing


@pytest.mark.parametrize("obj", [rl.inv_freq, rl.attention, rl.permute_for_half_layout],
                         ids=lambda o: o.__name__)
def test_show_source_shows_the_same_code_with_a_chinese_docstring(obj, chinese):
    source = inspect.getsource(obj)
    shown = utils.translated_docstring(source)
    assert shown != source and ("参数：" in shown or "返回" in shown)
    original, translated = (ast.parse(s) for s in (source, shown))
    assert ([ast.dump(node) for node in original.body[0].body[1:]]
            == [ast.dump(node) for node in translated.body[0].body[1:]])
    assert ast.get_docstring(translated.body[0]) != ast.get_docstring(original.body[0])


def test_show_source_is_unchanged_in_english(english):
    source = inspect.getsource(rl.inv_freq)
    assert utils.translated_docstring(source) == source


def test_a_method_docstring_keeps_its_indentation(chinese):
    from rope_lab import models

    source = inspect.getsource(models.TinyTransformer.forward)
    shown = utils.translated_docstring(source)
    assert "下一个 token 的 logits" in shown
    compile("class X:\n" + shown, "<x>", "exec")  # indented as the original: valid code


# --- the method dropdown and legend ------------------------------------------------------------

def test_the_method_dropdown_names_each_method_and_keeps_its_identifier(chinese):
    control = widgets.scaling_panel().controls["method"]
    labels = dict(control.options)
    assert labels["线性插值（linear）"] == "linear" and labels["NTK 插值（ntk）"] == "ntk"
    assert all(value in label for label, value in control.options)
    assert control.value == "yarn"


def test_the_method_dropdown_is_unchanged_in_english(english):
    control = widgets.scaling_panel().controls["method"]
    assert list(control.options) == ["default", "linear", "ntk", "dynamic", "yarn", "llama3"]
    assert length_extrapolation.scaling_label("linear") == "linear"


# --- the claims page -----------------------------------------------------------------------------

def test_the_claims_table_speaks_chinese(chinese):
    table = claims.claims_markdown(catalogs.check_lines())
    header, _, first, *rest = table.splitlines()
    assert header == "| 原博文 | 论断 | 结论 | 条件 / 理由 | 检验位置 |"
    assert first.startswith("| 000 第 3 行 | 没有位置编码时，注意力对查询是置换等变的")
    assert "01 · ✔ 键和值" in first  # the check line as the Chinese notebook prints it


def test_the_claims_table_is_unchanged_in_english(english):
    first = claims.claims_markdown().splitlines()[2]
    assert first.startswith("| 000 l. 3 | Without position encoding, attention is")
    assert first.endswith("| 01 · ✔ keys and values: attention(q, k[σ], v[σ]) = "
                          "attention(q, k, v) |")


# --- notebook 00's ways to run --------------------------------------------------------------------

def test_an_unpublished_copy_offers_no_colab_or_binder_link(english):
    table = about.ways_to_run_markdown(repository="")
    assert "| **Binder** |" not in table and "Binder badge in the README opens" not in table
    assert "names no published repository" in table


def test_a_published_copy_offers_colab_and_binder(english, monkeypatch):
    monkeypatch.setattr(course, "REPOSITORY", "https://github.com/owner/rope_lab")
    table = about.ways_to_run_markdown()
    assert "| **Binder** |" in table and "| **Google Colab** |" in table
    assert "names no published repository" not in table


def test_the_ways_to_run_speak_chinese(chinese):
    table = about.ways_to_run_markdown(repository="")
    assert table.startswith("| 在哪里 | 怎么做 |") and "这份副本用不了" in table


# --- grader lines at a projector's width ----------------------------------------------------------

def test_printed_lines_wrap_between_words_in_the_lab_and_the_book():
    """JupyterLab's output area breaks anywhere (word-break: break-all); the course's CSS,
    loaded by the lab and by every book page, breaks between words."""
    from rope_lab import book

    css = book.CJK_CSS.read_text(encoding="utf-8")
    rule = css[css.index(".jp-OutputArea-output pre {"):]
    assert "word-break: normal" in rule.split("}")[0]
