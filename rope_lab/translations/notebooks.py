"""A notebook as the messages a translator translates, and a translation put back into it.

:func:`notebook_messages` lists what is translated, :func:`translate_notebook` builds the
other language's notebook from the English one and a lookup ``msgid → msgstr``. Everything
else of a notebook (cell ids, metadata, every line of code) is copied.

What is a message
-----------------
*Markdown*, one message per block, so that a small English edit invalidates one paragraph,
not a cell: a paragraph (its lines joined by single spaces: rewrapping the English changes
nothing), a list item (without its marker), a heading (without its ``#``), a whole table.
Display maths (``$$ … $$``), fenced code and HTML stay as they are; so does a block with no
words outside maths and code.

*Code*, only what a learner reads, never what the code reads:

* comments: a block of whole-line comments is one message, a trailing comment another
  (pragmas such as ``# noqa`` stay);
* the docstrings of functions and classes the notebook defines;
* string literals (plain, f-strings, implicit concatenations) in these places only, listed
  in :data:`LITERAL_SLOTS`:

  - any argument of ``print(...)``;
  - the message of an exception raised with ``raise SomeError("...")``;
  - an argument bound to a parameter named ``claim`` or ``detail`` (the verdict line of
    ``rl.check`` / ``rl.check_close``), whether passed by keyword or by position: positional
    arguments are matched to parameter names through the signature of the rope_lab function
    or the notebook's own function that is called;
  - an argument bound to a parameter named ``description`` (a widget's label);
  - with ``rope_lab.i18n.TRANSLATE_FIGURE_TEXT`` on (phase 2 of issue 31: once matplotlib
    has a CJK font), also ``title``, ``titles``, ``suptitle``, ``xlabel``, ``ylabel``,
    ``label``, ``tolerance_label`` parameters and variables of those names, the string keys
    of a dict literal passed to a ``rope_lab.plots`` function (its legend labels), and the
    string values of a *label mapping*: a dict literal passed as ``labels=`` or assigned to
    a variable named ``labels`` or ``…_labels`` (``labels={"fix": "hf.decode_position_ids
    (fix)"}``: the keys stay the names the checks use, the values are what a figure writes).

  Inside such a place a literal may sit in a list or tuple, either branch of ``a if c else
  b``, a ``+`` concatenation, or the item of a joined comprehension (``"; ".join(f"{k}L:
  … learned {v}" for k in ks)``; a join of a list of plain strings is code). Everything
  else (dict keys, layout names, arguments such as ``"causal"``, strings compared with
  ``==``) is code and is never touched. An f-string is one message whose replacement
  fields (``{worst:.1e}``) the translation must keep, in any order; the words a field
  prints are messages of their own (:func:`_field_words`: ``{'passes' if ok else
  'fails'}``, and ``{mode}`` in a loop over ``("random", "correlated")``), written into
  the field by the build.

Putting a translation back keeps the code valid and within the line length: a literal is
re-wrapped into implicitly concatenated pieces aligned under its first piece, comments are
re-wrapped at their indentation (a trailing comment too long for its line moves above it),
and the notebook's ``rl.setup_notebook(...)`` call gains ``language="zh"``: the only change
to code that is not a comment or one of the literals above (:func:`code_signature` checks it).
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import io
import posixpath
import re
import tokenize
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

LINE_LENGTH = 100  # ruff's line-length for the repository, notebooks included

# parameter (or variable) name → what a translator is told about it
LITERAL_SLOTS = {"claim": "verdict line of a check (claim)",
                 "detail": "verdict line of a check (detail)"}
FIGURE_SLOTS = {name: "figure text" for name in
                ("title", "titles", "suptitle", "xlabel", "ylabel", "label", "tolerance_label")}
# A figure's display labels kept apart from the keys the code uses: the string values of a
# dict literal passed as ``labels=`` or assigned to ``labels`` / ``…_labels`` (figure text).
LABEL_MAPS = "labels"
# Widget labels are HTML, drawn by the browser's fonts: always translated.
WIDGET_SLOTS = {"description": "widget label"}
# FIGURE_SLOTS count only while rope_lab.i18n.TRANSLATE_FIGURE_TEXT is on (issue 31, phase 2:
# once the plots carry a CJK font): a Chinese title would make matplotlib warn about missing
# glyphs, and a warning on stderr fails the notebook under nbval.

_CJK = re.compile(r"[\u2e80-\u9fff\u3000-\u303f\uff00-\uffef\uac00-\ud7af]")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$", re.S)
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_URL = re.compile(r"https?://\S+")
_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class Message:
    """One translatable text of a notebook."""

    msgid: str
    cell_id: str
    kind: str  # "markdown", "comment", "docstring" or "literal"
    note: str  # what it is, for the translator
    brace_format: bool = False  # an f-string: its {fields} must survive translation


@dataclass
class _Slot:
    """A span of a cell's source and how to write it in another language."""

    message: Message
    start: int  # character offsets into the cell source
    end: int
    # (translation, the line's text before the slot as built so far) → new source
    render: Callable[[str, str], str] = field(repr=False)
    trailing_comment: bool = False  # may move above its line when the line gets too long
    # words printed by the replacement fields of an f-string (see _field_words), and how to
    # put their translations into the fields: (text, {msgid: translation}) → text
    field_messages: tuple[Message, ...] = ()
    rewrite_fields: Callable[[str, dict[str, str]], str] | None = field(default=None,
                                                                       repr=False)


def has_words(text: str) -> bool:
    """True when ``text`` has something to translate: a word outside maths, code and URLs."""
    bare = _URL.sub(" ", _CODE_SPAN.sub(" ", _MATH.sub(" ", text)))
    return bool(_WORD.search(bare))


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font (CJK characters take two, as ruff counts)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# --- markdown ---------------------------------------------------------------------------------

