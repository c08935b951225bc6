"""The static book in a real browser with the network cut off, as in a classroom without one.

Every page of the book is built from the notebooks as they are (not executed: the maths,
the Chinese words and the code are in the sources) and opened from disk in headless
Chromium, with every request to the network refused. On each page MathJax must typeset
the formulas from the site's own copy, the Chinese words must be drawn with the shipped
font (this machine has no CJK system font), in prose and in code, where a Chinese character
takes two columns, no code line may be wider than the page at 1280 px, and the page logs
no error to the console. Screenshots at 1280 × 800 go to test-artifacts/browser/.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "browser_conftest", Path(__file__).with_name("conftest.py"))
setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup)

from rope_lab import book  # noqa: E402

NOTEBOOKS = book.course_notebooks()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book") / "site"
    book.build(out, NOTEBOOKS, run=False, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def offline_page(chromium, playwright_driver, site):
    """A Chromium page whose every http(s) request is refused and recorded."""
    refused: list[str] = []
    with setup.offline_page(chromium, playwright_driver, refused=refused, cdp=True) as page:
        page.refused = refused
        yield page


def _open(page, path: Path) -> None:
    page.refused.clear()
    page.console_errors.clear()
    page.goto(path.as_uri(), wait_until="load")
    page.evaluate("document.fonts.ready.then(() => true)")


# The width of one character in the code font, and of one Chinese character, in CSS px.
CODE_WIDTHS = """() => {
    const pre = document.querySelector('.jp-InputArea pre, .highlight pre');
    const measure = text => {
        const span = document.createElement('span');
        span.textContent = text;
        pre.appendChild(span);
        const width = span.getBoundingClientRect().width;
        span.remove();
        return width / text.length;
    };
    return {latin: measure('abcdefghij'), chinese: measure('我爱你你爱我位置编码')};
}"""


TYPESET = """() => new Promise(done => {
    const ready = () => window.MathJax && MathJax.Hub && MathJax.Hub.queue &&
                        MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0;
    const wait = (left) => ready() || left <= 0 ? done(
        document.querySelectorAll('.MathJax, .MathJax_Display, .MathJax_CHTML, .MathJax_SVG')
            .length) : setTimeout(() => wait(left - 1), 100);
    wait(150);
})"""

CJK_DRAWN = """async ([family, text]) => {
    await document.fonts.load(`16px "${family}"`, text);
    const faces = [...document.fonts].filter(f => f.family.replace(/"/g, '') === family);
    return {loaded: faces.some(f => f.status === 'loaded'),
            covers: document.fonts.check(`16px "${family}"`, text)};
}"""

WIDEST_CODE = """() => Math.max(0, ...[
    ...document.querySelectorAll('.jp-InputArea pre, .highlight pre')
].map(pre => pre.scrollWidth - pre.clientWidth))"""


def test_maths_typesets_with_no_network(offline_page, site):
    page = offline_page
    _open(page, site / "02_absolute_position_encodings.html")
    typeset = page.evaluate(TYPESET)
    setup.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(setup.ARTIFACTS / "book-offline-02-maths.png"))
    assert typeset > 10, "MathJax typeset no formula: it did not load from the site's copy"
    assert page.evaluate("document.body.innerText").count("$$") == 0
    assert page.refused == [], f"the page asked the network for {page.refused}"
    assert page.console_errors == [], page.console_errors


def test_chinese_renders_with_the_shipped_font(offline_page, site):
    page = offline_page
    _open(page, site / "00_start_here.html")
    assert "旋转位置编码" in page.evaluate("document.body.innerText")
    drawn = page.evaluate(CJK_DRAWN, [book.CJK_FAMILY, "旋转位置编码"])
    page.get_by_text("旋转位置编码").first.scroll_into_view_if_needed()
    page.screenshot(path=str(setup.ARTIFACTS / "book-offline-00-chinese.png"))
    assert drawn == {"loaded": True, "covers": True}, drawn
    fonts = setup.platform_fonts(page.cdp, "旋转位置编码")
    assert setup.glyphs_from_the_course_font(fonts) >= 6, fonts
    assert page.refused == [], f"the page asked the network for {page.refused}"
    assert page.console_errors == [], page.console_errors


def test_chinese_in_code_renders_two_columns_wide(offline_page, site):
    """01's Chinese sentence in code (`characters = "我爱你求关注"`): drawn with the shipped
    font, where a Chinese character takes two columns of the monospace font."""
    page = offline_page
    notebook = setup.ROOT / "notebooks" / "01_attention_without_position.ipynb"
    text = setup.chinese_in_code(notebook)
    _open(page, site / book.page_name(notebook))
    code = page.locator(".jp-InputArea pre, .highlight pre", has_text=text).first
    code.scroll_into_view_if_needed()
    page.screenshot(path=str(setup.ARTIFACTS / "book-offline-01-chinese-code.png"))
    fonts = setup.platform_fonts(page.cdp, text)
    assert setup.glyphs_from_the_course_font(fonts) >= len(text), fonts
    widths = page.evaluate(CODE_WIDTHS)
    assert abs(widths["chinese"] - 2 * widths["latin"]) < 0.05 * widths["latin"], widths
    assert page.console_errors == [], page.console_errors


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_no_code_line_is_wider_than_the_page(offline_page, site, notebook):
    page = offline_page
    _open(page, site / book.page_name(notebook))
    overflow = page.evaluate(WIDEST_CODE)
    assert overflow <= 1, (f"{notebook.name}: a code line overflows its box by {overflow} px at "
                           "1280 px; hold notebook code to 100 characters (ruff E501)")
    assert page.refused == [], f"{notebook.name} asked the network for {page.refused}"
    assert page.console_errors == [], f"{notebook.name}: console errors {page.console_errors}"
