"""The offline slide decks (``make slides``) in a real browser, with the network refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ARTIFACTS, ROOT, offline_page
from rope_lab import book, slides

# beside the executed book (one worker of `make browser`): the decks reuse its runs
pytestmark = pytest.mark.xdist_group("executed-book")

# one deck per edition: notebook 03 has maths, a frozen slider panel, code and exercises
DECKS = [ROOT / "notebooks" / "03_rope_in_2d.ipynb",
         ROOT / "notebooks" / "zh_CN" / "03_rope_in_2d.ipynb"]


@pytest.fixture(scope="module")
def decks(tmp_path_factory) -> Path:
    """The decks as ``make slides`` writes them (the runs come from build/executed/ when
    the book or make check ran them already)."""
    pytest.importorskip("sphinx_revealjs", reason="the teach extra is not installed")
    out = tmp_path_factory.mktemp("slides") / "site"
    slides.build(out, DECKS, log=lambda _: None)
    return out


def test_the_decks_have_no_problems(decks):
    assert slides.problems(decks, DECKS) == []
    for notebook in DECKS:
        deck = (decks / book.page_name(notebook)).read_text(encoding="utf-8")
        assert "data:image/png" in deck  # the figures, frozen as the book freezes them
        assert book.WIDGET_STATE not in deck and "jupyter-widgets" not in deck


@pytest.mark.slow
@pytest.mark.parametrize("notebook", DECKS, ids=["en", "zh_CN"])
def test_a_deck_pages_through_offline_without_a_console_error(decks, chromium,
                                                              playwright_driver, notebook):
    refused: list[str] = []
    with offline_page(chromium, playwright_driver, refused=refused) as page:
        page.goto((decks / book.page_name(notebook)).as_uri())
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
        total = page.evaluate("Reveal.getTotalSlides()")
        assert total > 10
        for _ in range(total - 1):  # the key a presenter presses: next slide, sub-slides too
            page.keyboard.press("Space")
        page.wait_for_timeout(300)  # MathJax typesets the last slide
        assert page.evaluate("Reveal.isLastSlide()")
        assert page.evaluate("Reveal.getProgress()") == 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.evaluate("Reveal.slide(0)")
        page.screenshot(path=str(ARTIFACTS / f"slides-{book.page_name(notebook).replace('/', '-')}"
                                              ".png"))
        assert page.console_errors == []
    assert refused == []
