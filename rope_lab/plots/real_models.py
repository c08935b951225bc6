"""Figures of notebook 10 RoPE in real models (and ``python -m rope_lab.hf --plot``)."""

from __future__ import annotations

import math

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    log_ticks,
    new_figure,
    number,
    one_two_five,
    role,
)


def _decade_ticks(axes, low: float, high: float) -> None:
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    step = max(1, (last - first) // 6)
    log_ticks(axes, [10.0 ** e for e in range(first, last + 1, step)])


def _spectrum(axes, report, label: str | None = None) -> None:
    """One layer type's wavelengths (log) with its trained and scaled context."""
    import torch

    spec = report.spec
    freqs = report.inv_freq
    rotating = freqs > 0
    pairs = torch.arange(freqs.numel())[rotating]
    axes.semilogy(pairs, report.wavelengths, "o-", ms=3, color=role("rope"),
                  label=label or _("wavelength 2π/θ_i"))
    trained, scaled = spec.trained_context, spec.scaled_context
    if trained:
        axes.axhline(trained, color=role("reference"), ls="--", lw=1.5,
                     label=_("trained context {trained}").format(trained=number(trained)))
    if scaled and scaled != trained:
        axes.axhline(scaled, color=role("scaled"), ls=":", lw=2,
                     label=_("scaled for {scaled}").format(scaled=number(scaled)))
    if report.still_pairs:
        axes.axvspan(pairs.max().item() + 0.5, freqs.numel() - 0.5, color=role("context"),
                     alpha=0.25,
                     label=_("{count} pairs with θ = 0").format(count=report.still_pairs))
    values = [report.wavelengths.min().item(), report.wavelengths.max().item()]
    values += [v for v in (trained, scaled) if v]
    _decade_ticks(axes, min(values), max(values))
    axes.set(xlabel=_("pair i"), ylabel=_("wavelength (positions)"))


@course_style
def config_spectrum(config, title: str = "config"):
    """The wavelength 2π/θ_i of every pair, one panel per layer type, with the trained
    context (dashed) and the context the frequencies were scaled for (dotted).

    Data: ``axes[k].lines[0]`` is (i, 2π/θ_i) of the rotating pairs of layer type k.
    """
    from rope_lab.hf import report as hf_report

    reports = {k: v for k, v in hf_report.describe(config).items() if v is not None}
    if not reports:
        raise ValueError(f"{title}: no layer type has RoPE; nothing to plot")
    # One layer type: 6.4 in, wide enough for a title naming a long file; two: 9.2 in.
    figure, axes = new_figure(1, len(reports), width=min(9.2, 3.2 * len(reports) + 3.2),
                              height=5.2)
    axes = [axes] if len(reports) == 1 else list(axes)
    for panel, (layer_type, report) in zip(axes, reports.items(), strict=True):
        _spectrum(panel, report)
        spec = report.spec
        panel.set_title(_("{layer_type}\n{rope_type}, base {base}").format(
            layer_type=layer_type or _("every layer"), rope_type=spec.rope_type,
            base=number(spec.base)))
        # Under the axes: inside, it sat on the trained-context line.
        panel.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0)
    figure.suptitle(_("{title}\nRoPE wavelengths against the context").format(title=title))
    return figure


