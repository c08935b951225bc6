"""The course as a static web site (``make book``) and the README's "Open in Colab" badges.

``python -m rope_lab.book`` executes every notebook and writes ``build/book/``: an index page
with the course map (:data:`rope_lab.course.NOTEBOOKS`), one HTML page per notebook with its
figures inline, and links between notebooks that point at the other pages (notebook 00's
course map, which links to Colab in a notebook, links to the pages here). A widget cannot
move on a static page, so each widget output is replaced by the figure its panel drew at the
default settings, with a note saying so. The command exits non-zero when a page is missing,
shows an error or stderr output, links to a page or a file that does not exist, or lacks
its language switch.

The book has one edition per language of the course (:data:`EDITIONS`), laid out as
``notebooks/`` is: the English pages at the top, the 简体中文 edition, made from
``notebooks/zh_CN/``, in ``zh_CN/`` with its own index. Every page links to the same page in
the other edition, or to that edition's index where the page has no twin (a notebook not
translated yet); which twins exist is read from the notebook files. A Chinese page speaks
Chinese throughout: its navigation, notes and index come from the package's gettext catalog
(``rope_lab/locale/``, looked up with :func:`rope_lab.i18n.using_language`), its ``<html>`` is
marked ``lang="zh-CN"``, and its Colab links open the Chinese notebooks.

The site works offline (a classroom may have no network): MathJax is copied into it from
the ``jupyter-server-mathjax`` package (the ``book`` extra), and the Chinese words of the
course, in prose, code and outputs, render from the font shipped in ``rope_lab/book_assets/``
(made by ``scripts/cjk_font.py``; the same CSS gives it to JupyterLab under ``make lab``), so
no CDN and no system CJK font are needed. Printed outputs are set in the code's monospace
font. Notebooks run through :mod:`rope_lab.runner` (several at once, encrypted kernel
connections, a run reused while the notebook and the package are unchanged).

Every page passes one gate on its way out (:func:`sanitize_page`): the body of the page,
everything a notebook, an output or a translation put there, goes through an allow-list HTML
sanitizer (nh3, Rust's ammonia), so no script, event handler, ``javascript:`` URL, frame or
form reaches a reader from a contributed notebook or catalog (hostile by design: a .po file
or a notebook is text anyone can send). The book's own template (its head: MathJax, the
fonts, the styles) is kept; formulas, figures (PNG and JPEG data URLs), tables, code
highlighting and links still work.

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
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rope_lab import _atomic, course, runner
from rope_lab.course import COLAB_CELL, NOTEBOOKS, REF, REPOSITORY, colab_url, notebook_files
from rope_lab.i18n import LANGUAGES, N_, _, using_language

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



@dataclass(frozen=True)
class Edition:
    """One language of the book.

    ``folder`` is where its notebooks are below ``notebooks/`` and where its pages are below
    the site: "" for English, the gettext locale ("zh_CN") for a translation, so a page's
    links to other notebooks resolve as they do between the notebooks.
    """

    language: str  # rope_lab.i18n's code: "en", "zh"
    folder: str
    label: str  # the edition's name in its own language, shown on the language switch

    @property
    def html_lang(self) -> str:
        """The ``lang`` of its pages (BCP 47: "en", "zh-CN")."""
        return self.folder.replace("_", "-") or self.language

    def page(self, name: str) -> str:
        """The site path of one of its pages: "index.html" → "zh_CN/index.html"."""
        return posixpath.join(self.folder, name) if self.folder else name


# The course's languages (rope_lab.i18n.LANGUAGES), English first: the site's top level.
_AUTONYMS = {"en": "English", "zh": "中文"}
EDITIONS = tuple(Edition(code, locale or "", _AUTONYMS[code])
                 for code, locale in LANGUAGES.items())
ENGLISH = EDITIONS[0]


def edition_of(notebook: Path) -> Edition:
    """The edition a notebook belongs to: a translation's when it sits in that edition's
    folder (``notebooks/zh_CN/``, its ``solutions/`` too), else English."""
    return next((edition for edition in EDITIONS[1:]
                 if edition.folder in notebook.parent.parts), ENGLISH)


def page_edition(page: str) -> Edition:
    """The edition of the page at site path ``page`` ("zh_CN/03_x.html": Chinese)."""
    return next((edition for edition in EDITIONS[1:]
                 if page.startswith(edition.folder + "/")), ENGLISH)


def _relative(target: str, page: str) -> str:
    """The link from the site path ``page`` to the site path ``target``."""
    return posixpath.relpath(target, posixpath.dirname(page) or ".")


def _root(page: str) -> str:
    """The way from the site path ``page`` to the site's top folder ("", "../")."""
    return "../" * page.count("/")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# nbconvert's lab template marks both error outputs and stderr streams with this MIME type.
STDERR_MARK = 'data-mime-type="application/vnd.jupyter.stderr"'


# --- README ---------------------------------------------------------------------------------

def binder_url(repository=REPOSITORY, ref=REF, folder: str = "") -> str | None:
    """JupyterLab on Binder (mybinder.org builds it from environment.yml) at the pinned
    release, opened at ``notebooks/`` (or its sub-folder ``folder``, e.g. "zh_CN"); None while
    the course names no published repository."""
    if repository is None or ref is None:
        return None
    from urllib.parse import quote

    found, owner, name = course.forge(repository)
    where = found.binder.format(owner=owner, name=name, ref=ref,
                                url=quote(course.check_repository(repository), safe=""))
    path = posixpath.join("notebooks", folder) if folder else "notebooks"
    return f"https://mybinder.org/v2/{where}?urlpath=lab/tree/{path}"


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
    colab = links and course.forge(repository)[0].colab  # Colab opens GitHub's notebooks only
    lines = ["| # | notebook | what you learn | minutes |" + (" open |" if colab else ""),
             "|---|---|---|---|" + ("---|" if colab else "")]
    for notebook in NOTEBOOKS:
        row = (f"| {notebook.filename[:2]} | `{notebook.filename}` | {notebook.summary} "
               f"| {notebook.minutes} |")
        if colab:
            url = colab_url(notebook.filename, repository=repository, ref=ref)
            row += f" [![Open In Colab]({COLAB_BADGE})]({url}) |"
        lines.append(row)
    lines.append("")
    if links:
        lines.append(f"The whole course in the browser, nothing to install: [![Binder]"
                     f"({BINDER_BADGE})]({binder_url(repository, ref)}) (Binder builds it from "
                     f"`environment.yml`). {'Both open' if colab else 'It opens'} the release "
                     f"`{ref}` of {repository}.")
    else:
        lines.append(UNPUBLISHED_NOTE)
    return "\n".join(lines)


