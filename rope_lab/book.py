"""The course as a static web site (``make book``) and the README's "Open in Colab" badges.

``python -m rope_lab.book`` executes every notebook and writes ``build/book/``: an index page
with the course map (:data:`rope_lab.course.NOTEBOOKS`), one HTML page per notebook with its
figures inline, and links between notebooks that point at the other pages (notebook 00's
course map, which links to Colab in a notebook, links to the pages here). A widget cannot
move on a static page, so each widget output is replaced by the figure its panel drew at the
default settings, with a note saying so. The command exits non-zero when a page is missing,
shows an error or stderr output, or links to a page that does not exist.

The site works offline (a classroom may have no network): MathJax is copied into it from
the ``jupyter-server-mathjax`` package (the ``book`` extra), and the Chinese words of the
course, in prose, code and outputs, render from the font shipped in ``rope_lab/book_assets/``
(made by ``scripts/cjk_font.py``; the same CSS gives it to JupyterLab under ``make lab``), so
no CDN and no system CJK font are needed. Printed outputs are set in the code's monospace
font. Notebooks run with encrypted kernel connections (:func:`kernel_config`).

Importing this module is cheap; nbformat, nbclient and nbconvert are imported only when a
book is built.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import os
import posixpath
import re
import shutil
import sys
from pathlib import Path

from rope_lab import course
from rope_lab.course import COLAB_CELL, NOTEBOOKS, REF, REPOSITORY, colab_url, notebook_files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
BOOK_DIR = ROOT / "build" / "book"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"

# The font with the common Chinese characters and every one the course uses
# (scripts/cjk_font.py), and the CSS that appends it to every font stack: the same file is
# JupyterLab's custom CSS under `make lab` (lab/jupyter_server_config.py).
ASSETS = Path(__file__).resolve().parent / "book_assets"
CJK_FONT = ASSETS / "cjk-subset.otf"
CJK_CSS = ASSETS / "custom.css"
CJK_FAMILY = "rope_lab CJK"
# Where the site's copy of MathJax goes, and the configuration nbconvert's template expects.
MATHJAX_DIR = "mathjax"
MATHJAX_URL = f"{MATHJAX_DIR}/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# A frozen panel whose figure looks like the figure just above it is not shown again (see
# same_figure). Measured on the course's book: a panel and the static figure of the same
# plot differ by 0.005-0.008, two different figures of one notebook by 0.023 or more.
SAME_FIGURE = 0.015

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# nbconvert's lab template marks both error outputs and stderr streams with this MIME type.
STDERR_MARK = 'data-mime-type="application/vnd.jupyter.stderr"'


# --- README ---------------------------------------------------------------------------------

def binder_url(repository=REPOSITORY, ref=REF) -> str | None:
    """JupyterLab on Binder (mybinder.org builds it from environment.yml) at the pinned
    release; None while the course names no published repository."""
    if repository is None or ref is None:
        return None
    owner_and_name = repository.split("github.com/", 1)[1]
    return f"https://mybinder.org/v2/gh/{owner_and_name}/{ref}?urlpath=lab/tree/notebooks"


UNPUBLISHED_NOTE = (
    "No Colab or Binder links yet: this copy of the course names no published repository "
    "(a link to an address nobody here controls would open whatever its owner serves). "
    "`make set-repository URL=https://github.com/OWNER/NAME REF=TAG` adds them, pinned at "
    "that release.")


def readme_badges(repository=REPOSITORY, ref=REF) -> str:
    """The README's notebook table (markdown) and how to open the course online: one "Open in
    Colab" badge per notebook and a Binder badge once the course is published, else a note
    saying why there are none."""
    links = repository is not None and ref is not None
    lines = ["| # | notebook | what you learn | minutes |" + (" open |" if links else ""),
             "|---|---|---|---|" + ("---|" if links else "")]
    for notebook in NOTEBOOKS:
        row = (f"| {notebook.filename[:2]} | `{notebook.filename}` | {notebook.summary} "
               f"| {notebook.minutes} |")
        if links:
            url = colab_url(notebook.filename, repository=repository, ref=ref)
            row += f" [![Open In Colab]({COLAB_BADGE})]({url}) |"
        lines.append(row)
    lines.append("")
    if links:
        lines.append(f"The whole course in the browser, nothing to install: [![Binder]"
                     f"({BINDER_BADGE})]({binder_url(repository, ref)}) (Binder builds it from "
                     "`environment.yml`). Both open the release "
                     f"`{ref}` of {repository}.")
    else:
        lines.append(UNPUBLISHED_NOTE)
    return "\n".join(lines)


BADGES_START, BADGES_END = "<!-- notebook table: start -->", "<!-- notebook table: end -->"
_GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?")
_INSTALL_MARK = '"google.colab" in sys.modules'


def set_repository(url: str, ref: str, root: Path = ROOT) -> list[Path]:
    """Publish the course at ``url``, pinned at ``ref`` (a tag or a commit hash): rewrite every
    place that names them.

    That is :data:`rope_lab.course.REPOSITORY` and :data:`~rope_lab.course.REF`, the README's
    notebook table (badges, Binder) and the install cell of every notebook. Returns the files
    changed.
    """
    match = _GITHUB.fullmatch(url.strip()) if isinstance(url, str) else None
    if not match:
        raise ValueError(f"set_repository: url={url!r} is not a GitHub repository address; "
                         "expected https://github.com/OWNER/NAME")
    try:
        ref = course.check_ref(ref)
    except ValueError as error:
        raise ValueError(f"set_repository: {error}") from None
    new = f"https://github.com/{match[1]}/{match[2]}"
    changed = []
    settings = root / "rope_lab" / "course.py"
    text = settings.read_text(encoding="utf-8")
    edited = re.sub(r"^REPOSITORY: str \| None = .*$", f'REPOSITORY: str | None = "{new}"',
                    text, count=1, flags=re.MULTILINE)
    edited = re.sub(r"^REF: str \| None = .*$", f'REF: str | None = "{ref}"', edited, count=1,
                    flags=re.MULTILINE)
    if edited.count(f'"{new}"') != 1 or edited.count(f'"{ref}"') < 1:
        raise ValueError(f"set_repository: {settings} has no REPOSITORY / REF lines to rewrite")
    if edited != text:
        settings.write_text(edited, encoding="utf-8")
        changed.append(settings)
    readme = root / "README.md"
    if readme.exists() and write_readme_badges(readme, new, ref):
        changed.append(readme)
    changed += place_install_cells(root, course.install_cell(new, ref))
    return changed


def write_readme_badges(readme: Path, repository=REPOSITORY, ref=REF) -> bool:
    """Rewrite the README's block between the notebook-table markers; True if it changed."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(BADGES_START), text.find(BADGES_END)
    if start < 0 or end < start:
        raise ValueError(f"{readme} has no {BADGES_START} … {BADGES_END} block")
    block = f"{BADGES_START}\n{readme_badges(repository, ref)}\n"
    edited = text[:start] + block + text[end:]
    if edited == text:
        return False
    readme.write_text(edited, encoding="utf-8")
    return True