@course_style
def family_spectra(rows):
    """Small multiples: each family's wavelengths against its trained and scaled context.

    One legend for all panels, under them: a legend inside a panel covered the point where
    the wavelengths cross the trained context, the point of the figure.

    rows: ``(label, LayerTypeReport)`` pairs. Data: ``axes[k].lines[0]`` is (i, 2π/θ_i).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    count = len(rows)
    columns = 2  # three columns of log axes do not fit the 848 px output area legibly
    lines = math.ceil(count / columns)
    figure, axes = new_figure(lines, columns, width=9.2, height=2.5 * lines + 1.0)
    flat = list(axes.flat)
    for panel, (label, report) in zip(flat, rows, strict=False):
        _spectrum(panel, report)
        panel.set_title(label)
        panel.set_xlabel(_("pair i"))
        panel.set_ylabel(_("λ (positions)"))
    for panel in flat[count:]:
        panel.set_visible(False)
    # Proxies in the panels' own styles (see _spectrum): one entry per kind of mark.
    handles = [Line2D([], [], marker="o", ms=3, color=role("rope"),
                      label=_("wavelength 2π/θ_i")),
               Line2D([], [], color=role("reference"), ls="--", lw=1.5,
                      label=_("trained context")),
               Line2D([], [], color=role("scaled"), ls=":", lw=2,
                      label=_("context it was scaled for")),
               Patch(color=role("context"), alpha=0.25, label=_("pairs with θ = 0"))]
    figure.legend(handles=handles, loc="outside lower center", ncol=2)
    figure.suptitle(_("Wavelengths 2π/θ_i of each layer type against its context"))
    return figure


@course_style
def base_over_years(rows):
    """RoPE base per model release against its year (log y).

    rows: ``(label, year, base)``. Data: ``axes.collections[0]`` offsets are (year, base).
    """
    figure, axes = new_figure(width=9.2, height=4.6)
    years = [row[1] for row in rows]
    bases = [row[2] for row in rows]
    axes.scatter(years, bases, s=60, color=role("rope"), zorder=3)
    groups: dict[tuple[int, float], list[str]] = {}
    for label, year, base in rows:
        groups.setdefault((year, base), []).append(label)
    axes.set_yscale("log")
    _decade_ticks(axes, min(bases) / 2, max(bases) * 2)
    axes.set_xlim(min(years) - 0.5, max(years) + 1.5)
    axes.set_xticks(range(min(years), max(years) + 1))
    axes.set(xlabel=_("release year"), ylabel=_("RoPE base"),
             title=_("RoPE base of each release (log scale)"))
    _place_labels(figure, axes, {point: "\n".join(labels) for point, labels in groups.items()})
    return figure


# Where a point's label may go, in order of preference: (offset in points, ha, va).
_SPOTS = (((8, 0), "left", "center"), ((0, 8), "center", "bottom"),
          ((0, -8), "center", "top"), ((8, 6), "left", "bottom"), ((8, -6), "left", "top"),
          ((-8, 0), "right", "center"))


def _place_labels(figure, axes, labels: dict) -> None:
    """Label each point ``(x, y) → text`` at the first spot of :data:`_SPOTS` where the
    text, as the renderer measures it, covers no point, no label placed before it, and
    stays inside the axes (a label on a marker or on another label is unreadable)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    if figure.get_layout_engine() is not None:
        figure.canvas.draw()  # the layout moves the axes: measure where they end up
    radius = 6 * figure.dpi / 72  # the markers' radius (s = 60 pt²), in px
    points = [axes.transData.transform(point) for point in labels]
    frame = axes.get_window_extent(renderer)
    taken = []
    for point, text in labels.items():
        for offset, ha, va in _SPOTS:
            label = axes.annotate(text, point, xytext=offset, textcoords="offset points",
                                  ha=ha, va=va)
            box = label.get_window_extent(renderer)
            inside = (box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0
                      and box.y1 <= frame.y1)
            on_point = any(box.x0 - radius < x < box.x1 + radius
                           and box.y0 - radius < y < box.y1 + radius for x, y in points)
            if inside and not on_point and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            label.remove()
        else:
            raise RuntimeError(f"base_over_years: no free spot for the label {text!r}")


@course_style
def rotary_fraction(rows):
    """Horizontal bars: the share of each head's features that RoPE rotates.

    rows: ``(label, rotating dims, head dim)``. Data: ``axes.patches`` widths are the
    fractions, in row order.
    """
    figure, axes = new_figure(width=9.0, height=0.45 * len(rows) + 1.4)
    labels = [row[0] for row in rows]
    fractions = [row[1] / row[2] for row in rows]
    axes.barh(range(len(rows)), fractions, color=role("rope"))
    for y, (_label, dims, head) in enumerate(rows):
        axes.text(min(fractions[y], 1.0) + 0.01, y, f"{dims} / {head}", va="center")
    axes.set_yticks(range(len(rows)), labels)
    axes.invert_yaxis()
    axes.set_xlim(0, 1.2)
    axes.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    axes.set(xlabel=_("rotated share of the head dim"),
             title=_("How much of each head RoPE rotates"))
    return figure


@course_style
def turned_pairs(report, context: int, title: str = ""):
    """Turns each pair makes within ``context`` positions (context/λ_i, log), with the one-
    turn line: pairs above it have completed a full turn.

    Data: ``axes.patches`` heights are context/λ_i of the rotating pairs.
    """
    import torch

    freqs = report.inv_freq
    pairs = torch.arange(freqs.numel())[freqs > 0]
    turns = context / report.wavelengths
    turned = turns >= 1
    colours = [role("rope") if t else role("context") for t in turned.tolist()]
    figure, axes = new_figure(width=9.2, height=4.2)
    axes.bar(pairs.tolist(), turns.tolist(), color=colours, width=0.9)
    axes.axhline(1.0, color=role("reference"), lw=1.5, ls="--", label=_("one full turn"))
    axes.set_yscale("log")
    low = max(min(turns.min().item(), 1.0), 1e-6)
    high = max(turns.max().item(), 10.0)
    _decade_ticks(axes, low / 2, high * 2)
    axes.set_ylim(low / 2, high * 2)
    axes.set(xlabel=_("pair i"), ylabel=_("turns within the context"),
             title=_("{title}: {turned} of {pairs} pairs turned in {context} positions").format(
                 title=title, turned=int(turned.sum()), pairs=freqs.numel(),
                 context=number(context)))
    axes.legend(loc="upper right")
    if report.still_pairs:
        axes.axvspan(pairs.max().item() + 0.5, freqs.numel() - 0.5, color=role("context"),
                     alpha=0.25, label=_("{count} pairs never turn (θ = 0)").format(
                         count=report.still_pairs))
        axes.legend(loc="upper right")
    return figure


