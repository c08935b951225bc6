"""Figures of notebook 06 length extrapolation."""

from __future__ import annotations

from rope_lab.i18n import N_, lazy_gettext
from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    fixed_layout_figure,
    live,
    log_ticks,
    new_figure,
    nice_limit,
    number,
    readable,
    role,
    shades,
)

# Scaling methods in the order the figures list them. Plain RoPE keeps RoPE's blue; every
# stretched variant is the "scaled" green (one family, one colour), told apart by line
# style and marker.
SCALING_COLOURS = {"default": role("rope"), "linear": role("scaled"), "ntk": role("scaled"),
                   "dynamic": role("scaled"), "yarn": role("scaled"), "llama3": role("scaled")}
SCALING_STYLES = {"default": "-", "linear": ":", "ntk": "--", "dynamic": "-.", "yarn": "-",
                  "llama3": (0, (6, 2, 1, 2, 1, 2))}
SCALING_MARKERS = {"default": "o", "linear": "x", "ntk": "s", "dynamic": "D", "yarn": "^",
                   "llama3": "v"}
# What a legend or a dropdown shows for a method: the identifier in English; a translation
# names the method in its words and keeps the identifier ("线性插值（linear）").
SCALING_LABELS = {
    # Translators: a scaling method in a legend or dropdown: its name, then the identifier
    "default": N_("scaling method: default"), "linear": N_("scaling method: linear"),
    "ntk": N_("scaling method: ntk"), "dynamic": N_("scaling method: dynamic"),
    "yarn": N_("scaling method: yarn"), "llama3": N_("scaling method: llama3"),
}


def scaling_label(method: str) -> str:
    """``method`` as a legend or a dropdown shows it (see :data:`SCALING_LABELS`)."""
    from rope_lab.i18n import gettext

    text = gettext(SCALING_LABELS[method])
    return method if text == SCALING_LABELS[method] else text


def _scaled(method, dim, base, factor, original_length, beta_fast, beta_slow):
    """inv_freq (float64) of ``method``; dynamic at the length s·L, yarn with the betas."""
    import torch

    from rope_lab import scaling

    options = {"beta_fast": beta_fast, "beta_slow": beta_slow} if method == "yarn" else {}
    freqs, _ = scaling.scaled_inv_freq(
        method, dim, base=base, factor=factor, original_max_position=original_length,
        seq_len=round(factor * original_length), dtype=torch.float64, **options)
    return freqs


def _draw_frequency_overlay(axes, dim, base, factor, original_length, method, beta_fast,
                            beta_slow):
    from rope_lab import scaling

    theta = _scaled("default", dim, base, 1.0, original_length, beta_fast, beta_slow)
    pairs = range(dim // 2)
    for name in scaling.METHODS:
        ratio = _scaled(name, dim, base, factor, original_length, beta_fast, beta_slow) / theta
        chosen = name == method
        label = _("dynamic (at ℓ = sL)") if name == "dynamic" else scaling_label(name)
        axes.plot(pairs, ratio.numpy(), color=SCALING_COLOURS[name], label=label,
                  linestyle=SCALING_STYLES[name], linewidth=3.2 if chosen else 1.4,
                  alpha=1.0 if chosen else 0.55, zorder=3 if chosen else 2)
    axes.axhline(1 / factor, color="0.4", linestyle=":", linewidth=1)
    axes.set_yscale("log")
    log_ticks(axes)
    axes.set(title=_("Rotation speed after scaling, s = {factor:g}").format(factor=factor),
             xlabel=_("pair i (0 = fastest)"),
             ylabel=_("θ′ᵢ / θᵢ  (1 = unchanged, 1/s = PI)"))
    # under the axes: the methods' names (线性插值（linear）…) would cover the curves inside
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, columnspacing=1.5)


