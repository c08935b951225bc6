"""Figures of notebook 03 RoPE in 2D."""

from __future__ import annotations

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    fixed_layout_figure,
    live,
    new_figure,
    number,
    role,
)


def _arrow(axes, tip, colour, *, dashed=False):
    """One arrow from the origin to ``tip``; axes.texts keeps it (an annotation whose
    ``.xy`` is the tip)."""
    style = dict(arrowstyle="-|>", color=colour, lw=2.5, mutation_scale=18,
                 linestyle="--" if dashed else "-", alpha=0.55 if dashed else 1.0)
    axes.annotate("", xy=tip, xytext=(0.0, 0.0), arrowprops=style)


def _spread(angles, gap):
    """``angles`` (radians) moved apart until neighbours around the circle are at least
    ``gap`` apart, each by as little as it takes (equal angles split symmetrically)."""
    import math

    spread = list(angles)
    if len(spread) < 2:
        return spread
    for _step in range(200):
        moved = False
        order = sorted(range(len(spread)), key=lambda i: spread[i] % (2 * math.pi))
        for first, second in zip(order, order[1:] + order[:1], strict=True):
            apart = (spread[second] - spread[first]) % (2 * math.pi)
            if apart < gap - 1e-9:
                spread[first] -= (gap - apart) / 2
                spread[second] += (gap - apart) / 2
                moved = True
        if not moved:
            break
    return spread


def _tip_labels(axes, arrows, radius):
    """Name each arrow (``arrows``: (tip, text, colour)) just beyond the longest tip, in its
    direction, on one circle of radius 1.1·``radius``; labels of arrows pointing the same
    way (R₀q on q, k under R₂q) are turned apart until they no longer meet (18° ≈ the
    widest label at that radius), so no label covers another or an arrow. The text is the
    arrow's colour darkened to 4.5:1 (sky blue letters are faint on a projector)."""
    import math

    from rope_lab.plots.style import readable

    at = 1.1 * radius
    directions = _spread([math.atan2(tip[1], tip[0]) for tip, _, _ in arrows],
                         math.radians(18))
    for (_tip, text, colour), angle in zip(arrows, directions, strict=True):
        x, y = at * math.cos(angle), at * math.sin(angle)
        axes.text(x, y, text, color=readable(colour), fontsize=14, fontweight="bold",
                  ha="left" if x >= 0 else "right", va="bottom" if y >= 0 else "top")


def _angle_arc(axes, start, end, radius, colour, label):
    """The arc from direction ``start`` to ``end`` (radians, the short way round) and its
    label just outside the arc's middle."""
    import math

    import torch

    sweep = math.remainder(end - start, 2 * math.pi)
    arc = torch.linspace(start, start + sweep, 60)
    axes.plot(radius * arc.cos(), radius * arc.sin(), color=colour, lw=3)
    middle = start + sweep / 2
    axes.text(1.18 * radius * math.cos(middle), 1.18 * radius * math.sin(middle), label,
              color=colour, fontsize=14, fontweight="bold",
              ha="left" if math.cos(middle) >= 0 else "right",
              va="bottom" if math.sin(middle) >= 0 else "top")
    return sweep


def _rotate_2d(vector, angle):
    import math

    c, s = math.cos(angle), math.sin(angle)
    return (c * vector[0] - s * vector[1], s * vector[0] + c * vector[1])


@course_style
def complex_rotation(z=(1.0, 0.0), angle: float | None = None):
    """z and z·e^{i·angle} on the complex plane, with the unit circle and the angle's arc.

    ``angle`` defaults to π/4. Data: the arrows are ``axes.texts`` annotations (``.xy`` is
    the tip); ``axes.lines[1]`` is the rotated point.
    """
    from rope_lab import _validate

    if angle is not None:
        _validate.check_finite_number(angle, "angle")
    import math

    import torch

    angle = math.pi / 4 if angle is None else angle
    figure, axes = new_figure(width=5.5, height=5.5)
    turned = _rotate_2d(z, angle)
    t = torch.linspace(0, 2 * math.pi, 200)
    axes.plot(t.cos(), t.sin(), color=role("context"), lw=1, label=_("unit circle |z| = 1"))
    axes.plot([turned[0]], [turned[1]], "o", color=role("rope"), ms=7)
    start = math.atan2(z[1], z[0])
    arc = torch.linspace(start, start + angle, 50)
    axes.plot(0.3 * arc.cos(), 0.3 * arc.sin(), color=role("reference"), lw=1.5)
    _arrow(axes, z, role("rope"), dashed=True)
    _arrow(axes, turned, role("rope"))
    _tip_labels(axes, [(z, "z", role("rope")), (turned, r"$z\,e^{i\varphi}$", role("rope"))],
                max(math.hypot(*z), math.hypot(*turned)))
    axes.text(-1.25, -1.2, f"z = {z[0]:.3f} + {z[1]:.3f}i\n"
              f"φ = {angle:.4f} rad\nz·e^(iφ) = {turned[0]:.3f} + {turned[1]:.3f}i",
              fontsize=12, va="bottom")
    axes.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal", xlabel=_("real part"),
             ylabel=_("imaginary part"), title=_("Multiplying by e^(iφ) rotates by φ"))
    return figure


