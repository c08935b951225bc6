"""The course map and the pieces every notebook shares (kept in one place, tested).

``NOTEBOOKS`` is the single list of notebooks: notebook 00 draws its map from it, the README
lists it, and a test checks that each file exists and opens with its title, then
:data:`COLAB_CELL` (in a Chinese notebook the same code with its comment and message in
Chinese: ``install_cell(REPOSITORY, REF, language="zh")``).

:data:`REPOSITORY`, :data:`REF` and :data:`PACKAGE_COMMIT` are the one place that says
where the course is published (a repository on a known forge, :data:`FORGES`), which release
its links open and which commit's package the install cell installs (a commit, never a tag:
a moved tag cannot change what learners run). The README's Colab and Binder badges, every
notebook's install cell and the book's links are made from them; ``make set-repository
URL=... REF=...`` (run twice, see :func:`rope_lab.book.set_repository`) rewrites them all and
a test keeps them in step. Until they are set there are no such links, and the install cell
installs nothing: a badge or an install from an address nobody here controls would run
whatever its owner serves.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from rope_lab.i18n import N_

# Where the course is published (a repository on a known forge, FORGES) and the release its
# links open: a tag (made on the commit that records it) or a commit hash, never a branch,
# which moves. PACKAGE_COMMIT: the commit whose package the install cell installs (a commit,
# unlike a tag, cannot be moved to other code). None until `make set-repository
# URL=https://github.com/OWNER/NAME REF=TAG` names them (two runs: see rope_lab.book).
REPOSITORY: str | None = None
REF: str | None = None
PACKAGE_COMMIT: str | None = None


@dataclass(frozen=True)
class Notebook:
    filename: str
    title: str
    minutes: int
    summary: str


NOTEBOOKS = (
    Notebook("00_start_here.ipynb", "Start here", 10,
             "The course map, how to run it, an environment report and a glossary."),
    Notebook("01_attention_without_position.ipynb", "Attention without position", 20,
             "Self-attention cannot tell word order apart: equivariance and invariance."),
    Notebook("02_absolute_position_encodings.ipynb", "Absolute position encodings", 30,
             "Integer, binary, sinusoidal and learned encodings against five properties."),
    Notebook("03_rope_in_2d.ipynb", "RoPE in two dimensions", 30,
             "Deriving RoPE from complex numbers: the score depends on m − n only."),
    Notebook("04_rope_in_d_dimensions.ipynb", "RoPE in d dimensions", 40,
             "Block-diagonal rotations, four implementations, layouts and precision."),
    Notebook("05_long_range_decay.ipynb", "Long-range decay", 30,
             "What decays with distance, what does not, and how the base sets it."),
    Notebook("06_length_extrapolation.ipynb", "Length extrapolation", 45,
             "Position interpolation, NTK, YaRN, Llama 3 scaling and ALiBi."),
    Notebook("07_rope_and_linear_attention.ipynb", "RoPE with linear attention", 25,
             "Where the rotation goes when attention is linear."),
    Notebook("08_rope_beyond_1d.ipynb", "RoPE beyond one dimension", 30,
             "Axial and mixed RoPE for images, M-RoPE for video."),
    Notebook("09_performance.ipynb", "Performance", 25,
             "RoPE is memory-bound: bytes, FLOPs and measured speed."),
    Notebook("10_rope_in_real_models.ipynb", "RoPE in real models, 2021–2026", 40,
             "Fifteen published configs (GPT-J to Qwen3-VL) and Gemma 4's defaults, read "
             "offline, checked against transformers."),
    Notebook("11_debugging_rope.ipynb", "Debugging RoPE in real code", 45,
             "Eight plumbing bugs in transformers' own model code, found, measured and fixed, "
             "and one suspected bug that is not."),
    Notebook("12_what_2024_2026_changed.ipynb", "What 2024–2026 models changed", 35,
             "p-RoPE, NoPE layers, local/global bases, base 5e5: trained, three seeds, two tasks."),
)

# The cell below every notebook's title: installs rope_lab on Colab, does nothing elsewhere.
# It installs the zip archive of one commit over HTTPS (no git, no credential prompt); if
# that fails (no network, a moved repository) it stops the notebook with one message.
_PINNED_CELL = """\
# On Colab, install the course package (a pinned release); elsewhere this does nothing.
import subprocess
import sys

