"""A real JupyterLab and a real (headless) Chromium for the widget tests.

JupyterLab runs on 127.0.0.1 on a free port, with its config, runtime, settings and
workspace folders in a temporary directory: no token, no browser window, no news or update
checks, no extension manager. It serves a temporary copy of the notebooks, so running them
in the browser never writes outputs into the repository.

Chromium is the system's (Debian's ``chromium``; Playwright cannot download its own here),
found at ``$ROPE_LAB_CHROMIUM``, ``/usr/bin/chromium`` or on ``PATH``. Without it, or
without the ``playwright`` package, the tests skip with the reason — except under CI
(``CI=true``), where they fail: CI must prove the widgets work in a browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rope_lab.course import notebook_files

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "test-artifacts" / "browser"

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# JupyterLab settings for the run: no autosave (belt and braces: it serves copies anyway),
# no news pop-up, a notebook without a kernel picks the default one without asking, and
# every cell stays in the page (no windowing: off-screen cells would have no text or layout).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "autoStartDefaultKernel": True, "windowingMode": "none"},
}


# Every test here drives a browser, a lab or a built book: seconds each, so all are slow and
# the fast loop (`pytest -m "not slow"`, docs/testing.md) leaves them to `make browser`.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)


def on_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str):
    """Skip with ``reason``; under CI, fail instead."""
    if on_ci():
        pytest.fail(f"{reason}. Under CI=true the browser test must run "
                    "(`make test` installs Debian's chromium when it is missing).",
                    pytrace=False)
    pytest.skip(reason)


def find_chromium() -> str | None:
    candidates = [os.environ.get("ROPE_LAB_CHROMIUM"), "/usr/bin/chromium",
                  shutil.which("chromium"), shutil.which("chromium-browser")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def copy_notebooks(root: Path) -> None:
    """Copy notebooks/ (with the data files notebooks read) and the fixtures under ``root``.

    A notebook without a kernelspec gets one: JupyterLab would otherwise ask for a kernel.
    """
    import nbformat

    if (ROOT / "notebooks").exists():
        shutil.copytree(ROOT / "notebooks", root / "notebooks", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for path in notebook_files(HERE):
        (root / "fixtures").mkdir(parents=True, exist_ok=True)
        shutil.copy(path, root / "fixtures" / path.name)
    for path in notebook_files(root, recursive=True):
        nb = nbformat.read(path, as_version=4)
        if "kernelspec" not in nb.metadata:
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                         "language": "python"}
            nbformat.write(nb, path)


def platform_fonts(cdp, text: str) -> list[dict]:
    """The fonts Chromium drew the innermost element whose own text contains ``text`` with,
    from DevTools' CSS.getPlatformFontsForNode: family, web font or not, glyph count.
    ``cdp`` is a CDP session of the page with the DOM and CSS domains enabled.
    The first such element that is drawn counts (a hidden one, such as the source editor of
    a rendered markdown cell, has no fonts)."""
    cdp.send("DOM.getDocument", {"depth": -1})  # node ids for the search below
    search = cdp.send("DOM.performSearch", {"query": f"//*[text()[contains(., '{text}')]]"})
    try:
        nodes = cdp.send("DOM.getSearchResults", {
            "searchId": search["searchId"], "fromIndex": 0,
            "toIndex": min(search["resultCount"], 50)})["nodeIds"] if search["resultCount"] else []
    finally:
        cdp.send("DOM.discardSearchResults", {"searchId": search["searchId"]})
    for node in nodes:
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        if fonts:
            return fonts
    return []


def glyphs_from_the_course_font(fonts: list[dict]) -> int:
    """How many glyphs came from the shipped font (a web font named Noto Sans CJK SC)."""
    return sum(f["glyphCount"] for f in fonts
               if f["familyName"] == "Noto Sans CJK SC" and f["isCustomFont"])


def chinese_in_code(notebook: Path) -> str:
    """The first Chinese string literal of a code cell of ``notebook`` (01: "我爱你求关注")."""
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        found = re.search(r'"([\u4e00-\u9fff]{3,})"', "".join(cell["source"]))
        if cell["cell_type"] == "code" and found:
            return found[1]
    raise AssertionError(f"{notebook.name} has no Chinese string in its code")


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        unavailable("no Chromium found (looked at $ROPE_LAB_CHROMIUM, /usr/bin/chromium and "
                    "PATH); install it with `apt-get install chromium`")
    try:
        import playwright  # noqa: F401
    except ImportError:
        unavailable("the `playwright` package is missing; `make install` installs the "
                    "`browser` extra")
    return path


@contextlib.contextmanager
def jupyterlab(home: Path, root: Path, *, args: list[str] = (), env: dict | None = None,
               cwd: Path | None = None):
    """A JupyterLab on 127.0.0.1 (free port, no token) with its config, runtime, data and
    IPython folders under ``home``; yields its base URL. It loads the course's lab settings
    (``lab/``, as ``make lab`` does). Its log is copied to test-artifacts/browser/ as
    ``{home.name}.log`` when it stops."""
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_DATA_DIR=str(home / "data"),
               IPYTHONDIR=str(home / "ipython"), JUPYTER_PLATFORM_DIRS="1",
               JUPYTER_CONFIG_PATH=str(ROOT / "lab"), PYTHONUNBUFFERED="1", **(env or {}))
    port = free_port()
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--allow-root", "--ServerApp.terminals_enabled=False",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        "--LabApp.expose_app_in_browser=True", *args, str(root),
    ]
    log_path = home / "jupyterlab.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed at teardown
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                              cwd=cwd or root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError("JupyterLab exited:\n" + log_path.read_text())
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start in 120 s:\n"
                                       + log_path.read_text()) from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(log_path, ARTIFACTS / f"{home.name}.log")


@pytest.fixture(scope="session")
def lab_url(chromium, tmp_path_factory):
    """Base URL of a JupyterLab serving copies of notebooks/ and the fixtures."""
    home = tmp_path_factory.mktemp("jupyterlab", numbered=False)
    root = home / "root"
    copy_notebooks(root)
    settings = home / "settings"
    for name, values in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    with jupyterlab(home, root, args=[
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
    ]) as url:
        yield url


@pytest.fixture(scope="session")
def executed_notebooks() -> dict:
    """Every notebook of the book, both editions, executed by rope_lab.runner (which reuses a
    run from build/executed/ while the notebook and the package are unchanged, as after
    `make notebooks`, `make book` or `make check`): once a session. Path -> the executed
    notebook."""
    from rope_lab import book, runner

    return {run.path: run.notebook
            for run in runner.run_notebooks(book.book_notebooks(), progress=False)}


@pytest.fixture(scope="session")
def executed_site(tmp_path_factory, executed_notebooks) -> Path:
    """The book built as ``make book`` builds it, from those runs (taken from
    build/executed/, where the runner has just put them)."""
    from rope_lab import book

    out = tmp_path_factory.mktemp("executed-book") / "site"
    book.build(out, list(executed_notebooks), run=True, log=lambda _: None)
    return out


@contextlib.contextmanager
def offline_page(chromium: str, playwright_driver, *, refused: list | None = None,
                 cdp: bool = False):
    """A headless Chromium page at 1280 x 800 whose every http(s) request is refused (the
    book must work offline), with ``page.console_errors`` collecting console errors and
    uncaught exceptions. ``refused`` collects the refused URLs; with ``cdp``, ``page.cdp``
    is a DevTools session with DOM and CSS enabled (for :func:`platform_fonts`)."""
    browser = playwright_driver.chromium.launch(executable_path=chromium, headless=True,
                                                args=CHROMIUM_FLAGS)
    context = browser.new_context(viewport={"width": 1280, "height": 800})

    def refuse(route):
        if refused is not None:
            refused.append(route.request.url)
        route.abort("internetdisconnected")

    context.route("http://**/*", refuse)
    context.route("https://**/*", refuse)
    page = context.new_page()
    page.console_errors = []
    page.on("console", lambda message: page.console_errors.append(message.text)
            if message.type == "error" else None)
    page.on("pageerror", lambda error: page.console_errors.append(f"uncaught: {error}"))
    if cdp:
        page.cdp = context.new_cdp_session(page)
        page.cdp.send("DOM.enable")
        page.cdp.send("CSS.enable")
    try:
        yield page
    finally:
        context.close()
        browser.close()


@pytest.fixture(scope="session")
def playwright_driver(chromium):
    """Playwright, once for the session: its sync API cannot start a second time while one
    runs, so every test that drives a browser launches it from here."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser_context(chromium, playwright_driver, tmp_path_factory):
    """A headless Chromium with a fresh profile (Playwright drives it over CDP)."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")),
        executable_path=chromium, headless=True, args=CHROMIUM_FLAGS,
        viewport={"width": 1280, "height": 900},
    )
    try:
        yield context
    finally:
        context.close()
