"""Figures of notebook 12: the position-scheme grid of :mod:`rope_lab.experiments.position_schemes`.

Every figure reads a results dictionary (``position_schemes.load_results()``) and draws the
mean over seeds as a line and the range over seeds (min to max) as a vertical bar, a band or
one dot per seed: a difference smaller than that range is not one this experiment can see.
Colours keep the course's meanings (:data:`rope_lab.plots.style.ROLE_COLOURS`); full-strength
range bars rather than pale bands keep every pair apart for a deuteranope.
"""

from __future__ import annotations

import numpy as np

from rope_lab.experiments.names import NAMES as VARIANT_NAMES
from rope_lab.experiments.names import SHORT_NAMES
from rope_lab.i18n import N_
from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    ROLE_COLOURS,
    SEQUENTIAL_CMAP,
    course_style,
    log_ticks,
    new_figure,
    one_two_five,
    readable,
    shades,
)

WIDTH = 9.2  # inches at 90 dpi: 828 px, 846 px with the notebook's tight-bbox padding
TEXT = 12  # points at 90 dpi = 15 px, above the 14 px projector floor

# panel title → variants (the first line of a panel is RoPE 1e4 from panel 2 on: the
# comparison every 2024–2026 variant is read against)
PANELS = {
    N_("2021–2023 encodings"): ("none", "learned", "sinusoidal", "alibi", "rope"),
    N_("RoPE + zero-shot scaling"): ("rope", "rope+linear", "rope+ntk", "rope+dynamic",
                                     "rope+yarn"),
    "base 1e4 → 5e5": ("rope", "rope-5e5"),  # as the notebook writes bases; base stays base
    N_("p-RoPE (Gemma 4)"): ("rope", "p-rope-0.75", "p-rope-0.25"),
    N_("rotate less (NeoX, Llama 4)"): ("rope", "partial-25", "nope-hybrid"),
    N_("local/global (Gemma 3)"): ("rope", "local-global", "local-global-1e4"),
}

_DARK, _LIGHT = shades("rope", 2)  # RoPE variants: darker and lighter than RoPE's blue
# variant → (direct label, colour, line style). Colours keep the course's meanings
# (plots.style.ROLE_COLOURS): RoPE blue, added positions orange, ALiBi purple, scaled RoPE
# green, no position grey; items of one role differ by line style and their label. The
# labels are the experiments' short names (rope_lab.experiments.names, English); the
# figures show them in the course's language.
_COLOURS = {
    "none": (ROLE_COLOURS["context"], "-"),
    "learned": (ROLE_COLOURS["absolute"], "-"),
    "sinusoidal": (ROLE_COLOURS["absolute"], "--"),
    "alibi": (ROLE_COLOURS["bias"], "-"),
    "rope": (ROLE_COLOURS["rope"], "-"),
    "rope+linear": (ROLE_COLOURS["scaled"], ":"),
    "rope+ntk": (ROLE_COLOURS["scaled"], "--"),
    "rope+dynamic": (ROLE_COLOURS["scaled"], "-."),
    "rope+yarn": (ROLE_COLOURS["scaled"], "-"),
    "rope-5e5": (_DARK, "--"),
    "p-rope-0.75": (_DARK, "--"),
    "p-rope-0.25": (_LIGHT, "-."),
    "partial-25": (_DARK, "--"),
    "nope-hybrid": (_LIGHT, "-."),
    "local-global": (_DARK, "--"),
    "local-global-1e4": (_LIGHT, "-."),
}
STYLE = {variant: (SHORT_NAMES[variant], *look) for variant, look in _COLOURS.items()}
# variant → its full name, for titles (the one table of names: rope_lab.experiments.names)
NAMES = VARIANT_NAMES


def _owner(results, variant):
    return results["ablations"][variant]["scheme"] if variant in results["ablations"] else variant


def seed_matrix(results: dict, variant: str, task: str, metric: str) -> np.ndarray:
    """``(seeds, multiples)`` array of ``metric`` for ``variant`` on ``task``."""
    scheme = _owner(results, variant)
    return np.array([[results["units"][f"{scheme}|{seed}"][task][variant][metric][str(k)]
                      for k in results["config"]["multiples"]]
                     for seed in results["config"]["seeds"]], dtype=float)


