"""The widgets work in a real browser: JupyterLab + headless Chromium, driven by Playwright.

For each widget notebook: open it, run all cells, move one slider with the keyboard (as a
student would: focus the handle, press Page Up), then check that
- no cell shows an error or writes to stderr,
- the slider's panel drew a different figure (the PNG bytes its Image widget shows differ),
  once (one move, one redraw), shown at the figure's own size (crisp, not stretched),
- the page logged no JavaScript error.
Screenshots of the panel before and after, and of the whole page, go to
``test-artifacts/browser/`` (git-ignored).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import time
from pathlib import Path

import pytest

# `make browser` runs two workers: the tests sharing a JupyterLab (lab_url) on one.
pytestmark = pytest.mark.xdist_group("lab")

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the `chromium` fixture skips (or fails under CI) with the reason
    PlaywrightTimeout = TimeoutError

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"

# (notebook, served path, the slider to move: a regex on its label)
WIDGET_NOTEBOOKS = [
    ("widget_fixture.ipynb", "fixtures/widget_fixture.ipynb", r"^base$"),
    ("05_long_range_decay.ipynb", "notebooks/05_long_range_decay.ipynb", r"\bbase\b"),
    ("02_absolute_position_encodings.ipynb", "notebooks/02_absolute_position_encodings.ipynb",
     r"\bbase\b"),
]
RUN_ALL_TIMEOUT_MS = 180_000
# A panel's figure: the <img> of an ipywidgets Image (class "widget-image" in 7 and 8).
IMAGE = "img.widget-image"
REDRAW_TIMEOUT_MS = 30_000

# The notebook's panel is the current widget (JupyterLab exposes the app as window.jupyterapp
# with expose_app_in_browser).
NOTEBOOK_SHOWN = """() => {
    const app = window.jupyterapp;
    const panel = app && app.shell.currentWidget;
    return Boolean(panel && panel.sessionContext && panel.content);
}"""

KERNEL_READY = """async () => {
    const panel = window.jupyterapp.shell.currentWidget;
    await panel.context.ready;
    await panel.sessionContext.ready;
    return Boolean(panel.sessionContext.session && panel.sessionContext.session.kernel);
}"""

RUN_ALL = """async () => {
    await window.jupyterapp.commands.execute('notebook:run-all-cells');
}"""

# True once the kernel is idle and no code cell is running or queued ("[*]").
SETTLED = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    if (!kernel || kernel.status !== 'idle') { return false; }
    return panel.content.widgets.every(cell => cell.model.type !== 'code'
        || cell.model.executionState !== 'running');
}"""

# The figure's size as drawn (CSS px), as decoded (px), its width attribute, and the width
# of the output area it must fit in (the whole figure in view, not cut off).
IMAGE_SIZE = """img => ({shown: [img.clientWidth, img.clientHeight],
                         natural: [img.naturalWidth, img.naturalHeight],
                         widthAttribute: img.getAttribute('width'),
                         outputArea: img.closest('.jp-OutputArea-output').clientWidth})"""

# Counts the redraws that reach the page: each one gives the <img> a new src.
COUNT_SRC_CHANGES = """img => {
    window.ropeLabSrcChanges = 0;
    new MutationObserver(records => {
        window.ropeLabSrcChanges += records.filter(r => r.attributeName === 'src').length;
    }).observe(img, {attributes: true});
}"""