BADGES_START, BADGES_END = "<!-- notebook table: start -->", "<!-- notebook table: end -->"
_INSTALL_MARK = '"google.colab" in sys.modules'
_SETTING = r'^{name}: str \| None = (None|"[^"\n]*")$'
# What pip builds the package from: a change here that HEAD lacks would not be installed.
PACKAGE_SOURCES = ("rope_lab", "pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in")


@dataclass(frozen=True)
class Publication:
    """What :func:`set_repository` did: the files it changed, the step it took (1: the
    settings and links written, 2: the install cells pinned, 3: nothing left to pin) and the
    commit the install cell installs (None before step 2)."""

    changed: list[Path]
    step: int
    package_commit: str | None


def set_repository(url: str, ref: str, root: Path = ROOT) -> Publication:
    """Publish the course at ``url`` (a repository on a known forge, see
    :data:`rope_lab.course.FORGES`), its links opening ``ref`` (a tag or a commit hash), its
    install cell installing the package of one commit, which no one can move. Two runs with a
    commit between them, since a commit cannot name itself:

    1. While :data:`~rope_lab.course.REPOSITORY` or :data:`~rope_lab.course.REF` say
       otherwise: writes them in ``rope_lab/course.py`` (and clears
       :data:`~rope_lab.course.PACKAGE_COMMIT`), the README's notebook table (Colab and
       Binder links) and the install cell that installs nothing yet. Commit that.
    2. Run again: the package of that commit (HEAD, which must record these settings and
       hold every change to the package) becomes what learners install:
       ``PACKAGE_COMMIT`` and every install cell name HEAD's archive. Commit, tag, push.
    3. Any later run with the same URL and REF pins nothing new; it puts the README and the
       install cells back in step if they were edited.

    Everything is read and checked before anything is written (the address, the ref, every
    notebook, the lines to rewrite, the Chinese cell's translation, for step 2 the commit);
    then the changed files are written all together or none (:func:`rope_lab._atomic.
    replace_all`). ValueError names the first problem, with nothing changed.
    """
    try:
        repository = course.check_repository(url)
        ref = course.check_ref(ref)
    except ValueError as error:
        raise ValueError(f"set_repository: {error}") from None
    settings = root / "rope_lab" / "course.py"
    text = settings.read_text(encoding="utf-8")
    current = _settings(text, settings)
    if (current["REPOSITORY"], current["REF"]) != (repository, ref):
        step, commit = 1, None
    elif current["PACKAGE_COMMIT"] is None:
        step, commit = 2, _package_commit(root, repository, ref)
    else:
        step, commit = 3, current["PACKAGE_COMMIT"]
    files = {}
    edited = _with_settings(text, {"REPOSITORY": repository, "REF": ref,
                                   "PACKAGE_COMMIT": commit})
    if edited != text:
        files[settings] = edited
    readme = root / "README.md"
    if readme.exists():
        old = readme.read_text(encoding="utf-8")
        new = readme_with_badges(old, repository, ref, readme)
        if new != old:
            files[readme] = new
    files.update(install_cell_edits(root, course.install_cell(repository, commit)))
    _atomic.replace_all(files)
    return Publication(list(files), step, commit)


def _settings(text: str, path: Path) -> dict:
    """REPOSITORY, REF and PACKAGE_COMMIT as course.py's lines set them."""
    found = {}
    for name in ("REPOSITORY", "REF", "PACKAGE_COMMIT"):
        lines = re.findall(_SETTING.format(name=name), text, flags=re.MULTILINE)
        if len(lines) != 1:
            raise ValueError(f"set_repository: {path} has no line '{name}: str | None = …' to "
                             "rewrite; expected one, as rope_lab/course.py has")
        found[name] = None if lines[0] == "None" else lines[0][1:-1]
    return found


def _with_settings(text: str, values: dict) -> str:
    for name, value in values.items():
        text = re.sub(_SETTING.format(name=name),
                      f"{name}: str | None = " + ("None" if value is None else f'"{value}"'),
                      text, count=1, flags=re.MULTILINE)
    return text


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise ValueError(f"set_repository: git is needed to pin the install cell at a commit "
                         f"({error})") from None
    if done.returncode:
        raise ValueError(f"set_repository: git {' '.join(args)} failed in {root}: "
                         f"{done.stderr.strip() or done.returncode}")
    return done.stdout


def _package_commit(root: Path, repository: str, ref: str) -> str:
    """HEAD, checked: it records ``repository`` and ``ref`` (step 1, committed) and the package
    in the working tree has nothing HEAD lacks (it would not be installed)."""
    commit = _git(root, "rev-parse", "--verify", "HEAD^{commit}").strip()
    committed = _settings(_git(root, "show", "HEAD:rope_lab/course.py"), root / "rope_lab" /
                          "course.py")
    if (committed["REPOSITORY"], committed["REF"]) != (repository, ref):
        raise ValueError(
            f"set_repository: HEAD ({commit[:12]}) does not record REPOSITORY={repository!r} and "
            f"REF={ref!r} yet: commit rope_lab/course.py (and the README and notebooks the "
            "first run changed), then run this again to pin the install cell at that commit")
    present = [name for name in PACKAGE_SOURCES if (root / name).exists()]
    changes = _git(root, "status", "--porcelain", "--untracked-files=all", "--", *present)
    if changes.strip():
        listed = ", ".join(line[3:] for line in changes.splitlines()[:5])
        raise ValueError(
            f"set_repository: the package has changes HEAD ({commit[:12]}) lacks ({listed}): the "
            "install cell installs HEAD's package without them; commit them first")
    return commit


