"""One source, two languages: the Chinese edition is built from the English notebooks and gettext
catalogs (rope_lab.i18n). These tests say when a translation is missing or stale, when the
committed Chinese notebooks are not what the build makes, when their code drifts from the
English, when a translation breaks a placeholder, a formula, code or a link, and when a term
strays from the term table. The second half shows each check failing on a broken input.
"""

from __future__ import annotations

import ast
import copy
import gettext
import io
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("babel", reason="the catalogs need Babel (the test extra)")

import rope_lab as rl  # noqa: E402
from rope_lab import i18n  # noqa: E402
from rope_lab.glossary import GLOSSARY  # noqa: E402
from rope_lab.translations import catalogs, documents, lint  # noqa: E402
from rope_lab.translations import notebooks as text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = catalogs.catalogs()
NOTEBOOK_CATALOGS = [po for po in CATALOGS
                     if not catalogs.is_document(catalogs.english_source(po.stem))]
TEACHING_PO = catalogs.CATALOG_DIR / "TEACHING.po"
SEEDS = Path(os.environ.get("ROPE_LAB_SEEDS",
                            Path(__file__).resolve().parents[2] / "shared" / "seeds"))
# Terms notebooks 10–12 use, which the table must carry before those notebooks are translated.
LATE_TERMS = ["NoPE", "p-RoPE", "MLA", "GQA", "LongRoPE", "KV cache", "varlen attention",
              "autocast", "eager attention", "critical dimension", "attention factor", "nats",
              "ablation", "passkey retrieval", "YaRN", "NTK-aware scaling",
              "rotary position embedding (RoPE)"]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _entries(po: Path):
    """(message, translation) for every message of the notebook or document the catalog
    translates."""
    catalog = catalogs.read_catalog(po)
    seen = set()
    for message in catalogs.source_messages(catalogs.english_source(po.stem)):
        if message.msgid not in seen:
            seen.add(message.msgid)
            yield message, catalogs.translation(catalog, message.msgid)


def test_the_first_phase_is_translated():
    assert {p.stem for p in CATALOGS} >= {
        f"{stem}{suffix}" for stem in ("01_attention_without_position",
                                       "02_absolute_position_encodings",
                                       "04_rope_in_d_dimensions", "08_rope_beyond_1d")
        for suffix in ("", "_solutions")}


# --- the repository ---------------------------------------------------------------------------

@pytest.mark.parametrize("po", [*CATALOGS, catalogs.PACKAGE_PO], ids=lambda p: p.name)
def test_every_message_has_a_current_translation(po):
    """An English text added or changed since the last translation is missing or fuzzy."""
    template = (catalogs.package_template() if po == catalogs.PACKAGE_PO
                else catalogs.source_template(catalogs.english_source(po.stem)))
    found = catalogs.status(po, template)
    assert found.entries > 0
    assert not found.missing and not found.fuzzy, (
        f"{po.name}: {len(found.missing)} message(s) without a translation, "
        f"{len(found.fuzzy)} fuzzy (the English changed), e.g. "
        f"{(found.missing + found.fuzzy)[:3]}. Run `python -m rope_lab.translations update`, "
        "translate the empty and fuzzy entries of the .po file, then `make translations`.")


def test_the_committed_chinese_edition_is_what_the_build_makes():
    problems = catalogs.stale_outputs()
    assert not problems, ("the Chinese edition is stale or was edited by hand: "
                          f"{problems}; run `make translations` (or `python -m "
                          "rope_lab.translations build`) and commit what it writes")


@pytest.mark.slow
@pytest.mark.skipif(not (catalogs.ROOT / ".git").exists(), reason="not a git checkout")
def test_a_chinese_notebook_run_and_saved_in_class_is_still_what_the_build_makes(tmp_path):
    """The README's path in Chinese: `make lab`, Run All and save (outputs, execution counts,
    the kernel's language_info, a checkpoint copy), then `make test`. git's filter strips what
    the class saved, so the edition is not stale, the build keeps the class's outputs, and a
    real edit still shows."""
    pytest.importorskip("nbstripout")
    from test_project import clean_filter  # the filter `make` sets up

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(catalogs.ROOT), str(clone)], check=True)
    for key, value in (("clean", clean_filter()), ("smudge", "cat")):
        subprocess.run(["git", "config", f"filter.nbstripout.{key}", value], cwd=clone,
                       check=True)
    def run_and_save(path, printed):  # what executing and saving adds to a notebook
        notebook = json.loads(path.read_text(encoding="utf-8"))
        code = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
        code["execution_count"] = 1
        code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [printed]}]
        code["metadata"]["execution"] = {"iopub.status.idle": "2026-11-26T16:18:11.078010Z"}
        notebook["metadata"]["language_info"] = {"name": "python", "version": "3.12.1"}
        saved = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
        path.write_text(saved, encoding="utf-8")
        return notebook, code, saved

    run_and_save(clone / "notebooks" / "00_start_here.ipynb", "ran in class\n")
    path = clone / "notebooks" / "zh_CN" / "00_start_here.ipynb"
    notebook, code, saved = run_and_save(path, "课堂上运行\n")
    (path.parent / ".ipynb_checkpoints").mkdir()
    (path.parent / ".ipynb_checkpoints" / "00_start_here-checkpoint.ipynb").write_text(
        saved, encoding="utf-8")
    assert catalogs.stale_outputs(clone) == []
    assert catalogs.build(clone) == [] and path.read_text(encoding="utf-8") == saved
    code["source"] = ["print('改过')\n"]  # a hand edit: git would commit it
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert catalogs.stale_outputs(clone) == [
        "notebooks/zh_CN/00_start_here.ipynb: differs from what the build makes (edited by "
        "hand, or the English notebook or its catalog changed since the last build)"]


def test_the_build_strips_notebooks_with_the_options_of_gits_filter():
    """catalogs.stored_notebook runs nbstripout with the options the Makefile gives git's
    clean filter: the same notebook as git would store it."""
    makefile = (catalogs.ROOT / "Makefile").read_text()
    command = re.search(r"^NBSTRIPOUT\s*:?=\s*(.+)$", makefile, re.M)[1]
    options = re.search(r"^NBSTRIPOUT_ARGS\s*:?=\s*(.+)$", makefile, re.M)[1]
    program, arguments = command.split(" -m nbstripout ")
    assert program.endswith("$(PY))'") and arguments.strip() == "$(NBSTRIPOUT_ARGS)"
    assert shlex.split(options) == [*catalogs.CLEAN_FILTER_OPTIONS]


@pytest.mark.parametrize("po", NOTEBOOK_CATALOGS, ids=lambda p: p.stem)
def test_the_chinese_code_is_the_english_code(po):
    english = catalogs.english_source(po.stem)
    problems = text.code_drift(_load(english), _load(catalogs.translated_path(english)),
                               language=catalogs.LANGUAGE)
    assert not problems, problems


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_translations_keep_fields_maths_code_and_links(po):
    problems = [f"{message.msgid[:50]!r}: {problem}" for message, translation in _entries(po)
                if translation is not None
                for problem in lint.message_problems(
                    message.msgid, translation, brace_format=message.brace_format,
                    markdown=message.kind == "markdown", table=message.note == "markdown table")]
    assert not problems, problems


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_translated_markdown_renders_like_the_english(po):
    pytest.importorskip("markdown_it", reason="markdown-it-py renders the markdown")
    problems = [f"{translation[:60]!r}: {problem}" for message, translation in _entries(po)
                if translation is not None and message.kind == "markdown"
                for problem in lint.rendering_problems(message.msgid, translation)]
    assert not problems, problems