def install_cell_notebooks(root: Path = ROOT) -> list[Path]:
    """Every notebook that carries the install cell: the course, its solutions, and the
    browser tests' fixture."""
    return [*notebook_files(root / "notebooks", recursive=True),
            *notebook_files(root / "tests" / "browser")]


def place_install_cells(root: Path = ROOT, cell: str = COLAB_CELL) -> list[Path]:
    """Make ``cell`` the install cell of every notebook, right below its title (the first
    screen is the title and what you will learn). An existing install cell (a code cell
    among the first three that checks for ``google.colab``) is replaced, keeping its id.
    Returns the notebooks changed."""
    import nbformat

    changed = []
    for path in install_cell_notebooks(root):
        if ".ipynb_checkpoints" in path.parts:
            continue
        nb = nbformat.read(path, as_version=4)
        old = next((c for c in nb.cells[:3]
                    if c.cell_type == "code" and _INSTALL_MARK in c.source), None)
        cells = [c for c in nb.cells if c is not old]
        title = next((i for i, c in enumerate(cells[:2])
                      if c.cell_type == "markdown" and c.source.startswith("# ")), None)
        if title is None or old is None and "notebooks" not in path.relative_to(root).parts:
            continue  # not a course notebook, or a test fixture without an install cell
        new = nbformat.v4.new_code_cell(cell)
        if old is not None:
            new.id = old.id
        cells.insert(title + 1, new)
        if [c.source for c in cells] == [c.source for c in nb.cells]:
            continue
        nb.cells = cells
        nbformat.write(nb, path)
        changed.append(path)
    return changed