def write_readme_badges(readme: Path, repository=REPOSITORY, ref=REF) -> bool:
    """Rewrite the README's block between the notebook-table markers; True if it changed."""
    text = readme.read_text(encoding="utf-8")
    edited = readme_with_badges(text, repository, ref, readme)
    if edited == text:
        return False
    _atomic.write_text(readme, edited)
    return True


def readme_with_badges(text: str, repository=REPOSITORY, ref=REF, where="README.md") -> str:
    """``text`` (a README) with its block between the notebook-table markers made anew."""
    start, end = text.find(BADGES_START), text.find(BADGES_END)
    if start < 0 or end < start:
        raise ValueError(f"{where} has no {BADGES_START} … {BADGES_END} block")
    return text[:start] + f"{BADGES_START}\n{readme_badges(repository, ref)}\n" + text[end:]


def install_cell_notebooks(root: Path = ROOT) -> list[Path]:
    """Every notebook that carries the install cell: the course, its solutions, and the
    browser tests' fixture."""
    return [*notebook_files(root / "notebooks", recursive=True),
            *notebook_files(root / "tests" / "browser")]


def place_install_cells(root: Path = ROOT, cell: str = COLAB_CELL) -> list[Path]:
    """Make ``cell`` (an English cell of :func:`rope_lab.course.install_cell`) the install cell
    of every notebook (:func:`install_cell_edits`), all notebooks or none; returns the
    notebooks changed."""
    return _atomic.replace_all(install_cell_edits(root, cell))


def install_cell_edits(root: Path = ROOT, cell: str = COLAB_CELL) -> dict[Path, str]:
    """The notebooks whose install cell is not ``cell`` yet, and their new text: ``cell`` in
    the notebook's language (a translation's folder, ``notebooks/zh_CN/``, gets
    :func:`~rope_lab.course.translate_install_cell`), right below its title (the first screen
    is the title and what you will learn). An existing install cell (a code cell among the
    first three that checks for ``google.colab``) is replaced, keeping its id. Every notebook
    is read first; one that cannot be read is a ValueError naming it."""
    import nbformat

    translated = {edition.language: course.translate_install_cell(cell, edition.language)
                  for edition in EDITIONS[1:]}
    edits = {}
    for path in install_cell_notebooks(root):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as error:  # noqa: BLE001 - JSON, schema or encoding: all say the same
            raise ValueError(f"{path.relative_to(root)} is not a notebook nbformat can read "
                             f"({type(error).__name__}: {str(error)[:200]}); fix it or restore "
                             "it (git checkout), then run this again; nothing was changed"
                             ) from None
        old = next((c for c in nb.cells[:3]
                    if c.cell_type == "code" and _INSTALL_MARK in c.source), None)
        cells = [c for c in nb.cells if c is not old]
        title = next((i for i, c in enumerate(cells[:2])
                      if c.cell_type == "markdown" and c.source.startswith("# ")), None)
        if title is None or old is None and "notebooks" not in path.relative_to(root).parts:
            continue  # not a course notebook, or a test fixture without an install cell
        language = next((edition.language for edition in EDITIONS[1:]
                         if edition.folder in path.relative_to(root).parts), ENGLISH.language)
        new = nbformat.v4.new_code_cell(translated.get(language, cell))
        if old is not None:
            new.id = old.id
        cells.insert(title + 1, new)
        if [c.source for c in cells] == [c.source for c in nb.cells]:
            continue
        nb.cells = cells
        edits[path] = nbformat.writes(nb) + "\n"
    return edits


def is_install_cell(cell) -> bool:
    return cell.cell_type == "code" and _INSTALL_MARK in cell.source


# --- which notebooks, in which order --------------------------------------------------------

def course_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """Notebooks of one folder to publish: the course map's order first, then any others, by
    name (the folder's own notebooks: ``notebooks/`` is the English edition only)."""
    in_map = [notebook_dir / n.filename for n in NOTEBOOKS]
    present = [path for path in in_map if path.exists()]
    others = [path for path in notebook_files(notebook_dir) if path not in in_map]
    return present + others


def book_notebooks(notebook_dir: Path = NOTEBOOK_DIR) -> list[Path]:
    """Every edition's notebooks (:func:`course_notebooks` of ``notebooks/`` and of each
    translation's folder, ``notebooks/zh_CN/``): what ``make book`` publishes."""
    return [path for edition in EDITIONS
            for path in course_notebooks(notebook_dir / edition.folder)]


def page_name(notebook: Path) -> str:
    """The site path of a notebook's page: ``notebooks/03_x.ipynb`` → ``03_x.html``,
    ``notebooks/zh_CN/03_x.ipynb`` → ``zh_CN/03_x.html``."""
    return edition_of(notebook).page(notebook.stem + ".html")


def _title(notebook: Path) -> str:
    """"03 · RoPE in two dimensions", in the current language (the catalog has the titles)."""
    for entry in NOTEBOOKS:
        if entry.filename == notebook.name:
            return f"{entry.filename[:2]} · {_(entry.title)}"
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
    duplicate = bool(images) and any(same_figure(images[-1], above) for above in shown_above)
    # whole sentences, in the current language (the edition being written)
    if not images:
        note = _("Interactive widget: run the notebook to use it; it has no static figure.")
    elif duplicate and settings:
        note = _("Interactive panel: run the notebook (JupyterLab, VS Code or Colab) to move "
                 "its controls. At its default settings ({settings}) it draws the figure "
                 "above.")
    elif duplicate:
        note = _("Interactive panel: run the notebook (JupyterLab, VS Code or Colab) to move "
                 "its controls. At its default settings it draws the figure above.")
    elif settings:
        note = _("Interactive panel: run the notebook (JupyterLab, VS Code or Colab) to move "
                 "its controls. Shown at {settings}.")
    else:
        note = _("Interactive panel: run the notebook (JupyterLab, VS Code or Colab) to move "
                 "its controls.")
    note = "*" + note.format(settings=", ".join(settings)) + "*"
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


