"""Figures of notebook 02 absolute position encodings."""

from __future__ import annotations

from rope_lab.i18n import N_
from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    DIVERGING_CMAP,
    course_style,
    fixed_layout_figure,
    live,
    new_figure,
    number,
    role,
    shades,
)


def _rms(table):
    return table.double().pow(2).mean(dim=-1).sqrt()


@course_style
def encoding_sizes(length: int = 64, dim: int = 16, *, embedding_rms: float = 1.0):
    """RMS of PE(p) against p = 1 … length−1 for four encodings, next to the token's RMS.

    A LayerNorm output has RMS 1 over its features; an encoding much larger than that
    drowns the token (low signal-to-noise). Log-scaled y axis.

    Data: one line per encoding, label = encoding name, ydata = RMS(PE(p)) for p ≥ 1.
    """
    from rope_lab import absolute

    figure, ax = new_figure(width=8.0, height=4.8)
    # From p = 1: three of the codes are the zero vector at p = 0, which a log axis cannot show.
    positions = range(1, length)
    tables = {
        _("integer"): absolute.integer_pe(length, dim),
        _("normalized integer (L = {length})").format(length=length):
            absolute.normalized_integer_pe(length, dim),
        _("binary"): absolute.binary_pe(length, dim),
        _("sinusoidal"): absolute.sinusoidal_pe(length, dim),
    }
    # all four are added position vectors: one colour family, told apart by shade and style
    for (name, table), colour, style in zip(tables.items(), shades("absolute", 4),
                                            ("-", "--", "-.", ":"), strict=True):
        ax.plot(positions, _rms(table[1:]).numpy(), label=name, linewidth=2.4, color=colour,
                linestyle=style)
    ax.axhline(embedding_rms, color=role("reference"), linestyle="--", linewidth=1.5,
               label=_("token embedding (LayerNorm output)"))
    ax.set_yscale("log")
    ax.set(title=_("How big is PE(p) next to the token? (dim = {dim})").format(dim=dim),
           xlabel=_("position p"), ylabel=_("RMS of the vector"))
    # Under the axes: the five lines leave no corner free (the binary code's steps ran
    # under a legend at the lower right). Two columns: in three, the long reference label
    # reached past the canvas with matplotlib 3.7's text metrics.
    figure.legend(loc="outside lower center", ncols=2)
    return figure


