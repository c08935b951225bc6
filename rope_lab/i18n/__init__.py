"""The language the course speaks, and the package's own messages in that language.

The course exists in English and in 简体中文 (simplified Chinese), from one source: the
Chinese notebooks are built from the English ones and gettext catalogs (``python -m
rope_lab.i18n``, see :mod:`rope_lab.i18n.catalogs`). At run time only this module is
involved, and it needs nothing but the standard library's :mod:`gettext`:

* the language is chosen once, by ``rope_lab.setup_notebook(language="zh")`` in a Chinese
  notebook's first code cell, or by the environment variable ``ROPE_LAB_LANG`` (``en`` or
  ``zh``); English is the default and the English notebooks never set it;
* a package module marks a message for translation with :func:`_`, formatting *after* the
  lookup so the catalog holds one entry with its named fields::

      from rope_lab.i18n import _
      print(_("{claim} — max |difference| = {gap}").format(claim=claim, gap=gap))

  English (or a message without a translation) comes back unchanged.

The package's catalog is ``rope_lab/locale/zh_CN/LC_MESSAGES/rope_lab.po``, compiled to the
``.mo`` next to it that :mod:`gettext` reads (both committed; a test keeps them in step).
"""

from __future__ import annotations

import functools
import gettext as _gettext
import os
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


def get_language() -> str:
    """The language chosen by :func:`set_language`, else ``ROPE_LAB_LANG``, else "en"."""
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
    """``message`` in the current language (unchanged in English or without a translation)."""
    locale = LANGUAGES[get_language()]
    return message if locale is None else _translations(locale).gettext(message)


_ = gettext