# Indexes of the code cells that did not run (run-all stops at the first error).
NOT_RUN = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .map((cell, index) => [cell, index])
    .filter(([cell]) => cell.model.type === 'code' && cell.model.executionCount === null)
    .map(([, index]) => index)"""


def _png(image) -> bytes:
    """The bytes the <img> shows (the Image widget gives it a blob: URL)."""
    encoded = image.evaluate("""async img => {
        const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
        let text = '';
        for (const byte of bytes) { text += String.fromCharCode(byte); }
        return btoa(text);
    }""")
    return base64.b64decode(encoded)


def _problems_on_page(page) -> list[str]:
    return page.locator(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    ).all_inner_texts()


@pytest.mark.parametrize("name, served, label", WIDGET_NOTEBOOKS,
                         ids=[n for n, _, _ in WIDGET_NOTEBOOKS])
def test_slider_redraws_in_browser(name, served, label, request):
    if served.startswith("notebooks/") and not (ROOT / served).exists():
        pytest.skip(f"{served} does not exist yet (written on another branch)")
    lab_url = request.getfixturevalue("lab_url")
    browser_context = request.getfixturevalue("browser_context")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    stem = Path(name).stem
    console_errors: list[str] = []
    page = browser_context.new_page()
    page.on("console", lambda m: console_errors.append(f"console.{m.type}: {m.text}")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(f"uncaught: {e}"))
    timings = {}
    start = time.perf_counter()
    try:
        page.goto(f"{lab_url}/lab/tree/{served}?reset", wait_until="domcontentloaded")
        page.wait_for_function(NOTEBOOK_SHOWN, timeout=60_000, polling=250)
        assert page.evaluate(KERNEL_READY), f"{name}: no kernel started"
        timings["open"] = time.perf_counter() - start

        page.evaluate(RUN_ALL)
        page.wait_for_function(SETTLED, timeout=RUN_ALL_TIMEOUT_MS, polling=250)
        timings["run all"] = time.perf_counter() - start - timings["open"]
        errors = _problems_on_page(page)
        assert not errors, f"{name}: error or stderr outputs in the browser:\n" + "\n".join(errors)
        assert not page.evaluate(NOT_RUN), f"{name}: cells {page.evaluate(NOT_RUN)} did not run"

        pattern = re.compile(label, re.IGNORECASE)
        labels = page.locator(".widget-slider .widget-label").evaluate_all(
            "labels => labels.map(label => label.textContent)")
        matching = [i for i, text in enumerate(labels) if pattern.search(text.strip())]
        assert matching, f"{name}: no slider labelled /{label}/; sliders: {labels}"
        slider = page.locator(".widget-slider").nth(matching[0])
        # The panel: the innermost widget box holding both this slider and an Image widget.
        panel = page.locator(".widget-vbox", has=slider).filter(has=page.locator(IMAGE)).last
        image = panel.locator(IMAGE).first
        image.wait_for(state="visible", timeout=REDRAW_TIMEOUT_MS)
        panel.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                               arg=image.element_handle(), timeout=REDRAW_TIMEOUT_MS)
        size = image.evaluate(IMAGE_SIZE)
        # Crisp: shown at the figure's CSS size, of which the PNG is a whole multiple (1× at
        # the course's dpi), or narrower with its aspect kept where the output is narrower.
        css_width = int(size["widthAttribute"])
        assert size["natural"][0] % css_width == 0, f"{name}: {size}"
        assert 0 < size["shown"][0] <= min(css_width, size["outputArea"]), f"{name}: {size}"
        assert (abs(size["shown"][1] / size["shown"][0] - size["natural"][1] / size["natural"][0])
                < 0.01), f"{name}: the figure is stretched: {size}"
        before_src = image.get_attribute("src")
        before_png = _png(image)
        readout = slider.locator(".widget-readout")
        before_value = readout.inner_text()
        panel.screenshot(path=ARTIFACTS / f"{stem}-before.png")
        image.evaluate(COUNT_SRC_CHANGES)

        moved = time.perf_counter()
        handle = slider.locator(".noUi-handle, input[type=range]").first
        handle.focus()
        # One key press, one change, one redraw (several presses could leave the screenshot
        # showing an intermediate redraw). PageUp moves a few steps.
        handle.press("PageUp")
        if readout.inner_text() == before_value:  # already at its maximum: go the other way
            handle.press("PageDown")
        # The Image widget keeps its <img> and gives it a new src on every redraw. No redraw
        # within the time limit is reported by the assertions below.
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(
                "([img, old]) => img.getAttribute('src') !== old && img.complete",
                arg=[image.element_handle(), before_src], timeout=REDRAW_TIMEOUT_MS,
                polling=100)
        page.wait_for_function(SETTLED, timeout=REDRAW_TIMEOUT_MS, polling=100)
        timings["move + redraw"] = time.perf_counter() - moved
        after_png = _png(image)
        panel.screenshot(path=ARTIFACTS / f"{stem}-after.png")

        assert readout.inner_text() != before_value, f"{name}: the slider did not move"
        assert hashlib.sha256(before_png).digest() != hashlib.sha256(after_png).digest(), (
            f"{name}: the figure did not change ({len(after_png)} bytes, identical)")
        assert after_png.startswith(b"\x89PNG"), f"{name}: the image is not a PNG"
        changes = page.evaluate("() => window.ropeLabSrcChanges")
        assert changes == 1, f"{name}: one move redrew the figure {changes} times"
        errors = _problems_on_page(page)
        assert not errors, f"{name}: error outputs after moving the slider:\n" + "\n".join(errors)
        assert not console_errors, f"{name}: JavaScript errors:\n" + "\n".join(console_errors)
    finally:
        # A screenshot for the record, even of a failed run; never mask the real failure.
        with contextlib.suppress(Exception):
            page.screenshot(path=ARTIFACTS / f"{stem}-page.png", full_page=True)
        page.close()
        timings["total"] = time.perf_counter() - start
        print(f"{name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