if "google.colab" in sys.modules:
    commit = "{commit}"
    source = f"{archive}"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-input",
                          f"rope_lab[models] @ {{source}}"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True)
    if pip.returncode:
        last = (pip.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"Could not install rope_lab from {{source}}: {{last}}\\nCheck the "
                         "runtime's internet access and that the address opens in a browser.")\
"""

# Until the course names where it is published, the cell installs nothing and says so.
_UNPUBLISHED_CELL = """\
# On Colab this cell installs the course package; elsewhere it does nothing.
import sys

if "google.colab" in sys.modules:
    raise SystemExit("This copy of the course names no published repository, so it installs "
                     "nothing. Run the course on your machine (README: make lab), or open "
                     "the notebook from the Colab link of a published copy.")\
"""

@dataclass(frozen=True)
class Forge:
    """A code host the course can be published on: where a commit's zip is, how Binder
    names a repository there, and whether Colab opens notebooks from it (GitHub only)."""

    archive: str  # {repository}, {name}, {commit}
    binder: str  # mybinder.org's path: {owner}, {name}, {url} (quoted), {ref}
    colab: bool


FORGES = {
    "github.com": Forge("{repository}/archive/{commit}.zip", "gh/{owner}/{name}/{ref}", True),
    "gitlab.com": Forge("{repository}/-/archive/{commit}/{name}-{commit}.zip",
                        "gl/{owner}%2F{name}/{ref}", False),
    "codeberg.org": Forge("{repository}/archive/{commit}.zip", "git/{url}/{ref}", False),
}
# An owner or a repository name as the forges allow them: letters, digits, . _ -, not
# starting with a dot or a dash ("..", ".git" and "-x" name no repository).
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}"
_REPOSITORY = re.compile(rf"https://({'|'.join(re.escape(h) for h in FORGES)})/({_NAME})/"
                         rf"({_NAME}?)(?:\.git)?/?")


def check_repository(url) -> str:
    """``url`` as ``https://HOST/OWNER/NAME`` if it names a repository on a known forge
    (:data:`FORGES`), else ValueError naming the value and what is expected."""
    found = _REPOSITORY.fullmatch(url.strip()) if isinstance(url, str) else None
    if not found or found[3].endswith(".") or found[2].endswith("."):
        hosts = ", ".join(FORGES)
        raise ValueError(f"url={url!r} does not name a repository on a known forge; expected "
                         f"https://HOST/OWNER/NAME with HOST one of {hosts} and OWNER, NAME "
                         "made of letters, digits, '.', '_' and '-' (e.g. "
                         "https://github.com/OWNER/NAME)")
    return f"https://{found[1]}/{found[2]}/{found[3]}"


def forge(repository: str) -> tuple[Forge, str, str]:
    """(the forge, the owner, the name) of a repository :func:`check_repository` accepts."""
    host, owner, name = check_repository(repository).split("/")[2:]
    return FORGES[host], owner, name


# A tag name (git check-ref-format, roughly) or a full commit hash; branch names are refused.
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
BRANCH_NAMES = ("main", "master", "HEAD", "develop", "trunk", "gh-pages")


def check_ref(ref) -> str:
    """``ref`` if it can pin a release: a tag or a full commit hash, not a branch."""
    if not isinstance(ref, str) or not _REF.fullmatch(ref) or ".." in ref \
            or ref.endswith((".lock", ".")) or len(ref) > 100:
        raise ValueError(f"ref={ref!r} is not a git tag or commit hash; expected a tag such "
                         "as v1.0 or a 40-character commit hash")
    if ref in BRANCH_NAMES:
        raise ValueError(f"ref={ref!r} is a branch, which moves: the install would change "
                         "under your students; expected a tag (git tag v1.0) or a commit hash")
    return ref


def is_commit(ref: str) -> bool:
    return bool(_COMMIT.fullmatch(ref))


def check_commit(commit, name: str = "commit") -> str:
    """A full commit hash (40 or 64 lowercase hex digits): what a tag names can move, a
    commit's code cannot."""
    if not isinstance(commit, str) or not is_commit(commit):
        raise ValueError(f"{name}={commit!r} is not a full commit hash; expected 40 (or 64) "
                         "lowercase hexadecimal digits, as `git rev-parse HEAD` prints")
    return commit


def archive_url(repository: str, commit: str) -> str:
    """The forge's zip of the repository at ``commit`` (a full hash: the archive of a commit
    always holds the same files, where a tag could be moved)."""
    found, owner, name = forge(repository)
    if commit != "{commit}":  # the cell's f-string names the commit through its variable
        check_commit(commit)
    return found.archive.format(repository=check_repository(repository), name=name,
                                commit=commit)