def is_install_cell(cell) -> bool:
    return cell.cell_type == "code" and _INSTALL_MARK in cell.source


# --- which notebooks, in which order --------------------------------------------------------

def course_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """Notebooks to publish: the course map's order first, then any others, by name."""
    in_map = [notebook_dir / n.filename for n in NOTEBOOKS]
    present = [path for path in in_map if path.exists()]
    others = [path for path in notebook_files(notebook_dir) if path not in in_map]
    return present + others


def page_name(notebook: Path) -> str:
    return notebook.stem + ".html"


def _title(notebook: Path) -> str:
    for entry in NOTEBOOKS:
        if entry.filename == notebook.name:
            return f"{entry.filename[:2]} · {entry.title}"
    return notebook.stem.replace("_", " ")


# --- widgets → static figures ---------------------------------------------------------------

def _widget_models(nb) -> dict:
    return nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})


def _walk(model_id: str, models: dict, seen: set):
    """The model and every model it contains (children, nested boxes), depth first."""
    if model_id in seen or model_id not in models:
        return
    seen.add(model_id)
    yield models[model_id]
    state = models[model_id].get("state", {})
    for child in state.get("children", []):
        if isinstance(child, str) and child.startswith("IPY_MODEL_"):
            yield from _walk(child[len("IPY_MODEL_"):], models, seen)


def freeze_widget(model_id: str, models: dict, shown_above: list[str] = ()) -> list[dict]:
    """Static outputs standing in for one widget view: its panels' PNGs and a note.

    The note lists the controls' values, so a reader knows which setting the figure shows.
    When the panel's figure looks like one of ``shown_above`` (the figures of the code cell
    just above, base64 PNGs), it is left out and the note points up instead.
    """
    from nbformat.v4 import new_output

    images, settings, css_width = [], [], None
    for model in _walk(model_id, models, set()):
        state = model.get("state", {})
        if model.get("model_name") == "OutputModel":
            images += [o["data"]["image/png"] for o in state.get("outputs", [])
                       if "image/png" in o.get("data", {})]
        elif model.get("model_name") == "ImageModel":
            # the PNG travels as a binary buffer, base64-encoded in the saved state
            images += [buffer["data"] for buffer in model.get("buffers", [])
                       if buffer.get("path") == ["value"] and buffer.get("data")]
            # a panel's PNG has twice the pixels of its CSS width (crisp when zoomed)
            width = str(state.get("width", ""))
            css_width = int(width) if width.isdigit() else None
        elif state.get("description") and "value" in state:
            value = state["value"]
            settings.append(f"{state['description']} = "
                            + (f"{value:g}" if isinstance(value, float) else f"{value}"))
        elif state.get("description") and isinstance(state.get("index"), int):
            # a dropdown saves the chosen index and the labels, not the value
            labels = state.get("_options_labels", [])
            if 0 <= state["index"] < len(labels):
                settings.append(f"{state['description']} = {labels[state['index']]}")
    shown = f" Shown at {', '.join(settings)}." if settings else ""
    duplicate = bool(images) and any(same_figure(images[-1], above) for above in shown_above)
    if duplicate:
        shown = (f" At its default settings ({', '.join(settings)}) it draws the figure above."
                 if settings else " At its default settings it draws the figure above.")
    note = ("*Interactive panel: run the notebook (JupyterLab, VS Code or Colab) to move "
            f"its controls.{shown}*" if images else
            "*Interactive widget: run the notebook to use it; it has no static figure.*")
    outputs = [new_output("display_data", data={"image/png": png},
                          metadata={"image/png": {"width": css_width}} if css_width else {})
               for png in ([] if duplicate else images[-1:])]
    return outputs + [new_output("display_data", data={"text/markdown": note,
                                                       "text/plain": note})]