def test_package_messages_keep_their_fields():
    catalog = catalogs.read_catalog(catalogs.PACKAGE_PO)
    problems = [(m.id, lint.message_problems(m.id, m.string, brace_format=True))
                for m in catalog if m.id and m.string]
    assert not [p for p in problems if p[1]], problems


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_terms_follow_the_table(po):
    terms = lint.load_terms()
    messages = [(m.msgid, t, m.note) for m, t in _entries(po) if m.kind == "markdown" and t]
    problems = lint.term_problems(messages, terms)
    assert not problems, problems


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_links_in_the_chinese_edition_resolve(po):
    translated = catalogs.translated_path(catalogs.english_source(po.stem))
    assert translated.exists() and not catalogs.link_problems(translated)


def _block_structure(markdown: str) -> list[tuple[str, str]]:
    """The blocks a CommonMark reader (markdown-it-py, tables on) opens, in order: headings,
    paragraphs, lists and items, tables, rows and cells."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py parses the markdown")
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(markdown)
    return [(token.type, token.tag) for token in tokens if token.nesting == 1]


def test_the_teaching_guide_is_built_from_its_catalog():
    """The guide is a catalog source like the notebooks (its entries are checked above:
    current, fields, terms, links, build): here, the built guide has every block of the
    English, in order, none left in English, and points at the Chinese solutions."""
    assert TEACHING_PO in CATALOGS
    english = (ROOT / "notebooks" / "TEACHING.md").read_text(encoding="utf-8")
    chinese = (ROOT / "notebooks" / "zh_CN" / "TEACHING.md").read_text(encoding="utf-8")
    assert _block_structure(chinese) == _block_structure(english)
    left = [m.msgid for m in documents.document_messages(english) if m.msgid in chinese]
    assert not left, left
    assert "`notebooks/zh_CN/solutions/05_long_range_decay_solutions.ipynb`" in chinese
    assert "`notebooks/solutions/05_long_range_decay_solutions.ipynb`" not in chinese
    index = (ROOT / "notebooks" / "zh_CN" / "README.md").read_text(encoding="utf-8")
    assert "[TEACHING.md](TEACHING.md)" in index  # the Chinese index links the Chinese guide


def test_the_teaching_guide_is_split_where_commonmark_splits_it():
    """An independent reader (markdown-it-py) finds the guide's headings, paragraphs, list
    items and tables (a table read as one paragraph) with the same words as the messages."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py parses the markdown")
    english = (ROOT / "notebooks" / "TEACHING.md").read_text(encoding="utf-8")
    tokens = markdown_it.MarkdownIt("commonmark").parse(english)
    expected = [" ".join(t.content.split()) for t in tokens
                if t.type == "inline" and text.has_words(t.content)]
    found = [" ".join(m.msgid.split()) for m in documents.document_messages(english)]
    assert found == expected and len(found) > 15


def test_the_compiled_catalog_is_what_gettext_reads():
    """The committed .mo, read by the standard library alone, holds every translation."""
    mo = catalogs.PACKAGE_PO.with_suffix(".mo")
    with mo.open("rb") as file:
        read = gettext.GNUTranslations(file)
    catalog = catalogs.read_catalog(catalogs.PACKAGE_PO)
    translated = [m for m in catalog if m.id and m.string]
    assert translated
    for message in translated:
        assert read.gettext(message.id) == message.string


def test_the_term_table_covers_the_glossary_and_the_late_notebooks():
    terms = {t.english: t for t in lint.load_terms()}
    missing = [g.english for g in GLOSSARY if g.english not in terms]
    assert not missing, f"glossary terms without a row in {lint.TERMS.name}: {missing}"
    for entry in GLOSSARY:  # the glossary's Chinese column is one the table knows
        row = terms[entry.english]
        known = {row.chinese, row.seed_wording, *row.variants}
        forms = [f.strip(" ()（）") for f in entry.chinese.replace("（", " (").split(" (")]
        assert set(forms) <= known, (entry.english, entry.chinese, known)
    assert not [t for t in LATE_TERMS if t not in terms]
    for term in terms.values():
        assert term.chinese and term.note is not None
        if term.first_use:  # the first use names the term in Chinese and in English
            assert term.first_use.startswith(term.chinese) and "（" in term.first_use


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the source posts are not here (set ROPE_LAB_SEEDS)")
def test_the_seed_wording_is_on_the_line_the_table_names():
    posts = {path.name[:3]: path.read_text(encoding="utf-8").splitlines()
             for path in SEEDS.glob("*.txt")}
    wrong, checked = [], 0
    for term in lint.load_terms():
        for reference in filter(None, (r.strip() for r in term.seed_source.split(";"))):
            wording, _, where = reference.rpartition(" @ ")
            post, line = where.split(":")
            checked += 1
            if (wording or term.seed_wording) not in posts[post][int(line) - 1]:
                wrong.append(f"{term.english}: {reference}")
    assert checked > 50 and not wrong, wrong


# --- the package speaks the chosen language ------------------------------------------------------

@pytest.fixture
def language():
    yield
    i18n._chosen = None


def test_the_language_is_chosen_once_and_english_stays_english(capsys, monkeypatch, language):
    monkeypatch.delenv(i18n.ENVIRONMENT_VARIABLE, raising=False)
    rl.check_close("same", 1.0, 1.0)
    assert capsys.readouterr().out == "✔ same — max |difference| = 0.00e+00 (atol 1e-06)\n"
    rl.setup_notebook(seed=0, language="zh")
    capsys.readouterr()
    rl.check_close("相同", 1.0, 1.0)
    assert capsys.readouterr().out == "✔ 相同 — 最大 |差值| = 0.00e+00（atol 1e-06）\n"
    with pytest.raises(AssertionError, match=r"^✘ 不同 — 最大 \|差值\| = 1.00e\+00"):
        rl.check_close("不同", 1.0, 2.0)
    i18n._chosen = None
    monkeypatch.setenv(i18n.ENVIRONMENT_VARIABLE, "zh-CN")
    assert i18n.get_language() == "zh"
    monkeypatch.setenv(i18n.ENVIRONMENT_VARIABLE, "en")
    assert i18n.gettext("{claim} — max |difference| = {gap} ({tolerance})").startswith(
        "{claim} — max")


@pytest.mark.parametrize("bad", ["fr", "", None, 3])
def test_a_language_the_course_does_not_speak_is_refused(bad, monkeypatch, language):
    with pytest.raises(ValueError, match=r"language must be one of \['en', 'zh'\]"):
        rl.setup_notebook(language=bad if bad is not None else "none")
    monkeypatch.setenv(i18n.ENVIRONMENT_VARIABLE, "klingon")
    with pytest.raises(ValueError, match="the environment variable ROPE_LAB_LANG must be one of"):
        i18n.get_language()


# --- each check, failing on a broken input ----------------------------------------------------

