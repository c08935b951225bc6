"""Figures for the course: pure functions, parameters in, a matplotlib ``Figure`` out.

No pyplot state: every function builds its own ``Figure`` (so nothing is drawn twice and
nothing leaks between cells), uses the colour-blind-safe Okabe–Ito palette, and sets a
title and labelled axes. Notebooks display the returned figure; widgets redraw it.

One module per notebook (named like :mod:`rope_lab.exercises`), plus :mod:`.style`, the
shared visual language (palette, fonts, sizes, number format, log ticks, PNG rendering).
Every figure is re-exported here, so ``rope_lab.plots.<name>`` works for all of them. Each
function's docstring names the data it plots so tests can read it back from ``fig.axes``.
"""

from __future__ import annotations

from rope_lab.plots.absolute_position_encodings import (
    binary_pe_figure,
    encoding_sizes,
    position_similarity,
    sinusoidal_pe_figure,
)
from rope_lab.plots.attention_without_position import (
    attention_weights,
)
from rope_lab.plots.length_extrapolation import (
    EXPERIMENT_STYLE,
    SCALING_COLOURS,
    SCALING_STYLES,
    alibi_heatmap,
    extrapolation_by_position,
    extrapolation_losses,
    frequency_overlay,
    interpolation_vs_extrapolation,
    scaling_explorer,
    wavelength_chart,
)
from rope_lab.plots.long_range_decay import (
    abel_curve,
    base_sweep,
    bound_counterexample,
    decay_and_abel,
    minimum_base_chart,
    random_vs_correlated,
)
from rope_lab.plots.performance import (
    cost_versus_size,
    gpu_speed,
    implementation_bars,
    layer_shares,
    roofline,
)
from rope_lab.plots.real_models import (
    atlas_turned_pairs,
    base_over_years,
    config_spectrum,
    family_spectra,
    longrope_switch,
    rotary_fraction,
    turned_pairs,
)
from rope_lab.plots.rope_and_linear_attention import (
    attention_cost,
    linear_attention_normalizers,
)
from rope_lab.plots.rope_beyond_1d import (
    mrope_sections,
    rope_2d_kernels,
    rope_mixed_kernels,
)
from rope_lab.plots.rope_in_2d import (
    complex_rotation,
    rotation_2d,
)
from rope_lab.plots.rope_in_d_dimensions import (
    angle_precision,
    rope_frequencies,
    singular_values,
)
from rope_lab.plots.start_here import (
    visual_language,
)
from rope_lab.plots.style import (
    COURSE_STYLE,
    DISPLAY_DPI,
    DIVERGING_CMAP,
    PALETTE,
    PIXEL_RATIO,
    ROLE_COLOURS,
    ROLE_MEANINGS,
    SEQUENTIAL_CMAP,
    course_style,
    encode_png,
    fixed_layout,
    fixed_layout_figure,
    house_ticks,
    live,
    log_ticks,
    new_figure,
    nice_limit,
    number,
    one_two_five,
    render_png,
    render_rgba,
    role,
    shades,
)

__all__ = [
    "COURSE_STYLE",
    "DISPLAY_DPI",
    "DIVERGING_CMAP",
    "EXPERIMENT_STYLE",
    "PALETTE",
    "PIXEL_RATIO",
    "ROLE_COLOURS",
    "ROLE_MEANINGS",
    "SCALING_COLOURS",
    "SCALING_STYLES",
    "SEQUENTIAL_CMAP",
    "abel_curve",
    "alibi_heatmap",
    "angle_precision",
    "attention_cost",
    "attention_weights",
    "base_sweep",
    "binary_pe_figure",
    "bound_counterexample",
    "complex_rotation",
    "cost_versus_size",
    "course_style",
    "encode_png",
    "decay_and_abel",
    "encoding_sizes",
    "extrapolation_by_position",
    "extrapolation_losses",
    "fixed_layout",
    "fixed_layout_figure",
    "frequency_overlay",
    "house_ticks",
    "gpu_speed",
    "implementation_bars",
    "interpolation_vs_extrapolation",
    "layer_shares",
    "linear_attention_normalizers",
    "live",
    "log_ticks",
    "minimum_base_chart",
    "mrope_sections",
    "new_figure",
    "nice_limit",
    "number",
    "one_two_five",
    "position_similarity",
    "random_vs_correlated",
    "render_png",
    "render_rgba",
    "roofline",
    "rope_2d_kernels",
    "rope_frequencies",
    "role",
    "rope_mixed_kernels",
    "rotation_2d",
    "scaling_explorer",
    "shades",
    "singular_values",
    "sinusoidal_pe_figure",
    "visual_language",
    "wavelength_chart",
    "base_over_years",
    "config_spectrum",
    "family_spectra",
    "rotary_fraction",
    "turned_pairs",
    "atlas_turned_pairs",
    "longrope_switch",
]