def freeze_widgets(nb) -> int:
    """Replace every widget view in ``nb`` by static outputs; return how many were replaced.

    Also drops the saved widget state, so the page loads no widget JavaScript.
    """
    models = _widget_models(nb)
    replaced = 0
    above: list[str] = []  # the figures of the last code cell, for freeze_widget
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                outputs.append(output)
            else:
                outputs += freeze_widget(view["model_id"], models, above)
                replaced += 1
        cell.outputs = outputs
        above = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    nb.metadata.pop("widgets", None)
    return replaced


def same_figure(png_a: str, png_b: str) -> bool:
    """Whether two base64 PNGs show the same figure (size, margins and resolution may differ).

    Each image is cropped to its drawn content, blurred (line widths and text hinting at
    another resolution wash out) and averaged into 64 × 48 boxes; the mean grey-level
    difference must stay under :data:`SAME_FIGURE`.
    """
    from PIL import Image, ImageFilter, ImageOps  # Pillow comes with matplotlib

    def grey(png: str) -> bytes:
        image = Image.open(io.BytesIO(base64.b64decode(png))).convert("L")
        content = ImageOps.invert(image).getbbox()
        if content:
            image = image.crop(content)
        image = image.filter(ImageFilter.GaussianBlur(max(image.size) / 200))
        return image.resize((64, 48), Image.Resampling.BOX).tobytes()

    try:
        a, b = grey(png_a), grey(png_b)
    except Exception:  # not a decodable image: cannot be the same figure
        return False
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / (255 * len(a)) < SAME_FIGURE


# --- links and navigation -------------------------------------------------------------------

# Relative links to files of the repository (notebooks link to each other, to the teaching
# guide, to package modules); links to pages, anchors and other sites are left alone.
_HREF = re.compile(r'href="(?!https?:|mailto:|#|data:)([^"#]*?\.(?:ipynb|md|py|json|txt|toml|yml))'
                   r'(#[^"]*)?"')


def rewrite_links(page: str, pages: set[str]) -> str:
    """Point a page's links at the book's pages where there is one, else at the repository.

    Links are written relative to ``notebooks/``, as in the notebooks and TEACHING.md.
    """

    def replace(match):
        path = posixpath.normpath(posixpath.join("notebooks", match[1]))  # from the repo root
        anchor = match[2] or ""
        folder, name = posixpath.split(path)
        stem = name.rsplit(".", 1)[0]
        if folder == "notebooks" and name.endswith(".ipynb") and f"{stem}.html" in pages:
            return f'href="{stem}.html{anchor}"'
        if path == "notebooks/TEACHING.md" and "teaching.html" in pages:
            return f'href="teaching.html{anchor}"'
        if REPOSITORY is None or REF is None:  # nowhere online to point at: plain text
            return f'title="{path} in the course repository"'
        return f'href="{REPOSITORY}/blob/{REF}/{path}{anchor}"'

    return _HREF.sub(replace, page)