def _direct_labels(axis, ends, low, high, gap):
    """Write each line's label right of its last point, in the order of the lines' ends (so
    no two leader lines cross), at least ``gap`` (a label's height, as a fraction of the y
    range) apart; a thin stroke joins a moved label to its line. Text in the line's colour,
    darkened where that colour would be faint as text (:func:`readable`)."""
    ends = sorted(ends, key=lambda end: end[1])
    wanted = [(y - low) / (high - low) for _, y, _, _ in ends]
    placed = []
    for fraction in wanted:  # upwards: each at least gap above the previous
        placed.append(max(fraction, placed[-1] + gap) if placed else max(fraction, gap / 2))
    overflow = placed[-1] - (1.0 - gap / 2)
    if overflow > 0:  # then downwards from the top, keeping the gaps
        placed[-1] -= overflow
        for index in range(len(placed) - 2, -1, -1):
            placed[index] = min(placed[index], placed[index + 1] - gap)
    made = []
    for (x, y, label, colour), fraction in zip(ends, placed, strict=True):
        y_text = low + fraction * (high - low)
        moved = abs(fraction - (y - low) / (high - low)) > gap / 4
        text_colour = readable(colour)
        made.append(axis.annotate(label, (x, y), xytext=(x * 2 ** 0.35, y_text), textcoords="data",
                      va="center", fontsize=TEXT, color=text_colour, annotation_clip=False,
                      arrowprops={"arrowstyle": "-", "color": text_colour, "linewidth": 1,
                                  "shrinkA": 1, "shrinkB": 2,
                                  # from the middle of the label's left side, not a corner
                                  # that may sit next to the label below or above
                                  "relpos": (0.0, 0.5)} if moved else None))
    return made


@course_style
def scheme_curves(results: dict, task: str = "copy"):
    """Loss (copy) or accuracy (retrieval) against test length, one small panel per group
    of :data:`PANELS`: line = mean over seeds, vertical bar = min–max over seeds (dodged
    sideways so bars at one length do not hide each other), each line labelled at its end.

    ``fig.axes[p].lines[i]`` is variant ``PANELS[...][i]`` of panel p, its y-data the mean.
    """
    metric = "loss" if task == "copy" else "accuracy"
    config = results["config"]
    multiples = np.array(config["multiples"], dtype=float)
    height = 7.2
    figure, axes = new_figure(2, 3, width=WIDTH, height=height, sharex=True, sharey=True)
    drawn = {variant: seed_matrix(results, variant, task, metric)
             for variants in PANELS.values() for variant in variants}
    if task == "copy":
        top = max(max(values.max() for values in drawn.values()), results["guess_loss"])
        low, high = 0.0, 1.08 * top
    else:
        low, high = 0.0, 1.04
    figure.supylabel(_("loss on the copied tokens (nats)") if task == "copy"
                     else _("retrieval accuracy"), fontsize=TEXT)
    figure.supxlabel(_("test length, in multiples of the training length L = {length}").format(
        length=config["train_length"]), fontsize=TEXT)
    seeds = len(config["seeds"])
    what = _("copy task: loss") if task == "copy" else _("retrieval task: accuracy")
    figure.suptitle(_("{what} against test length (line: mean of {seeds} seeds, bar: lowest to "
                      "highest)").format(what=what, seeds=seeds), fontsize=TEXT + 1)
    for axis, title in zip(axes.flat, PANELS, strict=True):
        axis.set_title(_(title), fontsize=TEXT)
        axis.set_ylim(low, high)
        axis.set_xscale("log", base=2)
        axis.set_xlim(multiples[0] / 1.25, multiples[-1] * 1.25)
        axis.set_xticks(multiples, labels=[f"{k:g}×" for k in multiples])
        axis.minorticks_off()
        axis.tick_params(labelsize=TEXT)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    for axis, variants in zip(axes.flat, PANELS.values(), strict=True):
        for index, variant in enumerate(variants):
            label, colour, style = STYLE[variant]
            values = drawn[variant]
            axis.plot(multiples, values.mean(0), style, color=colour, linewidth=2.4,
                      marker="o", markersize=4, label=_(label))
            shift = 2 ** (0.07 * (index - (len(variants) - 1) / 2))
            axis.vlines(multiples * shift, values.min(0), values.max(0), color=colour,
                        linewidth=2.5)
    # The labels need room that the layout gives them, and their spacing needs the panels'
    # height that the layout sets: place them, lay out, and place them again at the gap
    # (a label's line height as a fraction of a panel's y range) measured then.
    labels = []
    for _twice in range(2):
        canvas.draw()
        for label in labels:
            label.remove()
        gap = 1.5 * TEXT * figure.dpi / 72 / axes[0, 0].get_window_extent().height
        labels = []
        for axis, variants in zip(axes.flat, PANELS.values(), strict=True):
            ends = [(multiples[-1], drawn[variant].mean(0)[-1], _(STYLE[variant][0]),
                     STYLE[variant][1]) for variant in variants]
            labels += _direct_labels(axis, ends, low, high, gap)
    if task == "copy":
        for axis in axes.flat:
            axis.axhline(results["guess_loss"], color=ROLE_COLOURS["context"], linewidth=1)
        axes[0, 0].annotate(_("uniform guess"), (multiples[0], results["guess_loss"]),
                            xytext=(0, 3), textcoords="offset points", fontsize=TEXT,
                            color=ROLE_COLOURS["context"])
    return figure


