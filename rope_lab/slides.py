"""The course as slides: live in class with RISE, and as offline reveal.js decks.

**Live.** Every notebook is a RISE slideshow (``jupyterlab-rise``, in the ``lab`` extra: the
slideshow button in JupyterLab's notebook toolbar, or Alt+R), on the notebook's kernel: code
cells run on the slides. Its slider panels do not render there yet: RISE's page cannot load the
widget manager of ipywidgets 8 ("Shared module @jupyterlab/console doesn't exist in shared
scope", jupyterlab-contrib/rise issue 119, open for jupyterlab-rise 0.43.1), so sliders are
turned in the notebook's tab. Where the slides break is written in each cell's metadata
(``slideshow.slide_type``), set by one rule, :func:`slide_types`, never by hand::

    python -m rope_lab.slides --mark      # after editing an English notebook
    python -m rope_lab.translations build         # the Chinese notebooks carry the same types

The rule: the title and each ``##`` section start a slide; a ``###`` heading, a paragraph
that opens with a bold lead (``**Step 2 …**``, ``**Exercise 03.1 — …**``) and a slider panel
(with the sentence that introduces it) start a sub-slide, so a panel and its sliders fill one
screen; the Colab install cell is skipped; every other cell continues the slide above. A
test checks that every notebook's stored types are what the rule gives, and git's notebook
filter (nbstripout with the Makefile's options) keeps them.

**Offline.** ``python -m rope_lab.slides --out build/slides`` (``make slides``) writes one
reveal.js deck per notebook, both editions (``build/slides/03_rope_in_2d.html``,
``build/slides/zh_CN/03_rope_in_2d.html``), beside the book in ``build/book``: the notebooks
run through :mod:`rope_lab.runner` (a run cached in ``build/executed/`` is reused), each slider
panel frozen into the figure it draws at its default settings (:func:`rope_lab.book.
freeze_widgets`), every page through the book's one HTML gate (:func:`rope_lab.book.
sanitize_page`). Nothing is loaded from the network: MathJax and the CJK font are the book's
copies, and reveal.js (5.2) is copied from the ``sphinx-revealjs`` package (the ``teach``
extra) into ``build/slides/reveal.js/``; the deck's template (``book_assets/slides.html.j2``)
is nbconvert's reveal template without its jQuery, require.js and mermaid from CDNs.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import shutil
import sys
from pathlib import Path

from rope_lab import _atomic, book, runner
from rope_lab.i18n import using_language

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
SLIDES_DIR = ROOT / "build" / "slides"
TEMPLATE = Path(__file__).resolve().parent / "book_assets" / "slides.html.j2"
REVEAL_DIR = "reveal.js"
# what a deck loads of reveal.js (and the theme's fonts), copied from sphinx-revealjs
REVEAL_FILES = ("LICENSE", "dist/reveal.css", "dist/reveal.js", "dist/theme/white.css",
                "plugin/notes/notes.js")
# white: its font ships with reveal.js (nbconvert's default, simple, imports Google Fonts)
REVEAL_THEME = "white"
REVEAL_FONTS = "dist/theme/fonts/source-sans-pro"
# RISE's settings, in each notebook's metadata: a slide taller than the screen scrolls
RISE_SETTINGS = {"scroll": True}
# a cell of any of these types is shown on a slide; "skip" and "notes" are not
SHOWN = {"slide", "subslide", "fragment", "-"}


# --- where the slides break ------------------------------------------------------------------

def is_panel(cell) -> bool:
    """Whether a code cell ends by showing a slider panel (``widgets.…_panel()`` or
    ``widgets.Panel(…).box``)."""
    if cell.cell_type != "code":
        return False
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    if not body or not isinstance(body[-1], ast.Expr):
        return False
    node = body[-1].value
    while isinstance(node, (ast.Call, ast.Attribute)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id == "widgets"


def _opens_with_bold(source: str) -> bool:
    return bool(re.match(r"\*\*[^*\n]+\*\*", source.lstrip()))


def slide_types(nb) -> list[str]:
    """The slide type of each cell of ``nb`` (see the module's docstring)."""
    from rope_lab.book import is_install_cell

    cells = nb.cells
    types = []
    for index, cell in enumerate(cells):
        source = cell.source.lstrip()
        following = cells[index + 1] if index + 1 < len(cells) else None
        if is_install_cell(cell):
            kind = "skip"
        elif cell.cell_type == "markdown" and re.match(r"#{1,2} ", source):
            kind = "slide"
        elif cell.cell_type == "markdown" and (source.startswith("### ")
                                               or _opens_with_bold(source)):
            kind = "subslide"
        elif cell.cell_type == "markdown" and following is not None and is_panel(following):
            kind = "subslide"  # the sentence that says which knob to turn, then the panel
        elif is_panel(cell) and not (index and cells[index - 1].cell_type == "markdown"):
            kind = "subslide"
        else:
            kind = "-"
        types.append(kind)
    return types


def stored_types(nb) -> list[str | None]:
    return [cell.metadata.get("slideshow", {}).get("slide_type") for cell in nb.cells]


def course_notebooks() -> list[Path]:
    """The English notebooks of the course (the Chinese ones are built from them)."""
    return book.course_notebooks(NOTEBOOK_DIR)


def mark(notebooks: list[Path] | None = None) -> list[Path]:
    """Write :func:`slide_types` and :data:`RISE_SETTINGS` into ``notebooks`` (default: the
    English course); all files or none. Returns the notebooks changed."""
    import nbformat

    edits = {}
    for path in notebooks or course_notebooks():
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        for cell, kind in zip(nb.cells, slide_types(nb), strict=True):
            cell.metadata["slideshow"] = {"slide_type": kind}
        nb.metadata["rise"] = dict(RISE_SETTINGS)
        new = nbformat.writes(nb) + "\n"
        if new != text:
            edits[path] = new
    return _atomic.replace_all(edits)


# --- offline decks ---------------------------------------------------------------------------

def reveal_source() -> Path:
    """The reveal.js folder of the ``sphinx-revealjs`` package."""
    try:
        import sphinx_revealjs
    except ImportError:
        raise book.MissingBookDependency(
            "the slides need reveal.js from the sphinx-revealjs package, which is not "
            "installed: run `make slides` (it installs the `teach` extra) or "
            "`pip install 'rope_lab[teach]'`") from None
    folder = Path(sphinx_revealjs.__file__).resolve().parent / "_static" / "revealjs"
    missing = [name for name in REVEAL_FILES if not (folder / name).is_file()]
    if missing:
        raise book.MissingBookDependency(
            f"sphinx-revealjs has no {', '.join(missing)} in {folder} (another layout of "
            "reveal.js?); reinstall the version constraints.txt pins")
    return folder


def copy_reveal(out_dir: Path, source: Path) -> None:
    for name in REVEAL_FILES:
        target = out_dir / REVEAL_DIR / name
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic.copy_file(source / name, target)
    fonts = source / REVEAL_FONTS
    for font in sorted(fonts.iterdir()):
        if font.suffix in (".css", ".woff") or font.name == "LICENSE":
            target = out_dir / REVEAL_DIR / REVEAL_FONTS / font.name
            target.parent.mkdir(parents=True, exist_ok=True)
            _atomic.copy_file(font, target)


def render_deck(notebook: Path, order: list[Path], pages: set[str], *, executed=None) -> str:
    """One notebook as a reveal.js deck (widgets frozen, links to the other decks, the
    navigation on a last slide), in the current language, not yet through the gate."""
    import nbformat
    from nbconvert import SlidesExporter
    from nbformat.v4 import new_markdown_cell

    here = book.page_name(notebook)
    root = book._root(here)
    nb = copy.deepcopy(executed) if executed is not None else nbformat.read(notebook,
                                                                              as_version=4)
    book.freeze_widgets(nb)
    book.local_links(nb, pages, here)
    last = new_markdown_cell(book.navigation(notebook, order, pages))
    last.metadata["slideshow"] = {"slide_type": "slide"}
    nb.cells.append(last)
    exporter = SlidesExporter(template_file=str(TEMPLATE), reveal_url_prefix=root + REVEAL_DIR,
                              mathjax_url=root + book.MATHJAX_URL, reveal_scroll=True,
                              reveal_number="c/t", reveal_theme=REVEAL_THEME,
                              reveal_transition="none")
    body, _resources = exporter.from_notebook_node(
        nb, resources={"metadata": {"name": book._title(notebook)}})
    body = re.sub(r"<html\b[^>]*>", f'<html lang="{book.page_edition(here).html_lang}">', body,
                  count=1)
    return book.rewrite_links(book._offline(body, root), pages, here)


def build(out_dir: Path = SLIDES_DIR, notebooks: list[Path] | None = None, *,
          cache: Path | None = runner.CACHE_DIR, progress: bool = False,
          workers: int | None = None, log=print) -> list[Path]:
    """Write the decks of ``notebooks`` (default: both editions) into ``out_dir`` (emptied
    first), with an index per edition; returns the decks written."""
    order = list(notebooks) if notebooks is not None else book.book_notebooks()
    editions = {edition: [path for path in order if book.edition_of(path) == edition]
                for edition in book.EDITIONS}
    editions = {edition: listed for edition, listed in editions.items()
                if listed or edition == book.ENGLISH}
    pages = {book.page_name(path) for path in order}
    pages |= {edition.page("index.html") for edition in editions}
    mathjax, reveal = book.mathjax_source(), reveal_source()  # fail before any work
    log(f"running {len(order)} notebooks")
    executed = {run.path: run.notebook for run in runner.run_notebooks(
        order, workers=workers, cache=cache, progress=progress)}
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    book.copy_offline_assets(out_dir, mathjax)
    copy_reveal(out_dir, reveal)
    written = []
    for edition, listed in editions.items():
        (out_dir / edition.folder).mkdir(parents=True, exist_ok=True)
        with using_language(edition.language):
            for notebook in listed:
                log(f"rendering {book.page_name(notebook)}")
                target = out_dir / book.page_name(notebook)
                deck = render_deck(notebook, listed, pages, executed=executed.get(notebook))
                _atomic.write_text(target, book.sanitize_page(deck))
                written.append(target)
            translated = frozenset(path.name for path in editions[book.ENGLISH]
                                   if (path.parent / edition.folder / path.name).is_file())
            _atomic.write_text(out_dir / edition.page("index.html"), book.index_page(
                listed, {}, edition=edition, pages=pages, translated=translated))
    return written


_REMOTE = re.compile(r'<(?:script|link|img)\b[^>]*\s(?:src|href)="(?:https?:)?//', re.I)


def problems(out_dir: Path, notebooks: list[Path]) -> list[str]:
    """What is wrong with built decks: a missing deck, a file it loads that is not there,
    anything loaded from the network, a deck not marked with its language, an error or
    stderr output shown, or a script, frame or event handler among the slides."""
    found = []
    for notebook in notebooks:
        name = book.page_name(notebook)
        path = out_dir / name
        if not path.is_file():
            found.append(f"{name}: missing")
            continue
        text = path.read_text(encoding="utf-8")
        for target in book._LOCAL_HREF.findall(text) + book._CSS_URL.findall(text):
            if not (path.parent / target).exists():
                found.append(f"{name}: loads or links to a missing file {target}")
        if _REMOTE.search(text) or "require(" in text:
            found.append(f"{name}: loads something from the network")
        lang = book.edition_of(notebook).html_lang
        if not re.search(rf'<html[^>]*\slang="{re.escape(lang)}"', text):
            found.append(f'{name}: not marked lang="{lang}"')
        if book.STDERR_MARK in text:
            found.append(f"{name}: shows an error or stderr output")
        slides = text[text.find("<body"):text.rfind("</body>")]
        if unsafe := sorted(set(book._UNSAFE.findall(slides))):
            found.append(f"{name}: the slides hold {unsafe} (not through sanitize_page?)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rope_lab.slides", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to make decks of (default: both editions)")
    parser.add_argument("--out", type=Path, default=SLIDES_DIR, help="output folder")
    parser.add_argument("--mark", action="store_true",
                        help="write the slide types into the English notebooks and stop")
    parser.add_argument("--no-cache", action="store_true",
                        help="run every notebook, even one whose run is in build/executed/")
    args = parser.parse_args(argv)
    if args.mark:
        changed = mark(args.notebooks or None)
        for path in changed:
            print(f"slides: marked {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        print(f"slides: {len(changed)} notebook(s) changed"
              + ("; now run python -m rope_lab.translations build" if changed else ""))
        return 0
    order = args.notebooks or book.book_notebooks()
    for path in order:
        if path.suffix != ".ipynb" or not path.is_file():
            print(f"slides: {path}: not a notebook of the course (expected an .ipynb file "
                  "in notebooks/ or notebooks/zh_CN/)", file=sys.stderr)
            return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"slides: --out {args.out}: exists and is not a folder", file=sys.stderr)
        return 2
    return book.build_and_report("slides", build, problems, args.out, order,
                                 no_cache=args.no_cache, written="deck(s)")


if __name__ == "__main__":
    sys.exit(main())
