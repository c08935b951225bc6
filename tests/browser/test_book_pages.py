"""The executed book as a reader sees it: printed outputs, links, the console.

The book built as ``make book`` builds it (the session's ``executed_site``, every notebook
executed) is opened from disk in headless Chromium at 1280 × 800, the network cut off. On
every page:

- every printed output (a ``print`` of a table: 06's results and θ′/θ tables, 05's minimum
  bases, 00's environment report, 11's ``check_rotary`` tables) and every code shown as HTML
  (``show_source``) is set in the code's monospace font, so its columns line up: ten "i"
  are as wide as ten "M";
- the page logs no error to the console (both editions);
- notebook 00's course map links to the book's own pages, not to Colab (only the navigation
  line offers Colab).

Screenshots of a printed table per page go to test-artifacts/browser/book-output-*.png.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

# `make browser` runs two workers: the tests of the executed book (built once) on one.
pytestmark = pytest.mark.xdist_group("executed-book")

_spec = importlib.util.spec_from_file_location(
    "browser_conftest", Path(__file__).with_name("conftest.py"))
setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup)

from rope_lab import book  # noqa: E402
from rope_lab.course import NOTEBOOKS as COURSE  # noqa: E402

NOTEBOOKS = book.book_notebooks()  # both editions

# Each printed output's font, and whether narrow and wide letters take the same width in it.
PRINTED = """() => [...document.querySelectorAll('.jp-OutputArea-output pre')].map((pre, index) => {
    const measure = text => {
        const span = document.createElement('span');
        span.textContent = text;
        pre.appendChild(span);
        const width = span.getBoundingClientRect().width;
        span.remove();
        return width;
    };
    pre.dataset.ropeLabPrinted = String(index);
    return {index, font: getComputedStyle(pre).fontFamily, narrow: measure('iiiiiiiiii'),
            wide: measure('MMMMMMMMMM'), text: pre.innerText.slice(0, 80)};
})"""
CODE_FONT = """() => getComputedStyle(document.querySelector('.jp-InputArea pre, .highlight pre'))
    .fontFamily"""


@pytest.fixture(scope="module")
def page(chromium, playwright_driver, executed_site):
    with setup.offline_page(chromium, playwright_driver) as page:
        yield page


def _open(page, path: Path) -> None:
    page.console_errors.clear()
    page.goto(path.as_uri(), wait_until="load")
    page.evaluate("document.fonts.ready.then(() => true)")


def test_every_page_of_the_executed_book_is_whole(executed_site):
    """Every notebook of both editions ran without an error or stderr output, every link
    resolves, and every widget became its static figure."""
    assert book.problems(executed_site, NOTEBOOKS) == []
    for notebook in NOTEBOOKS:
        page = (executed_site / book.page_name(notebook)).read_text(encoding="utf-8")
        assert book.WIDGET_VIEW not in page, f"{notebook.name}: a widget was not frozen"


@pytest.mark.parametrize("notebook", NOTEBOOKS,
                         ids=lambda p: ("zh-" if "zh_CN" in p.parts else "") + p.stem[:2])
def test_printed_outputs_are_monospace_and_the_console_is_clean(page, executed_site,
                                                                notebook):
    _open(page, executed_site / book.page_name(notebook))
    printed = page.evaluate(PRINTED)
    code_font = page.evaluate(CODE_FONT)
    ragged = [p for p in printed if p["font"] != code_font
              or abs(p["narrow"] - p["wide"]) > 0.5]
    assert not ragged, (f"{notebook.name}: printed outputs not in the code font "
                        f"({code_font}): {ragged[:3]}")
    tables = [p for p in printed if p["text"].count("\n") >= 2]
    if tables:
        setup.ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shown = page.locator(f'pre[data-rope-lab-printed="{tables[0]["index"]}"]')
        shown.scroll_into_view_if_needed()
        edition = "zh-" if "zh_CN" in notebook.parts else ""
        page.screenshot(path=str(setup.ARTIFACTS / f"book-output-{edition}{notebook.stem[:2]}.png"))
    assert page.console_errors == [], f"{notebook.name}: console errors {page.console_errors}"


def test_the_course_map_links_to_the_book_pages(page, executed_site):
    start = executed_site / "00_start_here.html"
    if not start.exists():
        pytest.skip("no notebook 00 in this book")
    _open(page, start)
    links = page.locator(".jp-OutputArea-output a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    pages = {book.page_name(Path(entry.filename)) for entry in COURSE
             if (executed_site / book.page_name(Path(entry.filename))).exists()}
    assert pages <= set(links), f"course map links: {links}"
    colab = [link for link in links if "colab.research.google.com" in link]
    assert not colab, f"outputs of 00 still link to Colab: {colab}"
