"""Every panel in a real browser: key press to painted figure, screenshots before and after.

JupyterLab (left sidebar open) in headless Chromium at 1280 × 800, the usual classroom
laptop. The fixture notebook displays every panel of ``rope_lab.widgets.PANELS``. For each
panel the test focuses its first slider and presses → (or ←) a few times, one press at a
time, as a student does. For every press the page records when the key went down and when
the new figure (the preview) was decoded and painted (the end of the first frame that shows
the ``<img>``'s new source: a task posted from that frame's ``requestAnimationFrame`` callback
runs once the frame is painted; the start of the frame after it is recorded too);
the kernel's own redraw time is read back from the panel. It checks that

- each press redraws the figure twice, to a different picture: at once as a preview (one
  device pixel per CSS px), then, once the kernel has seen no move for
  ``widgets.SHARPEN_AFTER_S``, sharp (a 2× PNG); nothing else after that,
- the figure is shown at its own size, inside the output area (no shrinking: text stays at
  the size the course style sets, at least 14 px), preview and sharp alike,

and writes the timings to ``test-artifacts/browser/panel-timings.json`` and the screenshots
(each panel before and after a move) next to it. Speed is reported, not asserted here: a
shared CI machine has no fixed speed (``python -m rope_lab.bench widgets`` states the
target).

Under load: ``ROPE_LAB_CPU_BURNERS=N`` runs N busy-looping processes beside the test while
it presses keys (a teacher's laptop with a video call and a browser), and the JSON records
N and the load average. Each press is split into its stages, on one clock (the browser's
``performance.timeOrigin + now()`` and the kernel's ``time.time()``): the slider's own
handling until the page sends the value (``key_to_send``), the server and the kernel until
the redraw starts (``send_to_redraw``), the kernel's redraw (``update``, ``draw``,
``encode``, ``send`` from ``Panel.redraw_log``), the way back until the page has the
message (``kernel_to_page``), the widget's handling until the ``<img>`` has its new source
(``page_to_src``), the decode (``src_to_decoded``) and the paint (``decoded_to_paint``).
The sharp figure's arrival is reported too (``key_to_sharp_ms``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

# `make browser` runs two workers: the tests sharing a JupyterLab (lab_url) on one.
pytestmark = pytest.mark.xdist_group("lab")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
SERVED = "fixtures/panels_fixture.ipynb"
PRESSES = 5
RUN_ALL_TIMEOUT_MS = 240_000
IMAGE = "img.widget-image"
BURNERS = "ROPE_LAB_CPU_BURNERS"
STAGES = ("key_to_send", "send_to_redraw", "update", "draw", "encode", "send",
          "kernel_to_page", "page_to_src", "src_to_decoded", "decoded_to_paint")

OPEN_SIDEBAR = """async () => {
    const app = window.jupyterapp;
    if (app.shell.leftCollapsed) { await app.commands.execute('filebrowser:activate'); }
    return !app.shell.leftCollapsed;
}"""

# Times one key press: keydown on the slider, then the first frame that shows the <img>'s
# new, decoded source: `painted` when that frame has been painted (a task posted from its
# requestAnimationFrame callback runs after the paint), `next_frame` at the start of the
# frame after it. Ms on the page clock.
# Also stamps the stages between: the first comm message the page sends after the key
# (`sent`), the first it receives with a binary buffer (`received`, the new picture), the
# src change and the end of the decode. `origin` turns page ms into epoch ms.
ARM = """([img, handle]) => {
    window.ropeLabPress = {key: null, sent: null, received: null, src: null, decoded: null,
                           painted: null, next_frame: null, sharp: null, changes: 0, srcs: [],
                           origin: performance.timeOrigin};
    const press = window.ropeLabPress;
    handle.addEventListener('keydown', () => { press.key = performance.now(); },
                            {once: true, capture: true});
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    const watch = (_, args) => {
        if (press.key === null || args.msg.header.msg_type !== 'comm_msg') { return; }
        if (args.direction === 'send' && press.sent === null) { press.sent = performance.now(); }
        if (args.direction === 'recv' && press.received === null && press.sent !== null
            && args.msg.buffers && args.msg.buffers.length) {
            press.received = performance.now();
        }
    };
    kernel.anyMessage.connect(watch);
    const observer = new MutationObserver(records => {
        for (const record of records) {
            if (record.attributeName !== 'src') { continue; }
            press.changes += 1;
            press.srcs.push(img.src);
            const first = press.changes === 1;
            if (first) { press.src = performance.now(); }
            img.decode().catch(() => null).then(() => {
                if (first) {
                    press.decoded = performance.now();
                    // the preview's size, read before the sharp figure can replace it
                    press.preview_natural = img.naturalWidth;
                    press.preview_shown = img.clientWidth;
                }
                requestAnimationFrame(() => {
                    const after = new MessageChannel();
                    after.port1.onmessage = () => {
                        if (first) { press.painted = performance.now(); }
                        else if (press.sharp === null) { press.sharp = performance.now(); }
                    };
                    after.port2.postMessage(null);
                    if (first) {
                        requestAnimationFrame(() => { press.next_frame = performance.now(); });
                    }
                });
            });
        }
    });
    observer.observe(img, {attributes: true});
    window.ropeLabObserver = {disconnect: () => { observer.disconnect();
                                                  kernel.anyMessage.disconnect(watch); }};
}"""

# Runs code in the notebook's kernel and resolves to what it printed.
KERNEL_PRINT = """async code => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    let text = '';
    const future = kernel.requestExecute({code, store_history: false});
    future.onIOPub = message => {
        if (message.header.msg_type === 'stream') { text += message.content.text; }
    };
    await future.done;
    return text;
}"""
REDRAWS = ("import json; print(json.dumps({name: panel.redraw_log[1:] "
           "for name, panel in panels.items()}))")

# `cut`: px of the image hidden by an ancestor that clips its overflow (the output area,
# the notebook): a figure wider than the room the lab gives it loses its right edge.
SIZE = """img => {
    const box = img.getBoundingClientRect();
    let left = -Infinity, right = Infinity;
    for (let e = img.parentElement; e; e = e.parentElement) {
        if (getComputedStyle(e).overflowX !== 'visible') {
            const r = e.getBoundingClientRect();
            left = Math.max(left, r.left); right = Math.min(right, r.right);
        }
    }
    return {shown: img.clientWidth, natural: img.naturalWidth,
            css: Number(img.getAttribute('width')),
            area: img.closest('.jp-OutputArea-output').clientWidth,
            cut: Math.max(0, box.right - right) + Math.max(0, left - box.left)};
}"""


def burners_wanted() -> int:
    value = os.environ.get(BURNERS, "0")
    if not value.isdigit():
        raise ValueError(f"{BURNERS} must be a whole number of CPU burners, got {value!r}")
    return int(value)


def start_burners(count: int) -> list:
    """``count`` processes that keep a core busy (at the default priority) until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(count)]


