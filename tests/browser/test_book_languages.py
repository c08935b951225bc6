"""The book's two editions in a real browser: the language switch, and Chinese pages that read
as Chinese on a machine with no CJK font.

A small book (not executed: the words are in the sources) of notebook 03 in English and in
简体中文, and one English notebook without a Chinese twin, is opened from disk in headless
Chromium at 1280 × 800 with the network cut off. A reader on the English page clicks the
switch and lands on the Chinese twin: marked ``lang="zh-CN"``, its navigation Chinese and
drawn glyph by glyph from the shipped font (this machine has no CJK system font, so any
other font would draw empty boxes), its formulas typeset by the site's MathJax from the
folder above; the switch leads back. On the untranslated notebook the switch leads to the
Chinese index. Screenshots go to test-artifacts/browser/book-zh-*.png.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "browser_conftest", Path(__file__).with_name("conftest.py"))
setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup)

from rope_lab import book  # noqa: E402

ENGLISH = setup.ROOT / "notebooks" / "03_rope_in_2d.ipynb"
CHINESE = setup.ROOT / "notebooks" / "zh_CN" / "03_rope_in_2d.ipynb"

# MathJax 2 has typeset the page: how many formulas it drew (0 if it never loaded).
TYPESET = """() => new Promise(done => {
    const ready = () => window.MathJax && MathJax.Hub && MathJax.Hub.queue &&
                        MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0;
    const wait = (left) => ready() || left <= 0 ? done(
        document.querySelectorAll('.MathJax, .MathJax_Display').length)
        : setTimeout(() => wait(left - 1), 100);
    wait(150);
})"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Path]:
    """(site folder, the English notebook without a Chinese twin)."""
    tmp_path = tmp_path_factory.mktemp("two-editions")
    english_only = tmp_path / "english_only" / book.course_notebooks()[-1].name
    english_only.parent.mkdir()
    shutil.copy(book.course_notebooks()[-1], english_only)
    out = tmp_path / "site"
    notebooks = [ENGLISH, english_only, CHINESE]
    book.build(out, notebooks, run=False, log=lambda _: None)
    assert book.problems(out, notebooks) == []
    return out, english_only


@pytest.fixture(scope="module")
def page(chromium, playwright_driver):
    with setup.offline_page(chromium, playwright_driver, cdp=True) as page:
        yield page


def _switch(page) -> None:
    """Click the language switch at the top of the page and wait for the other page."""
    with page.expect_navigation(wait_until="load"):
        page.locator("a.rope-lab-language").first.click()
    page.evaluate("document.fonts.ready.then(() => true)")


def fonts_of(page, selector: str) -> list[dict]:
    """The fonts Chromium drew the first element matching ``selector`` with (DevTools'
    CSS.getPlatformFontsForNode: family, web font or not, glyph count)."""
    root = page.cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = page.cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    return page.cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


def _all_from_the_course_font(page, selector: str, text: str) -> None:
    """The element ``selector`` shows ``text``, every glyph of it from the shipped web font
    (any other font here has no Chinese: it would draw empty boxes)."""
    assert page.locator(selector).first.inner_text().strip() == text
    fonts = fonts_of(page, selector)
    assert setup.glyphs_from_the_course_font(fonts) == len(text), (text, fonts)
    assert sum(font["glyphCount"] for font in fonts) == len(text), (text, fonts)
    assert page.evaluate(f"document.fonts.check('16px \"{book.CJK_FAMILY}\"', '{text}')")


def test_the_switch_leads_to_the_chinese_twin_and_back(page, site):
    out, _ = site
    page.goto((out / "03_rope_in_2d.html").as_uri(), wait_until="load")
    page.evaluate("document.fonts.ready.then(() => true)")
    _all_from_the_course_font(page, "a.rope-lab-language", "中文")  # bold, lang="zh-CN"
    _switch(page)
    assert page.url == (out / "zh_CN" / "03_rope_in_2d.html").as_uri()
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    heading = page.locator("h1").first.inner_text().strip()
    assert heading.removesuffix("¶").strip() == nb_heading(CHINESE)
    # the navigation: chrome from the catalog
    _all_from_the_course_font(page, 'a[href="index.html"]', "课程地图")
    # the heading's Chinese, drawn at its medium weight (not the <title>'s: the browser
    # draws the tab)
    fonts = fonts_of(page, "h1")
    words = re.findall(r"[\u4e00-\u9fff]", heading)
    assert words and setup.glyphs_from_the_course_font(fonts) == len(words), fonts
    assert page.evaluate(TYPESET) > 10, "MathJax did not typeset from ../mathjax/"
    setup.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(setup.ARTIFACTS / "book-zh-03.png"))
    assert page.console_errors == [], page.console_errors
    assert page.locator("a.rope-lab-language").first.inner_text() == "English"
    _switch(page)
    assert page.url == (out / "03_rope_in_2d.html").as_uri()
    assert page.evaluate("document.documentElement.lang") == "en"


def test_an_untranslated_page_switches_to_the_chinese_index(page, site):
    out, english_only = site
    page.console_errors.clear()
    page.goto((out / book.page_name(english_only)).as_uri(), wait_until="load")
    _switch(page)
    assert page.url == (out / "zh_CN" / "index.html").as_uri()
    _all_from_the_course_font(page, 'a[href="teaching.html"]', "教学指南")
    untranslated = page.locator(f'a[href="../{english_only.stem}.html"]')
    assert untranslated.count() == 1 and "英文版，尚未翻译" in untranslated.locator(
        "xpath=..").inner_text()
    page.screenshot(path=str(setup.ARTIFACTS / "book-zh-index.png"))
    assert page.console_errors == [], page.console_errors


def nb_heading(notebook: Path) -> str:
    import nbformat

    return nbformat.read(notebook, as_version=4).cells[0].source.splitlines()[0][2:].strip()
