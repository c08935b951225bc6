"""What a reviewer checks in a translation, as functions that return the problems found.

* :func:`message_problems`: one entry, msgid against msgstr: the f-string fields, maths,
  inline code, link targets and table shape must survive; bold markers stay paired; a
  printed text keeps its line breaks; no English sentence is left behind; and nothing that
  could run is added (:func:`added_code`): no HTML tag, ``javascript:`` URL or control
  character the English does not have. ``make translations`` refuses to build while any
  entry has a problem (:func:`rope_lab.translations.catalogs.translation_problems`).
* :func:`term_problems`: the course's terms (``rope_lab/data/terms_zh.csv``) are used as
  the table says, and the first use in a notebook gives the English in parentheses where
  the table asks for it.

The tests run them over every catalog (tests/test_i18n.py), and each can be tried on a
single entry.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from rope_lab.translations.notebooks import _MATH, _strip_fields, replacement_fields

TERMS = Path(__file__).resolve().parent.parent / "data" / "terms_zh.csv"

_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK_TARGET = re.compile(r"\]\(([^)\s]*)\)")
_ITALIC = re.compile(r"(?<![*\w])\*(?!\*)[^*]+\*(?!\*)")
# "…", '…' and the typographic and corner-bracket quotes
_QUOTED = re.compile("\"[^\"]*\"|'[^']*'|\u201c[^\u201d]*\u201d|\u2018[^\u2019]*\u2019|"
                     "\u300c[^\u300d]*\u300d")
_ENGLISH_RUN = re.compile(r"(?:\b[A-Za-z][a-z'-]*\b[ ,;:]+){5}\b[A-Za-z][a-z'-]*\b")
_WORDS = re.compile(r"\b[A-Za-z]{3,}\b")  # words, not symbols such as PE or W_k
# An HTML tag, a CommonMark autolink (<https://…>, <javascript:…>) or a processing
# instruction: markup a page renders or a browser runs.
_MARKUP = re.compile(r"<[/!?]?[A-Za-z][^<>]*>?")
# URL schemes that run code or smuggle a document when a link or an image is followed.
_CODE_SCHEMES = re.compile(r"(?i)\b(?:javascript|vbscript|data|file)\s*:")
# Characters that end a line of code or hide text: every C0/C1 control but tab and newline
# (those are counted as line breaks), and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _without_code(text: str) -> str:
    """``text`` without maths, inline code, link targets and URLs (what is never translated)."""
    text = _MATH.sub(" ", text)
    text = _CODE_SPAN.sub(" ", text)
    text = _LINK_TARGET.sub("]", text)
    return re.sub(r"https?://\S+", " ", text)


def prose(text: str) -> str:
    """The words of ``text`` a translator translates: without code, maths, titles in
    italics and quoted examples ("dog bites man")."""
    return _QUOTED.sub(" ", _ITALIC.sub(" ", _without_code(text)))


def _table_shape(text: str) -> list[int]:
    return [len(re.findall(r"(?<!\\)\|", line)) for line in text.split("\n")]


def message_problems(msgid: str, msgstr: str, *, brace_format: bool = False,
                     markdown: bool = False, table: bool = False) -> list[str]:
    """What is wrong with ``msgstr`` as a translation of ``msgid`` (empty: nothing).

    ``brace_format``: an f-string or ``str.format`` message; ``markdown``: a markdown block
    (``table``: a whole table).
    """
    problems = added_code(msgid, msgstr)
    if brace_format and replacement_fields(msgid) != replacement_fields(msgstr):
        problems.append(f"the {{fields}} differ: {replacement_fields(msgid)} in English, "
                        f"{replacement_fields(msgstr)} in the translation")
    for what, pattern in (("maths", _MATH), ("inline code", _CODE_SPAN),
                          ("link targets", _LINK_TARGET)):
        english, translated = (sorted(set(pattern.findall(t))) for t in (msgid, msgstr))
        if english != translated:
            missing = sorted(set(english) - set(translated))
            added = sorted(set(translated) - set(english))
            problems.append(f"{what} differ: missing {missing}, added {added}")
    if table and _table_shape(msgid) != _table_shape(msgstr):
        problems.append(f"the table's shape differs: cells per row {_table_shape(msgid)} "
                        f"vs {_table_shape(msgstr)}")
    if markdown and _without_code(msgstr).count("**") % 2:
        problems.append("an unpaired ** (bold) marker")
    if msgid.count("\n") != msgstr.count("\n") and not table:
        problems.append(f"{msgid.count(chr(10))} line break(s) in English, "
                        f"{msgstr.count(chr(10))} in the translation")
    english = prose(_strip_fields(msgid) if brace_format else msgid)
    if msgstr == msgid and len(_WORDS.findall(english)) >= 3:
        problems.append("the translation is the English text")
    elif left := _ENGLISH_RUN.search(prose(_strip_fields(msgstr) if brace_format else msgstr)):
        problems.append(f"English left in the translation: {left[0]!r}")
    return problems


def added_code(msgid: str, msgstr: str) -> list[str]:
    """What ``msgstr`` adds that a page or a notebook could run: an HTML tag, a
    ``javascript:``-like URL scheme or a control character that ``msgid`` does not have.

    A translation becomes notebook markdown, a page of the book (rope_lab.book sanitizes
    every page as well) and, for the install cell, Python source: none of it may carry
    markup or code the English does not.
    """
    problems = []
    english = {_tag_shape(tag) for tag in _MARKUP.findall(_without_maths_and_code(msgid))}
    added = sorted({tag for tag in _MARKUP.findall(_without_maths_and_code(msgstr))
                    if _tag_shape(tag) not in english})
    if added:
        problems.append(f"markup the English does not have: {added}")
    schemes = {s.lower().replace(" ", "") for s in _CODE_SCHEMES.findall(msgid)}
    added = sorted({s.lower().replace(" ", "") for s in _CODE_SCHEMES.findall(msgstr)} - schemes)
    if added:
        problems.append(f"a URL scheme the English does not have: {added}")
    controls = sorted({f"U+{ord(c):04X}" for c in _CONTROL.findall(msgstr)}
                      - {f"U+{ord(c):04X}" for c in _CONTROL.findall(msgid)})
    if controls:
        problems.append(f"control characters the English does not have: {controls}")
    return problems


def _without_maths_and_code(text: str) -> str:
    # both must equal the English's (message_problems checks), so they add nothing
    return _CODE_SPAN.sub(" ", _MATH.sub(" ", text))


def _tag_shape(tag: str) -> tuple:
    """What a tag does, not what its words say: its kind (``/``, ``!``), name and attribute
    names (``<a href=…>`` and ``<a href=… onclick=…>`` differ; translated text inside a
    placeholder such as ``<rope_lab panel …>`` does not matter)."""
    found = re.match(r"<([/!?]?)([A-Za-z][\w:.-]*)(.*)", tag, re.S)
    attributes = re.findall(r"[\s/\"']([^\s\"'<>/=]+)\s*=", found[3])
    return found[1], found[2].lower(), tuple(sorted(a.lower() for a in attributes))


def rendering_problems(msgid: str, msgstr: str) -> list[str]:
    """Markdown that renders differently: bold, italics, code, links or table cells lost.

    CommonMark decides whether ``**`` opens or closes by the characters around it, and
    Chinese punctuation counts: ``**时间：**约`` stays literal asterisks, while ``**时间**：约``
    is bold. Rendered with markdown-it-py (CommonMark plus tables), both texts must produce
    the same number of each element.
    """
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark").enable("table")
    elements = ("strong", "em", "code", "a", "td", "th")

    def count(source: str) -> list[int]:
        html = renderer.render(source)
        return [len(re.findall(f"<{element}[ >]", html)) for element in elements]

    english, translated = count(msgid), count(msgstr)
    return [f"renders {translated[i]} {element} element(s), the English {english[i]}"
            for i, element in enumerate(elements) if english[i] != translated[i]]


# --- terms -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    english: str
    chinese: str
    first_use: str  # how the first use in a notebook reads ("" = as ``chinese``)
    variants: tuple[str, ...]  # other accepted forms
    pattern: re.Pattern | None  # finds the English term in a msgid (None: not checked)
    seed_wording: str
    seed_source: str
    note: str

    @property
    def accepted(self) -> tuple[str, ...]:
        return (self.chinese, *self.variants)


def load_terms(path: Path = TERMS) -> list[Term]:
    """The term table (one row per English term; see the file's columns)."""
    with path.open(encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    return [Term(row["english"], row["chinese"], row["first_use"],
                 tuple(v for v in row["variants"].split("|") if v),
                 re.compile(row["english_pattern"]) if row["english_pattern"] else None,
                 row["seed_wording"], row["seed_source"], row["note"]) for row in rows]


def term_problems(messages: list[tuple[str, str, str]], terms: list[Term]) -> list[str]:
    """Term use in one notebook's translation: ``messages`` are (msgid, msgstr, kind) in
    reading order. Where the English uses a term, the translation uses the table's Chinese
    (or an accepted variant); the first prose use of a term with a ``first_use`` form
    gives that form (the English in parentheses)."""
    problems, introduced = [], set()
    for msgid, msgstr, kind in messages:
        english = prose(msgid)
        for term in terms:
            if term.pattern is None or not term.pattern.search(english):
                continue
            if not any(form in msgstr for form in term.accepted):
                problems.append(f"{term.english!r} is not translated as {term.chinese!r} "
                                f"(or {list(term.variants)}): {msgstr[:80]!r}")
            if term.first_use and term.english not in introduced and kind in (
                    "markdown paragraph", "markdown list item"):
                introduced.add(term.english)
                if term.first_use not in msgstr:
                    problems.append(f"first use of {term.english!r} should read "
                                    f"{term.first_use!r}: {msgstr[:80]!r}")
    return problems
