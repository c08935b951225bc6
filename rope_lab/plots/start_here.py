"""Figures of notebook 00 Start here: the key to the course's colours."""

from __future__ import annotations

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    ROLE_COLOURS,
    ROLE_MEANINGS,
    course_style,
    new_figure,
    shades,
)


@course_style
def visual_language():
    """The colour key of the whole course: one swatch per role of
    :data:`rope_lab.plots.style.ROLE_COLOURS` with its meaning, and how an ordered set of
    one role is drawn (shades of its colour, darker first).

    Data: ``axes.lines[j]`` is the swatch of the j-th role, in the order of ROLE_COLOURS,
    coloured with that role's colour; ``axes.texts[j]`` its meaning; ``figure.axes[1]`` the
    shades example.
    """
    figure, axes = new_figure(width=8.6, height=4.4)
    roles = list(ROLE_COLOURS)
    for row, name in enumerate(roles):
        y = len(roles) - row
        axes.plot([0.0, 0.9], [y, y], color=ROLE_COLOURS[name], lw=9, solid_capstyle="butt")
        axes.text(1.15, y, _(ROLE_MEANINGS[name]), va="center", fontsize=14)
    # the shades example in its own inset: it shows one role, not eight meanings
    inset = axes.inset_axes([0.72, 0.0, 0.28, 0.3])
    for j, colour in enumerate(shades("bias", 3)):
        inset.plot([0.32 * j, 0.25 + 0.32 * j], [0, 0], color=colour, lw=9,
                   solid_capstyle="butt")
    inset.text(0.0, 0.6, _("ordered items of one role:\nshades, darker first"), fontsize=13,
               va="bottom")
    inset.set(xlim=(-0.05, 1.6), ylim=(-0.5, 2.2))
    inset.set_axis_off()
    axes.set(xlim=(-0.1, 9.6), ylim=(0.4, len(roles) + 0.6),
             )
    axes.set_title(_("One colour, one meaning, in every figure of the course"), fontsize=15)
    axes.set_axis_off()
    return figure