def install_cell(repository: str | None = None, commit: str | None = None, *,
                 language: str = "en") -> str:
    """The install cell for a course published at ``repository`` (``https://HOST/OWNER/NAME``)
    whose package is pinned at ``commit`` (:data:`PACKAGE_COMMIT`, a full hash); with either
    None, the cell that installs nothing.

    ``language`` ("en" or "zh") is the edition's: the Chinese cell runs the same code, with
    its comment and its message to the reader from the package catalog
    (:func:`translate_install_cell`).
    """
    from rope_lab.i18n import normalize_language

    language = normalize_language(language)
    if repository is None or commit is None:
        cell = _UNPUBLISHED_CELL
    else:
        cell = _PINNED_CELL.format(commit=check_commit(commit),
                                   archive=archive_url(repository, "{commit}"))
    return cell if language == "en" else translate_install_cell(cell, language)


# The comment and the message of each English cell, word for word, then the short string
# literals the reader may see: the package catalog's entries for them (a test checks they are
# the cells' own words).
INSTALL_CELL_TEXTS = {
    _PINNED_CELL: (
        N_("On Colab, install the course package (a pinned release); elsewhere this does "
           "nothing."),
        N_("Could not install rope_lab from {source}: {last}\nCheck the runtime's internet "
           "access and that the address opens in a browser."),
        N_("no message")),
    _UNPUBLISHED_CELL: (
        N_("On Colab this cell installs the course package; elsewhere it does nothing."),
        N_("This copy of the course names no published repository, so it installs nothing. "
           "Run the course on your machine (README: make lab), or open the notebook from the "
           "Colab link of a published copy.")),
}
_LINE_LENGTH = 100  # ruff's, notebooks included
_MESSAGE_START = "raise SystemExit("
_SOURCE_LINES = re.compile(r'^    commit = "([^"\n]*)"\n    source = f"([^"\n]*)"$', re.MULTILINE)


def _template_of(cell: str) -> tuple[str, str | None] | None:
    """(the English template, its archive address or None) of a cell :func:`install_cell`
    makes in English; None for any other text."""
    if cell == _UNPUBLISHED_CELL:
        return _UNPUBLISHED_CELL, None
    found = _SOURCE_LINES.search(cell)
    if found and cell == _PINNED_CELL.format(commit=found[1], archive=found[2]):
        return _PINNED_CELL, found[2].replace("{commit}", found[1])
    return None


def install_cell_language(cell: str) -> str | None:
    """The language ("en", "zh") of ``cell`` if :func:`install_cell` makes it (for some
    repository and ref), else None: how a tool recognises the install cell of either
    edition."""
    from rope_lab.i18n import LANGUAGES

    found = _SOURCE_LINES.search(cell)
    english = (_PINNED_CELL.format(commit=found[1], archive=found[2]) if found
               else _UNPUBLISHED_CELL)
    return next((language for language in LANGUAGES
                 if cell == (english if language == "en"
                             else translate_install_cell(english, language))), None)


def translate_install_cell(cell: str, language: str) -> str:
    """The English install cell ``cell`` (as :func:`install_cell` makes it) in ``language``:
    the same code; its comment and its message to the reader translated by the package
    catalog (English where it has none). The cell runs before rope_lab is installed, so
    the translation is written into it, not looked up when it runs."""
    from rope_lab.i18n import _, normalize_language, using_language

    language = normalize_language(language)
    found = _template_of(cell)
    if found is None:
        raise ValueError("translate_install_cell: cell is not an install cell that "
                         "rope_lab.course.install_cell makes; expected one of its English "
                         "cells")
    english = INSTALL_CELL_TEXTS[found[0]]
    with using_language(language):
        comment, message, *words = (_(text) for text in english)
    # A catalog is contributed text: it may only change words, never the cell's code. A line
    # break in the comment would start a line of code, a {field} of its own in the f-string
    # message would run code.
    if _fields(message) != _fields(english[1]) or re.search(
            r"[{}]", re.sub("|".join(re.escape(f"{{{name}}}") for name in _fields(english[1]))
                            or "^$", "", message)):
        raise ValueError(f"translate_install_cell: the {language} message {message!r} has the "
                         f"fields {sorted(_fields(message))} or other braces; expected exactly "
                         f"those of the English, {sorted(_fields(english[1]))}")
    for what, translated in (("comment", comment), ("message", message),
                             *(("word", word) for word in words)):
        control = [f"U+{ord(c):04X}" for c in translated if c != "\n" or what != "message"
                   if unicodedata.category(c) in ("Cc", "Zl", "Zp")]
        if control:
            raise ValueError(f"translate_install_cell: the {language} {what} {translated!r} "
                             f"holds control characters {control}; expected plain text (a "
                             "line break there would become code)")
    for word, translated in zip(english[2:], words, strict=True):
        cell = cell.replace(f'"{word}"', f'"{_escaped(translated)}"')
    lines = cell.split("\n")
    start = next(i for i, line in enumerate(lines) if _MESSAGE_START in line)
    lead = lines[start][:lines[start].index(_MESSAGE_START) + len(_MESSAGE_START)]
    comments = ["# " + part.rstrip() for part in _wrap(comment, _LINE_LENGTH - 2)]
    return "\n".join([*comments, *lines[1:start],
                      lead + _literal(message, len(lead)) + ")"])


