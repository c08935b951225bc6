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

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

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
    for path in HERE.glob("*.ipynb"):
        (root / "fixtures").mkdir(parents=True, exist_ok=True)
        shutil.copy(path, root / "fixtures" / path.name)
    for path in root.rglob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        if "kernelspec" not in nb.metadata:
            nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                         "language": "python"}
            nbformat.write(nb, path)


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


@pytest.fixture(scope="session")
def lab_url(chromium, tmp_path_factory):
    """Base URL of a JupyterLab serving copies of notebooks/ and the fixtures."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "root"
    copy_notebooks(root)
    settings = home / "settings"
    for name, values in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTER_PLATFORM_DIRS="1", PYTHONUNBUFFERED="1")
    port = free_port()
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--allow-root", "--ServerApp.terminals_enabled=False",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
    ]
    log = open(home / "jupyterlab.log", "w")  # noqa: SIM115 - closed at teardown
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                              cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError("JupyterLab exited:\n" + (home / "jupyterlab.log").read_text())
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start in 120 s:\n"
                                       + (home / "jupyterlab.log").read_text()) from None
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
        shutil.copy(home / "jupyterlab.log", ARTIFACTS / "jupyterlab.log")


@pytest.fixture(scope="session")
def browser_context(chromium, tmp_path_factory):
    """A headless Chromium with a fresh profile (Playwright drives it over CDP)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=chromium, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()
