"""Small helpers the notebooks share: pick a device, seed everything, show real source."""

from __future__ import annotations

import inspect
import random

import torch


def default_device() -> torch.device:
    """The best device available here: CUDA, then Apple's MPS, then the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and torch so a notebook prints the same numbers every run."""
    import numpy as np

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r} of type {type(seed).__name__}")
    if not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an int in [0, 2^32) (NumPy's range), got {seed}")
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 — seeds code that uses the legacy global RNG
    torch.manual_seed(seed)


def show_source(obj) -> None:
    """Print the real source of a function or class from the package, highlighted.

    Notebooks call this instead of copying code, so what a student reads is what runs.
    """
    try:
        source = inspect.getsource(obj)
        where = f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
    except (TypeError, OSError) as error:
        raise TypeError(
            f"show_source needs a function, class or module defined in Python source, "
            f"got {obj!r}"
        ) from error
    text = f"# {_short_path(where)}\n{source}"
    if _in_notebook():
        from IPython.display import HTML, display
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        formatter = HtmlFormatter(noclasses=True, style="default")
        display(HTML(highlight(text, PythonLexer(), formatter)))
    else:
        print(text)


def _short_path(where: str) -> str:
    marker = "rope_lab/"
    return where[where.rfind(marker):] if marker in where else where


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


def setup_notebook(seed: int = 0, language: str | None = None) -> torch.device:
    """The setup cell of every notebook: seed, show figures inline, print the environment.

    ``language`` ("en" or "zh") is the language of the package's messages (the ✔/✘ verdict
    lines …): the Chinese notebooks pass ``language="zh"``; left out, it stays as it was
    (English, or the ``ROPE_LAB_LANG`` environment variable). See :mod:`rope_lab.i18n`.

    Returns the device the notebook will use.
    """
    if language is not None:
        from rope_lab.i18n import normalize_language, set_language

        set_language(normalize_language(language))
    seed_everything(seed)
    if _in_notebook():
        # Figures are plain matplotlib Figures (no pyplot); ask IPython to show them as PNG.
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("png")
    device = default_device()
    from rope_lab._version import __version__
    from rope_lab.i18n import _

    print(_("rope_lab {version} · torch {torch} · device {device} · seed {seed}").format(
        version=__version__, torch=torch.__version__, device=device, seed=seed))
    return device