def rewrite_links(page: str, pages: set[str], here: str = "index.html") -> str:
    """Point a page's links at the book's pages where there is one, else at the repository.

    ``here`` is the page's site path: its links are written relative to its source's folder,
    ``notebooks/`` for an English page, ``notebooks/zh_CN/`` for a Chinese one (``zh_CN/…``),
    as in the notebooks and the teaching guides. A Chinese notebook's link to an English one
    (a notebook not translated yet) leads to the English page.
    """
    folder = posixpath.dirname(here)

    def replace(match):
        # the file's path from the repository root
        path = posixpath.normpath(posixpath.join("notebooks", folder, match[1]))
        anchor = match[2] or ""
        source_folder, name = posixpath.split(path)
        if source_folder == "notebooks" or source_folder.startswith("notebooks/"):
            site_folder = source_folder.removeprefix("notebooks").strip("/")
            stem, suffix = posixpath.splitext(name)
            target = (f"{stem}.html" if suffix == ".ipynb" else
                      "teaching.html" if name == "TEACHING.md" else None)
            if target and posixpath.join(site_folder, target) in pages:
                return f'href="{_relative(posixpath.join(site_folder, target), here)}{anchor}"'
        if REPOSITORY is None or REF is None:  # nowhere online to point at: plain text
            return 'title="{}"'.format(html.escape(_("{path} in the course repository")
                                                   .format(path=path)))
        return f'href="{REPOSITORY}/blob/{REF}/{path}{anchor}"'

    return _HREF.sub(replace, page)


def language_switch(here: str, pages: set[str]) -> str:
    """Links from the page at site path ``here`` to the same page in every other edition of
    the book, or to that edition's index where the page has none (HTML, for a markdown cell
    or a page); "" when the book has one edition."""
    edition = page_edition(here)
    name = here.removeprefix(edition.folder + "/") if edition.folder else here
    links = []
    for other in EDITIONS:
        if other == edition or other.page("index.html") not in pages:
            continue
        target = other.page(name) if other.page(name) in pages else other.page("index.html")
        links.append(f'<a class="rope-lab-language" href="{_relative(target, here)}" '
                     f'hreflang="{other.html_lang}" lang="{other.html_lang}">'
                     f"{html.escape(other.label)}</a>")
    return " ".join(links)


def navigation(notebook: Path, order: list[Path], pages: set[str] = frozenset()) -> str:
    """A markdown line, in the current language: the language switch (when ``pages``, the
    book's site paths, has another edition), course map, previous and next page of ``order``
    (the notebook's edition), and Colab, at the notebook's path (``notebooks/zh_CN/…`` for a
    Chinese one)."""
    here = page_name(notebook)
    edition = edition_of(notebook)
    index = order.index(notebook)
    # looked up outside the f-strings, where the catalog's extractor sees them
    course_map, open_in_colab = _("Course map"), _("Open in Colab")
    parts = [f"[{course_map}]({_relative(edition.page('index.html'), here)})"]
    if index > 0:
        previous = order[index - 1]
        parts.insert(0, f"[← {_title(previous)}]({_relative(page_name(previous), here)})")
    if index + 1 < len(order):
        following = order[index + 1]
        parts.append(f"[{_title(following)} →]({_relative(page_name(following), here)})")
    colab = colab_url(edition.page(notebook.name))
    if notebook.name in {n.filename for n in NOTEBOOKS} and colab:
        parts.append(f"[{open_in_colab}]({colab})")
    switch = language_switch(here, pages)
    return (switch + " " if switch else "") + " · ".join(parts)


# --- building -------------------------------------------------------------------------------

def local_links(nb, pages: set[str], here: str = "index.html") -> None:
    """Point the outputs' links to a notebook (notebook 00's course map: its Colab link once
    the course is published, the notebook file until then) at its page of the book instead:
    a reader of the book stays in the book, and in the edition of ``here`` (the page's site
    path) where the notebook is translated, else on its English page."""
    edition = page_edition(here)
    replacements = {}
    for entry in NOTEBOOKS:
        html_name = page_name(Path(entry.filename))
        page = next((p for p in (edition.page(html_name), html_name) if p in pages), None)
        if page is None:
            continue
        links = {colab_url(entry.filename), colab_url(edition.page(entry.filename)),
                 entry.filename}
        for link in links - {None}:  # no Colab link while the course is not published
            replacements[link] = _relative(page, here)
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
                executed=None) -> str:
    """One notebook as a standalone HTML page (widgets frozen, links fixed), with the chrome
    in the current language; ``executed`` is the notebook run (:mod:`rope_lab.runner`),
    else it is shown as it is on disk. ``order`` is its edition's notebooks and ``pages`` the
    book's site paths."""
    import copy

    import nbformat
    from nbformat.v4 import new_markdown_cell

    here = page_name(notebook)
    nb = copy.deepcopy(executed) if executed is not None else nbformat.read(notebook,
                                                                              as_version=4)
    freeze_widgets(nb)
    local_links(nb, pages, here)
    # The Colab install cell does nothing for a reader of the static page.
    nb.cells = [cell for cell in nb.cells[:3] if not is_install_cell(cell)] + nb.cells[3:]
    nav = navigation(notebook, order, pages)
    nb.cells.insert(0, new_markdown_cell(nav))
    nb.cells.append(new_markdown_cell(nav))
    return _export(nb, _title(notebook), pages, here)


def _export(nb, title: str, pages: set[str], here: str) -> str:
    """``nb`` as the page at site path ``here``: nbconvert's lab template, ``lang`` set to
    the page's edition, MathJax and the font from the site's top folder, links fixed."""
    from nbconvert import HTMLExporter

    root = _root(here)
    exporter = HTMLExporter(template_name="lab", mathjax_url=root + MATHJAX_URL)
    body, _resources = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    # nbconvert's language_code takes ISO 639-1 only ("zh", not "zh-CN"), and older versions
    # have none: the page's <html> is written here.
    body = re.sub(r"<html\b[^>]*>", f'<html lang="{page_edition(here).html_lang}">', body,
                  count=1)
    return rewrite_links(_offline(body, root), pages, here)


