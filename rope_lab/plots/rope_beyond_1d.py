"""Figures of notebook 08 RoPE beyond 1D."""

from __future__ import annotations

from matplotlib.figure import Figure

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    DIVERGING_CMAP,
    course_style,
    live,
    number,
    role,
    shades,
)


def _offset_grid(radius_x: int, radius_y: int):
    """(2·ry+1, 2·rx+1, 2) offsets (Δx, Δy), Δy down the rows, and the imshow extent."""
    import torch

    dy, dx = torch.meshgrid(torch.arange(-radius_y, radius_y + 1),
                            torch.arange(-radius_x, radius_x + 1), indexing="ij")
    extent = (-radius_x - 0.5, radius_x + 0.5, radius_y + 0.5, -radius_y - 0.5)
    return torch.stack((dx, dy), dim=-1), extent


def _heatmap_row(count: int, *, panel_width: float = 3.3, height: float = 4.0):
    """``count`` heatmap axes in a row and a colorbar axis, laid out by hand.

    Constrained layout costs about a third of a redraw here, too much for a live slider.
    """
    width = panel_width * count + 1.4
    figure = Figure(figsize=(width, height), layout="none")
    axes = figure.subplots(1, count, squeeze=True)
    figure.subplots_adjust(left=0.75 / width, right=1 - 1.45 / width, bottom=0.13, top=0.80,
                           wspace=0.35)
    colorbar_axes = figure.add_axes((1 - 1.2 / width, 0.16, 0.14 / width, 0.6))
    return figure, (list(axes) if count > 1 else [axes]), colorbar_axes


def _kernel_image(axes, kernel, extent, title):
    from matplotlib.ticker import MaxNLocator

    image = axes.imshow(getattr(kernel, "numpy", lambda: kernel)(), extent=extent,
                        cmap=DIVERGING_CMAP, vmin=-1, vmax=1, interpolation="nearest")
    # A fixed title height skips matplotlib's search for overlapping ticks (slow per redraw).
    axes.set_title(title, y=1.01)
    axes.set(xlabel=_("Δx (patches)"), ylabel=_("Δy (patches)"))
    axes.grid(False)
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(MaxNLocator(5, integer=True))
    return image


@course_style
def rope_2d_kernels(size: int = 8, base: float = 100.0, dim: int = 32):
    """Relative-position kernels K(Δx, Δy) on a size × size patch grid: axial 2D RoPE vs
    flattened 1D RoPE (raster position m = y·size + x, so Δm = Δy·size + Δx).

    Images (in order): axial kernel, flattened kernel, both ``(2·size−1, 2·size−1)``.
    Circles mark (1, 0) and the row-end wrap (−(size−1), 1): both have Δm = 1. The axes
    span offsets up to ±15 (a 16 × 16 grid) whatever the size, so a bigger grid shows as a
    bigger kernel. A live figure: a panel updates it in place.
    """
    from rope_lab import _validate

    _validate.check_positive_int(size, "size")
    figure, (left, right), colorbar_axes = _heatmap_row(2, panel_width=3.7, height=4.4)
    empty = [[0.0]]
    images = [_kernel_image(left, empty, None, _("axial 2D RoPE")),
              _kernel_image(right, empty, None, _("flattened 1D RoPE"))]
    marks = [axes.plot([], [], "o", markersize=10, markerfacecolor="none",
                       markeredgecolor=role("reference"), markeredgewidth=2)[0]
             for axes in (left, right)]
    figure.colorbar(images[1], cax=colorbar_axes, label="K(Δx, Δy)",
                    ticks=[-1, -0.5, 0, 0.5, 1])
    suptitle = figure.suptitle(" ", fontsize=13)
    reach = max(size, 16) - 0.5
    for axes in (left, right):
        axes.set(xlim=(-reach, reach), ylim=(reach, -reach), facecolor="0.93")

    def update(size=size, base=base, dim=dim):
        import torch

        from rope_lab import nd
        from rope_lab.rope import inv_freq

        _validate.check_positive_int(size, "size")
        if size - 0.5 > reach:
            return False  # a grid bigger than the axes: build anew
        offsets, extent = _offset_grid(size - 1, size - 1)
        axial = nd.relative_kernel(nd.axial_freqs(dim, base, dtype=torch.float64), offsets)
        raster = offsets[..., 1:] * size + offsets[..., :1]
        flat = nd.relative_kernel(inv_freq(dim, base, dtype=torch.float64)[None, :], raster)
        for image, kernel in zip(images, (axial, flat), strict=True):
            image.set_data(kernel.numpy())
            image.set_extent(extent)
        for mark in marks:
            mark.set_data([1, -(size - 1)], [0, 1])
        suptitle.set_text(_("Score of a patch with a copy of itself at (Δx, Δy): {size}×{size} "
                            "grid, d = {dim}, base = {base}").format(
                                size=size, dim=number(dim), base=number(base)))
        return None

    return live(figure, update, animated=[*images, *marks, suptitle])


