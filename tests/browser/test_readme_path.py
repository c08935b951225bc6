"""The README's own path, as a newcomer takes it, is a test.

A fresh clone of the repository (the working tree as git would commit it, committed into a
repository under a temporary folder and cloned from there with ``git clone``: every index
entry "racily clean", as in a newcomer's clone), git's notebook filter set up by the
Makefile's own step (``make notebook-filter``, part of ``make lab``'s install), then
JupyterLab started as ``make lab`` starts it (the course's settings in ``lab/``, the
notebooks folder as its root, autosave on, a user with no Jupyter settings of their own),
and every English course notebook and the Chinese edition's first notebook and its solutions
opened in headless Chromium and saved, the way a class does it: JupyterLab writes its
checkpoint copies into ``.ipynb_checkpoints/`` and the kernel's spec and language into each
notebook. Each notebook must open unmodified (no "unsaved changes" before anything ran), and
each save, the first one in the fresh clone above all, must leave git usable. A sample of
them (:data:`RUN_IN_LAB`: the first notebook, the one with Chinese in its code, one full of
sliders, and the Chinese pair) is run first (Run All), with no error or stderr output, and
saved with its outputs and widgets. Every other notebook, run and saved, is no change to git
either: tests/browser/test_executed_notebooks.py strips each executed notebook of both
editions with git's filter (running them all here again took ten minutes of the check's
25); they run under nbval in `make notebooks`. Then, in the clone:

- ``git status`` shows nothing: a run and saved course is no change to git;
- the project's own checks still pass (the tests that list notebooks, and the collection of
  every test and notebook, must not pick up the checkpoint copies);
- the lab showed Chinese in the course's font (the machine has no CJK font), in prose,
  tables and code, showed no news pop-up, and no kernel warned about an unencrypted
  connection.

Screenshots at 1280 x 800 (notebook 00's opening and glossary, notebook 01's Chinese code)
go to test-artifacts/browser/readme-path-*.png.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# `make browser` runs two workers: this long path on one of them.
pytestmark = pytest.mark.xdist_group("readme")

_spec = importlib.util.spec_from_file_location(
    "browser_conftest", Path(__file__).with_name("conftest.py"))
setup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup)

from rope_lab.course import notebook_files  # noqa: E402

ROOT = setup.ROOT
RUN_ALL_TIMEOUT_MS = 300_000
# Run All before saving in these (the rest are opened and saved): the first notebook (its
# glossary's Chinese column), the one with Chinese in its code, one full of sliders, and the
# Chinese edition's first notebook and its solutions.
RUN_IN_LAB = ("00_start_here.ipynb", "01_attention_without_position.ipynb",
              "05_long_range_decay.ipynb", "zh_CN/00_start_here.ipynb",
              "zh_CN/solutions/00_start_here_solutions.ipynb")

LAB_READY = "() => Boolean(window.jupyterapp && window.jupyterapp.shell)"
# Open a notebook as a double click in the file browser does; its kernel starts (the one its
# metadata names: no kernel dialog may be needed).
OPEN = """async path => {
    const app = window.jupyterapp;
    await app.restored;
    const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
    window.ropeLabPanel = panel;
    app.shell.activateById(panel.id);
    await panel.context.ready;
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    if (kernel) { await kernel.info; }  // the kernel's language_info has reached the model
    return {kernel: Boolean(kernel), dirty: panel.context.model.dirty};
}"""
RUN_ALL = """async () => {
    window.jupyterapp.shell.activateById(window.ropeLabPanel.id);
    await window.jupyterapp.commands.execute('notebook:run-all-cells');
}"""
# Idle kernel, every code cell run (none queued, none left with no execution count).
RAN = """() => {
    const panel = window.ropeLabPanel;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    return Boolean(kernel) && kernel.status === 'idle' && panel.content.widgets.every(
        cell => cell.model.type !== 'code'
            || (cell.model.executionCount !== null && cell.model.executionState !== 'running'));
}"""
# Error and stderr outputs of the open notebook: the cell's index, its first line, the text.
ERRORS = """() => window.ropeLabPanel.content.widgets.flatMap((cell, index) => [
    ...cell.node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .map(node => ({cell: index, source: cell.model.sharedModel.getSource().split('\\n')[0],
                   text: node.innerText.slice(0, 500), html: node.innerHTML.slice(0, 300)})))"""
# Save as Ctrl+S does (docmanager:save also makes the checkpoint); returns whether unsaved
# changes are left.
SAVE = """async () => {
    const app = window.jupyterapp;
    const panel = window.ropeLabPanel;
    app.shell.activateById(panel.id);
    const start = performance.now();
    await app.commands.execute('docmanager:save');
    return {dirty: panel.context.model.dirty, ms: performance.now() - start};
}"""
# Close the tab (its ×) and shut the kernel down (the Running panel's button).
CLOSE = """async () => {
    const app = window.jupyterapp;
    const panel = window.ropeLabPanel;
    const session = panel.sessionContext.session.id;
    panel.close();
    await app.serviceManager.sessions.shutdown(session);
}"""
NEWS_TOAST = """() => [...document.querySelectorAll('.Toastify__toast, .jp-toast-message')]
    .map(node => node.innerText).filter(text => /news/i.test(text))"""


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def fresh_clone(target: Path, make: str) -> Path:
    """A fresh clone of the repository with the working tree's uncommitted changes: every
    file git tracks or would add, committed into a repository of its own as git would commit
    it (through the notebook filter that `make notebook-filter` sets up; run in a checkout
    whose notebooks were run and saved, it commits them stripped, as their own git does),
    then cloned from there with `git clone`, and `make notebook-filter` run in the clone, as
    `make lab`'s install does. Like a newcomer's clone, git checks out every file in the
    second it writes its index: every entry is "racily clean", and the first command to
    write the index re-reads every notebook through the filter (the first save once took
    1 min 52 s there, and left .git/index.lock behind)."""
    upstream = target.parent / f"{target.name}-upstream"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():  # deleted files, a .venv link: no
            (upstream / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, upstream / name)
    _git(upstream, "init", "-q")
    subprocess.run([make, "--no-print-directory", "-s", "notebook-filter",
                    f"PY={sys.executable}"], cwd=upstream, check=True, capture_output=True)
    _git(upstream, "add", "-A")
    _git(upstream, "-c", "user.name=rope_lab", "-c", "user.email=rope_lab@localhost",
         "commit", "-q", "-m", "fresh clone")
    _git(target.parent, "clone", "-q", str(upstream), str(target))
    subprocess.run([make, "--no-print-directory", "-s", "notebook-filter",
                    f"PY={sys.executable}"], cwd=target, check=True, capture_output=True)
    return target


@pytest.fixture(scope="module")
def readme_path(chromium, playwright_driver, tmp_path_factory):
    """Clone, `make notebook-filter`, `make lab`'s JupyterLab, open + save everything (Run All
    first in :data:`RUN_IN_LAB`)."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no `make` here: the README path starts with it")
    home = tmp_path_factory.mktemp("readme-path", numbered=False)
    clone = fresh_clone(home / "rope_lab", make)
    chinese = clone / "notebooks" / "zh_CN"
    notebooks = notebook_files(clone / "notebooks")  # the course, not the solutions
    notebooks += notebook_files(chinese, "00_*.ipynb", recursive=True)
    record = {"clone": clone, "notebooks": notebooks, "seconds": {}, "errors": {},
              "dirty_after_save": [], "dirty_on_opening": [], "save_ms": {}, "fonts": {},
              "news": [], "console": []}
    # The user's own settings: none (a fresh machine); autosave stays on, as for them.
    (home / "config").mkdir()
    with setup.jupyterlab(home, clone / "notebooks", cwd=clone,
                          env={"PYTHONPATH": str(clone)}) as url:
        browser = playwright_driver.chromium.launch(executable_path=chromium, headless=True,
                                                    args=setup.CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        # JavaScript errors while a student works; closing a notebook in the middle of the
        # lab's own start-up requests (the debugger's) is the test's haste, not theirs.
        errors = {"working": record["console"], "closing": []}
        state = {"now": "working"}
        page.on("console", lambda m: errors[state["now"]].append(m.text)
                if m.type == "error" else None)
        page.on("pageerror", lambda e: errors[state["now"]].append(f"uncaught: {e}"))
        cdp = context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        try:
            page.goto(f"{url}/lab?reset", wait_until="domcontentloaded")
            page.wait_for_function(LAB_READY, timeout=60_000, polling=250)
            for path in notebooks:
                name = path.relative_to(clone / "notebooks").as_posix()
                start = time.perf_counter()
                opened = page.evaluate(OPEN, name)
                assert opened["kernel"], f"{name}: no kernel started"
                if opened["dirty"]:
                    record["dirty_on_opening"].append(name)
                if name == "00_start_here.ipynb":
                    _look_at_00_as_it_opens(page, cdp, record)
                if name in RUN_IN_LAB:
                    page.evaluate(RUN_ALL)
                    page.wait_for_function(RAN, timeout=RUN_ALL_TIMEOUT_MS, polling=500)
                    record["errors"][name] = page.evaluate(ERRORS)
                if name == "00_start_here.ipynb":
                    _look_at_00_glossary(page, cdp, record)
                if name == "01_attention_without_position.ipynb":
                    _look_at_01(page, cdp, record)
                saved = page.evaluate(SAVE)
                record["save_ms"][name] = saved["ms"]
                if saved["dirty"]:
                    record["dirty_after_save"].append(name)
                state["now"] = "closing"
                page.evaluate(CLOSE)
                page.wait_for_timeout(250)
                state["now"] = "working"
                record["seconds"][name] = time.perf_counter() - start
            record["index.lock after saving"] = (clone / ".git" / "index.lock").exists()
            record["status"] = _git(clone, "status", "--porcelain", "--untracked-files=all")
            state["now"] = "closing"  # opened, edited, saved and closed at once
            record["edited"] = _edit_one(page, clone, notebooks[-1])
        finally:
            context.close()
            browser.close()
    record["lab_log"] = (home / "jupyterlab.log").read_text()
    print("README path, open (+ Run All where run) + save: " + ", ".join(
        f"{name[:2]} {seconds:.0f} s" for name, seconds in record["seconds"].items()))
    print("README path, save (key press to saved, hook included): " + ", ".join(
        f"{name[:2]} {ms:.0f} ms" for name, ms in record["save_ms"].items()))
    return record


EDIT = """async path => {
    const app = window.jupyterapp;
    const panel = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
    await panel.context.ready;
    const cell = panel.content.widgets.find(cell => cell.model.type === 'markdown');
    cell.model.sharedModel.setSource(cell.model.sharedModel.getSource() + '\\n\\nEdited.');
    app.shell.activateById(panel.id);
    await app.commands.execute('docmanager:save');
    await panel.sessionContext.ready;
    // as a teacher's kernel is, up and done with the lab's start-up requests before it is
    // shut down: ipykernel prints into the lab's log when shut down while it still imports
    // (a KeyboardInterrupt, seen 0.15 s after start) or still answers the lab's first
    // control request (an unawaited dispatch_control, seen 0.1 s after its info reply)
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    if (kernel) {
        await kernel.info;
        await new Promise(done => setTimeout(done, 1000));
        // a kernel that died or never settles is shut down all the same after 30 s
        const until = Date.now() + 30000;
        while (kernel.status !== 'idle' && kernel.status !== 'dead' && Date.now() < until) {
            await new Promise(done => setTimeout(done, 100));
        }
    }
    const session = panel.sessionContext.session && panel.sessionContext.session.id;
    panel.close();
    if (session) { await app.serviceManager.sessions.shutdown(session); }
}"""


def _edit_one(page, clone: Path, path: Path) -> str:
    """A teacher edits a cell and saves: git must still see that (the lab's post-save hook
    only makes git compare by content). Returns git's status line; restores the file."""
    saved = path.read_bytes()
    page.evaluate(EDIT, path.relative_to(clone / "notebooks").as_posix())
    status = _git(clone, "status", "--porcelain", "--", str(path.relative_to(clone)))
    path.write_bytes(saved)
    return status


def _look_at_00_as_it_opens(page, cdp, record):
    """Notebook 00 as it opens: the news pop-up (if any), its Chinese words."""
    page.wait_for_timeout(2000)  # the lab's start-up notifications, if any, are up by now
    record["news"] = page.evaluate(NEWS_TOAST)
    setup.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(setup.ARTIFACTS / "readme-path-00-open.png"))
    record["fonts"]["00 prose"] = setup.platform_fonts(cdp, "旋转位置编码")