def navigation(notebook: Path, order: list[Path]) -> str:
    """A markdown line: course map, previous and next page."""
    index = order.index(notebook)
    parts = ["[Course map](index.html)"]
    if index > 0:
        parts.insert(0, f"[← {_title(order[index - 1])}]({page_name(order[index - 1])})")
    if index + 1 < len(order):
        parts.append(f"[{_title(order[index + 1])} →]({page_name(order[index + 1])})")
    if notebook.name in {n.filename for n in NOTEBOOKS} and colab_url(notebook.name):
        parts.append(f"[Open in Colab]({colab_url(notebook.name)})")
    return " · ".join(parts)


# --- building -------------------------------------------------------------------------------

def execute(nb, notebook: Path, *, timeout: int = 300):
    """Run every cell (in the notebook's folder) and keep the widget state."""
    from nbclient import NotebookClient
    from nbclient.output_widget import OutputWidget

    class CapturingOutput(OutputWidget):
        """nbclient's stand-in for a front end's Output widget, minus the echo to the kernel.

        nbclient sends the captured outputs back to the kernel on the shell channel while it
        waits for the cell's reply on that same channel; now and then the reply then goes
        unnoticed until the cell timeout (nbclient issue #312). A static page needs no echo:
        the captured outputs still reach the saved widget state.
        """

        def sync_state(self):
            pass

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            store_widget_state=True, config=kernel_config(),
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = CapturingOutput
    client.execute()
    return nb


def kernel_config():
    """Kernel settings for executing notebooks: CurveZMQ-encrypted connections.

    The kernel and its client talk over local TCP sockets. jupyter_client 8.10+ can hand the
    kernel encryption keys (ipykernel 7 declares it takes them); without them ipykernel 7
    warns at every start that the connection is "susceptible to eavesdropping". Older
    versions neither encrypt nor warn: nothing to set.
    """
    import zmq
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    config = Config()
    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return config


def local_links(nb, pages: set[str]) -> None:
    """Point the outputs' links to a notebook (notebook 00's course map: its Colab link once
    the course is published, the notebook file until then) at its page of the book instead:
    a reader of the book stays in the book."""
    replacements = {}
    for entry in NOTEBOOKS:
        page = page_name(Path(entry.filename))
        if page in pages:
            for link in (colab_url(entry.filename), entry.filename):
                if link:  # no Colab link while the course names no published repository
                    replacements[link] = page
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime in ("text/markdown", "text/html"):
                text = output.get("data", {}).get(mime)
                if isinstance(text, list):
                    text = "".join(text)
                if text:
                    for colab, page in replacements.items():
                        text = text.replace(f"({colab})", f"({page})").replace(
                            f'"{colab}"', f'"{page}"')
                    output["data"][mime] = text


