"""The glossary: complete, bilingual, rendered as a table, searchable."""

import re

import pytest

from rope_lab import course, glossary

# The Chinese terms the source posts use, which the brief promises to explain.
SOURCE_TERMS = ("旋转位置编码", "远程衰减", "外推", "绝对位置编码", "相对位置编码", "内插")


def test_source_terms_are_all_there():
    chinese = " ".join(term.chinese for term in glossary.GLOSSARY)
    for word in SOURCE_TERMS:
        assert word in chinese, word


def test_entries_are_well_formed():
    numbers = {notebook.filename[:2] for notebook in course.NOTEBOOKS}
    english = [term.english for term in glossary.GLOSSARY]
    assert len(english) == len(set(english))
    for term in glossary.GLOSSARY:
        assert re.search(r"[\u4e00-\u9fff]", term.chinese), term
        assert term.notebook in numbers, term
        assert term.meaning.endswith("."), term


def test_markdown_has_one_row_per_term_in_course_order():
    text = glossary.glossary_markdown()
    rows = text.splitlines()
    assert rows[0].startswith("| English | 中文 |") and len(rows) == len(glossary.GLOSSARY) + 2
    notebooks = [row.rsplit("|", 2)[1].strip() for row in rows[2:]]
    assert notebooks == sorted(notebooks)
    # a "|" inside a meaning is escaped, so every row still has exactly four cells
    assert all(re.sub(r"\\\|", "", row).count("|") == 5 for row in rows)
    assert "\\|m − n\\|" in text


def test_lookup_by_english_or_chinese():
    assert glossary.lookup("extrapolation").chinese == "外推"
    assert glossary.lookup("旋转位置编码").english.startswith("rotary")
    assert glossary.lookup("RoPE").chinese == "旋转位置编码"
    with pytest.raises(KeyError, match="'warp drive' is not in the glossary"):
        glossary.lookup("warp drive")
    with pytest.raises(ValueError, match="non-empty string"):
        glossary.lookup("  ")


def test_markdown_renders_subscripts_literally_not_as_italics():
    """Unescaped, `PE(p)_{2i} = sin(p·ω_i)` pairs its underscores into italics (seen in
    the book); rendered with the book's Markdown renderer (nbconvert's mistune) it must
    keep them."""
    mistune = pytest.importorskip("mistune")

    html = mistune.html(glossary.glossary_markdown())
    assert "<em>" not in html
    assert "PE(p)_{2i} = sin(p·ω_i)" in html