# Scroll the open notebook to the first cell whose source or outputs contain the text (cells
# far from the view are not drawn: JupyterLab renders a long notebook in windows).
SHOW = """async text => {
    const notebook = window.ropeLabPanel.content;
    const index = notebook.widgets.findIndex(
        cell => JSON.stringify(cell.model.toJSON()).includes(text));
    if (index < 0) { return -1; }
    notebook.activeCellIndex = index;
    await notebook.scrollToItem(index, 'auto', 0, 'start');
    return index;
}"""


def _look_at(page, cdp, text: str, screenshot: str) -> list[dict]:
    """Bring the cell showing ``text`` into view, screenshot the lab, return the fonts of the
    text as drawn (empty where the text is not in the notebook)."""
    if page.evaluate(SHOW, text) < 0:
        return []
    page.wait_for_timeout(1000)  # the cell is drawn
    page.screenshot(path=str(setup.ARTIFACTS / screenshot))
    return setup.platform_fonts(cdp, text)


def _look_at_00_glossary(page, cdp, record):
    """The glossary's table (an output: there after Run All), with its 中文 column."""
    record["fonts"]["00 glossary header"] = _look_at(page, cdp, "中文",
                                                     "readme-path-00-glossary.png")


def _look_at_01(page, cdp, record):
    """Notebook 01's Chinese sentence in a code cell."""
    text = setup.chinese_in_code(ROOT / "notebooks" / "01_attention_without_position.ipynb")
    record["code text"] = text
    record["fonts"]["01 code"] = _look_at(page, cdp, text, "readme-path-01-code.png")