def _fields(message: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", message))


def _width(text: str) -> int:
    """Columns in a monospace font: a CJK character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# Where a line may break: after a space or a CJK character, never inside a {field} or a word
# of Latin letters, never before a closing mark (，。) or after an opening one (（).
_CJK = "\u2e80-\uffef"
_CJK_BREAKS = "，。、；：！？）”’》」"
_PIECES = re.compile(rf"[（“‘《「]*(?:\{{\w+\}}|[^\s{{}}{_CJK}]+|[{_CJK}]|.)"
                     rf"[{_CJK_BREAKS}]*\s*", re.DOTALL)


def _wrap(text: str, width: int, measure=_width) -> list[str]:
    """``text`` in lines of at most ``width`` columns (as ``measure`` counts them; trailing
    spaces not counted, but kept), broken after a CJK punctuation mark where the line has
    one, else after a space, else between two CJK characters."""
    lines, line = [], []
    for piece in _PIECES.findall(text):
        if line and measure("".join(line + [piece]).rstrip()) > width:
            marks = [i for i, part in enumerate(line, 1) if part[-1] in _CJK_BREAKS]
            spaces = [i for i, part in enumerate(line, 1) if part[-1].isspace()]
            cut = (marks or spaces or [len(line)])[-1]
            lines.append("".join(line[:cut]))
            line = line[cut:]
        line.append(piece)
    return [*lines, "".join(line)]


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _literal(message: str, column: int) -> str:
    """``message`` as Python string literals, one per line from ``column`` on (an f-string
    where it shows a {field} of the cell)."""
    # each line holds its quotes, maybe an f and, on the last, the closing parenthesis
    parts = _wrap(message, _LINE_LENGTH - column - 4, lambda part: _width(_escaped(part)))
    return ("\n" + " " * column).join(("f" if _fields(part) else "") + f'"{_escaped(part)}"'
                                      for part in parts)


COLAB_CELL = install_cell(REPOSITORY, PACKAGE_COMMIT)


def published() -> bool:
    """True once ``make set-repository`` named where the course lives."""
    return REPOSITORY is not None and REF is not None


_CURRENT = object()


def colab_url(filename: str, *, repository=_CURRENT, ref=_CURRENT) -> str | None:
    """The link that opens a notebook of the course in Google Colab, at the pinned release
    (default: :data:`REPOSITORY` at :data:`REF`); None while the course names no published
    repository."""
    repository = REPOSITORY if repository is _CURRENT else repository
    ref = REF if ref is _CURRENT else ref
    if repository is None or ref is None:
        return None
    found, owner, name = forge(repository)
    if not found.colab:  # Colab opens notebooks from GitHub only
        return None
    return (f"https://colab.research.google.com/github/{owner}/{name}/blob/{ref}"
            f"/notebooks/{filename}")


def notebook_files(folder: Path, pattern: str = "*.ipynb", *,
                   recursive: bool = False) -> list[Path]:
    """The files of ``folder`` matching ``pattern`` (below it too when ``recursive``), sorted.

    Leaves out what JupyterLab writes next to the course: the copies it keeps in
    ``.ipynb_checkpoints/`` (``00_start_here-checkpoint.ipynb``), the temporary ``.~name``
    files of a save in progress, anything in another hidden folder. Every place that lists
    notebooks (the tests, the book) goes through here, so running the course in JupyterLab
    never adds a notebook to them.
    """
    folder = Path(folder)
    found = folder.rglob(pattern) if recursive else folder.glob(pattern)
    return sorted(path for path in found if path.is_file()
                  and not any(part.startswith(".") for part in path.relative_to(folder).parts))
