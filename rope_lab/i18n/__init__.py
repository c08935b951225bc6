"""The language the course speaks, and the package's own messages in that language.

The course exists in English and in 简体中文 (simplified Chinese), from one source: the
Chinese notebooks are built from the English ones and gettext catalogs by the build tools of
:mod:`rope_lab.translations` (``python -m rope_lab.translations``, a floor above the course).
At run time only this module is involved, the bottom floor every other one may call, and it
needs nothing but the standard library's :mod:`gettext`:

* the language is chosen once, by ``rope_lab.setup_notebook(language="zh")`` in a Chinese
  notebook's first code cell, or by the environment variable ``ROPE_LAB_LANG`` (``en`` or
  ``zh``); English is the default and the English notebooks never set it. A tool that writes
  both editions (the book, :mod:`rope_lab.book`) speaks one for a while with
  :func:`using_language`;
* a package module marks a message for translation with :func:`_`, formatting *after* the
  lookup so the catalog holds one entry with its named fields::

      from rope_lab.i18n import _
      print(_("{claim} — max |difference| = {gap}").format(claim=claim, gap=gap))

  English (or a message without a translation) comes back unchanged. The lookup happens
  where the text is shown (the language is chosen after ``import rope_lab``), so a module
  constant is marked with :func:`N_` and looked up with :func:`_` where it is displayed,
  or, when a notebook prints it itself, made a :class:`LazyText` with :func:`lazy_gettext`
  (it prints in the chosen language and is English to the code);

* text drawn inside a matplotlib figure (titles, axis labels, legends, annotations) goes
  through :func:`figure_text` instead, which translates only while
  :data:`TRANSLATE_FIGURE_TEXT` is on: without a CJK font matplotlib draws Chinese as empty
  boxes and warns "Glyph … missing" on stderr. The same switch decides whether the notebook
  catalogs carry the figure text that notebooks pass (:mod:`rope_lab.translations.notebooks`).

Which messages are translated: everything a learner reads (verdicts, grader feedback,
widget labels, figure text, tables, the glossary, the docstrings ``show_source`` prints).
Error messages that refuse bad input (``ValueError``, ``TypeError``) are raised in English:
tests and practitioners match them, and a search engine knows them. The Chinese edition
shows them translated, with the English kept below (:mod:`rope_lab.i18n.errors`: a note
under a cell's traceback, the graders' feedback, ``error_message``).

The package's catalog is ``rope_lab/locale/zh_CN/LC_MESSAGES/rope_lab.po``, compiled to the
``.mo`` next to it that :mod:`gettext` reads (both committed; a test keeps them in step).
"""

from __future__ import annotations

import contextlib
import functools
import gettext as _gettext
import os
import threading
from pathlib import Path

LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
DOMAIN = "rope_lab"
ENVIRONMENT_VARIABLE = "ROPE_LAB_LANG"
# The course's languages: short code → gettext locale (None: the source language, no catalog).
LANGUAGES = {"en": None, "zh": "zh_CN"}
# Other spellings people write for the same two languages.
_ALIASES = {"en": "en", "en_us": "en", "en_gb": "en", "english": "en",
            "zh": "zh", "zh_cn": "zh", "zh_hans": "zh", "zh_hans_cn": "zh", "chinese": "zh"}

_chosen: str | None = None
_this_thread = threading.local()  # using_language's choice, per thread


def normalize_language(language, name: str = "language") -> str:
    """``language`` as one of the codes of :data:`LANGUAGES` ("en" or "zh").

    Accepts the common spellings ("zh-CN", "zh_Hans", "en_US" …); anything else is refused
    with a message naming ``name``, the value and the choices.
    """
    if isinstance(language, str):
        code = _ALIASES.get(language.strip().lower().replace("-", "_"))
        if code is not None:
            return code
    raise ValueError(f"{name} must be one of {sorted(LANGUAGES)} (or a spelling such as "
                     f"'zh-CN', 'en_US'), got {language!r}")


def set_language(language) -> str:
    """Make ``language`` ("en" or "zh") the language of the package's messages; returns it."""
    global _chosen
    _chosen = normalize_language(language)
    return _chosen