def render_page(notebook: Path, order: list[Path], pages: set[str], *,
                run: bool = True) -> str:
    """One notebook as a standalone HTML page (executed, widgets frozen, links fixed)."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_markdown_cell

    nb = nbformat.read(notebook, as_version=4)
    if run:
        execute(nb, notebook)
    freeze_widgets(nb)
    local_links(nb, pages)
    # The Colab install cell does nothing for a reader of the static page.
    nb.cells = [cell for cell in nb.cells[:3] if not is_install_cell(cell)] + nb.cells[3:]
    nav = navigation(notebook, order)
    nb.cells.insert(0, new_markdown_cell(nav))
    nb.cells.append(new_markdown_cell(nav))
    exporter = HTMLExporter(template_name="lab", mathjax_url=MATHJAX_URL)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": _title(notebook)}})
    return rewrite_links(_offline(body), pages)


def font_css() -> str:
    """The page's fonts: JupyterLab's stacks with the course's CJK font appended
    (:data:`CJK_CSS`, which loads :data:`CJK_FONT` from the site's folder)."""
    return f"<style>\n{CJK_CSS.read_text(encoding='utf-8')}</style>\n"


# jupyter-server-mathjax ships MathJax's STIX-Web fonts only (not its default TeX fonts):
# configured before MathJax.js loads, so it never asks for the missing ones. MathJax's
# "MathJax_Blank" probe font is loaded from about:blank by default, which Chromium refuses
# from a page opened from disk, with a console error on every page; a local() source that
# no machine has fails the same way (MathJax only needs it not to load), in silence.
MATHJAX_FONTS = """<script>window.MathJax = {"HTML-CSS": {availableFonts: ["STIX-Web"],
  preferredFont: "STIX-Web", webFont: "STIX-Web", imageFont: null,
  styles: {"@font-face": {"font-family": "MathJax_Blank",
                          src: "local('rope_lab no such font')"}}}};</script>
"""


def _offline(page: str) -> str:
    """Make a page work with no network.

    Drops the template's require.js (no output needs it once widgets are frozen; it would
    be a request to a CDN on every view) and adds the CJK web font. MathJax already points
    at the site's own copy (:data:`MATHJAX_URL`).
    """
    page = re.sub(r'<script src="[^"]*require(?:\.min)?\.js"></script>\s*', "", page)
    mathjax = f'<script src="{MATHJAX_URL}"'
    page = page.replace(mathjax, MATHJAX_FONTS + mathjax, 1)
    return page.replace("</head>", font_css() + "</head>", 1)


def render_markdown_page(markdown: str, title: str, pages: set[str]) -> str:
    """A markdown document (e.g. the teaching guide) as a page in the same style."""
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell("[Course map](index.html)"),
                             new_markdown_cell(markdown)])
    body, _ = HTMLExporter(template_name="lab", mathjax_url=MATHJAX_URL).from_notebook_node(
        nb, resources={"metadata": {"name": title}})
    return rewrite_links(_offline(body), pages)