@course_style
def rope_mixed_kernels(angles_degrees=(0.0, 30.0, 45.0), base: float = 10.0, dim: int = 32,
                       radius: int = 7):
    """RoPE-Mixed kernels K(Δx, Δy) for a few frequency directions (one image per angle).

    Images (in order): one ``(2·radius+1, 2·radius+1)`` kernel per angle of
    :func:`rope_lab.nd.mixed_freqs`; angle 0 is axial RoPE. A live figure: a panel
    updates it in place (same number of angles).
    """
    count = len(list(angles_degrees))
    # square images 1.9 in wide: a taller figure only adds space above and below them
    figure, axes_row, colorbar_axes = _heatmap_row(count, panel_width=2.6, height=3.1)
    offsets, extent = _offset_grid(radius, radius)
    images = [_kernel_image(axes, [[0.0]], extent, " ") for axes in axes_row]
    for axes in list(axes_row)[1:]:  # one y label for the row: narrow panels, no overlap
        axes.set_ylabel("")
    figure.colorbar(images[-1], cax=colorbar_axes, label="K(Δx, Δy)",
                    ticks=[-1, -0.5, 0, 0.5, 1])
    suptitle = figure.suptitle(" ", fontsize=13)

    def update(angles_degrees=angles_degrees, base=base, dim=dim, radius=radius):
        import math

        import torch

        from rope_lab import nd

        angles_degrees = list(angles_degrees)
        if len(angles_degrees) != count:
            return False
        offsets, extent = _offset_grid(radius, radius)
        for axes, image, degrees in zip(axes_row, images, angles_degrees, strict=True):
            freqs = nd.mixed_freqs(dim, base, math.radians(degrees), dtype=torch.float64)
            image.set_data(nd.relative_kernel(freqs, offsets).numpy())
            image.set_extent(extent)
            axes.set_title(_("direction {degrees}°").format(degrees=number(degrees))
                           + (_(" (= axial)") if degrees == 0 else ""))
        suptitle.set_text(_("RoPE-Mixed kernels: d = {dim}, base = {base}").format(
            dim=number(dim), base=number(base)))
        return None

    return live(figure, update, animated=[*images, *(axes.title for axes in axes_row),
                                          suptitle])


@course_style
def mrope_sections(temporal_pairs: int = 16, base: float = 1e6, dim: int = 128,
                   max_offset: int = 48):
    """M-RoPE: which pairs turn with t, h, w, and the kernel along each axis.

    h and w share the pairs left after ``temporal_pairs`` (w gets the odd one).
    Left: log10 θ_i per pair, one marker series per axis (t, h, w). Right: lines K(Δ along t),
    K(Δ along h), K(Δ along w) for Δ = 0 … max_offset. A live figure: a panel updates it
    in place.
    """
    pairs = dim // 2
    # Laid out by hand, like the heatmaps: constrained layout is slow for a live slider.
    figure = Figure(figsize=(9.0, 4.3), layout="none")  # 810 CSS px: fits the lab output
    left, right = figure.subplots(1, 2)
    figure.subplots_adjust(left=0.09, right=0.98, bottom=0.15, top=0.8, wspace=0.28)
    names = (_("t (time)"), _("h (height)"), _("w (width)"))
    speeds, kernels = [], []
    for name, colour in zip(names, shades("rope", 3), strict=True):
        speeds.append(left.plot([], [], "o", markersize=4, color=colour, label=name)[0])
        kernels.append(right.plot([], [], color=colour, lw=2, label=name)[0])
    # log10 on a linear axis: log-scale tick placement is slow for a live slider; the range
    # holds every base up to 10⁷, so moving the base never rescales it.
    left.set(xlabel=_("pair i"), ylabel=_("log₁₀ θᵢ (rad per position)"), xlim=(-1, pairs),
             ylim=(-7.5, 0.5))
    right.set(xlabel=_("offset Δ along the axis (positions)"), ylabel="K", ylim=(-0.05, 1.02),
              xlim=(0, max_offset), title=_("kernel along one axis"))
    right.legend(loc="lower left")
    left.legend(loc="lower left")
    suptitle = figure.suptitle(" ", fontsize=13)

    def update(temporal_pairs=temporal_pairs, base=base, dim=dim, max_offset=max_offset):
        import torch

        from rope_lab import nd

        if dim // 2 != pairs:
            return False
        height_pairs = (pairs - temporal_pairs) // 2
        section = (temporal_pairs, height_pairs, pairs - temporal_pairs - height_pairs)
        freqs = nd.mrope_freqs(dim, base, section, dtype=torch.float64)
        offsets = torch.arange(max_offset + 1)
        for axis, (speed, kernel) in enumerate(zip(speeds, kernels, strict=True)):
            owned = torch.nonzero(freqs[axis]).flatten()
            speed.set_data(owned.numpy(), freqs[axis, owned].log10().numpy())
            along = torch.zeros(max_offset + 1, 3, dtype=torch.long)
            along[:, axis] = offsets
            kernel.set_data(offsets.numpy(), nd.relative_kernel(freqs, along).numpy())
        left.set_title(_("pairs for t, h, w: {section}").format(section=list(section)))
        right.set_xlim(0, max_offset)
        suptitle.set_text(_("M-RoPE (Qwen2-VL style), d = {dim}, base = {base}").format(
            dim=number(dim), base=number(base)))
        return None

    return live(figure, update, animated=[*speeds, *kernels, left.title, suptitle])