def font_css(root: str = "") -> str:
    """The page's fonts: JupyterLab's stacks with the course's CJK font appended
    (:data:`CJK_CSS`, which loads :data:`CJK_FONT` from the site's top folder: ``root`` is
    the way there from the page, "../" for a page in ``zh_CN/``), and the book's own rules
    (:data:`BOOK_CSS`)."""
    css = CJK_CSS.read_text(encoding="utf-8")
    if root:
        css = css.replace(f'url("{CJK_FONT.name}")', f'url("{root}{CJK_FONT.name}")')
    return f"<style>\n{css}{_chinese_first(css)}{BOOK_CSS}</style>\n"


def _chinese_first(css: str) -> str:
    """A rule for Chinese pages (``lang="zh-CN"``): the prose stacks of ``css`` with the
    course's font first instead of last.

    Chromium on a machine without a CJK font draws the Chinese of medium and bold text
    (headings, **bold**) on a ``zh-CN`` page as empty boxes in ``system-ui``'s font instead
    of falling back to the next family; regular text and "en" pages are not affected. The
    font has CJK characters only, so Latin letters still come from the stack after it.
    """
    lines = []
    for variable in ("--jp-ui-font-family", "--jp-content-font-family"):
        stack = re.search(rf"{variable}:([^;]+);", css)[1].strip()
        stack = re.sub(rf',\s*"{CJK_FAMILY}"$', "", stack)
        lines.append(f'  {variable}: "{CJK_FAMILY}", {stack};')
    return "html:root:lang(zh) {\n" + "\n".join(lines) + "\n}\n"


# The language switch sits at the right of the navigation line; its 中文 (lang="zh-CN" on an
# English page) in the course's font first, as on a Chinese page (see _chinese_first).
BOOK_CSS = f""".rope-lab-language {{ float: right; margin-left: 1em; font-weight: bold; }}
.rope-lab-language:lang(zh) {{ font-family: "{CJK_FAMILY}", var(--jp-content-font-family); }}
"""

# jupyter-server-mathjax ships MathJax's STIX-Web fonts only (not its default TeX fonts):
# configured before MathJax.js loads, so it never asks for the missing ones (but see
# TEX_FONT_STAND_INS). MathJax's
# "MathJax_Blank" probe font is loaded from about:blank by default, which Chromium refuses
# from a page opened from disk, with a console error on every page; a local() source that
# no machine has fails the same way (MathJax only needs it not to load), in silence.
MATHJAX_FONTS = """<script>window.MathJax = {"HTML-CSS": {availableFonts: ["STIX-Web"],
  preferredFont: "STIX-Web", webFont: "STIX-Web", imageFont: null,
  styles: {"@font-face": {"font-family": "MathJax_Blank",
                          src: "local('rope_lab no such font')"}}}};</script>
"""


def _offline(page: str, root: str = "") -> str:
    """Make a page work with no network (``root``: the way from the page to the site's top
    folder, see :func:`font_css`).

    Drops the template's require.js (no output needs it once widgets are frozen; it would
    be a request to a CDN on every view) and adds the CJK web font. MathJax already points
    at the site's own copy (:data:`MATHJAX_URL`).
    """
    page = re.sub(r'<script src="[^"]*require(?:\.min)?\.js"></script>\s*', "", page)
    mathjax = f'<script src="{root}{MATHJAX_URL}"'
    page = page.replace(mathjax, MATHJAX_FONTS + mathjax, 1)
    return page.replace("</head>", font_css(root) + "</head>", 1)


def render_markdown_page(markdown: str, title: str, pages: set[str],
                         here: str = "teaching.html") -> str:
    """A markdown document (e.g. the teaching guide) as the page at site path ``here``, in
    the same style: the course map and the language switch above it."""
    from nbformat.v4 import new_markdown_cell, new_notebook

    switch = language_switch(here, pages)
    course_map = _("Course map")
    nb = new_notebook(cells=[
        new_markdown_cell((switch + " " if switch else "") + f"[{course_map}](index.html)"),
        new_markdown_cell(markdown)])
    return _export(nb, title, pages, here)


def index_page(order: list[Path], extra_pages: dict[str, str], *,
               edition: Edition = ENGLISH, pages: set[str] = frozenset(),
               translated: frozenset[str] = frozenset()) -> str:
    """An edition's course map, in the current language: every notebook of NOTEBOOKS,
    linked to its page in ``order`` (the edition's notebooks), else to its English page
    (not translated yet), else marked as not in this build. ``translated`` names the
    notebooks that do have a twin in the edition (files, not pages): one left out of a
    partial build is "not in this build", not "not translated". ``extra_pages`` maps site
    paths to (English) labels; ``pages`` (the book's site paths) gives the language switch."""
    here = edition.page("index.html")
    have = {path.name: path for path in order}
    # the words, looked up outside the f-strings (where the catalog's extractor sees them)
    # A notebook of the map that is not in ``order`` was left out of this build (``python -m
    # rope_lab.book --out DIR some.ipynb``); the file exists (a test checks the map's files).
    untranslated, left_out = _("(in English: not translated yet)"), _("(not in this build)")
    rows = []
    for entry in NOTEBOOKS:
        title = html.escape(_(entry.title))
        english = page_name(Path(entry.filename))
        if entry.filename in have:
            title = f'<a href="{_relative(page_name(have[entry.filename]), here)}">{title}</a>'
        elif edition != ENGLISH and english in pages and entry.filename not in translated:
            title = (f'<a href="{_relative(english, here)}" hreflang="en">{title}</a> '
                     f"<em>{html.escape(untranslated)}</em>")
        else:
            title += f" <em>{html.escape(left_out)}</em>"
        minutes = html.escape(_("{minutes} min").format(minutes=entry.minutes))
        rows.append(f"<tr><td>{entry.filename[:2]}</td><td>{title}</td>"
                    f"<td>{minutes}</td><td>{html.escape(_(entry.summary))}</td></tr>")
    for path in order:
        if path.name not in {n.filename for n in NOTEBOOKS}:
            rows.append(f'<tr><td></td><td><a href="{_relative(page_name(path), here)}">'
                        f"{html.escape(path.stem)}</a></td><td></td><td></td></tr>")
    links = "".join(f'<li><a href="{_relative(name, here)}">{html.escape(_(label))}</a></li>'
                    for name, label in extra_pages.items())
    switch = language_switch(here, pages)
    intro = html.escape(_(
        "The notebooks of the course, executed, with their figures. The sliders only move "
        "when you run a notebook yourself (JupyterLab, VS Code or Colab{where_online}); here "
        "each panel shows its default setting.")).format(where_online=_where_online(edition))
    # Translators: the heading of the index's column of minutes per notebook
    minutes_heading = _("time")
    columns = ("#", _("notebook"), minutes_heading, _("what you learn"))
    headings = "".join(f"<th>{html.escape(heading)}</th>" for heading in columns)
    root = _root(here)
    title = html.escape(_("rope_lab: position encoding and RoPE"))
    heading = html.escape(_("rope_lab: position encoding and RoPE, interactively"))
    return f"""<!DOCTYPE html>
<html lang="{edition.html_lang}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: var(--jp-content-font-family); max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .4rem .6rem; text-align: left;
          vertical-align: top; }}
td:nth-child(3) {{ white-space: nowrap; }}
</style>
{font_css(root)}</head><body>
{f"<p>{switch}</p>" if switch else ""}
<h1>{heading}</h1>
<p>{intro}</p>
<table><thead><tr>{headings}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<ul>{links}</ul>
</body></html>
"""