@course_style
def depth_heatmaps(results: dict, variants=("rope", "rope-5e5", "learned", "alibi",
                                              "nope-hybrid", "local-global")):
    """Needle-in-a-haystack maps: retrieval accuracy by needle depth (rows) and test length
    (columns), the mean over seeds. ``fig.axes[i].images[0]`` holds variant i's array."""
    config = results["config"]
    multiples, bins = config["multiples"], config["depth_bins"]
    figure, axes = new_figure(2, 3, width=WIDTH, height=6.6, sharex=True, sharey=True)
    largest_range = 0.0
    for axis, variant in zip(axes.flat, variants, strict=False):
        per_seed = np.array([[[np.nan if v is None else v for v in
                               results["units"][f"{_owner(results, variant)}|{seed}"]
                               ["retrieval"][variant]["accuracy_by_depth"][str(k)]]
                              for k in multiples] for seed in config["seeds"]], dtype=float)
        mean = per_seed.mean(0).T  # (depth bins, multiples)
        largest_range = max(largest_range, float(np.nanmax(per_seed.max(0) - per_seed.min(0))))
        image = axis.imshow(mean, origin="upper", aspect="auto", cmap=SEQUENTIAL_CMAP,
                            vmin=0, vmax=1)
        axis.set_title(_(NAMES[variant]), fontsize=TEXT)
        axis.set_xticks(range(len(multiples)), labels=[f"{k}×" for k in multiples])
        axis.set_yticks([0, bins - 1], labels=[_("start"), _("end")])
        axis.tick_params(labelsize=TEXT)
        axis.grid(False)
    for axis in axes[:, 0]:
        axis.set_ylabel(_("needle depth"), fontsize=TEXT)
    for axis in axes[1]:
        axis.set_xlabel(_("test length"), fontsize=TEXT)
    colourbar = figure.colorbar(image, ax=axes, shrink=0.8)
    colourbar.set_label(_("accuracy (mean of seeds)"), fontsize=TEXT)
    colourbar.ax.tick_params(labelsize=TEXT)
    figure.suptitle(_("retrieval accuracy by depth and length ({seeds} seeds; largest seed "
                      "range in a cell {largest:.2f})").format(
                          seeds=len(config["seeds"]), largest=largest_range), fontsize=TEXT + 1)
    return figure


ABLATION_GROUPS = (
    ("RoPE", "rope", ("rope", "rope+window")),
    ("ALiBi", "bias", ("alibi", "alibi+window")),
    (N_("learned"), "absolute", ("learned", "learned+zeroed", "learned+redrawn")),
)
ABLATION_LABELS = {"rope": N_("as\ntrained"), "rope+window": N_("offsets\n< L"),
                   "alibi": N_("as\ntrained"), "alibi+window": N_("offsets\n< L"),
                   "learned": N_("as\ntrained"), "learned+zeroed": N_("rows\n≥ L\n= 0"),
                   "learned+redrawn": N_("rows\n≥ L\nrandom")}