def stop_burners(burners: list) -> None:
    for burner in burners:
        burner.kill()
        burner.wait()


def stages(press: dict, redraw: dict) -> dict:
    """One press's stages in ms (see the module docstring), from the page's stamps and the
    kernel's redraw log entry for it."""
    def epoch(name):
        return press["origin"] + press[name]

    started = 1e3 * redraw["started"]
    kernel_done = started + sum(redraw[f"{stage}_ms"]
                                for stage in ("update", "draw", "encode", "send"))
    return {"key_to_send": press["sent"] - press["key"],
            "send_to_redraw": started - epoch("sent"),
            **{stage: redraw[f"{stage}_ms"] for stage in ("update", "draw", "encode", "send")},
            "kernel_to_page": epoch("received") - kernel_done,
            "page_to_src": press["src"] - press["received"],
            "src_to_decoded": press["decoded"] - press["src"],
            "decoded_to_paint": press["painted"] - press["decoded"]}


def test_every_panel_redraws_once_per_key_press(request):
    lab_url = request.getfixturevalue("lab_url")
    context = request.getfixturevalue("browser_context")
    from rope_lab import widgets

    names = list(widgets.PANELS)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = context.new_page()
    page.set_viewport_size({"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    report = {}
    burners: list = []
    load = {"cpu_burners": burners_wanted(), "cores": os.cpu_count()}
    try:
        page.goto(f"{lab_url}/lab/tree/{SERVED}?reset", wait_until="domcontentloaded")
        page.wait_for_function("() => { const p = window.jupyterapp && "
                               "window.jupyterapp.shell.currentWidget; "
                               "return Boolean(p && p.sessionContext && p.content); }",
                               timeout=60_000, polling=250)
        assert page.evaluate(OPEN_SIDEBAR), "the left sidebar did not open"
        page.evaluate("""async () => { const p = window.jupyterapp.shell.currentWidget;
            await p.context.ready; await p.sessionContext.ready; }""")
        page.evaluate("async () => { await window.jupyterapp.commands.execute("
                      "'notebook:run-all-cells'); }")
        page.wait_for_function(f"() => document.querySelectorAll('{IMAGE}').length >= "
                               f"{len(names)}", timeout=RUN_ALL_TIMEOUT_MS, polling=250)
        page.wait_for_function("""() => { const p = window.jupyterapp.shell.currentWidget;
            const k = p.sessionContext.session && p.sessionContext.session.kernel;
            return k && k.status === 'idle'; }""", timeout=RUN_ALL_TIMEOUT_MS, polling=250)
        stderr = page.locator('.jp-OutputArea-output[data-mime-type='
                              '"application/vnd.jupyter.stderr"]').all_inner_texts()
        assert not stderr, "stderr in the notebook:\n" + "\n".join(stderr)
        panels = page.locator(".widget-vbox").filter(has=page.locator(IMAGE)).filter(
            has=page.locator(".widget-slider"))
        assert panels.count() == len(names)
        load["load_average_before"] = os.getloadavg()
        burners = start_burners(load["cpu_burners"])
        presses = {}
        for index, name in enumerate(names):
            panel = panels.nth(index)
            image = panel.locator(IMAGE).first
            slider = panel.locator(".widget-slider").first
            handle = slider.locator(".noUi-handle, input[type=range], .ui-slider-handle").first
            panel.scroll_into_view_if_needed()
            page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                                   arg=image.element_handle(), timeout=30_000)
            size = image.evaluate(SIZE)
            assert size["natural"] == 2 * size["css"], f"{name}: not a 2× PNG: {size}"
            assert size["shown"] == size["css"] <= size["area"], (
                f"{name}: the figure is shrunk or cut to fit: {size}")
            assert size["cut"] <= 0.5, f"{name}: {size['cut']:.0f} px of the figure hidden"
            panel.screenshot(path=ARTIFACTS / f"panel-{name}-before.png")
            readout = slider.locator(".widget-readout")
            key_to_paint, key_to_next_frame, key_to_sharp = [], [], []
            pictures = {image.get_attribute("src")}
            for press in range(PRESSES):
                before = readout.inner_text()
                key = "ArrowRight" if press % 2 == 0 else "ArrowLeft"
                page.evaluate(ARM, [image.element_handle(), handle.element_handle()])
                handle.focus()
                handle.press(key)
                if readout.inner_text() == before:  # at an end: the other way
                    handle.press("ArrowLeft" if key == "ArrowRight" else "ArrowRight")
                page.wait_for_function("() => window.ropeLabPress.painted !== null",
                                       timeout=30_000, polling="raf")
                preview = page.evaluate("() => window.ropeLabPress")
                assert preview["preview_natural"] == size["css"] == preview["preview_shown"], (
                    f"{name}: the preview is not a 1× PNG shown at its size: "
                    f"{preview['preview_natural']} px wide, shown at "
                    f"{preview['preview_shown']} px, {size}")
                if press == 0:
                    panel.screenshot(path=ARTIFACTS / f"panel-{name}-preview.png")
                page.wait_for_function("() => window.ropeLabPress.sharp !== null",
                                       timeout=30_000, polling="raf")
                page.wait_for_timeout(150)  # a third redraw would show up here
                timing = page.evaluate("() => { window.ropeLabObserver.disconnect(); "
                                       "return window.ropeLabPress; }")
                presses.setdefault(name, []).append(timing)
                assert timing["changes"] == 2, (
                    f"{name}: one key press changed the figure {timing['changes']} times, "
                    "not twice (preview, then sharp)")
                sharp = image.evaluate(SIZE)
                assert sharp["natural"] == 2 * sharp["css"] == 2 * sharp["shown"], (
                    f"{name}: the figure after a pause is not a 2× PNG at its size: {sharp}")
                key_to_paint.append(timing["painted"] - timing["key"])
                key_to_next_frame.append(timing["next_frame"] - timing["key"])
                key_to_sharp.append(timing["sharp"] - timing["key"])
                pictures.update(timing["srcs"])
                if press == 0:
                    panel.screenshot(path=ARTIFACTS / f"panel-{name}-after.png")
            assert len(pictures) == 2 * PRESSES + 1, f"{name}: a press left the figure as it was"
            report[name] = {"key_to_paint_ms": key_to_paint,
                            "median_key_to_paint_ms": statistics.median(key_to_paint),
                            "key_to_next_frame_ms": key_to_next_frame,
                            "median_key_to_next_frame_ms": statistics.median(key_to_next_frame),
                            "key_to_sharp_ms": key_to_sharp,
                            "median_key_to_sharp_ms": statistics.median(key_to_sharp),
                            "figure_css_px": size["css"], "output_area_px": size["area"]}
        load["load_average_after"] = os.getloadavg()
        stop_burners(burners)
        burners = []
        redraws = json.loads(page.evaluate(KERNEL_PRINT, REDRAWS))
        for name, row in report.items():  # the kernel's share: each move's redraws
            previews = [r for r in redraws[name] if r["preview"]]
            assert len(previews) == PRESSES == len(redraws[name]) - PRESSES, (
                f"{name}: {len(redraws[name])} redraws for {PRESSES} presses")
            row["python_redraw_ms"] = [sum(r[f"{stage}_ms"] for stage in
                                           ("update", "draw", "encode")) for r in previews]
            row["median_python_redraw_ms"] = statistics.median(row["python_redraw_ms"])
            split = [stages(press, redraw)
                     for press, redraw in zip(presses[name], previews, strict=True)]
            row["median_stage_ms"] = {stage: statistics.median(s[stage] for s in split)
                                      for stage in STAGES}
            row["preview_png_bytes"] = statistics.median(r["png_bytes"] for r in previews)
        page.screenshot(path=ARTIFACTS / "panels-page.png")
        assert not errors, "JavaScript errors:\n" + "\n".join(errors)
    finally:
        stop_burners(burners)
        (ARTIFACTS / "panel-timings.json").write_text(json.dumps(
            {"measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "viewport": "1280x800",
             **load, "panels": report}, indent=1))
        page.close()
    print(f"\n{load['cpu_burners']} CPU burner(s); load average before "
          f"{load['load_average_before'][0]:.2f}, after {load['load_average_after'][0]:.2f}")
    short = {"key_to_send": "key", "send_to_redraw": "→kernel", "update": "upd",
             "draw": "draw", "encode": "enc", "send": "send", "kernel_to_page": "→page",
             "page_to_src": "src", "src_to_decoded": "decode", "decoded_to_paint": "paint"}
    print(f"{'panel (medians, ms)':34} {'key→paint':>9} " + " ".join(
        f"{label:>7}" for label in short.values()) + f" {'→sharp':>7}")
    for name, row in report.items():
        print(f"{name:34} {row['median_key_to_paint_ms']:9.0f} " + " ".join(
            f"{row['median_stage_ms'][stage]:7.1f}" for stage in short)
            + f" {row['median_key_to_sharp_ms']:7.0f}")


@pytest.fixture(autouse=True)
def _skip_without_the_fixture():
    if not (Path(__file__).with_name("panels_fixture.ipynb")).exists():
        pytest.skip("panels_fixture.ipynb is missing")
