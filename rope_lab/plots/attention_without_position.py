"""Figures of notebook 01 attention without position."""

from __future__ import annotations

from rope_lab.i18n import N_, get_language
from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    SEQUENTIAL_CMAP,
    course_style,
    new_figure,
    role,
)


@course_style
def attention_weights(weights, labels, titles, *, suptitle: str = N_("Attention weights"),
                      causal: bool = False):
    """Heatmaps of attention weights side by side, one per sentence, values written in.

    Args:
        weights: list of ``(seq, seq)`` tensors (row = query, column = key).
        labels: list of token lists, one per heatmap. A Chinese character of the course's
            examples (:data:`PINYIN`) is written with its pinyin below it in the English
            edition, and alone in the Chinese one (the course's CJK font draws both).
        titles: one title per heatmap.
        causal: the weights come from a causal mask: the cells above the diagonal (a key
            after its query) are not weights at all, so they are drawn hatched grey with no
            number, not as a dark "0.00" like a real small weight. They must be 0.

    Data: ``fig.axes[i].images[0].get_array()`` is ``weights[i]`` (masked cells masked).
    """
    import matplotlib as mpl
    import numpy as np
    from matplotlib.patches import Rectangle

    count = len(weights)
    figure, axes = new_figure(1, count, width=3.6 * count + 0.8, height=3.8)
    # Square heatmaps: "compressed" lays them out in one pass (plain constrained layout
    # needs a second draw to settle, and the first one cut the "key" labels off).
    figure.set_layout_engine("compressed")
    axes = [axes] if count == 1 else list(axes)
    cmap = mpl.colormaps[SEQUENTIAL_CMAP].with_extremes(bad="white")
    for ax, matrix, tokens, title in zip(axes, weights, labels, titles, strict=True):
        matrix = matrix.detach().cpu().float()
        hidden = np.triu(np.ones(matrix.shape, dtype=bool), k=1) if causal else \
            np.zeros(matrix.shape, dtype=bool)
        if causal and bool((matrix.numpy()[hidden] != 0).any()):
            raise ValueError("attention_weights(causal=True): the weights above the diagonal "
                             "must be 0 (masked); got nonzero ones — were they made causal?")
        image = ax.imshow(np.ma.masked_array(matrix.numpy(), hidden), cmap=cmap, vmin=0.0,
                          vmax=1.0)
        for (row, col), value in _cells(matrix):
            if hidden[row, col]:
                ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, facecolor="0.92",
                                       edgecolor=role("context"), hatch="///", lw=0))
                continue
            ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=12,
                    color="white" if value < 0.6 else "black")
        ticks = range(len(tokens))
        names = [_token_label(token) for token in tokens]
        ax.set_xticks(ticks, names)
        ax.set_yticks(ticks, names)
        ax.grid(False)
        ax.set(title=_(title), xlabel=_("key"), ylabel=_("query"))
    figure.colorbar(image, ax=axes, shrink=0.8, label=_("weight"))
    # the note short enough for one heatmap's 4.4 in
    figure.suptitle(_(suptitle) + (_("\n(hatched: masked, a key after its query)")
                                   if causal else ""))
    return figure


# The characters of notebook 01's sentences (我爱你, 求关注) and their pinyin: an English reader
# gets the sound with the character, a Chinese reader the character alone.
PINYIN = {"我": "wǒ", "爱": "ài", "你": "nǐ", "求": "qiú", "关": "guān", "注": "zhù"}


def _token_label(token: str) -> str:
    if token in PINYIN and get_language() == "en":
        return f"{token}\n{PINYIN[token]}"
    return token


def _cells(matrix):
    rows, cols = matrix.shape
    return (((r, c), float(matrix[r, c])) for r in range(rows) for c in range(cols))