@contextlib.contextmanager
def using_language(language):
    """Speak ``language`` ("en" or "zh") inside the ``with`` block, then the language chosen
    before again, even after an error (the book writes each edition's pages in its own
    language, whatever the environment chose). The choice holds for this thread only:
    ``python -m rope_lab.exercises grade`` grades English and Chinese notebooks side by side.
    """
    before = getattr(_this_thread, "language", None)
    _this_thread.language = normalize_language(language)
    try:
        yield _this_thread.language
    finally:
        _this_thread.language = before


def get_language() -> str:
    """The language of :func:`using_language` in this thread, else the one chosen by
    :func:`set_language`, else ``ROPE_LAB_LANG``, else "en"."""
    within = getattr(_this_thread, "language", None)
    if within is not None:
        return within
    if _chosen is not None:
        return _chosen
    from_environment = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not from_environment:
        return "en"
    return normalize_language(from_environment, name=f"the environment variable "
                                                   f"{ENVIRONMENT_VARIABLE}")


@functools.cache
def _translations(locale: str) -> _gettext.NullTranslations:
    # fallback=False: a missing catalog in an installed package is a packaging bug, not a
    # reason to print English in a Chinese notebook without saying so.
    return _gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[locale])


def gettext(message: str) -> str:
    """``message`` in the current language (unchanged in English or without a translation;
    anything but text, a title of None say, comes back as it is)."""
    if not isinstance(message, str):
        return message
    message = str.__str__(message)  # a LazyText's English, as a plain str
    locale = LANGUAGES[get_language()]
    if locale is None or not message:  # gettext("") is the catalog's header
        return message
    return (_building.get(locale) or _translations(locale)).gettext(message)


_ = gettext
_building: dict[str, _gettext.NullTranslations] = {}


@contextlib.contextmanager
def using_catalog(locale: str, translations: _gettext.NullTranslations):
    """The package's messages in ``locale`` from ``translations`` instead of the installed .mo,
    inside the block: the translation build writes the Chinese install cells with the catalog
    it is compiling, not the one an earlier build left (which took two builds to settle)."""
    _building[locale] = translations
    try:
        yield
    finally:
        del _building[locale]


def N_(message: str) -> str:
    """Mark ``message`` for the catalog without translating it (gettext's ``N_``): for module
    constants, which :func:`_` translates later, where they are shown."""
    return message


class LazyText(str):
    """An English text that shows itself in the course's language when it is printed or
    formatted (``print(label)``, ``f"{label:24s}"``): a module constant a notebook prints
    (``plots.EXPERIMENT_STYLE``'s labels) speaks Chinese in the Chinese edition, with no
    change to the notebook's code. It compares, hashes and concatenates as its English
    (code reads it), and :func:`gettext` looks it up by that English (Django's and Babel's
    ``lazy_gettext``)."""

    __slots__ = ()

    def __str__(self) -> str:
        return gettext(self)

    def __format__(self, spec: str) -> str:
        return _format_columns(gettext(self), spec)


def _format_columns(text: str, spec: str) -> str:
    """``format(text, spec)`` with the width counted in monospace columns, as a table of
    printed rows needs: a CJK character takes two (``f"{label:24s}"`` lines up)."""
    import re
    import unicodedata

    extra = sum(unicodedata.east_asian_width(c) in "WF" for c in text)
    match = re.fullmatch(r"((?:.?[<>^])?)(\d+)(.*)", spec, re.S)
    if not extra or match is None:
        return format(text, spec)
    align, width, rest = match.groups()
    return format(text, f"{align}{max(int(width) - extra, 0)}{rest}")


def lazy_gettext(message: str) -> LazyText:
    """``message`` as a :class:`LazyText` (marked for the catalog, like :func:`N_`)."""
    return LazyText(message)


# On: matplotlib draws Chinese from the font the course ships (rope_lab/book_assets/
# cjk-subset.otf, registered as a fallback family in rope_lab/plots/style.py), so figure text
# is translated and the notebook catalogs carry the figure text notebooks pass (titles,
# labels). Switched off, every figure stays English in both editions.
TRANSLATE_FIGURE_TEXT = True


def figure_text(message: str) -> str:
    """:func:`gettext` for text drawn in a figure: translated only while
    :data:`TRANSLATE_FIGURE_TEXT` is on (the figure modules import it as ``_``)."""
    if TRANSLATE_FIGURE_TEXT or not isinstance(message, str):
        return gettext(message)
    return str.__str__(message)