def test_every_notebook_ran_and_was_saved_as_jupyterlab_saves(readme_path):
    notebooks = readme_path["notebooks"]
    assert len(notebooks) >= 15, [p.name for p in notebooks]  # 13, 2 Chinese (one solutions)
    assert any("solutions" in path.parts for path in notebooks)
    assert sorted(readme_path["errors"]) == sorted(RUN_IN_LAB), "not every sample was run"
    errors = {name: found for name, found in readme_path["errors"].items() if found}
    assert not errors, f"error or stderr outputs in JupyterLab: {errors}"
    assert not readme_path["dirty_after_save"], readme_path["dirty_after_save"]
    assert not readme_path["dirty_on_opening"], (
        "marked modified as soon as they opened, before anything ran: "
        f"{readme_path['dirty_on_opening']}")
    for path in notebooks:
        checkpoint = path.parent / ".ipynb_checkpoints" / f"{path.stem}-checkpoint.ipynb"
        assert checkpoint.exists(), f"JupyterLab kept no checkpoint of {path.name}"
        saved = path.read_text(encoding="utf-8")
        assert '"language_info"' in saved, f"{path.name} was not saved with the kernel's metadata"
        if path.relative_to(readme_path["clone"] / "notebooks").as_posix() in RUN_IN_LAB:
            assert '"execution_count": 1' in saved, f"{path.name} was saved without its outputs"