def _draw_wavelength_chart(axes, dim, base, factor, original_length, method, beta_fast,
                           beta_slow):
    from rope_lab import scaling

    theta = _scaled("default", dim, base, 1.0, original_length, beta_fast, beta_slow)
    wavelength = scaling.wavelengths(theta).numpy()
    turns = wavelength <= original_length
    pairs = list(range(dim // 2))
    colours = [role("rope") if full else role("context") for full in turns]
    axes.bar(pairs, wavelength, color=colours, width=0.8)
    if method != "default":
        scaled = scaling.wavelengths(
            _scaled(method, dim, base, factor, original_length, beta_fast, beta_slow))
        axes.plot(pairs, scaled.numpy(), "o", color=SCALING_COLOURS[method], markersize=4,
                  label=f"{scaling_label(method)}, s = {factor:g}")
    axes.axhline(original_length, color="0.2", linestyle="--", linewidth=1.2,
                 label=_("trained length L = {length}").format(length=original_length))
    if factor > 1:
        axes.axhline(factor * original_length, color="0.5", linestyle=":", linewidth=1.2,
                     label=_("target length sL = {length}").format(
                         length=round(factor * original_length)))
    axes.set_yscale("log")
    log_ticks(axes)
    axes.set(title=_("{turned} of {pairs} pairs turn fully within L").format(
                 turned=int(turns.sum()), pairs=dim // 2),
             xlabel=_("pair i (blue: λᵢ ≤ L, grey: never a full turn)"),
             ylabel=_("wavelength λᵢ = 2π/θᵢ (positions)"))
    axes.legend(loc="upper left")


@course_style
def frequency_overlay(dim: int = 64, base: float = 10000.0, factor: float = 8.0,
                      original_length: int = 2048, method: str = "yarn",
                      beta_fast: float = 32.0, beta_slow: float = 1.0):
    """θ′ᵢ/θᵢ per pair for every scaling method (one line each, ``method`` highlighted).

    Dynamic NTK is drawn at the input length s·L. Data: ``axes[0].lines[k]`` is method k of
    ``rope_lab.scaling.METHODS``.
    """
    from rope_lab import scaling

    if method not in scaling.METHODS:
        raise ValueError(f"method must be one of {scaling.METHODS}, got {method!r}")
    figure, axes = new_figure(width=7.5, height=5.0)
    _draw_frequency_overlay(axes, dim, base, factor, original_length, method, beta_fast,
                            beta_slow)
    return figure


@course_style
def wavelength_chart(dim: int = 64, base: float = 10000.0, original_length: int = 2048,
                     method: str = "default", factor: float = 1.0, beta_fast: float = 32.0,
                     beta_slow: float = 1.0):
    """Bars: wavelength λᵢ = 2π/θᵢ of each pair against the trained length L (log scale);
    dots: the wavelengths after scaling with ``method``. Data: the bar heights."""
    figure, axes = new_figure(width=7.5, height=4.2)
    _draw_wavelength_chart(axes, dim, base, factor, original_length, method, beta_fast,
                           beta_slow)
    return figure


@course_style
def scaling_explorer(dim: int = 64, base: float = 10000.0, factor: float = 8.0,
                     original_length: int = 2048, method: str = "yarn",
                     beta_fast: float = 32.0, beta_slow: float = 1.0):
    """The notebook 06 panel. Left: θ′ᵢ/θᵢ per pair for every method (``axes[0].lines[k]``
    is method k of ``rope_lab.scaling.METHODS``, ``method`` drawn thick). Right: wavelength
    bars λᵢ = 2π/θᵢ against the trained length L (``axes[1].patches``) and, as dots, the
    wavelengths after scaling with ``method`` (``axes[1].lines[0]``).

    The y axes depend on d and the base only, so moving s, the betas or L never rescales
    them. A live figure: a panel updates it in place.
    """

    from rope_lab import scaling

    if method not in scaling.METHODS:
        raise ValueError(f"method must be one of {scaling.METHODS}, got {method!r}")
    # 9 in = 810 CSS px: inside JupyterLab's output area at 1280 × 800 with the sidebar
    # open, the widget box's own padding included (9.3 in lost the right spine there). The
    # method legend sits under both axes, off the curves.
    figure, (left, right) = fixed_layout_figure(1, 2, width=9.0, height=5.4, left=0.09,
                                                right=0.975, bottom=0.3, top=0.92,
                                                wspace=0.5)
    pairs = list(range(dim // 2))
    theta = _scaled("default", dim, base, 1.0, original_length, beta_fast, beta_slow)
    wavelength = scaling.wavelengths(theta).numpy()
    ratios = {}
    for name in scaling.METHODS:
        label = _("dynamic (at sL)") if name == "dynamic" else scaling_label(name)
        ratios[name], = left.plot(pairs, [1.0] * len(pairs), color=SCALING_COLOURS[name],
                                  linestyle=SCALING_STYLES[name], label=label)
    pi_line = left.axhline(1.0, color=role("context"), linestyle=":", linewidth=1.2)
    left.set_yscale("log")
    left.set(xlabel=_("pair i (0 = fastest)"), ylabel=_("θ′ᵢ / θᵢ (1 = unchanged)"),
             xlim=(-0.5, len(pairs) - 0.5), ylim=(1 / 64, 2.0))
    log_ticks(left)
    bars = right.bar(pairs, wavelength, width=0.8)
    scaled_dots, = right.plot(pairs, wavelength, "o", markersize=5,
                              label=_("after scaling"))
    trained = right.axhline(original_length, color=role("reference"), linestyle="--",
                            linewidth=1.2, label=_("trained length L"))
    target = right.axhline(original_length, color=role("context"), linestyle=":",
                           linewidth=1.5, label=_("target length sL"))
    right.set_yscale("log")
    right.set(xlabel=_("pair i (blue: a full turn within L)"), ylabel=_("wavelength 2π/θᵢ"),
              xlim=(-0.5, len(pairs) - 0.5),
              ylim=(1.0, nice_limit(64 * float(wavelength.max()))))
    log_ticks(right)

    def update(dim=dim, base=base, factor=factor, original_length=original_length,
               method=method, beta_fast=beta_fast, beta_slow=beta_slow):
        if len(bars) != dim // 2 or method not in scaling.METHODS:
            return False  # another head size: build anew
        theta = _scaled("default", dim, base, 1.0, original_length, beta_fast, beta_slow)
        for name, line in ratios.items():
            ratio = _scaled(name, dim, base, factor, original_length, beta_fast,
                            beta_slow) / theta
            chosen = name == method
            line.set_ydata(ratio.numpy())
            line.set(linewidth=3.4 if chosen else 1.4, alpha=1.0 if chosen else 0.6,
                     zorder=3 if chosen else 2)
        pi_line.set_ydata([1 / factor, 1 / factor])
        # Under both axes, across the figure: the names (线性插值（linear）…) need the width.
        for legend in list(figure.legends):
            legend.remove()
        figure.legend(handles=list(ratios.values()), loc="lower center",
                      bbox_to_anchor=(0.5, 0.01), ncol=3, handlelength=2.2,
                      columnspacing=1.2, borderaxespad=0)
        left.set_title(_("Rotation speed, s = {factor} ({method} thick)").format(
            factor=number(factor), method=method))
        turns = scaling.wavelengths(theta).numpy() <= original_length
        for bar, full in zip(bars, turns, strict=True):
            bar.set_color(role("rope") if full else role("context"))
        scaled = scaling.wavelengths(_scaled(method, dim, base, factor, original_length,
                                             beta_fast, beta_slow))
        scaled_dots.set_ydata(scaled.numpy())
        scaled_dots.set(color=SCALING_COLOURS[method], visible=method != "default")
        trained.set_ydata([original_length, original_length])
        target.set_ydata([factor * original_length] * 2)
        target.set_visible(factor > 1)
        right.set_title(_("{turned} of {pairs} pairs turn within L = {length}").format(
            turned=number(int(turns.sum())), pairs=number(dim // 2),
            length=number(original_length)))
        # Made after the dots took the method's colour: a legend copies its artists' looks.
        right.legend(loc="upper left")
        # The static layer: the legend (which line is thick) and the bars' colours.
        return (method, original_length)

    return live(figure, update, animated=[*ratios.values(), pi_line, scaled_dots, target,
                                          left.title, right.title])


@course_style
def interpolation_vs_extrapolation(coefficients, dim: int = 128, base: float = 10000.0,
                                   length: int = 2048, zoom: float = 20.0):
    """The PI paper's Figure 2 idea: a score fitted on [0, L) evaluated past L (left,
    symmetric-log y) and at fractional offsets between the integers (right)."""
    import math

    import torch
    from matplotlib.ticker import NullLocator

    from rope_lab import scaling

    figure, (left, right) = new_figure(1, 2, width=9.2, height=4.4)
    offsets = torch.arange(0, 2 * length, dtype=torch.float64)
    scores = scaling.rope_basis(offsets, dim, base) @ coefficients
    left.plot(offsets.numpy(), scores.numpy(), color=role("rope"), linewidth=1)
    left.axvline(length, color=role("context"), linestyle="--", label=f"L = {number(length)}")
    left.set_yscale("symlog", linthresh=1.0)
    # one tick style: 0 and every other power of ten each way, in plain digits
    low, high = scores.min().item(), scores.max().item()
    top = math.ceil(math.log10(max(abs(low), abs(high), 10.0)))
    powers = [10.0 ** e for e in range(0, top + 1, 2 if top > 4 else 1)]
    ticks = sorted({0.0, *(p for p in powers if p <= high), *(-p for p in powers if -p >= low)})
    left.set_yticks(ticks, labels=[number(tick) for tick in ticks])
    left.yaxis.set_minor_locator(NullLocator())
    left.set(title=_("Extrapolation: offsets in [0, 2L)"), xlabel=_("offset m (positions)"),
             ylabel=_("fitted score (symlog)"))
    left.legend(loc="upper left")
    fine = torch.arange(0, zoom + 1e-9, 0.05, dtype=torch.float64)
    integers = torch.arange(0, int(zoom) + 1, dtype=torch.float64)
    right.plot(fine.numpy(), (scaling.rope_basis(fine, dim, base) @ coefficients).numpy(),
               color=role("rope"), linewidth=1.5, label=_("fractional offsets"))
    right.plot(integers.numpy(), (scaling.rope_basis(integers, dim, base) @ coefficients).numpy(),
               "o", color=role("reference"), markersize=5,
               label=_("integer offsets (fitted)"))
    right.set(title=_("Interpolation: offsets in [0, {zoom:g}]").format(zoom=zoom),
              xlabel=_("offset m (positions)"), ylabel=_("fitted score"))
    # below the axes: inside, it would cover the curve wherever the fit happens to go
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, handlelength=1.5,
                 columnspacing=1.0)
    return figure


# variant in the experiment JSON → (label, colour, line style): the colour says the family
# (added vectors, RoPE, RoPE stretched, a bias, nothing), the style tells a family apart.
# The labels are lazy texts (rope_lab.i18n.LazyText): English to the code, printed in the
# course's language (notebook 06 prints them in a table).
EXPERIMENT_STYLE = {
    "none": (lazy_gettext("no position (NoPE)"), role("context"), "-"),
    "learned": (lazy_gettext("learned"), role("absolute"), "-"),
    "sinusoidal": (lazy_gettext("sinusoidal"), role("absolute"), "--"),
    "alibi": (lazy_gettext("ALiBi"), role("bias"), "-"),
    "rope": (lazy_gettext("RoPE"), role("rope"), "-"),
    "rope+linear": (lazy_gettext("RoPE + PI (zero-shot)"), role("scaled"),
                    SCALING_STYLES["linear"]),
    "rope+ntk": (lazy_gettext("RoPE + NTK"), role("scaled"), SCALING_STYLES["ntk"]),
    "rope+dynamic": (lazy_gettext("RoPE + dynamic NTK"), role("scaled"),
                     SCALING_STYLES["dynamic"]),
    "rope+yarn": (lazy_gettext("RoPE + YaRN"), role("scaled"), SCALING_STYLES["yarn"]),
}
# the shorter labels at the lines' ends, made from those above by dropping words
_SHORT_LABELS = (N_("RoPE + PI"), N_("+ dynamic NTK"))
# the two families the loss figure draws side by side
_ENCODINGS = ("none", "learned", "sinusoidal", "alibi", "rope")
_STRETCHED = ("rope", "rope+linear", "rope+ntk", "rope+dynamic", "rope+yarn")


def _direct_labels(axes, ends, *, gap):
    """Write each series' name at the right end of its line (``ends``: label → (x, y,
    colour)), nudged apart vertically so no two labels overlap (``gap`` in data units)."""
    placed = []
    for label, (x, y, colour) in sorted(ends.items(), key=lambda item: item[1][1]):
        y_text = max(y, placed[-1] + gap) if placed else y
        placed.append(y_text)
        # 8 pt right of the end (clear of its marker); the colour darkened to 4.5:1 on
        # white: orange letters are faint on a projector where an orange line is not
        axes.annotate(_(label), (x, y_text), xytext=(8, 0), textcoords="offset points",
                      color=readable(colour), fontsize=13, fontweight="bold", va="center")


def _style(variant):
    return EXPERIMENT_STYLE.get(variant, (variant, role("context"), ":"))


@course_style
def extrapolation_losses(results: dict, variants=None):
    """Test loss against the test length (multiples of the training length), from
    ``rope_lab.experiments.extrapolation`` results, as small multiples with direct labels:
    left the position encodings, right RoPE and its zero-shot stretches (plain RoPE in
    both, as the common yardstick). Data: ``axes.lines`` in the order of ``variants`` that
    belong to each panel; with ``variants`` given, panels without one are left out."""
    chosen = list(variants or results["loss"])
    encodings = [v for v in chosen if v not in _STRETCHED or v == "rope"]
    stretched = [v for v in _STRETCHED if v in chosen]
    groups, titles = [encodings], [_("position encodings")]
    if set(stretched) - {"rope"}:  # a panel of plain RoPE alone would say nothing new
        groups.append(stretched)
        titles.append(_("RoPE stretched, zero-shot"))
    multiples = results["config"]["multiples"]
    figure, axes = new_figure(1, len(groups), width=9.2, height=4.6, sharey=True)
    panels = [axes] if len(groups) == 1 else list(axes)
    top = max(max(results["loss"][v][str(k)] for k in multiples) for g in groups for v in g)
    top = max(top, results["guess_loss"])
    for panel, group, title in zip(panels, groups, titles, strict=True):
        ends = {}
        for variant in group:
            label, colour, style = _style(variant)
            losses = [results["loss"][variant][str(k)] for k in multiples]
            panel.plot(multiples, losses, linestyle=style, marker="o", color=colour,
                       linewidth=2.4, markersize=6)
            ends[label.replace(" (zero-shot)", "").replace("RoPE + ", "+ ")] = (
                multiples[-1], losses[-1], colour)
        panel.axhline(results["guess_loss"], color=role("context"), linewidth=1, ls=":")
        panel.set_xscale("log", base=2)
        panel.set_xticks(multiples, [f"{k}×" for k in multiples])
        panel.set_xlim(multiples[0] / 1.25, multiples[-1] * 3.6)
        panel.set(title=title, xlabel=_("test length (multiple of L)"))
        _direct_labels(panel, ends, gap=0.075 * top * 1.1)
    panels[0].text(multiples[0], results["guess_loss"], _("uniform guess"), fontsize=13,
                   color=role("context"), va="bottom")
    panels[0].set_ylabel(_("cross-entropy (nats)"))
    panels[0].set_ylim(-0.03 * top, 1.1 * top)
    length = results["config"]["train_length"]
    figure.suptitle(_("Loss on the determined tokens, trained at L = {length}").format(
        length=length), fontsize=15)
    return figure


@course_style
def extrapolation_by_position(results: dict, variants=None):
    """Loss per position bin on the longest test inputs, with the training length marked;
    each line named at its right end. Data: ``axes.lines[j]`` for ``variants[j]``."""
    figure, axes = new_figure(width=9.2, height=4.6)
    curves = results["loss_by_position"]
    centres = [start + curves["bin_width"] / 2 for start in curves["bin_starts"]]
    ends = {}
    for variant in variants or results["loss"]:
        label, colour, style = _style(variant)
        axes.plot(centres, curves[variant], linestyle=style, color=colour, linewidth=2.4)
        ends[label.replace(" (zero-shot)", "")] = (centres[-1], curves[variant][-1], colour)
    length = results["config"]["train_length"]
    axes.axvline(length, color=role("context"), linestyle="--", linewidth=1.2)
    axes.annotate(_("training length"), (length, 0.97), xycoords=("data", "axes fraction"),
                  xytext=(4, 0), textcoords="offset points", va="top", fontsize=13)
    longest = curves["length"]
    axes.set_xlim(0, centres[-1] * 1.3)
    top = max(max(curves[v]) for v in (variants or results["loss"]))
    _direct_labels(axes, ends, gap=0.08 * top)
    axes.set(title=_("Loss along inputs of length {longest} ({multiple}L)").format(
                 longest=longest, multiple=longest // length),
             xlabel=_("position t (tokens)"), ylabel=_("cross-entropy (nats)"))
    return figure


@course_style
def alibi_heatmap(seq_len: int = 16, n_heads: int = 8, heads=(0, 3, 7)):
    """ALiBi's bias −slope_h·(m − n) against the distance m − n, one line per head on ONE
    scale, so the slopes' ratio (up to 128× for 8 heads) is what the eye sees.

    Data: ``axes.lines[j]`` is (distance m − n, bias) for ``heads[j]``, read from
    :func:`rope_lab.alibi.alibi_bias` (the last query's row, keys n = m … 0).
    """
    import torch

    from rope_lab import _validate
    from rope_lab.alibi import alibi_bias, alibi_slopes

    _validate.check_indices(heads, n_heads, "heads", "n_heads")
    bias = alibi_bias(seq_len, n_heads)
    slopes = alibi_slopes(n_heads)
    figure, axes = new_figure(width=8.0, height=4.6)
    distance = torch.arange(seq_len - 1, -1, -1)  # key n = 0 … m is at distance m − n
    for head, colour in zip(heads, shades("bias", len(heads)), strict=True):
        row = bias[head, seq_len - 1]
        axes.plot(distance.numpy(), row.numpy(), "o-", color=colour, lw=2.4, ms=4)
        slope = f"1/{1 / float(slopes[head]):g}" if slopes[head] < 1 else f"{float(slopes[head]):g}"
        axes.annotate(_("head {head}: slope {slope}").format(head=head, slope=slope),
                      (seq_len - 1, float(row[0])),
                      xytext=(6, 0), textcoords="offset points", va="center", fontsize=13,
                      color=readable(colour), fontweight="bold")  # the light shade: faint
    axes.set_xlim(0, (seq_len - 1) * 1.45)
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.set(title=_("ALiBi, {n_heads} heads: the bias on one scale").format(n_heads=n_heads),
             xlabel=_("distance m − n between query and key (positions)"),
             ylabel=_("bias added to the score"))
    return figure