@course_style
def binary_pe_figure(dim: int = 5):
    """Binary PE for positions 0 … 2^dim − 1: the bits (top) and the jump between neighbours.

    Both panels span the 2^d positions whatever d is (x ticks at 0, 2^d/4, …, 2^d; the
    jump between p and p + 1 is drawn at the boundary p + 1) and the jump axis is fixed to
    the largest d, √8: turning d changes the pictures, never the axes (a slider move then
    redraws the bits, their row labels and the curve only).

    Data: ``fig.axes[0].images[0].get_array()`` is the ``(dim, 2^dim)`` bit matrix (row j =
    bit j, LSB on top); ``fig.axes[1].lines[0].get_ydata()`` is ‖PE(p+1) − PE(p)‖ (its
    x data the positions p; its transform places them). A live figure: a panel updates it
    in place.
    """
    from matplotlib.transforms import Affine2D

    figure, (top, bottom) = fixed_layout_figure(2, 1, width=8.6, height=5.4, left=0.12,
                                                right=0.97, hspace=0.55, bottom=0.1,
                                                top=0.92,
                                                gridspec_kw={"height_ratios": [1.2, 1]})
    image = top.imshow([[0.0]], aspect="auto", cmap="Greys", vmin=0, vmax=1,
                       interpolation="nearest", extent=(0, 1, 1, 0))
    top.grid(False)
    spans = ["0", "$2^d/4$", "$2^d/2$", "$3 \\cdot 2^d/4$", "$2^d$"]
    top.set(xlabel=_("position p"), ylabel=_("feature"), xlim=(0, 1), ylim=(1, 0))
    top.set_xticks([0, 0.25, 0.5, 0.75, 1], spans)
    top.set_yticks([])
    top.yaxis.set_label_coords(-0.11, 0.5)  # left of the row labels
    # One label per bit row (at most 8), moved with the rows: animated, like the bits.
    row_labels = [top.text(-0.01, 0, _("bit {j}").format(j=j),
                           transform=top.get_yaxis_transform(), ha="right", va="center")
                  for j in range(8)]
    jumps_line, = bottom.plot([], [], marker="o", markersize=4, color=role("absolute"),
                              label=_("binary"))
    bottom.set(title=_("Distance between neighbours ‖PE(p+1) − PE(p)‖"),
               xlabel=_("position p"), ylabel=_("distance"), xlim=(0, 1), ylim=(0, 3))
    bottom.set_xticks([0, 0.25, 0.5, 0.75, 1], spans)
    # Below y = 1: neighbours differ in at least one bit, so no jump reaches there.
    bottom.legend(loc="lower right")

    def update(dim=dim):
        from rope_lab import absolute

        length = 2**dim
        bits = absolute.binary_pe(length, dim)
        image.set_data(bits.T.numpy())
        for j, label in enumerate(row_labels):
            label.set_visible(j < dim)
            label.set_y((j + 0.5) / dim)
        top.set_title(_("Binary position encoding, d = {dim} bits: positions 0 … {last}")
                      .format(dim=number(dim), last=number(length - 1)))
        jumps = (bits[1:] - bits[:-1]).norm(dim=-1)
        jumps_line.set_data(range(length - 1), jumps.numpy())
        # position p → (p + 1) / 2^d: the jump sits on the boundary between p and p + 1
        jumps_line.set_transform(Affine2D().translate(1, 0).scale(1 / length, 1)
                                 + bottom.transData)
        return None

    return live(figure, update, animated=[image, jumps_line, top.title, *row_labels])


@course_style
def sinusoidal_pe_figure(length: int = 128, dim: int = 64, base: float = 10000.0):
    """Sinusoidal PE as a heatmap (left) and PE(p)·PE(p+k) against k (right).

    The right panel draws the dot product from p = 0 and from p = length/4: the curves
    coincide, because the product is Σ_i cos(k·ω_i), a function of k alone.

    Both panels are drawn in units of d: the heatmap's x axis runs over the d features
    (ticks at 0, d/4, d/2, 3d/4, d) and the dot product is read in units of
    ‖PE(p)‖² = d/2, so turning d changes the pictures, never the axes (a slider move then
    redraws the curves and the table only).

    Data: ``fig.axes[0].images[0].get_array()`` is the ``(length, dim)`` table;
    ``fig.axes[1].lines[0]`` is PE(0)·PE(k), ``lines[1]`` PE(length/4)·PE(length/4 + k)
    (the dot products themselves; each line's transform divides them by d/2).
    A live figure: a panel updates it in place.
    """
    figure, (left, right) = fixed_layout_figure(1, 2, width=9.0, height=5.0, left=0.085,
                                                right=0.98, bottom=0.215, top=0.86,
                                                wspace=0.45,
                                                gridspec_kw={"width_ratios": [1, 1.3]})
    image = left.imshow([[0.0]], aspect="auto", cmap=DIVERGING_CMAP, vmin=-1, vmax=1,
                        interpolation="nearest")
    left.grid(False)
    left.set(title="PE(p)", xlabel=_("feature (even: sin, odd: cos)"),
             ylabel=_("position p"), xlim=(0, 1))
    fractions = ["0", "d/4", "d/2", "3d/4", "d"]
    left.set_xticks([0, 0.25, 0.5, 0.75, 1], fractions)
    figure.colorbar(image, ax=left, shrink=0.85, ticks=[-1, 0, 1])
    from_zero, = right.plot([], [], linewidth=2, label=_("from p = 0"))
    from_later, = right.plot([], [], linewidth=2, linestyle="--", label=_("from p = L/4"))
    right.axhline(0, color=role("context"), linewidth=0.8)
    right.set(title=_("PE(p) · PE(p + k) depends on k only"), xlabel=_("offset k"),
              ylabel=_("dot product"), ylim=(-1.1, 1.1))
    right.set_yticks([-1, -0.5, 0, 0.5, 1], ["−d/2", "−d/4", "0", "d/4", "d/2"])
    # Under the axes: the dot product fills the panel for a small base (base 1: cos k).
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, handlelength=1.5,
                 columnspacing=1.0, borderaxespad=0)
    suptitle = figure.suptitle(" ")

    def update(length=length, dim=dim, base=base):
        from matplotlib.transforms import Affine2D

        from rope_lab import absolute

        pe = absolute.sinusoidal_pe(length, dim, base)
        image.set_data(pe.numpy())
        image.set_extent((0, 1, length - 0.5, -0.5))  # feature j over [j/d, (j+1)/d]
        start = length // 4
        in_units = Affine2D().scale(1, 2 / dim) + right.transData  # of d/2 = ‖PE(p)‖²
        from_zero.set_data(range(length), (pe[0] @ pe.T).numpy())
        from_later.set_data(range(length - start), (pe[start] @ pe[start:].T).numpy())
        from_zero.set_transform(in_units)
        from_later.set_transform(in_units)
        right.set_xlim(0, length - 1)
        suptitle.set_text(_("Sinusoidal encoding: dim = {dim}, base = {base}, length L = "
                            "{length}").format(dim=number(dim), base=number(base),
                                               length=number(length)))
        return None

    return live(figure, update, animated=[image, from_zero, from_later, suptitle])