_ITEM = re.compile(r"^(\s*(?:[-*+]|(\d+)[.)])\s+)(.*)$")
_HEADING = re.compile(r"^(#{1,6}\s+)(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _block_start(line: str, item_column: int | None) -> bool:
    """Whether ``line`` ends the paragraph or list item being read and starts a block.

    ``item_column``: the column where the current list item's text starts (None: a plain
    paragraph). A list marker follows CommonMark: left of that column it closes the item
    and starts the next one (any number: ``2.`` after ``1.``); where it would interrupt a
    paragraph (a plain one, or the text of an item) only a non-empty item that is a bullet
    or numbered 1 may start, so "slope 1 and⏎2. The times" is one paragraph.
    """
    stripped = line.strip()
    if item := _ITEM.match(line):
        indent = len(line) - len(line.lstrip())
        if item_column is not None and indent < item_column:
            return True
        return bool(item[3].strip()) and (item[2] is None or int(item[2]) == 1)
    return (not stripped or bool(_HEADING.match(line))
            or stripped.startswith(("|", "$$", "<")) or bool(_FENCE.match(line)))


def _markdown_slots(source: str, cell_id: str) -> list[_Slot]:
    lines = source.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    slots: list[_Slot] = []

    def add(first: int, last: int, msgid: str, prefix: str, what: str) -> None:
        if not has_words(msgid):
            return
        start = offsets[first] + len(prefix)
        end = offsets[last + 1] - 1
        slots.append(_Slot(Message(msgid, cell_id, "markdown", what), start, end,
                           render=lambda text, lead: text))

    i = 0
    while i < len(lines):
        line, stripped = lines[i], lines[i].strip()
        if not stripped:
            i += 1
        elif _FENCE.match(line):  # fenced code: as it is
            fence = _FENCE.match(line)[1]
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                i += 1
            i += 1
        elif stripped.startswith("$$"):  # display maths: as it is, up to the closing $$
            if not (len(stripped) > 2 and stripped.endswith("$$")):
                i += 1
                while i < len(lines) and "$$" not in lines[i]:
                    i += 1
            i += 1
        elif stripped.startswith("<"):  # HTML: as it is
            while i < len(lines) and lines[i].strip():
                i += 1
        elif stripped.startswith("|"):  # a table: one message, exactly as written
            first = i
            while i < len(lines) and lines[i].strip().startswith("|"):
                i += 1
            add(first, i - 1, "\n".join(lines[first:i]), "", "markdown table")
        elif heading := _HEADING.match(line):
            add(i, i, heading[2].strip(), heading[1], "markdown heading")
            i += 1
        else:
            item = _ITEM.match(line)
            prefix = item[1] if item else line[:len(line) - len(line.lstrip())]
            first, words = i, [line[len(prefix):].strip()]
            i += 1
            while i < len(lines) and not _block_start(lines[i], len(prefix) if item else None):
                words.append(lines[i].strip())
                i += 1
            add(first, i - 1, " ".join(words), prefix,
                "markdown list item" if item else "markdown paragraph")
    return slots


# --- code: where literals are read -----------------------------------------------------------

def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Each name an ``import`` in ``tree`` binds → the dotted path it stands for (``import
    rope_lab as rl``: rl → rope_lab; ``import rope_lab.plots``: rope_lab → rope_lab; ``from
    rope_lab import plots as p``: p → rope_lab.plots). Relative imports are left out."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


class SignatureResolver:
    """Parameter names of the functions a notebook calls (rope_lab's and its own).

    ``aliases`` maps a name bound by an import in the notebook to a rope_lab module path
    (``rl`` → ``rope_lab``, ``plots`` → ``rope_lab.plots``); ``local`` holds the parameter
    names of functions the notebook defines.
    """

    def __init__(self, sources: Iterable[str]):
        self.aliases: dict[str, str] = {}
        self.local: dict[str, list[str]] = {}
        for source in sources:
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            self.aliases.update({name: path for name, path in import_aliases(tree).items()
                                 if path.split(".")[0] == "rope_lab"})
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.local[node.name] = [a.arg for a in node.args.posonlyargs
                                             + node.args.args]

    def parameters(self, func: ast.expr) -> list[str] | None:
        """Positional parameter names of the called function, or None when unknown."""
        if isinstance(func, ast.Name) and func.id in self.local:
            return self.local[func.id]
        dotted = _dotted(func)
        if dotted is None or dotted[0] not in self.aliases:
            return None
        return _rope_lab_parameters(self.aliases[dotted[0]], tuple(dotted[1:]))


def _dotted(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else [*head, node.attr]
    return None


_SIGNATURES: dict[tuple[str, tuple[str, ...]], list[str] | None] = {}


def _rope_lab_parameters(path: str, attributes: tuple[str, ...]) -> list[str] | None:
    key = (path, attributes)
    if key not in _SIGNATURES:
        try:
            try:
                target = importlib.import_module(path)
            except ImportError:  # `from rope_lab import check`: an attribute, not a module
                module, _, name = path.rpartition(".")
                target = getattr(importlib.import_module(module), name)
            for attribute in attributes:
                target = getattr(target, attribute)
            parameters = inspect.signature(target).parameters.values()
            _SIGNATURES[key] = [p.name for p in parameters
                                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (ImportError, AttributeError, TypeError, ValueError):
            _SIGNATURES[key] = None
    return _SIGNATURES[key]


def _figure_text_on() -> bool:
    from rope_lab import i18n

    return i18n.TRANSLATE_FIGURE_TEXT


def _slot_names() -> dict[str, str]:
    return {**LITERAL_SLOTS, **WIDGET_SLOTS, **(FIGURE_SLOTS if _figure_text_on() else {})}


def _string_nodes(node: ast.expr) -> list[ast.expr]:
    """The string literals of an expression in a translated place (see the module doc)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) or isinstance(
            node, ast.JoinedStr):
        return [node]
    if isinstance(node, ast.List | ast.Tuple):
        return [s for element in node.elts for s in _string_nodes(element)]
    if isinstance(node, ast.IfExp):
        return _string_nodes(node.body) + _string_nodes(node.orelse)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string_nodes(node.left) + _string_nodes(node.right)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join" and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str) and len(node.args) == 1
            and isinstance(node.args[0], ast.GeneratorExp | ast.ListComp)):
        # "; ".join(f"… {x} …" for x in xs): the text each item prints. A join of a list of
        # plain strings (names the code spells) is not text.
        return _string_nodes(node.args[0].elt)
    return []


def _is_label_map(name: str | None) -> bool:
    return name is not None and (name.lower() == LABEL_MAPS
                                 or name.lower().endswith("_" + LABEL_MAPS))


def _label_values(node: ast.expr) -> list[ast.expr]:
    """The display labels of a label mapping: the string values of a dict literal."""
    if not isinstance(node, ast.Dict):
        return []
    return [s for value in node.values for s in _string_nodes(value)]


def translated_literals(tree: ast.Module, resolver: SignatureResolver) -> list[
        tuple[ast.expr, str]]:
    """``(literal node, note)`` for every string literal in a translated place of ``tree``."""
    slots = _slot_names()
    found: list[tuple[ast.expr, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "print":
                for argument in node.args:
                    found += [(s, "printed text") for s in _string_nodes(argument)]
                continue
            for keyword in node.keywords:
                if keyword.arg in slots:
                    found += [(s, slots[keyword.arg]) for s in _string_nodes(keyword.value)]
                elif _figure_text_on() and keyword.arg == LABEL_MAPS:
                    found += [(s, "figure text (a label)") for s in _label_values(keyword.value)]
            names = resolver.parameters(node.func) if node.args else None
            for name, argument in zip(names or (), node.args, strict=False):
                if name in slots:
                    found += [(s, slots[name]) for s in _string_nodes(argument)]
                elif _figure_text_on() and name == LABEL_MAPS:
                    found += [(s, "figure text (a label)") for s in _label_values(argument)]
            if _figure_text_on():
                found += _plot_labels(node, resolver)
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            found += [(s, "error message") for s in _string_nodes(node.exc.args[0])]
        elif isinstance(node, ast.Assign) and _figure_text_on():
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in slots:
                    found += [(s, slots[target.id]) for s in _string_nodes(node.value)]
                elif isinstance(target, ast.Name) and _is_label_map(target.id):
                    found += [(s, "figure text (a label)") for s in _label_values(node.value)]
    unique = {id(node): (node, note) for node, note in found}
    return sorted(unique.values(), key=lambda pair: (pair[0].lineno, pair[0].col_offset))


def _plot_labels(call: ast.Call, resolver: SignatureResolver) -> list[tuple[ast.expr, str]]:
    """The string keys of a dict literal passed to a ``rope_lab.plots`` function: the
    figure's labels (``plots.singular_values({"fixed: …": m})``). Written in the call, they
    name nothing else in the code, so they are text, not keys."""
    dotted = _dotted(call.func)
    if not dotted or dotted[0] not in resolver.aliases:
        return []
    if not ".".join([resolver.aliases[dotted[0]], *dotted[1:]]).startswith("rope_lab.plots."):
        return []
    # a label mapping's keys name the data: code (its values are the labels)
    return [(key, "figure text (a label)") for argument in [
                *call.args, *(k.value for k in call.keywords if k.arg != LABEL_MAPS)]
            if isinstance(argument, ast.Dict) for key in argument.keys
            if isinstance(key, ast.Constant) and isinstance(key.value, str)]


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                node.body and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)
                and isinstance(node.body[0].value.value, str)):
            found.append(node.body[0].value)
    return found


# --- code: string literals as messages --------------------------------------------------------

@dataclass(frozen=True)
class _Piece:
    prefix: str
    quote: str
    body: str


def _scan_pieces(text: str) -> list[_Piece]:
    """The pieces of an implicitly concatenated literal, from its source text."""
    pieces, i = [], 0
    while i < len(text):
        if text[i] in " \t\n\\":
            i += 1
            continue
        if text[i] == "#":
            raise ValueError("a comment between the pieces of a string literal; move it above "
                             f"the statement: {text!r}")
        match = re.match(r"([rRbBuUfF]{0,2})('''|\"\"\"|'|\")", text[i:])
        if match is None:
            raise ValueError(f"not a string literal: {text!r}")
        prefix, quote = match[1], match[2]
        j = start = i + len(match[0])
        while not text.startswith(quote, j):
            j += 2 if text[j] == "\\" else 1
        pieces.append(_Piece(prefix, quote, text[start:j]))
        i = j + len(quote)
    return pieces


def _field_end(text: str, start: int) -> int:
    """Index just past the replacement field that opens at ``text[start] == "{"``."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "'\"":
            i = text.index(c, i + 1) + 1
            continue
        depth += c == "{"
        depth -= c == "}"
        i += 1
        if depth == 0:
            return i
    raise ValueError(f"unbalanced replacement field in {text!r}")


def _template(pieces: list[_Piece]) -> tuple[str, bool]:
    """The message of a literal: its text, with f-string fields kept as written."""
    formatted = any("f" in p.prefix.lower() for p in pieces)
    parts = []
    for piece in pieces:
        raw = "r" if "r" in piece.prefix.lower() else ""
        if "f" not in piece.prefix.lower():
            value = ast.literal_eval(f"{raw}{piece.quote}{piece.body}{piece.quote}")
            parts.append(value.replace("{", "{{").replace("}", "}}") if formatted else value)
            continue
        body, i, literal = piece.body, 0, []
        while i < len(body):
            if body.startswith(("{{", "}}"), i):
                literal.append(body[i:i + 2])
                i += 2
            elif body[i] == "{":
                if literal:
                    parts.append(ast.literal_eval(f"{raw}{piece.quote}{''.join(literal)}"
                                                  f"{piece.quote}"))
                    literal = []
                end = _field_end(body, i)
                parts.append(body[i:end])
                i = end
            elif body[i] == "\\":
                literal.append(body[i:i + 2])
                i += 2
            else:
                literal.append(body[i])
                i += 1
        if literal:
            parts.append(ast.literal_eval(f"{raw}{piece.quote}{''.join(literal)}{piece.quote}"))
    return "".join(parts), formatted


def replacement_fields(template: str) -> list[str]:
    """The ``{…}`` fields of an f-string message, sorted (``{{`` and ``}}`` are text)."""
    fields, i = [], 0
    while i < len(template):
        if template.startswith(("{{", "}}"), i):
            i += 2
        elif template[i] == "{":
            end = _field_end(template, i)
            fields.append(template[i:end])
            i = end
        else:
            i += 1
    return sorted(fields)


def _atoms(template: str, formatted: bool) -> list[tuple[str, str]]:
    """``(kind, text)``: "field" (kept verbatim) or "char" (one character of text)."""
    atoms, i = [], 0
    while i < len(template):
        if formatted and template.startswith(("{{", "}}"), i):
            atoms.append(("char", template[i]))
            i += 2
        elif formatted and template[i] == "{":
            end = _field_end(template, i)
            atoms.append(("field", template[i:end]))
            i = end
        else:
            atoms.append(("char", template[i]))
            i += 1
    return atoms


_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _encode(atom: tuple[str, str], quote: str, in_fstring: bool) -> str:
    kind, text = atom
    if kind == "field":
        return text
    if text in _ESCAPES:
        return _ESCAPES[text]
    if text == quote:
        return "\\" + quote
    if ord(text) < 32 or ord(text) == 127:
        return f"\\x{ord(text):02x}"
    if in_fstring and text in "{}":
        return text * 2
    return text


# Punctuation that never starts a line (full-width comma, full stop, closing brackets and
# quotes …, and the ASCII ones), written as escapes so that this file adds no characters the
# book's CJK font subset must carry.
_NO_LINE_START = set("\uff0c\u3002\u3001\uff1b\uff1a\uff1f\uff01\uff09\u300b\u300d\u300f\u3011"
                     "\u2019\u201d,.;:?!)")
# Where a clause ends: a line breaks best after these (full-width , . 、 ; : ? ! and closing
# brackets and quotes).
_BREAK_AFTER = ("\uff0c\u3002\u3001\uff1b\uff1a\uff1f\uff01\uff09\u300b\u300d\u300f\u3011"
                "\u201d")
CLEAN, SPLIT = 2, 1  # how a line may break (see _break_after); 0: never
# A line breaks at the last clean break if that keeps at least this share of the line;
# else between two CJK characters, which may cut a word in two ("分" "配").
MIN_FILL = 0.5


def _break_after(atoms: list[tuple[str, str]], k: int) -> int:
    """How a line may break between atoms[k] and atoms[k + 1]: :data:`CLEAN` after a space
    (between ASCII words) or after Chinese punctuation, :data:`SPLIT` between other CJK
    characters (Chinese has no spaces, so such a break may split a word), 0 never (before
    punctuation that cannot start a line, inside an ASCII word)."""
    if k + 1 >= len(atoms):
        return CLEAN
    here, after = atoms[k][1], atoms[k + 1][1]
    if atoms[k + 1][0] == "char" and after in _NO_LINE_START:
        return 0
    if here == " " or atoms[k][0] == "char" and here in _BREAK_AFTER:
        return CLEAN
    if atoms[k][0] == "char" and _CJK.match(here):
        return SPLIT
    return SPLIT if atoms[k + 1][0] == "char" and bool(_CJK.match(after)) else 0


def _cut(atoms, widths, current: list, limit: int) -> int | None:
    """Where to end the line ``current`` (``(index, atom)`` pairs) that overflows ``limit``:
    after the last clean break that fills :data:`MIN_FILL` of the line, else after the last
    break of any kind; None when there is none (a hard split at the limit)."""
    filled, ranks, width = [], [], 0
    for k, _ in current:
        width += widths[k]
        filled.append(width)
        ranks.append(_break_after(atoms, k))
    clean = [j for j in range(1, len(current))
             if ranks[j] == CLEAN and filled[j] >= MIN_FILL * limit]
    if clean:
        return clean[-1]
    breaks = [j for j in range(1, len(current)) if ranks[j]]
    return breaks[-1] if breaks else None


def _chunks(atoms, widths, first_budget: int, budget: int) -> list[list]:
    """Greedy line filling: atoms into chunks, breaking where :func:`_break_after` allows,
    a clean break preferred (see :func:`_cut`)."""
    chunks, current, width, limit = [], [], 0, first_budget
    for k, atom in enumerate(atoms):
        if current and width + widths[k] > limit:
            cut = _cut(atoms, widths, current, limit)
            if cut is None:
                chunks.append(current)
                current, width = [], 0
            else:
                chunks.append(current[:cut + 1])
                current = current[cut + 1:]
                width = sum(widths[j] for j, _ in current)
            limit = budget
        current.append((k, atom))
        width += widths[k]
    chunks.append(current)
    return [[atom for _, atom in chunk] for chunk in chunks if chunk]


def _fit_last(chunk: list, quote: str, formatted: bool, room: int) -> list[list]:
    """``chunk`` split where a line may break so that its end fits in ``room`` columns (the
    code after the literal leaves no more): at the last clean break that allows it, else at
    the first break of any kind that does (the longest end), or ``[chunk]`` when none does."""
    widths = [display_width(_encode(a, quote, formatted)) for a in chunk]
    if sum(widths) <= room:
        return [chunk]
    fits = [j for j in range(1, len(chunk)) if sum(widths[j:]) <= room]
    clean = [j for j in fits if _break_after(chunk, j - 1) == CLEAN]
    split = [j for j in fits if _break_after(chunk, j - 1)]
    j = clean[-1] if clean else split[0] if split else None
    return [chunk] if j is None else [chunk[:j], chunk[j:]]


def _render_literal(template: str, formatted: bool, quote: str, lead: str, tail: str,
                    bracketed: bool) -> str:
    """Source for a literal with text ``template`` that follows ``lead`` on its line and is
    followed by ``tail``; inside brackets (else it gets parentheses) when it needs pieces."""
    if len(quote) == 3:
        quote = quote[0]
    atoms = _atoms(template, formatted)
    encoded = [_encode(a, quote, formatted) for a in atoms]
    widths = [display_width(e) for e in encoded]
    overhead = 3  # f + two quotes
    first_budget = LINE_LENGTH - display_width(lead) - overhead - display_width(tail)
    opening = 0 if bracketed else 1  # the parenthesis put around the pieces
    indent = display_width(lead) + opening
    if sum(widths) <= first_budget:
        chunks = [atoms]
    else:
        # Every piece but the last fills a line of its own; the last shares its line with
        # the code after the literal (and the closing parenthesis), so it may be cut again.
        chunks = _chunks(atoms, widths, first_budget + display_width(tail) - opening,
                         LINE_LENGTH - indent - overhead)
        room = LINE_LENGTH - indent - overhead - display_width(tail) - opening
        chunks[-1:] = _fit_last(chunks[-1], quote, formatted, room)

    def piece(chunk) -> str:
        is_f = formatted and any(kind == "field" for kind, _ in chunk)
        return ("f" if is_f else "") + quote + "".join(
            _encode(a, quote, is_f) for a in chunk) + quote

    pieces = [piece(chunk) for chunk in chunks]
    if len(pieces) == 1:
        return pieces[0]
    joined = ("\n" + " " * indent).join(pieces)
    return joined if bracketed else f"({joined})"


# --- code: comments and docstrings ------------------------------------------------------------

_PRAGMA = re.compile(r"^\s*(noqa|type:|fmt:|pragma|pylint:|ruff:)", re.I)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns (breaking at spaces or between CJK)."""
    atoms = [("char", c) for c in text]
    widths = [display_width(c) for c in text]
    lines = ["".join(c for _, c in chunk).strip()
             for chunk in _chunks(atoms, widths, width, width)]
    return [line for line in lines if line] or [""]


def _comment_slots(source: str, cell_id: str, line_offsets: list[int]) -> list[_Slot]:
    lines = source.split("\n")
    comments = []  # (row, column, text, whole_line)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            text = token.string[1:]
            text = text[1:] if text.startswith(" ") else text
            whole = not lines[row - 1][:column].strip()
            if has_words(text) and not _PRAGMA.match(text) and "noqa" not in text:
                comments.append((row, column, text.rstrip(), whole))
    slots, k = [], 0
    while k < len(comments):
        row, column, text, whole = comments[k]
        start = line_offsets[row - 1] + column
        if not whole:
            code = lines[row - 1][:column]
            gap = code[len(code.rstrip()):]  # kept: aligned trailing comments stay aligned
            code_end = line_offsets[row - 1] + len(code.rstrip())
            end = line_offsets[row - 1] + len(lines[row - 1])
            slots.append(_Slot(Message(text, cell_id, "comment", "code comment (end of line)"),
                               code_end, end, lambda text, lead, gap=gap: f"{gap}# {text}",
                               trailing_comment=True))
            k += 1
            continue
        block = [text]
        last = row
        while (k + 1 < len(comments) and comments[k + 1][0] == last + 1
               and comments[k + 1][1] == column and comments[k + 1][3]):
            k += 1
            last = comments[k][0]
            block.append(comments[k][2])
        end = line_offsets[last - 1] + len(lines[last - 1])

        def render(translation, lead, column=column):
            return ("\n" + " " * column).join(
                "# " + part for part in _wrap(translation, LINE_LENGTH - column - 2))

        slots.append(_Slot(Message(" ".join(block), cell_id, "comment", "code comment"),
                           start, end, render))
        k += 1
    return slots


def _docstring_text(value: str) -> str:
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(value))
    return "\n\n".join(" ".join(line.strip() for line in p.split("\n")) for p in paragraphs)


def _render_docstring(text: str, column: int) -> str:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    single = f'"""{text}"""'
    if "\n" not in text and column + display_width(single) <= LINE_LENGTH:
        return single
    indent = " " * column
    out = []
    for number, paragraph in enumerate(text.split("\n\n")):
        first = 3 if number == 0 else 0
        wrapped = _wrap(paragraph, LINE_LENGTH - column - first)
        if number:
            out.append("")
        out += wrapped
    return '"""' + out[0] + "".join(("\n" + indent + line) if line else "\n"
                                    for line in out[1:]) + "\n" + indent + '"""'


# --- a code cell --------------------------------------------------------------------------------

def _char_offsets(source: str) -> tuple[list[str], list[int]]:
    lines = source.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    return lines, offsets


def _position(lines: list[str], offsets: list[int], lineno: int, byte_column: int) -> int:
    """Character offset in the source of ast's (line, UTF-8 byte column)."""
    line = lines[lineno - 1]
    return offsets[lineno - 1] + len(line.encode()[:byte_column].decode())


def _bracket_depths(source: str) -> dict[int, int]:
    """Bracket depth at the start of every token (character offsets)."""
    lines, offsets = _char_offsets(source)
    depth, depths = 0, {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        at = offsets[token.start[0] - 1] + token.start[1]
        depths[at] = depth
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
    return depths


def _code_slots(source: str, cell_id: str, resolver: SignatureResolver) -> list[_Slot]:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"cell {cell_id}: not Python ({error}); a notebook to translate "
                         "has Python code cells only") from error
    lines, offsets = _char_offsets(source)
    slots = _comment_slots(source, cell_id, offsets)
    depths = _bracket_depths(source)
    for node in _docstring_nodes(tree):
        start = _position(lines, offsets, node.lineno, node.col_offset)
        end = _position(lines, offsets, node.end_lineno, node.end_col_offset)
        slots.append(_Slot(Message(_docstring_text(node.value), cell_id, "docstring",
                                   "docstring"),
                           start, end, lambda text, lead: _render_docstring(text, len(lead))))
    for node, note in translated_literals(tree, resolver):
        start = _position(lines, offsets, node.lineno, node.col_offset)
        end = _position(lines, offsets, node.end_lineno, node.end_col_offset)
        pieces = _scan_pieces(source[start:end])
        if any("b" in p.prefix.lower() for p in pieces):
            continue
        template, formatted = _template(pieces)
        if not has_words(_strip_fields(template) if formatted else template):
            continue
        last_line_end = offsets[node.end_lineno - 1] + len(lines[node.end_lineno - 1])

        bracketed = depths.get(start, 0) > 0

        def render(text, lead, formatted=formatted, quote=pieces[0].quote,
                   tail=source[end:last_line_end], bracketed=bracketed):
            return _render_literal(text, formatted, quote, lead, tail, bracketed)

        words, rewrite = (_field_words(template, node, tree, cell_id, pieces[0].quote[0])
                          if formatted else ((), None))
        slots.append(_Slot(Message(template, cell_id, "literal", note, formatted),
                           start, end, render, field_messages=words, rewrite_fields=rewrite))
    return slots


def _strip_fields(template: str) -> str:
    for found in replacement_fields(template):
        template = template.replace(found, " ")
    return template


# --- code: words inside the replacement fields of an f-string -----------------------------------
#
# An f-string message keeps its fields as written (``{'passes' if ok else 'fails'}``), so the
# words a field prints are not part of its text. Two kinds are messages of their own, and the
# build writes their translations into the field:
#
# * a string literal the field evaluates to: either branch of ``a if c else b`` and an
#   operand of ``x or "fallback"`` (nested too): ``{'passes' if ok else 'fails'}``;
# * a loop variable over string literals (``for mode in ("random", "correlated"):`` with
#   ``{mode}`` in the loop): the values drive the code and stay English; in the translated
#   edition the field looks up the printed word, ``{ {'random': '随机', …}[mode]}``.
#
# A literal anywhere else in a field (``loss['rope']``, ``key.removesuffix('_ms')``) is code.

def _split_field(field_text: str) -> tuple[str, str] | None:
    """``{expression!r:spec}`` → ``("expression", "!r:spec")``; None when it does not parse."""
    inner = field_text[1:-1]
    _, offsets = _char_offsets(inner)
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(inner).readline):
            if token.type == tokenize.OP and token.string in ("(", "[", "{"):
                depth += 1
            elif token.type == tokenize.OP and token.string in (")", "]", "}"):
                depth -= 1
            elif depth == 0 and token.string in ("!", ":"):
                at = offsets[token.start[0] - 1] + token.start[1]
                return inner[:at], inner[at:]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return inner, ""


def _printed_literals(expression: ast.expr) -> list[ast.Constant]:
    """The string literals (with words) a field's expression evaluates to."""
    if isinstance(expression, ast.Constant) and isinstance(expression.value, str):
        return [expression] if has_words(expression.value) else []
    if isinstance(expression, ast.IfExp):
        return _printed_literals(expression.body) + _printed_literals(expression.orelse)
    if isinstance(expression, ast.BoolOp):
        return [found for value in expression.values for found in _printed_literals(value)]
    return []


def _loop_words(node: ast.expr, tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Loop variables over string literals whose loop body holds ``node``: name → values."""
    found = {}
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                and isinstance(loop.iter, ast.Tuple | ast.List) and loop.iter.elts
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                        for e in loop.iter.elts)):
            continue
        body = [inner for statement in loop.body for inner in ast.walk(statement)]
        name = loop.target.id
        rebound = any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                      for n in body)
        values = tuple(e.value for e in loop.iter.elts)
        if any(n is node for n in body) and not rebound and any(map(has_words, values)):
            found[name] = values
    return found


def _field_literal(value: str, quote: str) -> str:
    """``value`` as a literal inside an f-string field (Python 3.11: no backslash there, and
    not the f-string's own quote)."""
    if any(c in value for c in (quote, "\\", "\n", "{", "}")):
        raise ValueError(f"{value!r} cannot go into an f-string field: a translation of a word "
                         f"printed by a field must not hold {quote}, a backslash, a line break "
                         "or a brace")
    return f"{quote}{value}{quote}"


def _field_words(template: str, node: ast.expr, tree: ast.Module, cell_id: str,
                 quote: str) -> tuple[tuple[Message, ...], Callable[[str, dict], str] | None]:
    """The words printed by the fields of the f-string message ``template`` (see above), and
    the function that writes their translations into the fields of a text."""
    loops = _loop_words(node, tree)
    inner_quote = "'" if quote == '"' else '"'
    messages: dict[str, Message] = {}
    plans: dict[str, tuple] = {}
    for field_text in dict.fromkeys(replacement_fields(template)):
        split = _split_field(field_text)
        if split is None:
            continue
        expression, rest = split
        if rest.startswith(("!r", "!a")):  # the value's repr: shown as code, not as a word
            continue
        lead = len(expression) - len(expression.lstrip())
        try:
            parsed = ast.parse(expression.strip(), mode="eval").body
        except SyntaxError:
            continue
        if isinstance(parsed, ast.Name) and parsed.id in loops:
            values = loops[parsed.id]
            for value in filter(has_words, values):
                messages.setdefault(value, Message(
                    value, cell_id, "literal", f"a value of `{parsed.id}` that an f-string field "
                    "prints (the code keeps the English value)"))
            plans[field_text] = ("loop", parsed.id, values, rest)
            continue
        lines, offsets = _char_offsets(expression.strip())
        spans = []
        for literal in _printed_literals(parsed):
            start = lead + _position(lines, offsets, literal.lineno, literal.col_offset)
            end = lead + _position(lines, offsets, literal.end_lineno, literal.end_col_offset)
            spans.append((start, end, literal.value))
            messages.setdefault(literal.value, Message(
                literal.value, cell_id, "literal", "a word that an f-string field prints"))
        if spans:
            plans[field_text] = ("literals", expression, sorted(spans), rest)
    if not plans:
        return (), None

    def field_with(field_text: str, translations: dict[str, str]) -> str:
        plan = plans.get(field_text)
        if plan is None:
            return field_text
        if plan[0] == "loop":
            _, name, values, rest = plan
            if not any(value in translations for value in values):
                return field_text
            pairs = ", ".join(f"{_field_literal(v, inner_quote)}: "
                              f"{_field_literal(translations.get(v, v), inner_quote)}"
                              for v in values)
            return f"{{ {{{pairs}}}[{name}]{rest}}}"
        _, expression, spans, rest = plan
        out, at = "", 0
        for start, end, value in spans:
            out += expression[at:start] + (_field_literal(translations[value], inner_quote)
                                           if value in translations else expression[start:end])
            at = end
        return f"{{{out}{expression[at:]}{rest}}}"

    def rewrite(text: str, translations: dict[str, str]) -> str:
        return "".join(field_with(part, translations) if kind == "field"
                       else part * 2 if part in "{}" else part
                       for kind, part in _atoms(text, True))

    return tuple(messages.values()), rewrite


def _translate_field_words(slot: _Slot, translation: str | None,
                           translate: Callable[[Message], str | None]) -> str | None:
    """``translation`` (or the English, if None) with the slot's field words translated."""
    found = {m.msgid: t for m in slot.field_messages
             if (t := translate(m)) is not None and t != m.msgid}
    if not found:
        return translation
    return slot.rewrite_fields(slot.message.msgid if translation is None else translation, found)


# --- whole notebooks ---------------------------------------------------------------------------

def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _is_install_cell(index: int, cell: dict) -> bool:
    """The cell below every notebook's title installs rope_lab on Colab (course.COLAB_CELL).

    It is kept out of the catalogs: the build writes the edition's own install cell
    (:func:`rope_lab.course.translate_install_cell`, its words from the package catalog), which
    `make set-repository` rewrites in every notebook under notebooks/.
    """
    from rope_lab.course import install_cell_language

    return (index <= 2 and cell["cell_type"] == "code"
            and install_cell_language(_source(cell)) is not None)


def _cell_slots(notebook: dict, resolver: SignatureResolver | None = None) -> list[
        tuple[int, list[_Slot]]]:
    if resolver is None:
        resolver = SignatureResolver(_source(c) for c in notebook["cells"]
                                     if c["cell_type"] == "code")
    found = []
    for index, cell in enumerate(notebook["cells"]):
        cell_id = cell.get("id", str(index))
        if _is_install_cell(index, cell):
            continue
        if cell["cell_type"] == "markdown":
            found.append((index, _markdown_slots(_source(cell), cell_id)))
        elif cell["cell_type"] == "code":
            found.append((index, _code_slots(_source(cell), cell_id, resolver)))
    return found


def notebook_messages(notebook: dict) -> list[Message]:
    """Every translatable text of ``notebook`` (an nbformat dict), in reading order."""
    messages = []
    for _, slots in _cell_slots(notebook):
        messages += [message for slot in sorted(slots, key=lambda s: s.start)
                     for message in (slot.message, *slot.field_messages)]
    return messages


def _apply(source: str, slots: list[_Slot], translate: Callable[[Message], str | None]) -> str:
    """``source`` with each slot's message replaced by its translation, left to right, so
    that every slot is laid out after what precedes it on its line."""
    out, position = "", 0
    for slot in sorted(slots, key=lambda s: s.start):
        out += source[position:slot.start]
        position = slot.start
        translation = translate(slot.message)
        if slot.rewrite_fields is not None:
            translation = _translate_field_words(slot, translation, translate)
        if translation is None or translation == slot.message.msgid:
            continue
        line_start = out.rfind("\n") + 1
        lead = out[line_start:]
        rendered = slot.render(translation, lead)
        if slot.trailing_comment and display_width(lead + rendered) > LINE_LENGTH:
            indent = len(lead) - len(lead.lstrip())
            block = "".join(" " * indent + "# " + part + "\n" for part in
                            _wrap(translation, LINE_LENGTH - indent - 2))
            out, rendered = out[:line_start] + block + lead, ""
        out += rendered
        position = slot.end
    return out + source[position:]


def _add_language(source: str, language: str) -> str:
    """``rl.setup_notebook(seed=0)`` → ``rl.setup_notebook(seed=0, language="zh")``."""
    tree = ast.parse(source)
    lines, offsets = _char_offsets(source)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and (_dotted(node.func) or [""])[-1] == "setup_notebook"]
    for call in sorted(calls, key=lambda c: (c.end_lineno, c.end_col_offset), reverse=True):
        if any(k.arg == "language" for k in call.keywords):
            continue
        close = _position(lines, offsets, call.end_lineno, call.end_col_offset) - 1
        separator = ", " if call.args or call.keywords else ""
        source = f'{source[:close]}{separator}language="{language}"{source[close:]}'
    return source


class Link(Protocol):
    """Where a link of the English notebook points from the translated one."""

    def __call__(self, target: str, repository_path: bool = False) -> str: ...


def translate_notebook(notebook: dict, translate: Callable[[Message], str | None], *,
                       language: str, link: Link | None = None) -> dict:
    """The notebook in another language: every message through ``translate`` (None: keep
    the English), ``setup_notebook(...)`` told the language, and every link through
    ``link`` (see :func:`relink`). Cell ids, metadata and code are kept."""
    from rope_lab.course import translate_install_cell

    result = copy.deepcopy(notebook)
    slots_by_cell = dict(_cell_slots(notebook))
    for index, cell in enumerate(result["cells"]):
        source = _source(cell)
        if index in slots_by_cell:
            source = _apply(source, slots_by_cell[index], translate)
        if _is_install_cell(index, cell):
            source = translate_install_cell(source, language)
        elif cell["cell_type"] == "code":
            source = _add_language(source, language)
        if cell["cell_type"] == "markdown" and link is not None:
            source = relink(source, link)
        cell["source"] = source
    return result


_NOTEBOOK_PATH = re.compile(r"(?<![\w/.])notebooks/((?:solutions/)?[\w.-]+\.(?:ipynb|md))")


def relink(markdown: str, link: Link) -> str:
    """Rewrite the relative link targets ``](target)`` and the repository paths
    ``notebooks/….ipynb`` (and ``notebooks/….md``) of a markdown text through ``link`` (a
    path relative to the English notebook's folder → the path to use from the translated
    notebook)."""
    def target(match: re.Match) -> str:
        url = match[1]
        if re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", url, re.I):
            return match[0]
        path, hash_, anchor = url.partition("#")
        return f"]({link(path)}{hash_}{anchor})"

    markdown = _LINK_TARGET.sub(target, markdown)
    return _NOTEBOOK_PATH.sub(lambda m: link("notebooks/" + m[1], repository_path=True),
                              markdown)


def relative_link(from_folder: str, to_path: str) -> str:
    """``to_path`` (relative to the repository) as seen from ``from_folder``."""
    return posixpath.relpath(to_path, from_folder)


# --- comparing code across editions ---------------------------------------------------------

class _Mask(ast.NodeTransformer):
    def __init__(self, masked: set[int]):
        self.masked = masked

    def visit_Constant(self, node):
        return ast.Constant("<message>") if id(node) in self.masked else node

    def visit_JoinedStr(self, node):
        return ast.Constant("<message>") if id(node) in self.masked else node

    def visit_Call(self, node):
        self.generic_visit(node)
        if (_dotted(node.func) or [""])[-1] == "setup_notebook":
            node.keywords = [k for k in node.keywords if k.arg != "language"]
        return node


def code_signature(source: str, resolver: SignatureResolver) -> str:
    """The code of a cell with its comments, docstrings and translated literals masked and
    ``setup_notebook``'s ``language`` dropped: equal in every edition of a notebook."""
    tree = ast.parse(source)
    masked = {id(node) for node, _ in translated_literals(tree, resolver)}
    masked |= {id(node) for node in _docstring_nodes(tree)}
    return ast.dump(_Mask(masked).visit(tree), annotate_fields=False)


def code_drift(english: dict, translated: dict, *, language: str) -> list[str]:
    """How the translated notebook's code differs from its English twin (empty: it does
    not): cells, ids and types must match; every code cell must compile, fit the line length
    and have the English :func:`code_signature`; the install cell is the English one as
    :func:`rope_lab.course.translate_install_cell` translates it; and
    ``setup_notebook`` is told ``language``."""
    from rope_lab.course import translate_install_cell

    problems = []
    shape = [(c["cell_type"], c.get("id")) for c in english["cells"]]
    if shape != [(c["cell_type"], c.get("id")) for c in translated["cells"]]:
        return ["the cells differ (types, ids or number): rebuild with "
                "`python -m rope_lab.translations build`, never edit a translated notebook"]
    resolver = SignatureResolver(_source(c) for c in english["cells"] if c["cell_type"] == "code")
    told = 0
    for index, (a, b) in enumerate(zip(english["cells"], translated["cells"], strict=True)):
        if a["cell_type"] != "code":
            continue
        where = f"cell {a.get('id', index)}"
        source = _source(b)
        if _is_install_cell(index, a):
            if source != translate_install_cell(_source(a), language):
                problems.append(f"{where}: the install cell is not the English one in "
                                f"{language!r} (rope_lab.course.translate_install_cell)")
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            problems.append(f"{where}: does not compile ({error.msg}, line {error.lineno})")
            continue
        for number, line in enumerate(source.split("\n"), 1):
            if display_width(line) > LINE_LENGTH:
                problems.append(f"{where}, line {number}: {display_width(line)} columns, more "
                                f"than {LINE_LENGTH}")
        if code_signature(source, resolver) != code_signature(_source(a), resolver):
            problems.append(f"{where}: the code differs from the English cell beyond comments, "
                            "docstrings and translated strings")
        told += sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and (_dotted(node.func) or [""])[-1] == "setup_notebook"
                    and any(k.arg == "language" and isinstance(k.value, ast.Constant)
                            and k.value.value == language for k in node.keywords))
    calls = sum(1 for index, c in enumerate(english["cells"])
                if c["cell_type"] == "code" and not _is_install_cell(index, c)
                for node in ast.walk(ast.parse(_source(c))) if isinstance(node, ast.Call)
                and (_dotted(node.func) or [""])[-1] == "setup_notebook")
    if told != calls:
        problems.append(f"{told} of {calls} setup_notebook calls pass language={language!r}")
    return problems
