"""The course's visual language: every figure stays readable for a deuteranope.

Deuteranopia (no green cones, about 1 % of men) is simulated with the matrix of Machado,
Oliveira and Fernandes (2009, "A physiologically-based model for simulation of color vision
deficiency", IEEE TVCG 15(6), severity 1.0), applied to linear RGB — written out here, not
taken from the package. Two series drawn in one Axes in different colours (lines, markers,
bars, filled bands) must stay at least ``MIN_DELTA_E`` apart in CIELAB (ΔE*ab, 1976) after
the simulation: two colours a deuteranope cannot tell apart would carry a meaning he cannot
read. Pairs drawn in the *same* colour on purpose (one role, told apart by line style or a
label) are not compared.

Every figure function of notebooks 00–10 is drawn with the arguments its notebook uses
(or its defaults); a new figure function fails ``test_every_figure_function_is_checked``
until it is added to ``FIGURES``.
"""

from __future__ import annotations

import functools
import inspect
import itertools

import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgba

from rope_lab import plots

# Machado et al. (2009), Table 1, deuteranomaly at severity 1.0 (= deuteranopia).
MACHADO_DEUTERANOPIA = np.array([
    [0.367322, 0.860646, -0.227968],
    [0.280085, 0.672501, 0.047413],
    [-0.011820, 0.042940, 0.968881],
])
# ΔE*ab: about 2 is a just-noticeable difference side by side; two thin lines in a figure
# need far more. Matplotlib's default red and green (tab10) end 7.3 apart for a deuteranope.
MIN_DELTA_E = 12.0
SAME_COLOUR = 3.0  # closer than this in normal vision: the same colour, on purpose