@course_style
def longrope_switch(config, title: str = "LongRoPE"):
    """Left: λ_i with the short and the long factors, against the original context L and
    max_position_embeddings. Right: θ of the slowest pair used for a sequence of length
    ℓ around L: one list up to L, the other past it.

    Data: ``axes[0].lines[0:2]`` are (i, λ_i) short and long; ``axes[1].lines[0]`` is
    (ℓ, θ_last(ℓ)).
    """
    import torch
    from matplotlib.ticker import MaxNLocator

    from rope_lab.hf import config as hf_config
    from rope_lab.hf import report as hf_report

    spec = hf_config.rope_spec(config)
    original = spec.original_max_position_embeddings
    short = hf_config.inv_freq_from_spec(spec, seq_len=original, dtype=torch.float64)[0]
    long = hf_config.inv_freq_from_spec(spec, seq_len=original + 1, dtype=torch.float64)[0]
    figure, (left, right) = new_figure(1, 2, width=9.2, height=5.0)
    pairs = torch.arange(short.numel())
    left.semilogy(pairs, hf_report.wavelengths(short), "o-", ms=3, color=role("rope"),
                  label=_("short_factor (ℓ ≤ L)"))
    left.semilogy(pairs, hf_report.wavelengths(long), "s--", ms=3, color=role("scaled"),
                  label=_("long_factor (ℓ > L)"))
    left.axhline(original, color=role("reference"), ls="--", lw=1.5,
                 label=f"L = {number(original)}")
    if spec.max_position_embeddings:
        left.axhline(spec.max_position_embeddings, color=role("context"), ls=":", lw=2,
                     label=_("max_position {length}").format(
                         length=number(spec.max_position_embeddings)))
    left.set(xlabel=_("pair i"), ylabel=_("wavelength (positions)"),
             title=_("two factor lists"))
    # Under the axes: inside, it covered the long factors' curve and the max_position line.
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, borderaxespad=0)
    lengths = list(range(original - 8, original + 9))
    slowest = [hf_config.inv_freq_from_spec(spec, seq_len=n, dtype=torch.float64)[0][-1].item()
               for n in lengths]
    right.step(lengths, slowest, where="post", color=role("rope"), lw=2)
    right.axvline(original + 0.5, color=role("reference"), ls="--", lw=1.5)
    right.set_yscale("log")
    low, high = right.get_ylim()  # often under two decades: label 1, 2, 5 in each
    if high / low > 100:
        _decade_ticks(right, low, high)
    else:
        log_ticks(right, one_two_five(low, high))
    right.set_ylim(low, high)
    right.xaxis.set_major_locator(MaxNLocator(4, integer=True))  # lengths: whole numbers
    right.set(xlabel=_("sequence length ℓ"), ylabel=_("θ of the slowest pair"),
              title=_("the switch: ℓ = {original} → {next}").format(
                  original=number(original), next=number(original + 1)))
    figure.suptitle(_("{title}: LongRoPE picks its factors by the sequence length").format(
        title=title))
    return figure


def atlas_entries() -> dict:
    """label → LayerTypeReport for every fixture and layer type (the widget's choices); the
    labels name the layer type in the current language ("Gemma 3 global", "Gemma 3 全局层")."""
    from rope_lab.hf import report as hf_report

    # the layer type as the course says it, in the current language ("Gemma 3 global")
    short = {"sliding_attention": _("{model} local"), "full_attention": _("{model} global")}
    entries = {}
    for _name, label, _year, config in hf_report.atlas():
        for layer_type, entry in hf_report.describe(config).items():
            if entry is None or entry.spec.rope_type == "axial":
                continue
            name = short.get(layer_type, f"{{model}} {layer_type}") if layer_type else "{model}"
            entries[name.format(model=label)] = entry
    return entries


def atlas_turned_pairs(family: str, context: int):
    """:func:`turned_pairs` for one of :func:`atlas_entries` (the notebook 10 widget)."""
    entries = atlas_entries()
    if family not in entries:
        raise ValueError(f"family must be one of {sorted(entries)}, got {family!r}")
    return turned_pairs(entries[family], context, title=family)
