"""The package's error messages in the course's language, the English kept for searching.

A ``ValueError`` or ``TypeError`` that refuses bad input is raised in English (tests,
notebooks and practitioners match it). In the Chinese edition a learner still reads it in
Chinese: :func:`error_message` returns the translation with the English below it, the
notebook's traceback gets the same as a note (``rope_lab.setup_notebook(language="zh")``
installs :func:`show_translated`), and the graders' feedback quotes it.

Each message is an f-string in the source of one of :data:`MODULES`; its *template* is the
f-string as written (``"{name} must be an int, got {value!r} of type …"``), found by reading
the module's syntax tree, so nothing is written twice. The template is the message's msgid
in the package catalog (:func:`rope_lab.translations.catalogs.data_messages` adds them); a raised
message is matched against the templates, and the translation is filled with the values the
English carried, field by field. A message no template matches stays English.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from rope_lab.i18n import _, get_language

PACKAGE = Path(__file__).resolve().parent.parent
# The modules whose refusals a learner meets in the notebooks: every public function
# validates there (_validate) or in its own module.
MODULES = ("_validate.py", "absolute.py", "alibi.py", "attention.py", "checks.py", "decay.py",
           "linear_attention.py", "rope.py")
_CONVERSIONS = {-1: "", 115: "!s", 114: "!r", 97: "!a"}


def _template(node: ast.expr) -> str | None:
    """An f-string (or plain string) message as written, its fields as ``{expression…}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
            continue
        spec = ""
        if value.format_spec is not None:
            spec = ":" + "".join(str(v.value) if isinstance(v, ast.Constant)
                                 else "{" + ast.unparse(v.value) + "}"
                                 for v in value.format_spec.values)
        parts.append("{" + ast.unparse(value.value) + _CONVERSIONS[value.conversion] + spec + "}")
    return "".join(parts)


@functools.cache
def located_templates() -> tuple[tuple[str, str], ...]:
    """(module, template) of every message the :data:`MODULES` raise, in source order."""
    found, seen = [], set()
    for name in MODULES:
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and node.exc.args):
                template = _template(node.exc.args[0])
                words = re.sub(r"\{[^{}]*\}", " ", template or "")
                if template and re.search(r"[A-Za-z]{3}", words) and template not in seen:
                    seen.add(template)
                    found.append((name, template))
    return tuple(found)


def templates() -> tuple[str, ...]:
    """Every message the :data:`MODULES` raise, as a template, in source order."""
    return tuple(template for _module, template in located_templates())


def _pieces(template: str) -> list[tuple[str, str]]:
    """("text", …) and ("field", "{…}") pieces of a template, ``{{``/``}}`` made text."""
    pieces, text, i = [], [], 0
    while i < len(template):
        if template.startswith(("{{", "}}"), i):
            text.append(template[i])
            i += 2
        elif template[i] == "{":
            depth, end = 0, i
            while True:
                depth += {"{": 1, "}": -1}.get(template[end], 0)
                end += 1
                if depth == 0:
                    break
            if text:
                pieces.append(("text", "".join(text)))
                text = []
            pieces.append(("field", template[i:end]))
            i = end
        else:
            text.append(template[i])
            i += 1
    if text:
        pieces.append(("text", "".join(text)))
    return pieces


@functools.cache
def _pattern(template: str) -> tuple[re.Pattern, tuple[str, ...]]:
    """A regular expression that matches the messages of ``template``, and its fields in the
    order of their groups (a field met twice must carry the same text twice)."""
    regex, fields = [], []
    for kind, piece in _pieces(template):
        if kind == "text":
            regex.append(re.escape(piece))
        elif piece in fields:
            regex.append(f"(?P=f{fields.index(piece)})")
        else:
            regex.append(f"(?P<f{len(fields)}>.+?)")
            fields.append(piece)
    return re.compile(r"\A" + "".join(regex) + r"\Z", re.DOTALL), tuple(fields)


def translate_error(message: str) -> str | None:
    """``message`` (an English error of the package) in the course's language, its values
    put back in; None in English, or when no template matches or none is translated."""
    if get_language() == "en":
        return None
    for template in templates():
        pattern, fields = _pattern(template)
        match = pattern.match(message)
        if match is None:
            continue
        translated = _(template)
        if translated == template:
            return None
        values = {field: match.group(f"f{i}") for i, field in enumerate(fields)}
        out = []
        for kind, piece in _pieces(translated):
            out.append(values.get(piece, piece) if kind == "field" else piece)
        return "".join(out)
    return None


def error_message(error: BaseException | str) -> str:
    """The message of ``error`` as a learner should read it: in English the message itself;
    in Chinese its translation, then the English message (what a search engine knows)."""
    english = str(error)
    translated = translate_error(english)
    if translated is None:
        return english
    # Translators: the line under a translated error message; {message} is the English
    return translated + "\n" + _("(in English: {message})").format(message=english)


def show_translated(shell, etype, value, tb, tb_offset=None):
    """IPython's handler for an error a cell raises: the usual traceback, with the message
    in the course's language as a note under the English (installed in the Chinese edition
    by ``rope_lab.setup_notebook``)."""
    translated = translate_error(str(value))
    if translated is not None and translated not in getattr(value, "__notes__", ()):
        value.add_note(translated)
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