def _linear(srgb):
    srgb = np.asarray(srgb, dtype=float)
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _srgb(linear):
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def _lab(srgb):
    """CIELAB (D65) of an sRGB colour, from the sRGB standard's XYZ matrix."""
    xyz = np.array([[0.4124, 0.3576, 0.1805],
                    [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ _linear(srgb)
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def deuteranope(srgb):
    return _srgb(MACHADO_DEUTERANOPIA @ _linear(srgb))


def delta_e(a, b) -> float:
    return float(np.linalg.norm(_lab(a) - _lab(b)))


def _on_white(rgba) -> tuple:
    """The colour as it shows on the white figure: alpha blended with white."""
    r, g, b, a = rgba
    return tuple(a * c + (1 - a) for c in (r, g, b))


def series_colours(axes) -> list[tuple[str, tuple]]:
    """(what, colour on white) of every line, marker, bar and filled band of ``axes``."""
    found = []
    for line in axes.lines:
        if not line.get_visible() or len(np.atleast_1d(line.get_xdata())) == 0:
            continue
        alpha = line.get_alpha() if line.get_alpha() is not None else 1.0
        colour = to_rgba(line.get_color())
        if line.get_linestyle() in ("None", "none", "", " "):  # markers only
            colour = to_rgba(line.get_markerfacecolor())
        found.append((f"line {line.get_label()!r}", _on_white((*colour[:3], alpha))))
    for patch in axes.patches:
        if patch.get_visible() and patch.get_fill():
            found.append((f"patch {type(patch).__name__}", _on_white(patch.get_facecolor())))
    for collection in axes.collections:
        colours = collection.get_facecolor()
        if collection.get_visible() and len(colours) and len(collection.get_paths()) > 0:
            found.append((f"band {collection.get_label()!r}", _on_white(colours[0])))
    return found


def confusable_pairs(figure) -> list[str]:
    """Pairs of series in one Axes that differ in colour but not for a deuteranope."""
    problems = []
    for index, axes in enumerate(figure.axes):
        unique = {}
        for what, colour in series_colours(axes):
            unique.setdefault(tuple(round(c, 3) for c in colour), what)
        for (a, what_a), (b, what_b) in itertools.combinations(unique.items(), 2):
            if delta_e(a, b) < SAME_COLOUR:
                continue
            seen = delta_e(deuteranope(a), deuteranope(b))
            if seen < MIN_DELTA_E:
                problems.append(f"axes {index} ({axes.get_title()!r}): {what_a} and {what_b} "
                                f"are ΔE {seen:.1f} apart for a deuteranope")
    return problems


# --- the simulation itself, against numbers computed independently --------------------------

def test_the_simulation_keeps_grey_and_confuses_red_with_green():
    # A deuteranope sees greys unchanged (each row of the matrix sums to 1) …
    for level in (0.0, 0.3, 0.6, 1.0):
        assert deuteranope((level, level, level)) == pytest.approx([level] * 3, abs=1e-4)
    # … and pure red and a green of the same lightness as nearly the same colour, which
    # anyone with normal vision tells apart at a glance.
    red, green = (0.84, 0.15, 0.16), (0.17, 0.63, 0.17)  # matplotlib tab:red, tab:green
    assert delta_e(red, green) > 80
    assert delta_e(deuteranope(red), deuteranope(green)) < MIN_DELTA_E


def test_lab_of_white_and_black():
    assert _lab((1.0, 1.0, 1.0)) == pytest.approx([100.0, 0.0, 0.0], abs=0.05)
    assert _lab((0.0, 0.0, 0.0)) == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)


def test_the_check_fails_on_a_bad_palette():
    """The figure check is able to fail: red and green series, as a careless plot draws them."""
    figure, axes = plots.new_figure()
    axes.plot([0, 1], [0, 1], color="tab:red", label="extrapolated")
    axes.plot([0, 1], [1, 0], color="tab:green", label="interpolated")
    problems = confusable_pairs(figure)
    assert len(problems) == 1 and "'extrapolated'" in problems[0]
    # the same figure in the course's roles passes
    axes.lines[0].set_color(plots.role("mistake"))
    axes.lines[1].set_color(plots.role("rope"))
    assert confusable_pairs(figure) == []


def test_every_pair_of_roles_stays_distinguishable():
    roles = plots.ROLE_COLOURS
    for (a, colour_a), (b, colour_b) in itertools.combinations(roles.items(), 2):
        seen = delta_e(deuteranope(to_rgba(colour_a)[:3]), deuteranope(to_rgba(colour_b)[:3]))
        assert seen >= MIN_DELTA_E, f"roles {a} and {b}: ΔE {seen:.1f} for a deuteranope"
    assert set(roles) == set(plots.ROLE_MEANINGS)  # every colour has its meaning written down
    assert "#F0E442" not in roles.values()  # yellow vanishes on white


@pytest.mark.parametrize("count", [2, 3, 4])
@pytest.mark.parametrize("role", ["rope", "absolute", "bias", "scaled", "mistake"])
def test_shades_of_a_role_stay_ordered_and_apart(role, count):
    colours = plots.shades(role, count)
    lightness = [_lab(c)[0] for c in colours]
    assert lightness == sorted(lightness)  # darker first
    for a, b in itertools.pairwise(colours):
        assert delta_e(deuteranope(a), deuteranope(b)) >= MIN_DELTA_E


# --- every figure of the course ----------------------------------------------------------------

def _results():
    from rope_lab.experiments import extrapolation

    return extrapolation.load_results()


def _bound_counterexample():
    q = torch.full((64,), 2 ** -0.5, dtype=torch.float64)
    k = torch.randn(64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return plots.bound_counterexample(q, k, torch.arange(1200), marked=1000)


def _interpolation():
    from rope_lab import scaling

    coefficients = scaling.fit_random_scores(dim=16, length=64, seed=1)
    return plots.interpolation_vs_extrapolation(coefficients, dim=16, length=64, zoom=4.0)


def _attention():
    import rope_lab as rl

    x = torch.randn(3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    _, plain = rl.attention(x, x, x, return_weights=True)
    _, causal = rl.attention(x, x, x, mask="causal", return_weights=True)
    return [plots.attention_weights([plain, plain], [list("abc")] * 2, ["a", "b"]),
            plots.attention_weights([causal], [list("abc")], ["c"], causal=True)]


def _singular_values():
    rotation = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))[0]
    return plots.singular_values({"a rotation": rotation, "a bug": rotation * 1.5})


def _performance():
    rows = [{"name": n, "layout": "half", "times_clone": v} for n, v in
            (("clone", 1.0), ("copy_ into a buffer", 0.8), ("apply_rope (default)", 1.25),
             ("reference formula", 4.6), ("dense matrix", 310.0))]
    sweep = [{"seq": s, "clone_ms": s / 1e3, "apply_rope_ms": 1.3 * s / 1e3,
              "reference_ms": 4 * s / 1e3} for s in (256, 512, 1024)]
    return [plots.implementation_bars(rows), plots.implementation_bars(rows, log=False),
            plots.cost_versus_size(sweep, "seq"),
            plots.layer_shares({"MLP": 9.0, "attention": 3.0, "RoPE on q and k": 0.05}),
            plots.roofline(1000.0, 50.0, {"RoPE": (0.375, 18.75), "matmul": (80.0, 900.0)}),
            plots.gpu_speed({"environment": {"gpu": "a GPU"}, "speed": [
                {"case": case, "dtype": "bfloat16", "us_per_tensor": {
                    "clone": 10.0, "apply_rope (default)": 11.0, "without Triton + ids": 40.0,
                    "HF eager (rotary + apply) / 2": 90.0}} for case in ("a", "b", "c")]})]


def _decay():
    from rope_lab import decay

    found = {length: decay.minimum_base(length, 128) for length in (1024, 4096, 8192)}
    return plots.minimum_base_chart(found, models=[("LLaMA 2", 4096, 1e4), ("Llama 3", 8192, 5e5)])


def _real_models():
    """Notebook 10's figures, drawn from the same fixtures and rows as the notebook."""
    from rope_lab.hf import report

    atlas = report.atlas()
    configs = {name: config for name, _, _, config in atlas}
    short = {"sliding_attention": "local", "full_attention": "global"}
    entries = [(label + (f" {short.get(layer_type, layer_type)}" if layer_type else ""),
                year, entry)
               for _, label, year, config in atlas
               for layer_type, entry in report.describe(config).items() if entry is not None]
    return [
        plots.base_over_years([(label.replace(" + YaRN", ""), year, entry.spec.base)
                               for label, year, entry in entries if year]),
        plots.rotary_fraction([(label, 2 * int((entry.inv_freq > 0).sum()), entry.spec.head_dim)
                               for label, _, entry in entries]),
        plots.family_spectra([(label, entry) for label, _, entry in entries
                              if entry.spec.rope_type != "axial"]),
        plots.config_spectrum(configs["gemma_3_4b"], "Gemma 3"),
        plots.longrope_switch(configs["phi_3_5_mini"], "Phi-3.5 mini"),
        plots.atlas_turned_pairs("Llama 3.1 8B", 8192),
    ]


FIGURES = {
    "visual_language": lambda: plots.visual_language(),
    "attention_weights": _attention,
    "encoding_sizes": lambda: plots.encoding_sizes(),
    "binary_pe_figure": lambda: plots.binary_pe_figure(),
    "sinusoidal_pe_figure": lambda: plots.sinusoidal_pe_figure(length=128, dim=64),
    "position_similarity": lambda: plots.position_similarity(
        torch.randn(512, 32, generator=torch.Generator().manual_seed(0)), positions=512),
    "complex_rotation": lambda: plots.complex_rotation(),
    "rotation_2d": lambda: plots.rotation_2d(theta=0.5, m=2, n=5, shift=0),
    "rope_frequencies": lambda: plots.rope_frequencies(dim=64, base=10000.0),
    "angle_precision": lambda: plots.angle_precision(),
    "singular_values": _singular_values,
    "base_sweep": lambda: plots.base_sweep(),
    "bound_counterexample": _bound_counterexample,
    "abel_curve": lambda: plots.abel_curve(),
    "random_vs_correlated": lambda: plots.random_vs_correlated(),
    "decay_and_abel": lambda: plots.decay_and_abel(),
    "minimum_base_chart": _decay,
    "frequency_overlay": lambda: [plots.frequency_overlay(method=m) for m in
                                  ("linear", "ntk", "yarn", "llama3")],
    "wavelength_chart": lambda: plots.wavelength_chart(),
    "scaling_explorer": lambda: plots.scaling_explorer(),
    "interpolation_vs_extrapolation": _interpolation,
    "extrapolation_losses": lambda: plots.extrapolation_losses(_results()),
    "extrapolation_by_position": lambda: plots.extrapolation_by_position(
        _results(), variants=["rope", "rope+yarn", "alibi", "sinusoidal", "learned"]),
    "alibi_heatmap": lambda: plots.alibi_heatmap(seq_len=16, n_heads=8, heads=(0, 3, 7)),
    "linear_attention_normalizers": lambda: plots.linear_attention_normalizers(),
    "attention_cost": lambda: plots.attention_cost(
        [64, 128, 256], {"softmax": [1e-4, 3e-4, 1e-3], "linear": [2e-4, 4e-4, 8e-4]}, 16),
    "rope_2d_kernels": lambda: plots.rope_2d_kernels(),
    "rope_mixed_kernels": lambda: plots.rope_mixed_kernels(),
    "mrope_sections": lambda: plots.mrope_sections(),
    "performance": _performance,
    "real_models": _real_models,
}
# figure functions of the course's own notebooks (00–10), by module
COURSE_MODULES = {"start_here", "attention_without_position", "absolute_position_encodings",
                  "rope_in_2d", "rope_in_d_dimensions", "long_range_decay",
                  "length_extrapolation", "rope_and_linear_attention", "rope_beyond_1d",
                  "performance", "real_models"}
PERFORMANCE = {"implementation_bars", "cost_versus_size", "layer_shares", "roofline",
               "gpu_speed"}
REAL_MODELS = {"base_over_years", "rotary_fraction", "family_spectra", "config_spectrum",
               "longrope_switch", "turned_pairs", "atlas_turned_pairs"}


def test_every_figure_function_is_checked():
    functions = {name for name in plots.__all__
                 if inspect.isfunction(getattr(plots, name))
                 and getattr(plots, name).__module__.rsplit(".", 1)[-1] in COURSE_MODULES}
    assert functions, "no figure functions found"
    missing = functions - set(FIGURES) - PERFORMANCE - REAL_MODELS
    assert not missing, f"add these figures to tests/test_style.py FIGURES: {sorted(missing)}"


@functools.cache
def _drawn(name: str) -> tuple:
    """The figures of ``FIGURES[name]``, drawn once for both tests below."""
    drawn = FIGURES[name]()
    return tuple(drawn) if isinstance(drawn, list) else (drawn,)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_is_readable_with_deuteranopia(name):
    figures = _drawn(name)
    problems = [problem for figure in figures for problem in confusable_pairs(figure)]
    assert not problems, "\n".join(problems)


OUTPUT_WIDTH = 848  # CSS px of JupyterLab's output area at 1280 × 800, sidebar open


def displayed_width(figure) -> int:
    """The width in CSS px a notebook shows ``figure`` at: the inline backend saves it at
    its dpi with ``bbox_inches="tight"`` (cropped to what is drawn, plus the padding)."""
    import io
    import struct

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=figure.dpi, bbox_inches="tight")
    width, _ = struct.unpack(">II", buffer.getvalue()[16:24])  # the PNG's IHDR chunk
    return width


def test_displayed_width_counts_the_tight_padding():
    """The width check is able to fail: 9.4 in at 90 dpi is 846 px of figure, but shown
    with tight-bbox padding it is wider than the output area."""
    import matplotlib

    from rope_lab.plots.style import COURSE_STYLE, DISPLAY_DPI

    with matplotlib.rc_context(COURSE_STYLE):
        figure, axes = plots.new_figure(1, 2, width=9.4, height=3.0)
        for panel in axes:
            panel.set(title="a title", xlabel="x", ylabel="y")
    assert figure.dpi == DISPLAY_DPI
    assert figure.get_figwidth() * DISPLAY_DPI <= OUTPUT_WIDTH < displayed_width(figure)


@pytest.mark.slow
@pytest.mark.versions
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_fits_the_projector(name):
    """At 1280 × 800 with JupyterLab's sidebar open the output is about 848 px wide, and a
    figure shows at DISPLAY_DPI CSS px per inch: no wider than that, no text under 14 px."""
    from matplotlib.text import Text

    from rope_lab.plots.style import DISPLAY_DPI

    for index, figure in enumerate(_drawn(name)):
        assert figure.dpi == DISPLAY_DPI, f"{name}, figure {index}: dpi {figure.dpi}"
        shown = displayed_width(figure)
        assert shown <= OUTPUT_WIDTH, f"{name}, figure {index}: {shown} px wide as shown"
        small = {text.get_text(): round(text.get_fontsize() * DISPLAY_DPI / 72, 1)
                 for text in figure.findobj(Text)
                 if text.get_visible() and text.get_text().strip()
                 and text.get_fontsize() * DISPLAY_DPI / 72 < 14}
        assert not small, f"{name}: text under 14 px: {small}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_log_axis_has_several_labelled_ticks(name):
    """A log axis with one labelled tick gives no scale at all (09's bars, 05's base chart)."""
    for figure in _drawn(name):
        for index, axes in enumerate(figure.axes):
            for axis in (axes.xaxis, axes.yaxis):
                if axis.get_scale() != "log":
                    continue
                low, high = sorted(axis.get_view_interval())
                ticks = [tick for tick in axis.get_majorticklocs() if low <= tick <= high]
                assert len(ticks) >= 2, (f"{name}, axes {index}: {axis.axis_name} axis has "
                                         f"{len(ticks)} tick(s) in view {low:g} … {high:g}")
