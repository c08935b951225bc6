"""A markdown document (the teaching guide, ``notebooks/TEACHING.md``) as messages, and its
translation put back together.

A document is segmented exactly as a notebook's markdown cell is
(:func:`rope_lab.translations.notebooks._markdown_slots`): one message per paragraph, list item,
heading and table; fenced code, display maths and HTML stay as they are. What a notebook
calls a cell id is here the anchor of the section a message is in (``before-class``), so a
translator's tool shows ``TEACHING.md#before-class`` as the entry's location and an edit
elsewhere in the English moves no entry of another section.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from rope_lab.translations.notebooks import Link, Message, _apply, _markdown_slots, _Slot, relink


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation other than ``-`` and ``_``
    dropped, each space a hyphen (``The 50-minute session: "why RoPE is a rotation"`` →
    ``the-50-minute-session-why-rope-is-a-rotation``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _document_slots(source: str) -> list[_Slot]:
    slots = sorted(_markdown_slots(source, ""), key=lambda slot: slot.start)
    section = ""
    for slot in slots:
        if slot.message.note == "markdown heading":
            section = anchor(slot.message.msgid)
        slot.message = replace(slot.message, cell_id=section)
    return slots


def document_messages(source: str) -> list[Message]:
    """Every translatable text of a markdown document, in reading order; a message's
    ``cell_id`` is the anchor of its section (empty before the first heading)."""
    return [slot.message for slot in _document_slots(source)]


def translate_document(source: str, translate: Callable[[Message], str | None], *,
                       link: Link | None = None) -> str:
    """The document in another language: every message through ``translate`` (None: keep
    the English), then every link through ``link`` (see
    :func:`rope_lab.translations.notebooks.relink`). Everything else is copied."""
    translated = _apply(source, _document_slots(source), translate)
    return translated if link is None else relink(translated, link)