@course_style
def rotation_2d(theta: float = 0.5, m: int = 2, n: int = 5, shift: int = 0,
                q=(1.0, 0.4), k=(0.3, 0.9)):
    """q, k (dashed) and R_{m+s} q, R_{n+s} k (solid) as arrows, and the angle between the
    rotated pair drawn as an arc (``axes.lines[2]``) labelled in degrees: the quantity that
    stays constant when both tokens shift. The title shows the angle and the score.

    The score ⟨R_{m+s} q, R_{n+s} k⟩ = qᵀ R_{(n−m)θ} k does not depend on the shift s.
    Data: the arrows are ``axes.texts`` annotations (``.xy`` is the arrow's tip). A live
    figure: a panel updates it in place.
    """
    import math

    import torch

    from rope_lab import _validate

    # Fixed margins: constrained layout leaves out the animated two-line title and would
    # cut it off.
    figure, axes = fixed_layout_figure(1, 1, width=6.0, height=6.0, left=0.13, right=0.97,
                                       bottom=0.1, top=0.86)
    radius = max(math.hypot(*q), math.hypot(*k))
    t = torch.linspace(0, 2 * math.pi, 120)
    for length in (math.hypot(*q), math.hypot(*k)):
        axes.plot(length * t.cos(), length * t.sin(), color=role("context"), lw=1, alpha=0.6)
    limit = 1.45 * radius
    axes.set(xlim=(-limit, limit), ylim=(-limit, limit), aspect="equal",
             xlabel=_("feature 1"), ylabel=_("feature 2"))
    drawn: list = []  # the arrows, their labels and the arc: redrawn on every update
    subscript = str.maketrans("-0123456789", "₋₀₁₂₃₄₅₆₇₈₉")

    def update(theta=theta, m=m, n=n, shift=shift, q=q, k=k):
        _validate.check_finite_number(theta, "theta")
        for name, value in (("m", m), ("n", n), ("shift", shift)):
            _validate.check_int(value, name)
        for artist in drawn:
            artist.remove()
        before = set(axes.texts) | set(axes.lines)
        pos_q, pos_k = m + shift, n + shift
        rotated_q, rotated_k = _rotate_2d(q, pos_q * theta), _rotate_2d(k, pos_k * theta)
        score = rotated_q[0] * rotated_k[0] + rotated_q[1] * rotated_k[1]
        _arrow(axes, q, role("rope"), dashed=True)
        _arrow(axes, k, role("key"), dashed=True)
        _arrow(axes, rotated_q, role("rope"))
        _arrow(axes, rotated_k, role("key"))
        _tip_labels(axes, [(q, "q", role("rope")), (k, "k", role("key")),
                           (rotated_q, f"R{str(pos_q).translate(subscript)}q", role("rope")),
                           (rotated_k, f"R{str(pos_k).translate(subscript)}k", role("key"))],
                    radius)
        # The point of the figure: the angle from R_m q to R_n k is the angle from q to k
        # plus (n − m)θ, whatever the shift — the score is |q||k| times its cosine.
        between = _angle_arc(axes, math.atan2(rotated_q[1], rotated_q[0]),
                             math.atan2(rotated_k[1], rotated_k[0]), 0.42 * radius,
                             role("reference"), "")
        axes.texts[-1].set_text(f"{math.degrees(abs(between)):.0f}°")
        drawn[:] = [a for a in [*axes.texts, *axes.lines] if a not in before]
        axes.set_title(_("θ = {theta} rad, m = {m}, n = {n}, n − m = {offset}\n"
                         "angle(R_m q, R_n k) = {angle:.0f}°, score = {score:.4f}").format(
                             theta=number(theta), m=pos_q, n=pos_k, offset=pos_k - pos_q,
                             angle=math.degrees(abs(between)), score=score), fontsize=14)
        figure.rope_lab_animated = [*drawn, axes.title]
        return None

    update()  # validates the arguments before anything is returned
    return live(figure, update, animated=figure.rope_lab_animated)
