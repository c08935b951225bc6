"""After JupyterLab saves a notebook, git compares it by content (a Jupyter server extension).

`make lab` loads it (``lab/jupyter_server_config.d/git_after_save.json``; the course's
``jupyter_server_config.py`` puts this folder on the server's import path).

git's clean filter (`make notebook-filter`) strips a saved notebook back to what is
committed, so `git diff` shows nothing. `git status`, though, sees that the file's size
changed and lists it as modified without running the filter (git's shortcut; it holds for
every clean filter). Putting the notebook's index entry back with the same blob and no
cached file size makes the next `git status` run the filter: a notebook that was only run
is clean again, one whose cells were edited still shows as modified. Nothing is staged or
unstaged: the entry keeps its blob.

Writing git's index can be slow: right after a clone or a pull, git re-reads every file it
checked out in the same second as it wrote the index ("racily clean" entries) and runs the
clean filter on each notebook among them (`make notebook-filter` refreshes the index once,
and runs the filter as one process, so this is seconds, not the 1 min 43 s it once was). So
a save never waits for git longer than :data:`WAIT_SECONDS`: git goes on in the
background and finishes by itself. git is never killed in the middle of writing its index
(that once left ``.git/index.lock`` behind and blocked every later `git add` and `git
commit`): only a git that runs past :data:`GIT_TIMEOUT_SECONDS` is asked to stop, with
SIGTERM (it and the filter it runs, in a process group of their own), on which git removes
its own lock. One git at a time: saves in quick succession take turns.

Outside a git checkout, for an untracked notebook, during a merge, when git is missing,
busy or fails, it changes nothing; no error here ever fails a save.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading

WAIT_SECONDS = 0.9
GIT_TIMEOUT_SECONDS = 120

log = logging.getLogger(__name__)
_one_git_at_a_time = threading.Lock()
# A name with *, ?, [ ] or a leading : is a file name, not a pattern or pathspec magic.
_GIT_ENV = {"GIT_LITERAL_PATHSPECS": "1", "GIT_TERMINAL_PROMPT": "0"}


def _signal_group(process: subprocess.Popen, signal_number: int) -> None:
    """Signal git and what it started (a filter): it runs in a process group of its own."""
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal_number)
        elif signal_number == signal.SIGTERM:
            process.terminate()
        else:
            process.kill()
    except OSError:  # gone already
        pass


def _git(*args: str, cwd: str) -> subprocess.CompletedProcess:
    """Run git; past GIT_TIMEOUT_SECONDS, SIGTERM to git and its filter (git removes its
    lock files on it), SIGKILL 10 s later if that was not enough."""
    group = ({"start_new_session": True} if os.name == "posix"
             else {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP})
    process = subprocess.Popen(["git", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, **_GIT_ENV}, **group)
    try:
        stdout, stderr = process.communicate(timeout=GIT_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGTERM)
        try:
            stdout, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_group(process, getattr(signal, "SIGKILL", signal.SIGTERM))
            process.wait(timeout=10)
            stdout = stderr = b""
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def index_entry(folder: str, name: str) -> tuple[str, str, str, str] | None:
    """(repository root, mode, blob, path from the root) of ``name``'s stage-0 index entry
    in the checkout holding ``folder``; None outside git, untracked, or being merged."""
    root = _git("rev-parse", "--show-toplevel", cwd=folder)
    if root.returncode != 0:
        return None
    found = _git("ls-files", "-z", "--stage", "--full-name", "--", name, cwd=folder)
    if found.returncode != 0:
        return None
    entries = [entry.split(None, 3) for entry in
               found.stdout.decode("utf-8", "surrogateescape").split("\0") if entry]
    if len(entries) != 1 or len(entries[0]) != 4 or entries[0][2] != "0":
        return None
    mode, blob, _, path = entries[0]
    return root.stdout.decode("utf-8", "surrogateescape").strip(), mode, blob, path


def compare_by_content(os_path: str) -> None:
    """Give ``os_path``'s index entry its own blob again and no cached stat data."""
    folder, name = os.path.split(os_path)
    with _one_git_at_a_time:
        entry = index_entry(folder, name)
        if entry is None:
            return
        root, mode, blob, path = entry
        _git("update-index", "--cacheinfo", f"{mode},{blob},{path}", cwd=root)


def _in_background(os_path: str) -> None:
    try:
        compare_by_content(os_path)
    except Exception:  # never fail a save, nor leave a traceback in the lab's log
        log.debug("git_after_save: nothing done for %s", os_path, exc_info=True)


def git_compares_saved_notebooks(model, os_path, contents_manager=None, **kwargs):
    """The post-save hook: after a notebook is saved, let git compare it by content.

    Returns within :data:`WAIT_SECONDS`; git finishes in the background if it needs longer.
    """
    if not isinstance(model, dict) or model.get("type") != "notebook":
        return
    worker = threading.Thread(target=_in_background, args=(os.fspath(os_path),),
                              name="git_after_save", daemon=True)
    worker.start()
    worker.join(WAIT_SECONDS)


def _jupyter_server_extension_points():
    return [{"module": "git_after_save"}]


def _load_jupyter_server_extension(serverapp):
    serverapp.contents_manager.register_post_save_hook(git_compares_saved_notebooks)
