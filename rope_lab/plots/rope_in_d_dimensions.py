"""Figures of notebook 04 RoPE in d dimensions."""

from __future__ import annotations

import functools

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    fixed_layout,
    live,
    log_ticks,
    new_figure,
    number,
    role,
)


@course_style
def rope_frequencies(dim: int = 64, base: float = 10000.0, length: int = 256):
    """Left: wavelength 2π/θ_i of every pair i (log scale). Right: heatmap of m·θ_i mod 2π.

    Data: ``axes[0].lines[0]`` is (2i/d, 2π/θ_i); ``axes[1].images[0]`` is the
    ``(length, dim/2)`` array of angles mod 2π. Pairs sit at 2i/d in [0, 1), the exponent
    of θ_i = base^(−2i/d), and the wavelength axis spans 1 to 10⁷: moving d or the base
    never rescales an axis. A live figure: a panel updates it in
    place.
    """
    import math

    from rope_lab import _validate

    _validate.check_positive_int(length, "length")
    figure, (left, right) = new_figure(1, 2, width=9.0, height=4.4)
    wavelengths, = left.plot([], [], "o-", ms=3, color=role("rope"),
                             label=_("wavelength 2π/θᵢ"))
    left.set_yscale("log")
    left.axhline(length, color=role("context"), ls="--",
                 label=_("positions shown ({length})").format(length=number(length)))
    left.set(xlim=(-0.02, 1.0), ylim=(1, 1e7), xlabel=_("2i/d (pair i of d/2)"),
             ylabel=_("wavelength (positions per turn)"))
    log_ticks(left, [1.0, 1e2, 1e4, 1e6])
    left.legend(loc="upper left")
    image = right.imshow([[0.0]], aspect="auto", origin="lower", cmap="twilight",
                         vmin=0, vmax=2 * math.pi, interpolation="nearest")
    right.grid(False)
    right.set(xlabel=_("2i/d (pair i of d/2)"), ylabel=_("position m"), xlim=(0, 1),
              ylim=(-0.5, length - 0.5), title=_("angle m·θᵢ mod 2π"))
    colorbar = figure.colorbar(image, ax=right, label=_("angle (rad)"))
    colorbar.set_ticks([0, math.pi, 2 * math.pi], labels=["0", "π", "2π"])
    fixed_layout(figure, ([0.155, 0.14, 0.33, 0.76], [0.6, 0.14, 0.28, 0.76],
                          [0.895, 0.14, 0.02, 0.76]))

    def update(dim=dim, base=base, length=length):
        import torch

        from rope_lab import rope

        speeds = rope.inv_freq(dim, base, dtype=torch.float64)
        pairs = torch.arange(dim // 2)
        wavelengths.set_data((2 * pairs / dim).numpy(), (2 * math.pi / speeds).numpy())
        left.set_title(f"θᵢ = {number(base)}^(−2i/{number(dim)})")
        angles = rope.rope_angles(torch.arange(length), speeds).remainder(2 * math.pi)
        image.set_data(angles.numpy())
        image.set_extent((0.0, 1.0, -0.5, length - 0.5))
        right.set_ylim(-0.5, length - 0.5)
        return None

    return live(figure, update, animated=[wavelengths, image, left.title])


@functools.lru_cache(maxsize=64)
def _worst_angle_errors(dtype: str, dim: int, base: float, length: int, block: int):
    """(block starts, worst phase error, worst cos error) per block of positions, cached:
    moving one slider back and forth, or switching dtype, reuses the curves already made."""
    import torch

    from rope_lab import precision, rope

    speeds = rope.inv_freq(dim, base, dtype=torch.float64)
    positions = torch.arange(length - length % block)
    worst = [error.reshape(-1, block * (dim // 2)).amax(-1).clamp_min(1e-9).numpy()
             for error in precision.angle_errors(positions, speeds, dtype)]
    curves = (positions[::block].numpy(), *worst)
    for curve in curves:
        curve.setflags(write=False)  # shared by every figure drawn from the cache
    return curves


@course_style
def angle_precision(dtype: str = "bfloat16", dim: int = 64, base: float = 10000.0,
                    length: int = 4096, block: int = 16):
    """Phase error and cos error of m·θ_i computed in ``dtype`` versus position m.

    Each point is the worst pair over a block of ``block`` positions; float32 is drawn as
    the reference, and errors are floored at 1e-9 for the log scale. Data:
    ``axes[0].lines[0]`` is the chosen dtype's phase error (hidden for float32, which the
    reference already draws), ``axes[0].lines[1]`` float32's; ``axes[1]`` holds the cos
    errors the same way. One legend for both panels, under them. A live figure: a panel
    updates it in place.
    """
    from matplotlib.ticker import MaxNLocator

    figure, (left, right) = new_figure(1, 2, width=9.0, height=4.9)
    curves = {}
    for axes, what in ((left, _("phase error (rad)")), (right, _("|cos error|"))):
        chosen, = axes.plot([], [], color=role("mistake"), lw=1.5, drawstyle="steps-post")
        reference, = axes.plot([], [], color=role("rope"), lw=1.5, label="float32",
                               drawstyle="steps-post")
        exact = axes.axvline(0, color=role("reference"), ls=":")
        curves[axes] = (chosen, reference, exact)
        axes.set_yscale("log")
        axes.set(xlabel=_("position m"), ylabel=_("{what}, worst pair").format(what=what),
                 ylim=(1e-9, 10), xlim=(0, length))
        log_ticks(axes, [1e-8, 1e-6, 1e-4, 1e-2, 1.0])
        axes.xaxis.set_major_locator(MaxNLocator(5))
    # Room at the bottom for one legend under both panels: inside, the curves (from 10⁻⁹
    # at m = 0 up to 1) and the exact-integer line (anywhere in m) leave no free corner.
    fixed_layout(figure, ([0.12, 0.215, 0.36, 0.705], [0.62, 0.215, 0.36, 0.705]))

    def update(dtype=dtype, dim=dim, base=base, length=length, block=block):
        from rope_lab import precision

        exact_up_to = precision.largest_exact_integer(dtype)
        for index, axes in enumerate((left, right)):
            chosen, reference, exact = curves[axes]
            for line, name in ((chosen, dtype), (reference, "float32")):
                starts, *errors = _worst_angle_errors(name, dim, base, length, block)
                line.set_data(starts, errors[index])
            # float32 chosen is the reference itself: one curve, in the reference's blue
            chosen.set_visible(dtype != "float32")
            chosen.set_label(dtype if dtype != "float32" else "_chosen")
            exact.set_xdata([exact_up_to, exact_up_to])
            exact.set_visible(exact_up_to < length)
            exact.set_label(_("{dtype}: integers exact up to {limit}").format(
                dtype=dtype, limit=number(exact_up_to)) if exact_up_to < length else "_exact")
        shown = [line for line in curves[left]
                 if line.get_visible() and not line.get_label().startswith("_")]
        entries = tuple(line.get_label() for line in shown)
        if getattr(figure, "rope_lab_legend_entries", None) != entries:  # else keep it
            figure.rope_lab_legend_entries = entries
            for legend in list(figure.legends):
                legend.remove()
            figure.legend(handles=shown, loc="lower center", ncols=len(shown),
                          borderaxespad=0.3)
        left.set_title(_("Angle m·θᵢ in {dtype}, base {base}").format(dtype=dtype,
                                                                      base=number(base)))
        right.set_title(_("cos(m·θᵢ) from the {dtype} angle").format(dtype=dtype))
        return entries  # the legend and the marked integer limit

    return live(figure, update, animated=[*curves[left][:2], *curves[right][:2],
                                          left.title, right.title])


@course_style
def singular_values(maps: dict):
    """Singular values of each named ``(d, d)`` linear map, sorted, one line per map.

    An orthogonal map (a true rotation) has every singular value equal to 1.
    Data: ``axes.lines[j]`` holds map j's singular values.
    """
    import torch

    figure, axes = new_figure(width=7.0, height=4.0)
    for (name, matrix), marker in zip(maps.items(), "os^v", strict=False):
        values = torch.linalg.svdvals(matrix.to(torch.float64))
        # a rotation (all singular values 1) in RoPE's blue; anything else is the bug
        rotation = bool(torch.allclose(values, torch.ones_like(values), atol=1e-6))
        axes.plot(values, marker, ms=5, label=_(name),
                  color=role("rope") if rotation else role("mistake"))
    axes.axhline(1.0, color=role("reference"), lw=1, ls=":")
    axes.set(xlabel=_("index (largest first)"), ylabel=_("singular value"),
             title=_("Singular values: a rotation has them all equal to 1"))
    axes.legend()
    return figure