def _where_online(edition: Edition = ENGLISH) -> str:
    """The index page's pointer to the published course (HTML, in the current language;
    Binder opens the edition's folder; nothing while the course names no repository)."""
    if REPOSITORY is None or REF is None:
        return ""
    return html.escape(_("; source: {repository} at {ref}, or in the browser on {binder}")).format(
        repository=f'<a href="{REPOSITORY}">{REPOSITORY}</a>', ref=html.escape(REF),
        binder=f'<a href="{binder_url(REPOSITORY, REF, edition.folder)}">Binder</a>')


# --- the one gate for HTML ----------------------------------------------------------------------

# What a page's body may hold: ammonia's default tags (text, lists, tables, images, links)
# and the lab template's own (main, section). Everything else is dropped, the tags below
# with their content (a script's code or a frame's document must not show up as text).
_PAGE_TAGS = {"main", "section", "article", "header", "footer", "nav", "aside", "figure",
              "figcaption", "details", "summary", "caption"}
_DROPPED_WITH_CONTENT = {"script", "style", "iframe", "frame", "frameset", "object", "embed",
                         "applet", "noscript", "template", "svg", "math", "textarea", "select",
                         "button", "form", "noembed", "noframes", "title", "xmp"}
_PAGE_ATTRIBUTES = {"*": {"class", "id", "tabindex", "title", "lang", "dir", "style"},
                    "a": {"href", "hreflang", "name"}, "img": {"src", "alt", "width", "height"},
                    "td": {"colspan", "rowspan", "align"},
                    "th": {"colspan", "rowspan", "align", "scope"}, "ol": {"start"}}
# Inline styles (pygments' highlighting in rope_lab.show_source, pandas tables): looks only.
# No position (a box drawn over the page), no url() (a request, and old browsers ran
# javascript: there).
_STYLE_PROPERTIES = {"color", "background", "background-color", "font-weight", "font-style",
                     "font-family", "font-size", "line-height", "text-align",
                     "text-decoration", "vertical-align", "white-space", "border",
                     "border-collapse", "padding", "margin", "width", "max-width", "height"}
_IMAGE_DATA = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*\Z")
_LOADS_OR_RUNS = re.compile(r"url\s*\(|expression\s*\(|\\|@import|javascript:", re.I)


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """nh3's last word on an attribute the allow-list let through: a data: URL only as an
    image's PNG, JPEG, GIF or WebP; a style that neither loads nor runs anything."""
    if attribute in ("href", "src") and value.strip().lower().startswith("data:"):
        keep = tag == "img" and attribute == "src" and _IMAGE_DATA.match(value.strip())
        return value if keep else None
    if attribute == "style" and _LOADS_OR_RUNS.search(value):
        return None
    return value


def sanitize_html(fragment: str) -> str:
    """``fragment`` with only what a book page may show (see :func:`sanitize_page`)."""
    import nh3

    return nh3.clean(fragment, tags=(nh3.ALLOWED_TAGS | _PAGE_TAGS) - _DROPPED_WITH_CONTENT,
                     clean_content_tags=_DROPPED_WITH_CONTENT, attributes=_PAGE_ATTRIBUTES,
                     generic_attribute_prefixes={"data-"},
                     url_schemes={"http", "https", "mailto", "data"},
                     attribute_filter=_keep_attribute, filter_style_properties=_STYLE_PROPERTIES,
                     link_rel=None, strip_comments=True)


def sanitize_page(page: str) -> str:
    """The book's one gate for HTML: ``page`` (a whole document this module made) with its
    body through an allow-list sanitizer (:func:`sanitize_html`: nh3, Rust's ammonia).

    The head and the ``<body>`` tag are the book's template (nbconvert's lab template, which
    escapes the title, and this module's MathJax, font and CSS); everything between
    ``<body …>`` and ``</body>`` came from a notebook, its outputs or a translation and keeps
    no script, event handler, ``javascript:`` or non-image ``data:`` URL, frame, form,
    ``<base>`` or ``<meta>``, and no style that loads anything.
    """
    start = re.search(r"<body\b[^>]*>", page)
    end = page.rfind("</body>")
    if start is None or end < start.end():
        raise ValueError("sanitize_page: expected a whole page with one <body> … </body>")
    return page[:start.end()] + sanitize_html(page[start.end():end]) + page[end:]


def _publish(path: Path, page: str) -> None:
    """Write one page of the book, through the gate."""
    _atomic.write_text(path, sanitize_page(page))


