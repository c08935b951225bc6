"""One term per concept in the Chinese edition, one unit and one number style.

The term table (``rope_lab/data/terms_zh.csv``) names, for each concept, the course's Chinese
term and, in its ``avoid`` column, the forms the edition never writes (内插 where the source
posts write 插值, four names for NTK-aware scaling, ``N 个特征`` where the glossary says
``N 维``). These tests read every translated message of the notebooks' catalogs and of the
package catalog (what a learner reads: prose, verdicts, printed lines, figure text)."""

import csv
import re

import pytest

from rope_lab import glossary
from rope_lab.translations import catalogs, lint

CATALOGS = catalogs.catalogs() + [catalogs.PACKAGE_PO]
TERMS = list(csv.DictReader(glossary.TERMS_ZH.open(encoding="utf-8", newline="")))


def _translated(po):
    return [(m.id, m.string) for m in catalogs.read_catalog(po)
            if m.id and isinstance(m.string, str) and m.string and not m.fuzzy]


def _avoided():
    """(form, pattern, english term): a form in Chinese is found as written; a form in ASCII
    letters only as a whole word ("rad", not "gradient")."""
    found = []
    for row in TERMS:
        for form in filter(None, row["avoid"].split("|")):
            pattern = (rf"(?<![A-Za-z]){re.escape(form)}(?![A-Za-z])" if form.isascii()
                       else re.escape(form))
            found.append((form, re.compile(pattern), row["english"]))
    return found


# Terms of the table: a form is not counted where it is part of a longer one (the 个特征 of
# 两个特征值 is the start of 特征值, eigenvalues).
KNOWN = {form for row in TERMS for form in (row["chinese"], *row["variants"].split("|"))
         if form}


def _found(pattern, text) -> bool:
    for match in pattern.finditer(text):
        start, end = match.span()
        if not any(text.startswith(term, at) and at + len(term) > end
                   for at in range(start, end) for term in KNOWN):
            return True
    return False


def _problems(messages, avoided):
    problems = []
    for _msgid, msgstr in messages:
        text = lint.prose(msgstr)
        problems += [f"{form!r} ({english}) in {msgstr[:70]!r}" for form, pattern, english
                     in avoided if _found(pattern, text)]
    return problems


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_the_chinese_edition_writes_no_avoided_form(po):
    problems = _problems(_translated(po), _avoided())
    assert not problems, problems


# One coordinate named by its index is 第 j 维, never 特征 j (the review's 特征 $j$, 特征 0);
# 特征 stays for linear attention's features φ(q), which follow it as \varphi, not as an index.
INDEXED_FEATURE = re.compile(r"特征\s*\$?\s*(?:[0-9]|[a-z](?![a-z]))")


def _indexed_features(messages):
    return [msgstr[:70] for _, msgstr in messages if INDEXED_FEATURE.search(msgstr)]


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_a_coordinate_is_a_dimension_not_a_feature(po):
    found = _indexed_features(_translated(po))
    assert not found, found


@pytest.mark.parametrize("po", CATALOGS, ids=lambda p: p.stem)
def test_one_number_style(po):
    """Thousands with a comma, as the printed numbers have them ({n:,}): never "10 000"."""
    spaced = [msgstr[:70] for _, msgstr in _translated(po)
              if re.search(r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d.])", lint.prose(msgstr))]
    assert not spaced, spaced


def test_the_checks_can_fail():
    avoided = _avoided()
    assert _problems([("", "06 越过训练长度，再把位置压缩回来（内插）")], avoided)
    assert _problems([("", "**NTK-aware（静态）** 则改为增大 base")], avoided)
    assert _problems([("", "四个头，每个头 16 个特征")], avoided)
    assert _problems([("", "[0, 0.273) rad 之内")], avoided)
    assert not _problems([("", "梯度 gradient 与代码 `rad`")], avoided[-1:])
    assert not _problems([("", "(R + Rᵀ)/2 的两个特征值都是 cos φ")], avoided)
    assert _problems([("", "笔记本 03 旋转的是一对特征。")], avoided)
    assert _problems([("", "然后专门去看特征布局")], avoided)
    assert _indexed_features([("", "`rotate_half` 把特征 $j$ 与特征 $j + 64$ 配成一对")])
    assert _indexed_features([("", "HF 把特征 i 与 i + d/2 配对（特征 0 落到特征 0 和 4）")])
    assert not _indexed_features([("", "用正的特征 $\\varphi(q)\\cdot\\varphi(k)$ 代替 softmax")])
    assert not _problems([("", "这里使用的特征映射（feature map）")], avoided)


def test_the_glossary_shows_the_term_table():
    table = glossary.terms_markdown().splitlines()
    assert len(table) == len(TERMS) + 2
    row = next(line for line in table if line.startswith("| interpolation |"))
    assert "插值" in row and "内插" in row  # the term, and the form never written
