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

    Notebooks call this instead of copying code, so what a student reads is what runs. In a
    translated edition the docstring is shown in the course's language
    (:func:`translated_docstring`); the code is the same.
    """
    try:
        source = inspect.getsource(obj)
        where = f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
    except (TypeError, OSError) as error:
        raise TypeError(
            f"show_source needs a function, class or module defined in Python source, "
            f"got {obj!r}"
        ) from error
    text = f"# {_short_path(where)}\n{translated_docstring(source)}"
    if _in_notebook():
        from IPython.display import HTML, display
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        formatter = HtmlFormatter(noclasses=True, style="default")
        display(HTML(highlight(text, PythonLexer(), formatter)))
    else:
        print(text)


def translated_docstring(source: str) -> str:
    """``source`` (one function's or class's code) with its docstring in the course's
    language, indented as the original: in the Chinese edition :func:`show_source` shows the
    same code with the explanation a learner reads translated. The package catalog holds
    the docstrings of every object a notebook shows (:mod:`rope_lab.translations.catalogs`)."""
    import ast
    import textwrap

    from rope_lab.i18n import _, get_language

    if get_language() == "en":
        return source
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    definition = tree.body[0] if tree.body else None
    body = getattr(definition, "body", None)
    if not body or not isinstance(body[0], ast.Expr) or not (
            isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
        return source
    english = inspect.cleandoc(body[0].value.value)
    translated = _(english)
    if translated == english:
        return source
    lines = source.splitlines(keepends=True)
    first, last = body[0].lineno - 1, body[0].end_lineno  # the docstring's lines
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    new = translated.splitlines()
    docstring = [f'{indent}"""{new[0]}'] + [f"{indent}{line}".rstrip() for line in new[1:]]
    docstring = "\n".join(docstring) + ("\n" + indent if len(new) > 1 else "") + '"""\n'
    return "".join(lines[:first]) + docstring + "".join(lines[last:])


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


def _translate_errors_in_notebook() -> None:
    """In a notebook of a translated edition, show the package's English errors with their
    translation as a note (:func:`rope_lab.i18n.errors.show_translated`); in English, or
    outside IPython, nothing changes."""
    from rope_lab.i18n import get_language

    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    if get_language() == "en":
        shell.set_custom_exc((), None)
        return
    from rope_lab.i18n.errors import show_translated

    shell.set_custom_exc((ValueError, TypeError, IndexError), show_translated)


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
        _translate_errors_in_notebook()
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