def build(out_dir: Path = BOOK_DIR, notebooks: list[Path] | None = None, *,
          run: bool = True, teaching: Path | None = NOTEBOOK_DIR / "TEACHING.md",
          log=print, cache: Path | None = runner.CACHE_DIR, progress: bool = False,
          workers: int | None = None) -> list[Path]:
    """Write the site into ``out_dir`` (emptied first); return the notebook pages written.

    With ``run``, every notebook is executed first by :func:`rope_lab.runner.run_notebooks`
    (``workers`` at a time, a run taken from ``cache`` where the notebook and the package
    are unchanged since it was made; ``cache=None`` runs all).

    ``notebooks`` (default :func:`book_notebooks`, every edition) may mix editions: each
    notebook goes to its edition's folder (:func:`edition_of`). The English index and the
    claims page are always written; a translation gets its folder, its index, its claims
    page and its teaching guide (``teaching``'s twin in its folder,
    ``notebooks/zh_CN/TEACHING.md``) when at least one of its notebooks is published. Each
    edition is written in its language.
    """
    order = list(notebooks) if notebooks is not None else book_notebooks()
    editions = {edition: [path for path in order if edition_of(path) == edition]
                for edition in EDITIONS}
    editions = {edition: listed for edition, listed in editions.items()
                if listed or edition == ENGLISH}
    pages = {page_name(path) for path in order} | {edition.page("claims.html")
                                                    for edition in editions}
    extra, guides = {}, {}
    for edition in editions:
        pages.add(edition.page("index.html"))
        guide = teaching.parent / edition.folder / teaching.name if teaching else None
        extra[edition] = {}
        if guide is not None and guide.exists():
            guides[edition] = guide
            extra[edition][edition.page("teaching.html")] = N_("Teaching guide")
            pages.add(edition.page("teaching.html"))
        # The claims inventory in each edition's language (the posts' quotes as written).
        extra[edition][edition.page("claims.html")] = N_("Claims of the source posts")
    mathjax = mathjax_source()  # before anything is deleted: fail early, say what to install
    executed = {}
    if run:
        log(f"running {len(order)} notebooks")
        executed = {result.path: result.notebook for result in runner.run_notebooks(
            order, workers=workers, cache=cache, progress=progress)}
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    copy_offline_assets(out_dir, mathjax)
    written = []
    for edition, listed in editions.items():
        (out_dir / edition.folder).mkdir(parents=True, exist_ok=True)
        with using_language(edition.language):
            for notebook in listed:
                log(f"rendering {page_name(notebook)}")
                target = out_dir / page_name(notebook)
                _publish(target, render_page(notebook, listed, pages,
                                             executed=executed.get(Path(notebook))))
                written.append(target)
            if edition in guides:
                here = edition.page("teaching.html")
                _publish(out_dir / here, render_markdown_page(
                    guides[edition].read_text(encoding="utf-8"), _("Teaching guide"), pages,
                    here))
            # The claims inventory gets its own page: what the course checked.
            from rope_lab.claims import claims_markdown

            lines = None
            if edition != ENGLISH:  # the check lines as the translated notebooks print them
                from rope_lab.translations.catalogs import check_lines

                lines = check_lines()
            title = _("Claims of the source posts")
            _publish(out_dir / edition.page("claims.html"), render_markdown_page(
                f"# {title}\n\n" + claims_markdown(lines), title, pages,
                edition.page("claims.html")))
            # twins on disk of the English notebooks built (those left out are still there)
            translated = frozenset(path.name for path in editions[ENGLISH]
                                   if (path.parent / edition.folder / path.name).is_file())
            _publish(out_dir / edition.page("index.html"), index_page(
                listed, extra[edition], edition=edition, pages=pages, translated=translated))
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


# MathJax's assistive MathML (hidden text for screen readers) is styled by its NativeMML
# output, which names MathJax's TeX fonts for the letter variants (double-struck \mathbb,
# script, fraktur, calligraphic); jupyter-server-mathjax ships STIX-Web only, so a page with
# 05's 𝔼 logged net::ERR_FILE_NOT_FOUND for TeX/otf/MathJax_AMS-Regular.otf. The STIX-Web
# font with the same letters stands in under each name asked for (browsers read a font by
# its content, not its file name), and no page asks for a file the site lacks.
TEX_FONT_STAND_INS = {
    "MathJax_AMS-Regular.otf": "STIXMathJax_DoubleStruck-Regular.woff",
    "MathJax_Script-Regular.otf": "STIXMathJax_Script-Regular.woff",
    "MathJax_Fraktur-Regular.otf": "STIXMathJax_Fraktur-Regular.woff",
    "MathJax_Fraktur-Bold.otf": "STIXMathJax_Fraktur-Bold.woff",
    "MathJax_Caligraphic-Regular.otf": "STIXMathJax_Script-Italic.woff",
    "MathJax_Caligraphic-Bold.otf": "STIXMathJax_Script-BoldItalic.woff",
}


def copy_offline_assets(out_dir: Path, mathjax: Path) -> None:
    """MathJax (without its 3.5 MB of screen-reader maps) and the CJK font, into the site."""
    shutil.copytree(mathjax, out_dir / MATHJAX_DIR, copy_function=_atomic.copy_file,
                    ignore=shutil.ignore_patterns("mathmaps", "*.py", "__pycache__"))
    stix = out_dir / MATHJAX_DIR / "fonts" / "HTML-CSS" / "STIX-Web" / "woff"
    tex = out_dir / MATHJAX_DIR / "fonts" / "HTML-CSS" / "TeX" / "otf"
    tex.mkdir(parents=True, exist_ok=True)
    for name, stand_in in TEX_FONT_STAND_INS.items():
        _atomic.copy_file(stix / stand_in, tex / name)
    if not CJK_FONT.exists():
        raise MissingBookDependency(f"{CJK_FONT} is missing: run `make cjk-font`")
    _atomic.copy_file(CJK_FONT, out_dir / CJK_FONT.name)


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


_CSS_URL = re.compile(r'url\("(?!https?:|data:|//)([^"#?]+)"\)')


# What must never reach a page's body (sanitize_page removes it; problems checks again).
_UNSAFE = re.compile(r"<(?:script|iframe|frame|object|embed|form|base|meta)\b"
                     r"|<[^>]*\son[a-z]+\s*=|<[^>]*javascript:", re.I)