def _notebook(*cells) -> dict:
    return {"cells": [{"cell_type": kind, "id": f"c{i}", "metadata": {}, "source": source,
                       **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                      for i, (kind, source) in enumerate(cells)],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_markdown_becomes_one_message_per_block():
    notebook = _notebook(("markdown", "# 01 · A title\n\nA paragraph that is\nwrapped.\n\n"
                                      "**Learn**\n- one item,\n  continued;\n1. two\n\n"
                                      "$$x = 1$$\n\n| name | value |\n|---|---|\n| one | 1 |"))
    found = [(m.msgid, m.note) for m in text.notebook_messages(notebook)]
    assert found == [("01 · A title", "markdown heading"),
                     ("A paragraph that is wrapped.", "markdown paragraph"),
                     ("**Learn**", "markdown paragraph"),
                     ("one item, continued;", "markdown list item"),
                     ("two", "markdown list item"),
                     ("| name | value |\n|---|---|\n| one | 1 |", "markdown table")]


@pytest.mark.parametrize("source", [
    # only a list numbered 1 may interrupt a paragraph (notebook 07's "slope 1 and⏎2. The")
    "guides of slope 1 and\n2. The times are measured here.",
    "a paragraph with words\n1. interrupts it here",
    "three words here\n- a bullet interrupts\n- and another one",
    # in a list, a marker left of the item's text starts the next item, whatever its number
    "1. the first item\n   goes on here\n2. the second item\n3. a third item",
    "**What you will learn**\n1. one thing;\n2. another thing;",
    # inside an item's text only a bullet or 1. starts a (nested) list
    "- an item about slopes\n  2. is not a new list\n- the next item",
    "- an item about slopes\n  1. starts a nested list\n- the next item",
])
def test_markdown_blocks_are_the_paragraphs_commonmark_makes(source):
    """An independent reader (markdown-it-py, CommonMark) finds the same paragraphs, list
    items included, with the same words as the segmenter."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py parses the markdown")
    tokens = markdown_it.MarkdownIt("commonmark").parse(source)
    expected = [" ".join(line.strip() for line in t.content.split("\n"))
                for t in tokens if t.type == "inline"]
    found = [m.msgid for m in text.notebook_messages(_notebook(("markdown", source)))]
    assert found == expected


CODE = '''\
import rope_lab as rl
from rope_lab import plots

device = rl.setup_notebook(seed=0)
layout = "half"  # which pairs rotate
# a whole-line comment
# that goes on
mask = {"causal": 1}
rl.check("the claim", layout == "half", f"gap {1:.1e}")
rl.check_close(claim="keyword claim", actual=1.0, expected=1.0)
print("shown", layout, "and " + "joined")
plots.attention_weights([], [["wǒ"]], ["a title"], suptitle="figure text")
if layout != "interleaved":
    raise ValueError("a message for the reader")


def helper(claim):
    """A docstring."""
    return {"key": claim}


helper("local claim")
'''


def test_which_code_literals_are_translated(monkeypatch):
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", False)  # figure text: its own test
    found = {m.msgid: m.note for m in text.notebook_messages(_notebook(("code", CODE)))}
    assert found == {
        "which pairs rotate": "code comment (end of line)",
        "a whole-line comment that goes on": "code comment",
        "the claim": "verdict line of a check (claim)",
        "gap {1:.1e}": "verdict line of a check (detail)",
        "keyword claim": "verdict line of a check (claim)",
        "shown": "printed text", "and ": "printed text", "joined": "printed text",
        "a message for the reader": "error message",
        "A docstring.": "docstring",
        "local claim": "verdict line of a check (claim)",  # helper's parameter is `claim`
    }  # never: "half", "causal", "key", "interleaved", layout names


def test_a_translated_literal_stays_valid_code_within_the_line_length():
    source = ('import rope_lab as rl\n\n'
              'rl.check("short", True, f"gap {gap:.1e} and more words here")\n')
    long = "一段很长的中文说明，" * 12 + "差距 {gap:.1e}"
    built = text._apply(source, text._code_slots(source, "c", text.SignatureResolver([source])),
                        lambda m: long if m.msgid.startswith("gap") else None)
    assert max(text.display_width(line) for line in built.split("\n")) <= text.LINE_LENGTH
    captured = {}
    checker = type("rl", (), {"check": staticmethod(
        lambda claim, ok, detail: captured.update(detail=detail))})
    # run the built cell (its import line aside) to read the value the literal now has
    exec(compile(built.split("\n", 2)[2], "cell", "exec"), {"gap": 0.5, "rl": checker})
    assert captured["detail"] == long.replace("{gap:.1e}", "5.0e-01")
    # a long line of code after the literal leaves its last piece little room
    source = ('import rope_lab as rl\n\n'
              'rl.check(f"{name}: a claim that fills the line up to here and then "\n'
              '         "axis", sum(section) == spec.rotary_dim // 2 and bool((owners.sum(0) == 1)'
              '.all()))\n')
    built = text._apply(source, text._code_slots(source, "c", text.SignatureResolver([source])),
                        lambda m: "{name}：一个足够长的中文论断，占满这一行之后还要再写上好几个字，"
                                  "最后给每个维度对分配一个轴")
    assert max(text.display_width(line) for line in built.split("\n")) <= text.LINE_LENGTH, built
    ast.parse(built)



def test_a_joined_comprehension_of_text_is_offered_a_join_of_names_is_not(monkeypatch):
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", False)
    source = ('import rope_lab as rl\n\n'
              'rl.check("the claim", True,\n'
              '         "; ".join(f"{k}L: RoPE {a[k]}, learned {b[k]}" for k in ks))\n'
              'print(", ".join([f"window {i} → {i + 1}" for i in rises]))\n'
              'print(", ".join(["q_proj", "k_proj"]), " | ".join(name for name in names))\n'
              'print(", ".join(f"{x:.2f}" for x in xs))\n'  # no words: nothing to translate
              'key = "|".join(f"scheme {s}" for s in seeds)\n')  # not printed: code
    found = {m.msgid: m.note for m in text.notebook_messages(_notebook(("code", source)))}
    assert found == {"the claim": "verdict line of a check (claim)",
                     "{k}L: RoPE {a[k]}, learned {b[k]}": "verdict line of a check (detail)",
                     "window {i} → {i + 1}": "printed text"}
    built = text.translate_notebook(_notebook(("code", source)),
                                    lambda m: {"window {i} → {i + 1}": "窗口 {i} → {i + 1}"}.get(
                                        m.msgid), language="zh")
    assert 'print(", ".join([f"窗口 {i} → {i + 1}" for i in rises]))' in built["cells"][0][
        "source"]


def test_label_maps_and_the_tolerance_label_are_figure_text(monkeypatch):
    source = ('from rope_lab.plots import debugging_rope as figures\n\n'
              'steps = {"fix": rule, "plus_one": other}\n'
              'step_labels = {"fix": "the fix", "plus_one": "P + 1 (bug)"}\n'
              'figures.error_bars(errors, labels={"rope": "Llama (RoPE)"}, title="bars",\n'
              '                   ylabel="error", tolerance_label="bf16 noise")\n'
              'figures.error_curves(x, errors, labels=step_labels, title="curves")\n'
              'options = {"fix": "not a label"}\n')
    notebook = _notebook(("code", source))
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", True)
    found = {m.msgid: m.note for m in text.notebook_messages(notebook)}
    assert found == {"the fix": "figure text (a label)", "P + 1 (bug)": "figure text (a label)",
                     "Llama (RoPE)": "figure text (a label)", "bf16 noise": "figure text",
                     "bars": "figure text", "error": "figure text",
                     "curves": "figure text"}  # never the keys "fix", "rope", nor `options`
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", False)
    assert not text.notebook_messages(notebook)


def _pieces(built: str) -> list[str]:
    """The pieces of the first argument of the cell's one call, as the build wrote them."""
    argument = next(n for n in ast.walk(ast.parse(built)) if isinstance(n, ast.Call)).args[0]
    return [ast.literal_eval(f'"{piece.body}"') for piece in
            text._scan_pieces(ast.get_source_segment(built, argument))]


def test_a_translated_literal_breaks_after_punctuation_and_between_words():
    """Chinese has no spaces: a break between two characters may cut a word ("分" "配"). A
    line breaks after Chinese punctuation or at a space when that keeps half the line, and
    between two characters only when neither is near."""
    source = 'import rope_lab as rl\n\nrl.check("a claim", True)\n'
    slots = text._code_slots(source, "c", text.SignatureResolver([source]))
    clauses = ("旋转位置编码给每个维度对分配一个轴，", "每一组频率都来自同一个 base；",
               "至多转过半圈的维度对不会被外推影响，", "所以 token 的位置信息保留下来。")
    built = text._apply(source, slots, lambda m: "".join(clauses * 3))
    pieces = _pieces(built)
    assert "".join(pieces) == "".join(clauses * 3) and len(pieces) > 1
    assert all(text.display_width(line) <= text.LINE_LENGTH for line in built.split("\n"))
    assert all(piece[-1] in "，；。 " for piece in pieces[:-1]), pieces
    # a mixed line breaks at a space between ASCII words, never inside one
    words = "检查 " + " ".join(["rotary_dim", "inv_freq", "attention_factor"] * 8)
    pieces = _pieces(text._apply(source, slots, lambda m: words))
    assert "".join(pieces) == words and all(p.endswith(" ") for p in pieces[:-1]), pieces
    # no punctuation and no space for most of a line: a break between two characters
    run = "位" * 120
    pieces = _pieces(text._apply(source, slots, lambda m: run))
    assert "".join(pieces) == run and len(pieces) == 3
    # the ranks themselves
    atoms = [("char", c) for c in "分配，一 ab"]
    assert [text._break_after(atoms, k) for k in range(len(atoms))] == [
        text.SPLIT, 0, text.CLEAN, text.SPLIT, text.CLEAN, 0, text.CLEAN]


def test_a_comment_wraps_after_punctuation_too():
    line = ("旋转位置编码给每个维度对分配一个轴，每一组频率都来自同一个 base；"
            "至多转过半圈的维度对不会被外推影响。")
    assert text._wrap(line * 2, 60) == [
        "旋转位置编码给每个维度对分配一个轴，每一组频率都来自同一个",
        "base；至多转过半圈的维度对不会被外推影响。"] * 2


def _tiny_repository(root: Path) -> Path:
    """A repository with one English notebook, as `init` and `update` see it."""
    (root / "notebooks").mkdir(parents=True)
    english = root / "notebooks" / "01_tiny.ipynb"
    english.write_text(json.dumps(_notebook(
        ("markdown", "# 01 · Tiny\n\nThe first paragraph.\n\nThe second paragraph."),
        ("code", 'import rope_lab as rl\n\nrl.setup_notebook(seed=0)\n'
                 'rl.check("it holds", True)'))))
    return english


def _translate_all(po: Path) -> None:
    catalog = catalogs.read_catalog(po)
    for message in catalog:
        if message.id:
            message.string = "译：" + message.id
    catalogs.write_catalog(catalog, po)


@pytest.mark.slow
def test_update_marks_a_changed_text_fuzzy_and_a_new_one_missing(tmp_path):
    english = _tiny_repository(tmp_path)
    po = catalogs.init("01_tiny", tmp_path)
    _translate_all(po)
    notebook = _load(english)
    notebook["cells"][0]["source"] = ("# 01 · Tiny\n\nThe first paragraph, edited.\n\n"
                                      "The second paragraph.\n\nA new one.")
    english.write_text(json.dumps(notebook))
    catalogs.update(tmp_path)
    updated = catalogs.read_catalog(po)
    changed = updated["The first paragraph, edited."]
    assert changed.fuzzy and changed.previous_id == ["The first paragraph."]
    assert changed.string == "译：The first paragraph."  # the old translation, to review
    assert updated["The second paragraph."].string and not updated["The second paragraph."].fuzzy
    assert not updated["A new one."].string
    found = catalogs.status(po, catalogs.source_template(english))
    assert found.fuzzy == ["The first paragraph, edited."] and found.missing == ["A new one."]
    assert "#| msgid \"The first paragraph.\"" in po.read_text(encoding="utf-8")
    assert catalogs.update(tmp_path) == []  # a second update changes nothing
    # the build keeps English where the translation is fuzzy or missing
    catalogs.build(tmp_path)
    built = _load(tmp_path / "notebooks" / "zh_CN" / "01_tiny.ipynb")
    assert "The first paragraph, edited." in "".join(built["cells"][0]["source"])


@pytest.mark.slow
def test_a_stale_or_hand_edited_build_is_caught(tmp_path):
    english = _tiny_repository(tmp_path)
    _translate_all(catalogs.init("01_tiny", tmp_path))
    catalogs.build(tmp_path)
    assert catalogs.stale_outputs(tmp_path) == []
    built = tmp_path / "notebooks" / "zh_CN" / "01_tiny.ipynb"
    original = built.read_text(encoding="utf-8")
    built.write_text(original.replace("译：it holds", "译：手改"), encoding="utf-8")
    assert catalogs.stale_outputs(tmp_path) == [
        "notebooks/zh_CN/01_tiny.ipynb: differs from what the build makes (edited by hand, or "
        "the English notebook or its catalog changed since the last build)"]
    built.write_text(original, encoding="utf-8")
    english.write_text(english.read_text().replace("seed=0", "seed=1"))  # code changed
    assert len(catalogs.stale_outputs(tmp_path)) == 1
    (tmp_path / "notebooks" / "zh_CN" / "99_orphan.ipynb").write_text("{}")
    assert "not made by the build" in catalogs.stale_outputs(tmp_path)[-1]


def test_code_drift_is_caught():
    english = _load(ROOT / "notebooks" / "01_attention_without_position.ipynb")
    chinese = _load(ROOT / "notebooks" / "zh_CN" / "01_attention_without_position.ipynb")
    assert text.code_drift(english, chinese, language="zh") == []

    def edited(old: str, new: str) -> dict:
        copied = copy.deepcopy(chinese)
        cell = next(c for c in copied["cells"] if old in "".join(c["source"]))
        cell["source"] = "".join(cell["source"]).replace(old, new, 1)
        return copied

    drifted = text.code_drift(english, edited("L, d = 5, 8", "L, d = 5, 9"), language="zh")
    assert drifted and "the code differs from the English cell" in drifted[0]
    renamed = edited('language="zh"', 'language="en"')
    assert "0 of 1 setup_notebook calls" in text.code_drift(english, renamed, language="zh")[-1]
    broken = edited("最大 |差值| = {worst:.1e}\"", "最大 |差值| = {worst:.1e}")
    assert "does not compile" in text.code_drift(english, broken, language="zh")[0]
    # a translated literal or comment may change; that is not drift
    reworded = edited("只重排键会改变输出", "仅重排键，输出就变了")
    assert text.code_drift(english, reworded, language="zh") == []
    missing_cell = copy.deepcopy(chinese)
    del missing_cell["cells"][3]
    assert "the cells differ" in text.code_drift(english, missing_cell, language="zh")[0]
    # the install cell is the English one in Chinese: the English cell, or one whose code
    # drifted, is caught
    assert "这个单元格会安装课程的 Python 包" in "".join(chinese["cells"][1]["source"])
    left_english = copy.deepcopy(chinese)
    left_english["cells"][1]["source"] = english["cells"][1]["source"]
    for drifted in (left_english, edited("import sys", "import os, sys"),
                    edited("在此之前它只给出提示", "在此之前它什么也不做")):
        (problem,) = text.code_drift(english, drifted, language="zh")
        assert "the install cell is not the English one in 'zh'" in problem


def test_the_build_writes_the_chinese_install_cell_and_keeps_it_out_of_the_catalogs():
    from rope_lab import course

    english = _load(ROOT / "notebooks" / "solutions" / "03_rope_in_2d_solutions.ipynb")
    built = text.translate_notebook(english, lambda message: None, language="zh")
    expected = course.install_cell(course.REPOSITORY, course.REF, language="zh")
    assert "".join(built["cells"][1]["source"]) == expected
    assert built["cells"][1]["id"] == english["cells"][1]["id"]
    assert not any("installs the course package" in m.msgid or "Could not install" in m.msgid
                   for m in text.notebook_messages(english))
    # either edition's cell is the install cell, published or not; a changed one is not
    for language in ("en", "zh"):
        for where in [(None, None), ("https://github.com/teacher/course", "0" * 40)]:
            cell = {"cell_type": "code", "source": course.install_cell(*where, language=language)}
            assert text._is_install_cell(1, cell)
            cell["source"] = cell["source"].replace("sys.modules", "sys.path")
            assert not text._is_install_cell(1, cell)


@pytest.mark.parametrize("msgid, msgstr, options, expected", [
    ("gap {worst:.1e}", "差距 {worst:.2e}", {"brace_format": True}, "the {fields} differ"),
    ("the angle $m\\theta_i$ grows", "角度 $m\\theta$ 变大", {}, "maths differ"),
    ("call `rl.attention` here", "在这里调用 `attention`", {}, "inline code differ"),
    ("see [notebook 02](02_x.ipynb)", "见[笔记本 02](03_x.ipynb)", {}, "link targets differ"),
    ("| a | b |\n|---|---|", "| 甲 | 乙 | 丙 |\n|---|---|", {"table": True},
     "the table's shape differs"),
    ("**bold** text", "**粗体文字", {"markdown": True}, "an unpaired ** (bold) marker"),
    ("line one\nline two", "第一行第二行", {}, "line break"),
    ("the same English words here", "the same English words here", {},
     "the translation is the English text"),
    ("a long sentence", "一句话 and then the English was left here", {}, "English left"),
    # issue 35: a .po contribution must not become stored XSS on the Chinese pages
    ("see the figure", "见图 <script>alert(1)</script>", {"markdown": True},
     "markup the English does not have"),
    ("a <b>bold</b> word", "一个 <b onclick=\"alert(1)\">粗体</b> 词", {},
     "markup the English does not have"),
    ("see the docs", "见文档 javascript:alert(1)", {}, "a URL scheme the English does not have"),
    ("one line", "一行\r", {}, "control characters the English does not have"),
])
def test_message_problems_catch_broken_translations(msgid, msgstr, options, expected):
    problems = lint.message_problems(msgid, msgstr, **options)
    assert len(problems) == 1 and expected in problems[0], problems
    assert lint.message_problems(msgid, msgid.replace("the", "这"), **options) != problems


def test_rendering_problems_catch_emphasis_that_chinese_punctuation_breaks():
    pytest.importorskip("markdown_it", reason="markdown-it-py renders the markdown")
    assert lint.rendering_problems("**Time:** about 30 minutes.", "**时间**：约 30 分钟。") == []
    assert lint.rendering_problems("**Time:** about 30 minutes.", "**时间：**约 30 分钟。") == [
        "renders 0 strong element(s), the English 1"]
    lost_column = lint.rendering_problems("| a | b |\n|---|---|\n| 1 | 2 |",
                                          "| a |\n|---|\n| 1 | 2 |")
    assert lost_column == ["renders 1 td element(s), the English 2",
                           "renders 1 th element(s), the English 2"]


def test_term_problems_catch_a_wrong_term_and_a_missing_first_use():
    terms = lint.load_terms()
    good = [("RoPE rotates pairs.", "旋转位置编码（RoPE）旋转维度对。", "markdown paragraph"),
            ("So RoPE is relative.", "所以 RoPE 是相对的。", "markdown paragraph")]
    assert lint.term_problems(good, terms) == []
    no_first_use = [("RoPE rotates pairs.", "RoPE 旋转维度对。", "markdown paragraph")]
    assert "first use of 'rotary position embedding (RoPE)'" in lint.term_problems(
        no_first_use, terms)[0]
    wrong_term = [("Length extrapolation fails.", "长度外插失败。", "markdown paragraph")]
    assert "'extrapolation' is not translated as '外推'" in lint.term_problems(
        wrong_term, terms)[0]


@pytest.mark.slow
def test_a_link_to_an_english_notebook_with_a_chinese_twin_is_caught(tmp_path):
    english = _tiny_repository(tmp_path)
    _translate_all(catalogs.init("01_tiny", tmp_path))
    catalogs.build(tmp_path)
    built = tmp_path / "notebooks" / "zh_CN" / "01_tiny.ipynb"
    assert catalogs.link_problems(built, tmp_path) == []
    notebook = _load(built)
    notebook["cells"][0]["source"] += ("\n\nSee `notebooks/01_tiny.ipynb` and "
                                       "[it](../01_tiny.ipynb) and [nothing](missing.ipynb).")
    built.write_text(json.dumps(notebook))
    problems = catalogs.link_problems(built, tmp_path)
    assert len(problems) == 3, problems
    del english


@pytest.mark.slow
def test_the_build_points_links_at_the_chinese_twins(tmp_path):
    english = _tiny_repository(tmp_path)
    notebook = _load(english)
    notebook["cells"][0]["source"] += ("\n\nSolutions: "
                                       "`notebooks/solutions/01_tiny_solutions.ipynb`; "
                                       "data: [file](data.csv); [next](02_other.ipynb).")
    english.write_text(json.dumps(notebook))
    (tmp_path / "notebooks" / "solutions").mkdir()
    shutil.copy(english, tmp_path / "notebooks" / "solutions" / "01_tiny_solutions.ipynb")
    catalogs.init("01_tiny", tmp_path)
    catalogs.init("01_tiny_solutions", tmp_path)
    catalogs.build(tmp_path)
    built = "".join(_load(tmp_path / "notebooks" / "zh_CN" / "01_tiny.ipynb")["cells"][0]["source"])
    assert "`notebooks/zh_CN/solutions/01_tiny_solutions.ipynb`" in built  # the twin exists
    assert "[file](../data.csv)" in built and "[next](../02_other.ipynb)" in built  # no twin


GUIDE = """# Tiny guide

Open `notebooks/01_tiny.ipynb` first, then [its map](01_tiny.ipynb#map), the
[README](../README.md) and `notebooks/solutions/NN_slug_solutions.ipynb` (a pattern).

## Later on

- One item,
  wrapped.

```bash
make lab  # a fence stays as it is
```
"""


def _tiny_guide(root: Path) -> Path:
    """The tiny repository with a markdown document beside its notebook."""
    _tiny_repository(root)
    (root / "README.md").write_text("# readme\n")
    guide = root / "notebooks" / "GUIDE.md"
    guide.write_text(GUIDE, encoding="utf-8")
    return guide


@pytest.mark.slow
def test_a_markdown_document_is_a_catalog_source(tmp_path):
    guide = _tiny_guide(tmp_path)
    messages = documents.document_messages(GUIDE)
    assert [(m.msgid, m.cell_id, m.note) for m in messages] == [
        ("Tiny guide", "tiny-guide", "markdown heading"),
        ("Open `notebooks/01_tiny.ipynb` first, then [its map](01_tiny.ipynb#map), the "
         "[README](../README.md) and `notebooks/solutions/NN_slug_solutions.ipynb` (a pattern).",
         "tiny-guide", "markdown paragraph"),
        ("Later on", "later-on", "markdown heading"),
        ("One item, wrapped.", "later-on", "markdown list item")]
    po = catalogs.init("GUIDE.md", tmp_path)
    assert "#: GUIDE.md#later-on" in po.read_text(encoding="utf-8")  # where, for a translator
    _translate_all(po)
    _translate_all(catalogs.init("01_tiny", tmp_path))
    assert catalogs.build(tmp_path)
    built = tmp_path / "notebooks" / "zh_CN" / "GUIDE.md"
    chinese = built.read_text(encoding="utf-8")
    assert chinese.startswith("<!-- Generated by `python -m rope_lab.translations build` from "
                              "notebooks/GUIDE.md and its catalog")
    assert "# 译：Tiny guide\n" in chinese and "- 译：One item, wrapped.\n" in chinese
    # links: to the Chinese twin where one exists, else to the English file from the new folder
    assert ("译：Open `notebooks/zh_CN/01_tiny.ipynb` first, then [its map](01_tiny.ipynb#map), "
            "the [README](../../README.md)") in chinese
    assert "make lab  # a fence stays as it is" in chinese
    assert catalogs.stale_outputs(tmp_path) == [] and catalogs.link_problems(built, tmp_path) == []
    # an English edit: that entry fuzzy, the build keeps its English until it is reviewed
    guide.write_text(GUIDE.replace("One item,", "One edited item,"), encoding="utf-8")
    assert len(catalogs.stale_outputs(tmp_path)) == 1  # the English changed since the build
    catalogs.update(tmp_path)
    found = catalogs.status(po, catalogs.source_template(guide))
    assert found.fuzzy == ["One edited item, wrapped."] and not found.missing
    catalogs.build(tmp_path)
    assert "- One edited item,\n  wrapped.\n" in built.read_text(encoding="utf-8")  # as written
    assert catalogs.update(tmp_path) == []  # a second update changes nothing


@pytest.mark.slow
def test_a_stale_or_broken_document_is_caught(tmp_path):
    _tiny_guide(tmp_path)
    _translate_all(catalogs.init("GUIDE", tmp_path))
    _translate_all(catalogs.init("01_tiny", tmp_path))
    catalogs.build(tmp_path)
    built = tmp_path / "notebooks" / "zh_CN" / "GUIDE.md"
    original = built.read_text(encoding="utf-8")
    built.write_text(original.replace("译：Later on", "手改"), encoding="utf-8")
    assert catalogs.stale_outputs(tmp_path) == [
        "notebooks/zh_CN/GUIDE.md: differs from what the build makes (edited by hand, or the "
        "English notebook or its catalog changed since the last build)"]
    built.write_text(original + "\n[English](../01_tiny.ipynb), [gone](gone.md), "
                     "`notebooks/01_tiny.ipynb`, `notebooks/02_none.ipynb`\n", encoding="utf-8")
    assert catalogs.link_problems(built, tmp_path) == [
        "link ../01_tiny.ipynb leads to the English notebook or document; its Chinese twin "
        "exists",
        "link gone.md goes nowhere",
        "notebooks/01_tiny.ipynb is the English notebook or document; its Chinese twin exists",
        "notebooks/02_none.ipynb does not exist"]
    with pytest.raises(FileNotFoundError, match=r"nor a document notebooks/NOTES\.md"):
        catalogs.init("NOTES", tmp_path)


def test_stdlib_gettext_reads_what_babel_compiles(tmp_path):
    """The run-time path uses no Babel: a .mo that Babel writes, read by gettext alone."""
    from babel.messages.catalog import Catalog

    catalog = Catalog(locale="zh_CN", fuzzy=False)
    catalog.add("{claim} — max |difference| = {gap}", "{claim} — 最大 |差值| = {gap}")
    catalog.add("fuzzy one", "模糊", flags=["fuzzy"])
    data = io.BytesIO()
    from babel.messages.mofile import write_mo

    write_mo(data, catalog)
    read = gettext.GNUTranslations(io.BytesIO(data.getvalue()))
    assert read.gettext("{claim} — max |difference| = {gap}") == "{claim} — 最大 |差值| = {gap}"
    assert read.gettext("fuzzy one") == "fuzzy one"  # a fuzzy entry is never used


def test_the_chinese_readme_gives_the_quick_start_and_its_links_work():
    readme = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    for needed in ("make lab", "make test", "TORCH=cpu", "(README.md)",
                   "(notebooks/zh_CN/README.md)", "(notebooks/zh_CN/TEACHING.md)",
                   'language="zh"', "ROPE_LAB_LANG"):
        assert needed in readme, needed
    targets = re.findall(r"\]\(([^)#\s]+)\)", readme)
    assert targets and not [t for t in targets if not (ROOT / t).exists()]


def _section(markdown: str, heading: str) -> str:
    """The text under ``## heading``, up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"no section '## {heading}'"
    return match[1]


def _quick_start(markdown: str) -> dict[str, set[str]]:
    """What a quick start tells a reader to type: the make targets, the VAR=value settings
    and the Python it needs."""
    code = re.findall(r"`([^`\n]+)`", markdown) + re.findall(r"^make .*$", markdown, re.M)
    words = [word for snippet in code for word in snippet.split("#")[0].split()]
    targets = {snippet.split("#")[0].split()[1] for snippet in code
               if re.match(r"make [a-z]", snippet)}
    return {"targets": targets, "settings": {w for w in words if re.fullmatch(r"[A-Z_]+=\S+", w)},
            "python": set(re.findall(r"Python (3\.\d+(?:\.\d+)?)", markdown))}


def test_the_chinese_quick_start_is_the_english_one():
    """README.md's quick start and README.zh-CN.md's give the same commands: the make
    targets, the settings (TORCH=cpu, INSTALLER=pip) and the Python version. A command
    added to or dropped from the English quick start fails here until the Chinese follows."""
    english = _quick_start(_section((ROOT / "README.md").read_text(encoding="utf-8"),
                                    "Quick start"))
    chinese = _quick_start(_section((ROOT / "README.zh-CN.md").read_text(encoding="utf-8"),
                                    "快速上手"))
    assert {"lab", "test"} <= english["targets"] and "TORCH=cpu" in english["settings"]
    assert chinese == english
    # Colab links wait for a repository: both READMEs name the command that sets it
    publish = "make set-repository URL=https://github.com/OWNER/NAME REF="
    assert publish in (ROOT / "README.md").read_text(encoding="utf-8")
    assert publish in (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")


def test_a_stale_chinese_quick_start_is_caught():
    english = _quick_start("Python 3.11.5\n```bash\nmake lab  # open it\n```\n"
                           "`make lab TORCH=cpu` or `make notebook-filter`")
    assert english == {"targets": {"lab", "notebook-filter"}, "settings": {"TORCH=cpu"},
                       "python": {"3.11.5"}}
    assert _quick_start("Python 3.11.5，`make lab TORCH=cpu`") != english


def test_a_percent_sign_is_no_format_directive(tmp_path):
    """Babel takes "40% of the head" for a %-directive ("% o") and flags the entry
    python-format; nothing in the course is %-formatted, so no catalog says so, and msgfmt
    accepts a translation that writes the percent sign its own way."""
    english = _tiny_repository(tmp_path)
    notebook = _load(english)
    notebook["cells"][0]["source"] += "\n\nPhi-2 rotates 40% of the head, GPT-NeoX 25 % rotary."
    english.write_text(json.dumps(notebook))
    po = catalogs.init("01_tiny", tmp_path)
    _translate_all(po)
    catalog = catalogs.read_catalog(po)
    catalog["Phi-2 rotates 40% of the head, GPT-NeoX 25 % rotary."].string = "Phi-2 旋转头的 40%。"
    catalogs.write_catalog(catalog, po)
    assert "python-format" not in po.read_text(encoding="utf-8")
    if shutil.which("msgfmt"):
        result = subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "out.mo"), str(po)],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt is not installed")
@pytest.mark.parametrize("po", [*CATALOGS, catalogs.PACKAGE_PO], ids=lambda p: p.name)
def test_gnu_msgfmt_accepts_every_catalog(po, tmp_path):
    """An independent reader of the format: GNU gettext's own checker (syntax, headers, and
    python-brace-format placeholders where Babel flagged them)."""
    result = subprocess.run(["msgfmt", "--check", "-o", str(tmp_path / "out.mo"), str(po)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("msgmerge") is None, reason="GNU gettext's msgmerge is missing")
def test_update_agrees_with_gnu_msgmerge(tmp_path):
    """The reference implementation of `update`: msgmerge on the same old catalog and the
    same template marks the same entries fuzzy and the same ones new."""
    english = _tiny_repository(tmp_path)
    po = catalogs.init("01_tiny", tmp_path)
    _translate_all(po)
    old = tmp_path / "old.po"
    shutil.copy(po, old)
    notebook = _load(english)
    notebook["cells"][0]["source"] = ("# 01 · Tiny, renamed\n\nThe first paragraph, edited.\n\n"
                                      "The second paragraph.\n\nSomething else entirely.")
    english.write_text(json.dumps(notebook))
    catalogs.update(tmp_path)
    template = tmp_path / "new.pot"
    template.write_bytes(catalogs.po_bytes(catalogs.source_template(english)))
    merged = tmp_path / "merged.po"
    subprocess.run(["msgmerge", "--quiet", "-o", str(merged), str(old), str(template)],
                   check=True)

    def states(path: Path) -> dict[str, str]:
        return {m.id: "fuzzy" if m.fuzzy else "translated" if m.string else "new"
                for m in catalogs.read_catalog(path) if m.id}

    ours, gnu = states(po), states(merged)
    assert ours == gnu
    assert sorted(ours.values()) == ["fuzzy", "fuzzy", "new", "translated", "translated"]


def test_init_names_what_it_expected(capsys):
    with pytest.raises(SystemExit):
        catalogs.main(["init", "99_no_such_notebook"])
    assert "no English notebook notebooks/99_no_such_notebook.ipynb" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        catalogs.main(["init", CATALOGS[0].stem])
    assert "exists; run `update` to refresh it" in capsys.readouterr().err


# --- everything a learner reads, in the chosen language (issue 31, item 3) ---------------------

def _grade(grader, answer, capsys):
    from rope_lab.exercises import grading

    grading._results.clear()
    verdict = grader(answer, seed=1)
    return verdict, capsys.readouterr().out


def test_a_grader_speaks_the_chosen_language_and_english_is_unchanged(capsys, monkeypatch):
    from rope_lab import exercises

    def unscaled(q, k):  # the mistake the 00.1 hint names
        return (q * k).sum(-1)

    monkeypatch.delenv(i18n.ENVIRONMENT_VARIABLE, raising=False)
    verdict, english = _grade(exercises.check_scaled_dot, unscaled, capsys)
    assert not verdict and english.startswith("✘ Exercise 00.1 (the scaled dot product): q, k "
                                              "of shape (8,): expected ")
    assert english.rstrip().endswith("— you did not divide by √d")
    i18n.set_language("zh")
    try:
        verdict, chinese = _grade(exercises.check_scaled_dot, unscaled, capsys)
        assert chinese.startswith("✘ 练习 00.1（缩放点积）：形状为 (8,) 的 q、k：应为 ")
        assert chinese.rstrip().endswith("—— 你没有除以 √d") and not verdict
        assert verdict.title == "the scaled dot product"  # the record stays English
        _, passed = _grade(exercises.check_scaled_dot,
                           lambda q, k: (q * k).sum(-1) / q.shape[-1] ** 0.5, capsys)
        assert passed == "✔ 练习 00.1（缩放点积）：通过\n"
        exercises.summary("00")
        assert "笔记本 00：从这里开始（1 题中通过 1 题）" in capsys.readouterr().out
    finally:
        i18n._chosen = None


def test_grader_hints_do_not_depend_on_the_words(capsys, chinese):
    """Graders choose a hint by testing the answer, never the (translated) feedback text."""
    from rope_lab import exercises
    from rope_lab.absolute import sinusoidal_pe

    def swapped(length, dim, base):  # cos on even features, sin on odd ones
        table = sinusoidal_pe(length, dim, base)
        return table.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)

    _, out = _grade(exercises.check_sinusoidal_pe, swapped, capsys)
    assert "sin 和 cos 放反了" in out
    _, out = _grade(exercises.check_scaled_dot, lambda q, k: None, capsys)
    assert "你的函数返回了None（是不是忘了 `return`？）" in out
    _, out = _grade(exercises.check_scaled_dot, lambda q, k: 1 / 0, capsys)
    assert "你的函数抛出了 ZeroDivisionError" in out and "输入为" in out
    _, out = _grade(exercises.check_scaled_dot, lambda q, k: (_ for _ in ()).throw(
        NotImplementedError), capsys)
    assert "尚未作答（函数抛出 NotImplementedError）" in out


def test_widget_labels_and_the_fallback_line_speak_the_chosen_language(chinese):
    from rope_lab import widgets

    panel = widgets.decay_panel()
    assert panel.controls["dim"].description == "头维度 d"
    assert panel.controls["base"].description == "base"  # the term table keeps base
    mode = panel.controls["mode"]
    assert list(mode.options) == [("全 1", "ones"), ("随机", "random"), ("相关", "correlated")]
    assert mode.value == "ones"  # the value stays the option the plot reads
    assert panel.set(mode="random") is panel.figure
    text = panel._repr_mimebundle_()[0]["text/plain"]
    assert text.startswith("<rope_lab 面板 decay_and_abel(") and "拖动控件" in text
    i18n._chosen = None
    english = widgets.decay_panel()
    assert english.controls["dim"].description == "head dim d"
    assert list(english.controls["mode"].options) == ["ones", "random", "correlated"]


def test_figure_text_follows_the_switch_and_speaks_chinese(chinese, monkeypatch):
    """On (the default, now that matplotlib draws Chinese from the course's font): titles,
    labels and legends come out in Chinese. Off: the figures stay English in the Chinese
    edition. Checked on the Text artists; rendering is test_cjk_figures' job."""
    from rope_lab import plots

    assert i18n.TRANSLATE_FIGURE_TEXT is True
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", False)
    figure = plots.rope_frequencies()
    assert figure.axes[1].get_title() == "angle m·θᵢ mod 2π"
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", True)
    figure = plots.rope_frequencies()
    assert figure.axes[1].get_title() == "角度 m·θᵢ mod 2π"
    assert figure.axes[0].get_xlabel() == "2i/d（d/2 对中的第 i 对）"
    assert figure.axes[0].get_legend().get_texts()[0].get_text() == "波长 2π/θᵢ"
    live = plots.binary_pe_figure(dim=3)  # a title written by a live figure's update
    assert live.axes[0].get_title() == "二进制位置编码，d = 3 位：位置 0 … 7"
    losses = plots.extrapolation_losses(_experiment_results())
    labels = {text.get_text() for text in losses.axes[0].texts}
    assert {"可学习", "正弦", "NoPE"} <= labels


def _experiment_results():
    from rope_lab.experiments import extrapolation

    return extrapolation.load_results()


def test_figures_render_chinese_where_matplotlib_has_a_cjk_font(chinese, monkeypatch):
    """Where a CJK font is registered (the course's, once rope_lab.plots.style ships it, or
    a system font), a Chinese figure draws without a missing-glyph warning."""
    import warnings

    from matplotlib import font_manager

    from rope_lab import plots

    family = getattr(plots.style, "CJK_FAMILY", None)
    if family is None:
        names = {entry.name for entry in font_manager.fontManager.ttflist}
        family = next((name for name in ("Noto Sans CJK SC", "Source Han Sans SC",
                                         "WenQuanYi Zen Hei", "Droid Sans Fallback")
                       if name in names), None)
    if family is None:
        pytest.skip("no CJK font for matplotlib here")
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", True)
    monkeypatch.setitem(plots.style.COURSE_STYLE, "font.family", ["sans-serif", family])
    figure = plots.rope_frequencies()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.render_png(figure)


def test_tables_glossary_and_the_setup_line_speak_the_chosen_language(capsys, chinese):
    from rope_lab import about, absolute, glossary

    rl.setup_notebook(seed=3)
    assert "· 设备 " in capsys.readouterr().out
    table = absolute.property_table_markdown({"binary": dict.fromkeys(absolute.PROPERTIES,
                                                                      True)})
    assert table.startswith("| 编码 | 唯一 | 线性平移映射 |") and "| 二进制 | ✔" in table
    assert "| 05 | 远程衰减 (`05_long_range_decay.ipynb`) |" in about.course_map_markdown()
    markdown = glossary.glossary_markdown()
    assert markdown.startswith("| 术语 | English | 原博文的说法 | 含义 | 笔记本 |")
    rows = {row.split(" | ")[1]: row for row in markdown.splitlines()[2:]}
    assert rows["query / key / value"].startswith(  # the course's term, then the posts' wording
        "| 查询 / 键 / 值 | query / key / value | 查询向量 / 键向量 / 值向量 | 每个 token")
    assert "分数就只依赖于 m − n" in rows["rotary position embedding (RoPE)"]
    assert rows["causal mask"].split(" | ")[2] == "—"  # the posts do not use the term
    i18n._chosen = None
    assert glossary.glossary_markdown().startswith("| English | 中文 | meaning | notebook |")


def test_module_constants_are_english_until_shown(chinese):
    """The language is chosen after import: constants stay English (code reads them) and are
    translated where they are shown; a LazyText label prints in the chosen language."""
    from rope_lab import plots
    from rope_lab.plots import what_changed

    label = plots.EXPERIMENT_STYLE["sinusoidal"][0]
    assert label == "sinusoidal" and plots.EXPERIMENT_STYLE["rope"][0] == "RoPE"
    # padded in monospace columns (a CJK character takes two), so printed tables line up
    assert f"{label:8s}|" == "正弦    |" and str(label) == "正弦" == f"{label}"
    assert repr(label) == "'sinusoidal'" and label + "!" == "sinusoidal!"
    assert what_changed.STYLE["learned"][0] == "learned"
    assert plots.style.ROLE_MEANINGS["rope"] == "RoPE: the rotation and what it turns"
    assert i18n.gettext("") == ""  # never the catalog's header
    i18n._chosen = None
    assert f"{label:12s}|" == "sinusoidal  |"


def test_every_marked_data_text_is_in_the_package_catalog():
    """Texts shown from other modules' data (course titles, notebook 02's table, the layer's
    parts) are in the catalog, so a new title or encoding cannot stay English unnoticed."""
    from rope_lab import absolute, cost, course

    catalog = catalogs.read_catalog(catalogs.PACKAGE_PO)
    shown = [*(n.title for n in course.NOTEBOOKS), *(n.summary for n in course.NOTEBOOKS),
             *absolute.ENCODINGS, *absolute.PROPERTIES, *cost.layer_flops(8, 64)]
    assert not [text for text in shown if not catalogs.translation(catalog, text)]


# --- words that f-string fields print (the notebook catalogs' rule) ----------------------------

FIELD_WORDS = '''\
import rope_lab as rl

for mode in ("random", "correlated"):
    rl.check_close(f"{mode}: Monte Carlo mean = exact", 1.0, 1.0)
    print(f"mode {mode!r} is code here")
lowest, HF = -0.5, None
print(f"min = {lowest:8.3f}  {'passes' if lowest >= 0 else 'fails'}")
print(f"transformers {HF or 'not installed, so skipped'}, {'<' if HF else '>'}")
print(f"{['rope', 'alibi'][0]} stays")
'''


def test_words_printed_by_fstring_fields_are_messages_and_land_in_the_field(capsys):
    notebook = _notebook(("code", FIELD_WORDS))
    found = {m.msgid: m.note for m in text.notebook_messages(notebook)}
    assert found["passes"] == found["fails"] == "a word that an f-string field prints"
    assert found["not installed, so skipped"] == "a word that an f-string field prints"
    assert "a value of `mode`" in found["random"] and "a value of `mode`" in found["correlated"]
    assert "rope" not in found and "alibi" not in found and "<" not in found  # code, not words
    words = {"passes": "通过", "fails": "未通过", "random": "随机", "correlated": "相关",
             "not installed, so skipped": "未安装，因此跳过",
             "{mode}: Monte Carlo mean = exact": "{mode}：蒙特卡洛均值 = 精确值",
             "min = {lowest:8.3f}  {'passes' if lowest >= 0 else 'fails'}":
                 "最小值 = {lowest:8.3f}  {'passes' if lowest >= 0 else 'fails'}"}
    built = text.translate_notebook(notebook, lambda m: words.get(m.msgid), language="zh")
    source = built["cells"][0]["source"]
    assert ("rl.check_close(f\"{ {'random': '随机', 'correlated': '相关'}[mode]}：蒙特卡洛均值"
            in source)
    assert 'for mode in ("random", "correlated"):' in source  # the values drive the code
    assert text.code_drift(notebook, built, language="zh") == []
    checker = type("rl", (), {"check_close": staticmethod(lambda claim, *a: print(claim))})
    exec(compile(source.split("\n", 1)[1], "cell", "exec"), {"rl": checker})
    assert capsys.readouterr().out.splitlines() == [  # {mode!r} prints the value as code
        "随机：蒙特卡洛均值 = 精确值", "mode 'random' is code here",
        "相关：蒙特卡洛均值 = 精确值", "mode 'correlated' is code here",
        "最小值 =   -0.500  未通过", "transformers 未安装，因此跳过, >", "rope stays"]


def test_a_field_word_that_cannot_go_into_a_field_is_refused():
    notebook = _notebook(("code", FIELD_WORDS))
    with pytest.raises(ValueError, match="cannot go into an f-string field"):
        text.translate_notebook(notebook, lambda m: "通过'" if m.msgid == "passes" else None,
                                language="zh")


def test_dict_labels_passed_to_a_plot_are_figure_text_once_figures_are_translated(
        monkeypatch):
    source = ('from rope_lab import plots\n\n'
              'plots.singular_values({"post\'s test": a, "fixed": b})\n'
              'table = {"key": 1}\n')
    notebook = _notebook(("code", source))
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", False)
    assert "fixed" not in {m.msgid for m in text.notebook_messages(notebook)}
    monkeypatch.setattr(i18n, "TRANSLATE_FIGURE_TEXT", True)
    found = {m.msgid: m.note for m in text.notebook_messages(notebook)}
    assert found == {"post's test": "figure text (a label)", "fixed": "figure text (a label)"}


@pytest.mark.slow
def test_the_build_refuses_a_translation_that_adds_markup_and_writes_nothing(tmp_path):
    """Issue 35: the lint ran only in the test suite; `make translations` wrote a msgstr
    carrying <img onerror=…> into the Chinese notebook (and from there into the book)."""
    _tiny_repository(tmp_path)
    po = catalogs.init("01_tiny", tmp_path)
    _translate_all(po)
    catalogs.build(tmp_path)
    built = {path: path.read_bytes() for path in (tmp_path / "notebooks" / "zh_CN").rglob("*")
             if path.is_file()}
    catalog = catalogs.read_catalog(po)
    catalog["The second paragraph."].string = '第二段。<img src=x onerror="alert(1)">'
    catalogs.write_catalog(catalog, po)
    (tmp_path / "notebooks" / "01_tiny.ipynb").touch()
    with pytest.raises(catalogs.TranslationError, match="markup the English does not have"):
        catalogs.build(tmp_path)
    assert {path: path.read_bytes() for path in built} == built


def test_the_translation_commands_say_one_line_and_exit_2(monkeypatch, capsys):
    def refused(*args):
        raise catalogs.TranslationError("1 problem(s), nothing written:\n  x.po: …")

    monkeypatch.setattr(catalogs, "build", refused)
    assert catalogs.main(["build"]) == 2
    assert "nothing written" in capsys.readouterr().err

    def full(*args):
        raise OSError(28, "No space left on device", "notebooks/locale/zh_CN/LC_MESSAGES/x.po")

    monkeypatch.setattr(catalogs, "update", full)
    assert catalogs.main(["update"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device; no file was changed" in err


def test_one_build_writes_the_install_cell_with_the_catalog_it_compiles(tmp_path, monkeypatch):
    """The Chinese install cell's words come from the package catalog being built, not from
    the .mo an earlier build left (a changed translation once took two builds to arrive)."""
    from rope_lab import course

    (tmp_path / "notebooks").mkdir()
    english = tmp_path / "notebooks" / "01_tiny.ipynb"
    english.write_text(json.dumps(_notebook(
        ("markdown", "# 01 · Tiny\n\nThe first paragraph."),
        ("code", course.install_cell(course.REPOSITORY, course.REF)),
        ("code", 'import rope_lab as rl\n\nrl.check("it holds", True)'))))
    _translate_all(catalogs.init("01_tiny", tmp_path))
    po = tmp_path / catalogs.PACKAGE_PO.relative_to(catalogs.ROOT)
    po.parent.mkdir(parents=True)
    catalog = catalogs.read_catalog(catalogs.PACKAGE_PO)
    for comment, *_ in course.INSTALL_CELL_TEXTS.values():
        catalog[comment].string = "新的注释"
    catalogs.write_catalog(catalog, po)
    # the installed catalog: stale, without these words
    monkeypatch.setattr(i18n, "_translations", lambda locale: gettext.NullTranslations())
    catalogs.build(tmp_path)
    built = json.loads((tmp_path / "notebooks" / "zh_CN" / "01_tiny.ipynb").read_text())
    assert "".join(built["cells"][1]["source"]).startswith("# 新的注释\n")
    assert catalogs.stale_outputs(tmp_path) == []
