"""Every figure of the built book, executed, in a real browser at 1280 × 800.

The book is built once for the module the way ``make book`` builds it (every notebook
executed, widgets frozen into their figures), then each page is opened from disk in headless
Chromium with the network cut off. Every figure of the outputs (each ``<img>`` of an output
area) is scrolled into view and screenshotted into ``test-artifacts/book/`` (one PNG per
figure, named after its page and its place on the page), and the test checks that

- the image loaded (``naturalWidth > 0``): no broken picture on the page,
- it is shown no wider than the content column it sits in,
- and not shrunk to fit: its displayed width is at least 0.9 × the width it is meant to be
  shown at (its ``width`` attribute, else its own width in CSS px), so its text keeps the
  size the course style gives it (at least 14 px).

Look at the screenshots: they are the book as a reader sees it.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

# `make browser` runs two workers: the tests of the executed book (built once) on one.
pytestmark = pytest.mark.xdist_group("executed-book")

_spec = importlib.util.spec_from_file_location(
    "browser_conftest", Path(__file__).with_name("conftest.py"))
setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup)

from rope_lab import book  # noqa: E402

NOTEBOOKS = book.course_notebooks()
ARTIFACTS = setup.ROOT / "test-artifacts" / "book"

# Every output figure of the page, in page order, as the reader sees it.
FIGURES = """() => [...document.querySelectorAll('.jp-OutputArea-output img')].map((img, i) => {
    img.dataset.ropeLabFigure = String(i);
    return i;
})"""

MEASURE = """img => ({
    complete: img.complete, natural: img.naturalWidth,
    shown: img.getBoundingClientRect().width,
    intended: Number(img.getAttribute('width')) || img.naturalWidth,
    column: img.closest('.jp-OutputArea-output').getBoundingClientRect().width,
    alt: img.getAttribute('alt') || ''})"""


@pytest.fixture(scope="module")
def offline_page(chromium, playwright_driver, executed_site):
    with setup.offline_page(chromium, playwright_driver) as page:
        yield page


@pytest.fixture(scope="module")
def artifacts() -> Path:
    if ARTIFACTS.exists():  # only this build's figures
        shutil.rmtree(ARTIFACTS)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_figure_loads_and_fits_the_column(offline_page, executed_site, artifacts,
                                                notebook):
    page = offline_page
    page.goto((executed_site / book.page_name(notebook)).as_uri(), wait_until="load")
    indices = page.evaluate(FIGURES)
    report = []
    for index in indices:
        image = page.locator(f'img[data-rope-lab-figure="{index}"]')
        image.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete", arg=image.element_handle(),
                               timeout=10_000)
        size = image.evaluate(MEASURE)
        report.append(size)
        image.screenshot(path=artifacts / f"{notebook.stem}-figure-{index + 1:02d}.png")
        where = f"{notebook.name}, figure {index + 1} of {len(indices)}"
        assert size["natural"] > 0, f"{where}: the image did not load: {size}"
        assert size["shown"] <= size["column"] + 0.5, (
            f"{where}: wider than the content column: {size}")
        assert size["shown"] >= 0.9 * size["intended"], (
            f"{where}: shrunk to fit the column, its text with it: {size}")
    (artifacts / f"{notebook.stem}-figures.json").write_text(json.dumps(report, indent=1))
    if notebook.stem[:2] in {"02", "03", "05", "06"}:  # notebooks that show figures
        assert indices, f"{notebook.name}: the executed page shows no figure"