def problems(out_dir: Path, notebooks: list[Path]) -> list[str]:
    """What is wrong with a built book, in every edition: missing pages, error outputs,
    broken local links, a file a page loads that is not there (a script, the font its CSS
    names), a page not marked with its edition's language, or without the language switch
    while the book has two editions, or a script, frame or event handler in a page's body."""
    found = []
    if not (out_dir / "index.html").exists():
        found.append("index.html is missing")
    for notebook in notebooks:
        if not (out_dir / page_name(notebook)).exists():
            found.append(f"{edition_of(notebook).page(notebook.name)}: "
                         f"no page {page_name(notebook)}")
    editions = [edition for edition in EDITIONS
                if (out_dir / edition.page("index.html")).exists()]
    for edition in editions:
        for page in sorted((out_dir / edition.folder).glob("*.html")):
            name = page.relative_to(out_dir).as_posix()
            text = page.read_text(encoding="utf-8")
            if STDERR_MARK in text:
                found.append(f"{name}: shows an error or stderr output")
            for target in _LOCAL_HREF.findall(text):
                if not (page.parent / html.unescape(target)).exists():
                    found.append(f"{name}: broken link {target}")
            for target in _CSS_URL.findall(text):
                if not (page.parent / html.unescape(target)).exists():
                    found.append(f"{name}: loads a missing file {target}")
            if not re.search(rf'<html[^>]*\slang="{re.escape(edition.html_lang)}"', text):
                found.append(f'{name}: not marked lang="{edition.html_lang}"')
            if len(editions) > 1 and 'class="rope-lab-language"' not in text:
                found.append(f"{name}: no language switch")
            body = text[text.find("<body"):]
            if unsafe := sorted(set(_UNSAFE.findall(body))):
                found.append(f"{name}: the body holds {unsafe} (not through sanitize_page?)")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rope_lab.book", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to publish (default: every notebook in notebooks/ "
                             "and in each translation's folder, notebooks/zh_CN/); one in "
                             "notebooks/zh_CN/ goes to the Chinese edition")
    parser.add_argument("--out", type=Path, default=BOOK_DIR, help="output folder")
    parser.add_argument("--no-cache", action="store_true",
                        help="run every notebook, even one whose run is in build/executed/ "
                             "(kept there while the notebook and the package are unchanged)")
    parser.add_argument("--badges", action="store_true",
                        help="print the README's notebook table with Colab badges and stop")
    parser.add_argument("--set-repository", metavar="URL",
                        help="publish the course at URL (https://github.com/OWNER/NAME, or on "
                             "gitlab.com or codeberg.org), its links at --ref: rewrite the "
                             "README, rope_lab/course.py and every install cell; run twice, "
                             "committing between (the second run pins the install cell at "
                             "that commit)")
    parser.add_argument("--ref", help="with --set-repository: the tag (or commit hash) that "
                                      "Colab and Binder open and the install cell installs")
    parser.add_argument("--install-cells", action="store_true",
                        help="put rope_lab.course.COLAB_CELL (in Chinese in notebooks/zh_CN/) "
                             "below every notebook's title (replacing the install cell there) "
                             "and the README's table in step with it, then stop")
    args = parser.parse_args(argv)
    if args.badges:
        print(readme_badges())
        return 0
    if args.install_cells:
        readme = ROOT / "README.md"
        try:  # every notebook and the README read and checked first, then all or none written
            files = install_cell_edits(ROOT)
            old = readme.read_text(encoding="utf-8")
            if (new := readme_with_badges(old, where=readme)) != old:
                files[readme] = new
            changed = _atomic.replace_all(files)
        except (ValueError, OSError) as error:
            print(f"book: {error}", file=sys.stderr)
            return 2
        for path in changed:
            print(f"book: rewrote {path.relative_to(ROOT)}")
        print(f"book: {len(changed)} file(s) rewritten")
        return 0
    if args.set_repository or args.ref:
        if not (args.set_repository and args.ref):
            print("book: --set-repository URL needs --ref TAG (a release to pin: a tag or a "
                  "commit hash), and --ref needs --set-repository", file=sys.stderr)
            return 2
        try:
            done = set_repository(args.set_repository, args.ref)
        except (ValueError, OSError) as error:  # OSError: a full disk; nothing was changed
            print(f"book: {error}", file=sys.stderr)
            return 2
        for path in done.changed:
            print(f"book: rewrote {path.relative_to(ROOT)}")
        where = f"{course.check_repository(args.set_repository)} at {args.ref}"
        if done.step == 1:
            print(f"book: step 1 of 2: {len(done.changed)} file(s) now point at {where}; the "
                  "install cells install nothing yet. Commit them (git commit -am 'Publish "
                  f"at {args.ref}'), then run the same command again: it pins the install "
                  "cell at that commit (a commit cannot name itself)")
            return 0
        then = ("commit and push" if course.is_commit(args.ref) else
                f"commit, tag that commit {args.ref} (git tag {args.ref}) and push the tag")
        if (ROOT / "notebooks" / "zh_CN").exists():
            then += "; `make translations` puts the links into notebooks/zh_CN/README.md"
        step = "step 2 of 2" if done.step == 2 else "already published"
        print(f"book: {step}: {len(done.changed)} file(s) changed; the course points at "
              f"{where} and every install cell installs the package of commit "
              f"{done.package_commit}; {then}")
        return 0
    order = args.notebooks or book_notebooks()
    if not order:
        print("no notebooks found in notebooks/; nothing to publish", file=sys.stderr)
        return 1
    return build_and_report("book", build, problems, args.out, order, no_cache=args.no_cache,
                            written="notebook page(s)")


def build_and_report(command: str, build_site, find_problems, out: Path, order: list[Path], *,
                     no_cache: bool, written: str) -> int:
    """``make book``'s and ``make slides``' last step: build the site (runs from
    build/executed/ unless ``no_cache``), print every problem found in it and one summary
    line; returns the exit status (1 when the build could not run or found a problem)."""
    try:
        build_site(out, order, progress=True, cache=None if no_cache else runner.CACHE_DIR)
    except MissingBookDependency as error:
        print(f"{command}: {error}", file=sys.stderr)
        return 1
    found = find_problems(out, order)
    for problem in found:
        print(f"{command}: {problem}", file=sys.stderr)
    print(f"{command}: {len(order)} {written} in {out}"
          + (f", {len(found)} problem(s)" if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
