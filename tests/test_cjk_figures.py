"""Chinese in the course's figures, from the font the course ships (rope_lab.plots.style).

The machines the course is built and taught on may have no CJK font at all; matplotlib would
then draw boxes and warn "Glyph ... missing from font(s) DejaVu Sans". The style registers
rope_lab/book_assets/cjk-subset.otf and lists it after the usual sans-serif font.
"""

from __future__ import annotations

import io
import warnings

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from matplotlib import font_manager  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from rope_lab.plots import style  # noqa: E402


def _pixels(figure: Figure) -> np.ndarray:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    buffer.seek(0)
    return matplotlib.image.imread(buffer)


@style.course_style
def _title_figure(title: str) -> Figure:
    figure = Figure(figsize=(3, 1))
    axes = figure.add_subplot()
    axes.set_axis_off()
    axes.set_title(title)
    return figure


def test_the_registered_family_is_the_font_file_s_own_name():
    fontTools = pytest.importorskip("fontTools.ttLib")
    assert style.CJK_FAMILY == fontTools.TTFont(style.CJK_FONT)["name"].getDebugName(1)
    assert any(entry.fname == str(style.CJK_FONT)
               for entry in font_manager.fontManager.ttflist)
    assert style.register_cjk_font() == style.CJK_FAMILY  # again: no second set of entries
    weights = sorted(entry.weight for entry in font_manager.fontManager.ttflist
                     if entry.fname == str(style.CJK_FONT))
    assert weights == list(range(100, 1000, 100))  # one file, listed under every weight


def test_bold_text_logs_nothing(caplog):
    """matplotlib logs "Failed to find font weight bold for ..." for every family of the list
    that lacks the weight: a line on stderr under every bold title of a notebook."""
    @style.course_style
    def bold() -> Figure:
        figure = Figure(figsize=(3, 2))
        axes = figure.add_subplot()
        axes.set_title("Summary 总结", fontweight="bold")
        axes.set_xlabel("distance 距离", fontweight="semibold")
        return figure

    with caplog.at_level("WARNING", logger="matplotlib"):
        _pixels(bold())
    assert [r.getMessage() for r in caplog.records if style.CJK_FAMILY in r.getMessage()] == []


def test_a_chinese_title_draws_real_glyphs_without_warnings():
    """Six different characters give six different pictures (missing glyphs are the same
    box each time), and matplotlib warns of no missing glyph."""
    characters = "旋转位置编码"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pictures = [_pixels(_title_figure(character)) for character in characters]
        _pixels(_title_figure("RoPE 旋转位置编码: m − n"))
    inked = [picture[..., :3].mean() < 0.999 for picture in pictures]
    assert all(inked), "a character drew nothing"
    distinct = {picture.tobytes() for picture in pictures}
    assert len(distinct) == len(characters), "characters drew as identical boxes"


def test_the_check_can_fail_without_the_course_font():
    """Without the fallback, matplotlib warns and draws boxes: the test above would fail."""
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        with pytest.warns(UserWarning, match=r"Glyph \d+ .*missing from"):  # 3.7: "current font"
            figure = Figure(figsize=(3, 1))
            figure.add_subplot().set_title("旋转")
            _pixels(figure)


def test_english_figures_look_exactly_as_before():
    """The CJK font is only a fallback: an English figure is pixel for pixel the one drawn
    with the sans-serif font alone."""
    def draw():
        figure = Figure(figsize=(4, 3))
        axes = figure.add_subplot()
        axes.plot([0, 1, 2], [1, 0, 2], label="RoPE, base 10000")
        axes.set(title="Score versus distance m − n", xlabel="distance", ylabel="score θ")
        axes.legend()
        return _pixels(figure)

    with matplotlib.rc_context(style.COURSE_STYLE):
        with_fallback = draw()
    assert style.COURSE_STYLE["font.family"] == ["sans-serif", style.CJK_FAMILY]
    with matplotlib.rc_context({**style.COURSE_STYLE, "font.family": ["sans-serif"]}):
        without = draw()
    assert np.array_equal(with_fallback, without)
