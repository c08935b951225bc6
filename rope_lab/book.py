"""The course as a static web site (``make book``) and the README's "Open in Colab" badges.

``python -m rope_lab.book`` executes every notebook and writes ``build/book/``: an index page
with the course map (:data:`rope_lab.course.NOTEBOOKS`), one HTML page per notebook with its
figures inline, and links between notebooks that point at the other pages. A widget cannot
move on a static page, so each widget output is replaced by the figure its panel drew at the
default settings, with a note saying so. The command exits non-zero when a page is missing,
shows an error or stderr output, or links to a page that does not exist.

Importing this module is cheap; nbformat, nbclient and nbconvert (installed with JupyterLab)
are imported only when a book is built.
"""

from __future__ import annotations

import argparse
import html
import posixpath
import re
import shutil
import sys
from pathlib import Path

from rope_lab.course import COLAB_CELL, NOTEBOOKS, REPOSITORY, colab_url

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
BOOK_DIR = ROOT / "build" / "book"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# nbconvert's lab template marks both error outputs and stderr streams with this MIME type.
STDERR_MARK = 'data-mime-type="application/vnd.jupyter.stderr"'


# --- README ---------------------------------------------------------------------------------

def readme_badges() -> str:
    """The README's notebook table, one "Open in Colab" badge per notebook (markdown)."""
    lines = ["| # | notebook | what you learn | minutes | open |", "|---|---|---|---|---|"]
    for notebook in NOTEBOOKS:
        badge = f"[![Open In Colab]({COLAB_BADGE})]({colab_url(notebook.filename)})"
        lines.append(
            f"| {notebook.filename[:2]} | `{notebook.filename}` | {notebook.summary} "
            f"| {notebook.minutes} | {badge} |"
        )
    return "\n".join(lines)


# --- which notebooks, in which order --------------------------------------------------------

def course_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """Notebooks to publish: the course map's order first, then any others, by name."""
    in_map = [notebook_dir / n.filename for n in NOTEBOOKS]
    present = [path for path in in_map if path.exists()]
    others = sorted(set(notebook_dir.glob("*.ipynb")) - set(in_map))
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


def freeze_widget(model_id: str, models: dict) -> list[dict]:
    """Static outputs standing in for one widget view: its panels' PNGs and a note.

    The note lists the controls' values, so a reader knows which setting the figure shows.
    """
    from nbformat.v4 import new_output

    images, settings = [], []
    for model in _walk(model_id, models, set()):
        state = model.get("state", {})
        if model.get("model_name") == "OutputModel":
            images += [o["data"]["image/png"] for o in state.get("outputs", [])
                       if "image/png" in o.get("data", {})]
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
    note = ("*Interactive panel: run the notebook (JupyterLab, VS Code or Colab) to move "
            f"its controls.{shown}*" if images else
            "*Interactive widget: run the notebook to use it; it has no static figure.*")
    outputs = [new_output("display_data", data={"image/png": png}) for png in images[-1:]]
    return outputs + [new_output("display_data", data={"text/markdown": note,
                                                       "text/plain": note})]


def freeze_widgets(nb) -> int:
    """Replace every widget view in ``nb`` by static outputs; return how many were replaced.

    Also drops the saved widget state, so the page loads no widget JavaScript.
    """
    models = _widget_models(nb)
    replaced = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                outputs.append(output)
            else:
                outputs += freeze_widget(view["model_id"], models)
                replaced += 1
        cell.outputs = outputs
    nb.metadata.pop("widgets", None)
    return replaced


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
        return f'href="{REPOSITORY}/blob/main/{path}{anchor}"'

    return _HREF.sub(replace, page)


def navigation(notebook: Path, order: list[Path]) -> str:
    """A markdown line: course map, previous and next page."""
    index = order.index(notebook)
    parts = ["[Course map](index.html)"]
    if index > 0:
        parts.insert(0, f"[← {_title(order[index - 1])}]({page_name(order[index - 1])})")
    if index + 1 < len(order):
        parts.append(f"[{_title(order[index + 1])} →]({page_name(order[index + 1])})")
    if notebook.name in {n.filename for n in NOTEBOOKS}:
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
                            store_widget_state=True,
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = CapturingOutput
    client.execute()
    return nb


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
    # The Colab install cell does nothing for a reader of the static page.
    if nb.cells and nb.cells[0].cell_type == "code" and nb.cells[0].source == COLAB_CELL:
        nb.cells.pop(0)
    nav = navigation(notebook, order)
    nb.cells.insert(0, new_markdown_cell(nav))
    nb.cells.append(new_markdown_cell(nav))
    exporter = HTMLExporter(template_name="lab")
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": _title(notebook)}})
    return rewrite_links(_without_requirejs(body), pages)


def _without_requirejs(page: str) -> str:
    """Drop the template's require.js: no output on these pages needs it (widgets are frozen),
    and it would be a network request on every page view."""
    return re.sub(r'<script src="[^"]*require(?:\.min)?\.js"></script>\s*', "", page)


def render_markdown_page(markdown: str, title: str, pages: set[str]) -> str:
    """A markdown document (e.g. the teaching guide) as a page in the same style."""
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell("[Course map](index.html)"),
                             new_markdown_cell(markdown)])
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(
        nb, resources={"metadata": {"name": title}})
    return rewrite_links(_without_requirejs(body), pages)


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
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .4rem .6rem; text-align: left;
          vertical-align: top; }}
td:nth-child(3) {{ white-space: nowrap; }}
</style></head><body>
<h1>rope_lab: position encoding and RoPE, interactively</h1>
<p>The notebooks of the course, executed, with their figures. The sliders only move when
you run a notebook yourself (JupyterLab, VS Code or Colab; source:
<a href="{REPOSITORY}">{REPOSITORY}</a>); here each panel shows its default setting.</p>
<table><thead><tr><th>#</th><th>notebook</th><th>time</th><th>what you learn</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<ul>{links}</ul>
</body></html>
"""


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
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
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
    (out_dir / "index.html").write_text(index_page(order, extra), encoding="utf-8")
    return written


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
    args = parser.parse_args(argv)
    if args.badges:
        print(readme_badges())
        return 0
    order = args.notebooks or course_notebooks()
    if not order:
        print("no notebooks found in notebooks/; nothing to publish", file=sys.stderr)
        return 1
    build(args.out, order)
    found = problems(args.out, order)
    for problem in found:
        print(f"book: {problem}", file=sys.stderr)
    print(f"book: {len(order)} notebook page(s) in {args.out}"
          + (f", {len(found)} problem(s)" if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