@course_style
def position_similarity(table, *, positions: int = 128,
                        title: str = N_("Learned position table"), zoom: int = 128):
    """Cosine similarity between the rows of a position table, first ``positions`` rows.

    With more than ``zoom`` rows, two panels: the whole matrix, resampled with antialiasing
    (a 512-row matrix in a 300-pixel panel otherwise aliases into stripes that are not in
    the data) with the zoomed corner outlined, and rows/columns 0 … ``zoom`` − 1 at one
    cell per row, where the stripes along the diagonal can be seen.

    Data: ``fig.axes[0].images[0].get_array()`` is the ``(positions, positions)`` matrix and
    ``fig.axes[1].images[0]`` (when drawn) its top-left ``(zoom, zoom)`` block.
    """
    from matplotlib.patches import Rectangle

    rows = table[:positions].detach().cpu().double()
    unit = rows / rows.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    similarity = (unit @ unit.T).float()
    zoomed = len(similarity) > zoom
    figure, axes = new_figure(1, 2 if zoomed else 1, width=9.2 if zoomed else 5.6,
                              height=4.6)
    panels = list(axes) if zoomed else [axes]
    image = panels[0].imshow(similarity.numpy(), cmap=DIVERGING_CMAP, vmin=-1, vmax=1,
                             interpolation="antialiased" if zoomed else "nearest")
    panels[0].set(title=_("all {count} positions").format(count=len(similarity)) if zoomed
                  else _(title))
    if zoomed:
        panels[0].add_patch(Rectangle((-0.5, -0.5), zoom, zoom, fill=False, lw=2.5,
                                      edgecolor=role("reference")))
        panels[1].imshow(similarity[:zoom, :zoom].numpy(), cmap=DIVERGING_CMAP, vmin=-1,
                         vmax=1, interpolation="nearest")
        panels[1].set(title=_("zoom: positions 0 … {last}").format(last=zoom - 1))
        figure.suptitle(_(title), fontsize=15)
    for ax in panels:
        ax.grid(False)
        ax.set(xlabel=_("position q"), ylabel=_("position p"))
    figure.colorbar(image, ax=panels, shrink=0.85, label="cos(PE(p), PE(q))")
    return figure