def index_page(order: list[Path], extra_pages: dict[str, str]) -> str:
    """The course map: every notebook of NOTEBOOKS, linked when its page exists."""
    have = {path.name for path in order}
    rows = []
    for entry in NOTEBOOKS:
        title = html.escape(entry.title)
        if entry.filename in have:
            title = f'<a href="{page_name(Path(entry.filename))}">{title}</a>'
        else:
            title += " <em>(not written yet)</em>"
        rows.append(f"<tr><td>{entry.filename[:2]}</td><td>{title}</td>"
                    f"<td>{entry.minutes} min</td><td>{html.escape(entry.summary)}</td></tr>")
    for path in order:
        if path.name not in {n.filename for n in NOTEBOOKS}:
            rows.append(f'<tr><td></td><td><a href="{page_name(path)}">{html.escape(path.stem)}'
                        "</a></td><td></td><td></td></tr>")
    links = "".join(f'<li><a href="{name}">{html.escape(label)}</a></li>'
                    for name, label in extra_pages.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rope_lab: position encoding and RoPE</title>
<style>
body {{ font-family: var(--jp-content-font-family); max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .4rem .6rem; text-align: left;
          vertical-align: top; }}
td:nth-child(3) {{ white-space: nowrap; }}
</style>
{font_css()}</head><body>
<h1>rope_lab: position encoding and RoPE, interactively</h1>
<p>The notebooks of the course, executed, with their figures. The sliders only move when
you run a notebook yourself (JupyterLab, VS Code or Colab{_where_online()}); here each panel
shows its default setting.</p>
<table><thead><tr><th>#</th><th>notebook</th><th>time</th><th>what you learn</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<ul>{links}</ul>
</body></html>
"""


def _where_online() -> str:
    """The index page's pointer to the published course (nothing while it names none)."""
    if REPOSITORY is None or REF is None:
        return ""
    return (f'; source: <a href="{REPOSITORY}">{REPOSITORY}</a> at {html.escape(REF)}, or in '
            f'the browser on <a href="{binder_url()}">Binder</a>')


def build(out_dir: Path = BOOK_DIR, notebooks: list[Path] | None = None, *,
          run: bool = True, teaching: Path | None = NOTEBOOK_DIR / "TEACHING.md",
          log=print) -> list[Path]:
    """Write the site into ``out_dir`` (emptied first); return the notebook pages written."""
    order = list(notebooks) if notebooks is not None else course_notebooks()
    pages = {page_name(path) for path in order}
    extra = {}
    if teaching is not None and teaching.exists():
        extra["teaching.html"] = "Teaching guide"
        pages.add("teaching.html")
    mathjax = mathjax_source()  # before anything is deleted: fail early, say what to install
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    copy_offline_assets(out_dir, mathjax)
    written = []
    for notebook in order:
        log(f"rendering {notebook.name}")
        target = out_dir / page_name(notebook)
        target.write_text(render_page(notebook, order, pages, run=run), encoding="utf-8")
        written.append(target)
    if extra:
        (out_dir / "teaching.html").write_text(
            render_markdown_page(teaching.read_text(encoding="utf-8"), "Teaching guide", pages),
            encoding="utf-8")
    # The claims inventory gets its own page, so a reader can see what the course checked.
    from rope_lab.claims import claims_markdown

    extra["claims.html"] = "Claims of the source posts"
    (out_dir / "claims.html").write_text(
        render_markdown_page("# Claims of the source posts\n\n" + claims_markdown(),
                             "Claims of the source posts", pages | {"claims.html"}),
        encoding="utf-8")
    (out_dir / "index.html").write_text(index_page(order, extra), encoding="utf-8")
    return written


class MissingBookDependency(RuntimeError):
    """Something ``make book`` needs is not installed; the message names the fix."""


def mathjax_source() -> Path:
    """The MathJax 2 folder of the ``jupyter-server-mathjax`` package."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise MissingBookDependency(
            "the book needs MathJax from the jupyter-server-mathjax package, which is not "
            "installed: run `make book` (it installs the `book` extra) or "
            "`pip install 'rope_lab[book]'`") from None
    static = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
    if not (static / "MathJax.js").exists():
        raise MissingBookDependency(f"jupyter-server-mathjax has no MathJax.js in {static}; "
                                    "reinstall it: pip install --force-reinstall "
                                    "jupyter-server-mathjax")
    return static


def copy_offline_assets(out_dir: Path, mathjax: Path) -> None:
    """MathJax (without its 3.5 MB of screen-reader maps) and the CJK font, into the site."""
    shutil.copytree(mathjax, out_dir / MATHJAX_DIR,
                    ignore=shutil.ignore_patterns("mathmaps", "*.py", "__pycache__"))
    if not CJK_FONT.exists():
        raise MissingBookDependency(f"{CJK_FONT} is missing: run `make cjk-font`")
    shutil.copy2(CJK_FONT, out_dir / CJK_FONT.name)


# Characters of the CJK blocks (ideographs, CJK punctuation, kana, full-width forms).
_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")
# Text a reader may see: notebooks, markdown, translation catalogs, code, data.
TEXT_SUFFIXES = {".ipynb", ".md", ".po", ".pot", ".py", ".csv", ".json", ".txt", ".toml",
                 ".yml", ".yaml", ".html", ".css", ".rst"}
# Folders that are not the course's text: environments, builds, caches.
NOT_TEXT = {"build", "dist", "test-artifacts", "__pycache__", "node_modules"}


def is_cjk(character: str) -> bool:
    """Whether ``character`` needs a CJK font (ideograph, CJK punctuation, kana, full width)."""
    return bool(_CJK.fullmatch(character))


def text_files(root: Path = ROOT) -> list[Path]:
    """Every text file of the repository under ``root``, whatever folder it is in (a new
    locale folder of ``.po`` catalogs included), without hidden folders (``.git``, ``.venv``,
    ``.nox``, ``.ipynb_checkpoints``), builds and caches."""
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".")
                               and name not in NOT_TEXT and not name.endswith(".egg-info"))
        found += [Path(folder, name) for name in sorted(names)
                  if Path(name).suffix in TEXT_SUFFIXES and not name.startswith(".")]
    return found


def cjk_characters(root: Path = ROOT) -> set[str]:
    """Every CJK character of the repository's text (:func:`text_files`): the notebooks, the
    markdown, the translation catalogs, the package's strings and data. The shipped font
    (:data:`CJK_FONT`) must draw each one."""
    found = set()
    for path in text_files(root):
        found |= set(_CJK.findall(path.read_text(encoding="utf-8", errors="replace")))
    return found


_LOCAL_HREF = re.compile(r'(?:href|src)="(?!https?:|data:|mailto:|#|//)([^"#?]+)')


def problems(out_dir: Path, notebooks: list[Path]) -> list[str]:
    """What is wrong with a built book: missing pages, error outputs, broken local links."""
    found = []
    if not (out_dir / "index.html").exists():
        found.append("index.html is missing")
    for notebook in notebooks:
        if not (out_dir / page_name(notebook)).exists():
            found.append(f"{notebook.name}: no page {page_name(notebook)}")
    for page in sorted(out_dir.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        if STDERR_MARK in text:
            found.append(f"{page.name}: shows an error or stderr output")
        for target in _LOCAL_HREF.findall(text):
            if not (out_dir / html.unescape(target)).exists():
                found.append(f"{page.name}: broken link {target}")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rope_lab.book", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to publish (default: every notebook in notebooks/)")
    parser.add_argument("--out", type=Path, default=BOOK_DIR, help="output folder")
    parser.add_argument("--badges", action="store_true",
                        help="print the README's notebook table with Colab badges and stop")
    parser.add_argument("--set-repository", metavar="URL",
                        help="publish the course at URL (https://github.com/OWNER/NAME), "
                             "pinned at --ref: rewrite the README, rope_lab/course.py and "
                             "every install cell")
    parser.add_argument("--ref", help="with --set-repository: the tag (or commit hash) that "
                                      "Colab and Binder open and the install cell installs")
    parser.add_argument("--install-cells", action="store_true",
                        help="put rope_lab.course.COLAB_CELL below every notebook's title "
                             "(replacing the install cell there) and the README's table in "
                             "step with it, then stop")
    args = parser.parse_args(argv)
    if args.badges:
        print(readme_badges())
        return 0
    if args.install_cells:
        changed = place_install_cells(ROOT)
        if write_readme_badges(ROOT / "README.md"):
            changed.append(ROOT / "README.md")
        print(f"book: {len(changed)} file(s) rewritten")
        return 0
    if args.set_repository or args.ref:
        if not (args.set_repository and args.ref):
            print("book: --set-repository URL needs --ref TAG (a release to pin: a tag or a "
                  "commit hash), and --ref needs --set-repository", file=sys.stderr)
            return 2
        try:
            changed = set_repository(args.set_repository, args.ref)
        except ValueError as error:
            print(f"book: {error}", file=sys.stderr)
            return 2
        for path in changed:
            print(f"book: rewrote {path.relative_to(ROOT)}")
        then = ("commit and push" if course.is_commit(args.ref) else
                f"commit, tag that commit {args.ref} (git tag {args.ref}) and push the tag")
        if (ROOT / "notebooks" / "zh_CN").exists():
            then += "; `make translations` puts the links into notebooks/zh_CN/README.md"
        print(f"book: {len(changed)} file(s) now point at {args.set_repository} at {args.ref}; "
              f"{then}")
        return 0
    order = args.notebooks or course_notebooks()
    if not order:
        print("no notebooks found in notebooks/; nothing to publish", file=sys.stderr)
        return 1
    try:
        build(args.out, order)
    except MissingBookDependency as error:
        print(f"book: {error}", file=sys.stderr)
        return 1
    found = problems(args.out, order)
    for problem in found:
        print(f"book: {problem}", file=sys.stderr)
    print(f"book: {len(order)} notebook page(s) in {args.out}"
          + (f", {len(found)} problem(s)" if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