def test_git_sees_no_change_after_the_class(readme_path):
    clone = readme_path["clone"]
    assert not readme_path["index.lock after saving"], "the saves left .git/index.lock behind"
    assert readme_path["status"] == "", (
        "after Run All and save in JupyterLab, git status shows:\n" + readme_path["status"]
        + _git(clone, "diff")[:3000])
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""


def test_git_still_sees_an_edited_notebook(readme_path):
    name = readme_path["notebooks"][-1].relative_to(readme_path["clone"]).as_posix()
    assert readme_path["edited"] == f" M {name}\n", readme_path["edited"]


def test_git_add_and_commit_work_after_the_class(readme_path):
    """The teacher commits after class: nothing is locked, nothing is left to commit."""
    clone = readme_path["clone"]
    assert not (clone / ".git" / "index.lock").exists()
    _git(clone, "add", "-A")
    _git(clone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
         "--allow-empty", "-m", "after class")
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == ""
    assert _git(clone, "diff", "HEAD~1", "--stat") == ""


def test_the_project_checks_pass_in_the_used_clone(readme_path):
    """On the clone with JupyterLab's checkpoint copies: the project checks and the course
    checks (which list the notebooks), and the collection of every test and notebook."""
    clone = readme_path["clone"]
    env = dict(os.environ, PYTHONPATH=str(clone))
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests", "--ignore=tests/browser", "--nbval-lax", "--nbval-current-env", "notebooks"],
        cwd=clone, env=env, capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    picked = [line for line in collected.stdout.splitlines() if "checkpoint" in line.lower()]
    assert not picked, "tests collected JupyterLab's checkpoint copies:\n" + "\n".join(picked)
    # not the ones that list no notebook and take seconds (the fast loop's reach, xdist's
    # groups, the import's cost): `make unit` runs them
    checks = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_project.py",
         "tests/test_course.py", "-k", "not fast_loop_reaches and not xdist_groups "
         "and not import_is_cheap"],
        cwd=clone, env=env, capture_output=True, text=True)
    assert checks.returncode == 0, checks.stdout[-5000:] + checks.stderr[-2000:]
    status = _git(clone, "status", "--porcelain", "--untracked-files=all")
    assert status == "", "the checks themselves changed the clone:\n" + status


def test_the_lab_shows_chinese_with_the_course_font(readme_path):
    """No CJK font on this machine: every Chinese glyph must come from the shipped font."""
    fonts = readme_path["fonts"]
    expected = {"00 prose": len("旋转位置编码"), "00 glossary header": len("中文"),
                "01 code": len(readme_path.get("code text", "?"))}
    for where, count in expected.items():
        assert where in fonts, f"{where}: not found in the lab (see the screenshots)"
        ours = setup.glyphs_from_the_course_font(fonts[where])
        assert ours >= count, (f"{where}: {ours} of {count} Chinese glyphs from the course's "
                               f"font; fonts used: {fonts[where]}")


def test_no_news_pop_up_and_no_warnings(readme_path):
    assert readme_path["news"] == [], f"JupyterLab asked about news: {readme_path['news']}"
    log = readme_path["lab_log"]
    assert "without encryption" not in log, "a kernel warned of an unencrypted connection"
    assert "Warning" not in log, [line for line in log.splitlines() if "Warning" in line]
    for extension in ("git_after_save", "kernel_language"):
        assert f"{extension} | extension was successfully loaded" in log, extension
    assert log.count("Kernel started") >= len(readme_path["notebooks"])
    assert not readme_path["console"], readme_path["console"]