@course_style
def ablations(results: dict):
    """Left: copy loss at the longest length, one dot per seed and a bar at the mean, for
    each ablation of :data:`ABLATION_GROUPS` (the model as trained: a filled bar in its
    role's colour; an ablation: a hatched outline of it). Right: copy loss at length L of
    RoPE with PI factor k (``rope+linear@L``) against k, mean line and min–max bars,
    over the min–max band of plain RoPE at L.

    ``fig.axes[0].patches[j]`` is the j-th bar (groups in order); ``fig.axes[1].lines[0]``
    the PI-at-L mean."""
    config = results["config"]
    longest = max(config["multiples"])
    figure, (left, right) = new_figure(1, 2, width=WIDTH, height=5.0,
                                       gridspec_kw={"width_ratios": [2.1, 1]})
    position, ticks, labels, groups = 0, [], [], []
    for name, role, variants in ABLATION_GROUPS:
        colour, first = ROLE_COLOURS[role], position
        for variant in variants:
            values = seed_matrix(results, variant, "copy", "loss")[:, -1]
            if "+" in variant:  # an ablation: the outline of the trained model's bar
                left.bar(position, values.mean(), width=0.8, facecolor="white",
                         edgecolor=colour, hatch="//", linewidth=2)
            else:
                left.bar(position, values.mean(), width=0.8, color=colour)
            left.plot([position] * len(values), values, "o", color=ROLE_COLOURS["reference"],
                      markersize=6)
            ticks.append(position)
            labels.append(_(ABLATION_LABELS[variant]))
            position += 1
        groups.append((name, colour, (first + position - 1) / 2))
        position += 0.4
    left.set_yscale("log")
    low, high = left.get_ylim()
    left.set_ylim(low, high * 2.2)  # room for the group names
    log_ticks(left, y_ticks=one_two_five(low, high * 2.2))
    for name, colour, centre in groups:
        left.annotate(_(name), (centre, 1), xycoords=("data", "axes fraction"), xytext=(0, -6),
                      textcoords="offset points", ha="center", va="top", fontsize=TEXT,
                      color=readable(colour))
    left.set_xticks(ticks, labels=labels, fontsize=TEXT)
    left.tick_params(labelsize=TEXT)
    left.set_ylabel(_("copy loss at {longest}× L (nats)").format(longest=longest), fontsize=TEXT)
    left.set_title(_("hide what lies past L (dots: seeds)"), fontsize=TEXT)
    multiples = np.array(config["multiples"])
    squeezed = seed_matrix(results, "rope+linear@L", "copy", "loss")
    scaled = ROLE_COLOURS["scaled"]
    right.plot(multiples, squeezed.mean(0), ":", color=scaled, linewidth=2.4, marker="o")
    right.vlines(multiples, squeezed.min(0), squeezed.max(0), color=scaled, linewidth=2.5)
    plain = seed_matrix(results, "rope", "copy", "loss")[:, 0]
    right.axhspan(plain.min(), plain.max(), color=ROLE_COLOURS["rope"], alpha=0.35)
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    low, high = right.get_ylim()
    log_ticks(right, y_ticks=one_two_five(low, high))
    right.set_xticks(multiples, labels=[f"{k}" for k in multiples])
    right.minorticks_off()
    right.tick_params(labelsize=TEXT)
    right.annotate(_("PI,\nfactor k"), (multiples[-1], squeezed.mean(0)[-1]), xytext=(0, -12),
                   textcoords="offset points", ha="right", va="top", fontsize=TEXT,
                   color=readable(scaled))
    right.annotate(_("RoPE, no PI"), (1, plain.max()), xycoords=("axes fraction", "data"),
                   xytext=(-4, 4), textcoords="offset points", ha="right", va="bottom",
                   fontsize=TEXT, color=ROLE_COLOURS["rope"])
    right.set_xlabel(_("PI factor k"), fontsize=TEXT)
    right.set_ylabel(_("copy loss at L = {length}").format(length=config["train_length"]),
                     fontsize=TEXT)
    right.set_title(_("PI at length L"), fontsize=TEXT)
    figure.suptitle(_("copy-task ablations ({seeds} seeds): what breaks, and what is never "
                      "used").format(seeds=len(config["seeds"])), fontsize=TEXT + 1)
    return figure
