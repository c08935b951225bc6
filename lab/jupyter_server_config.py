"""JupyterLab as `make lab` starts it (the Makefile puts this folder on JUPYTER_CONFIG_PATH).

Your own Jupyter configuration (~/.jupyter) is still read, after this file: it wins where
both set something.

- No news pop-up: JupyterLab would ask, over the first notebook, whether to fetch Jupyter's
  news from the internet (labconfig/default_setting_overrides.json turns that off; your own
  settings can turn it on).
- Chinese without a CJK system font: JupyterLab loads rope_lab/book_assets/custom.css,
  which adds the course's font (a subset of Noto Sans CJK SC, served from the same folder)
  to every font stack of the lab.
- Encrypted kernel connections: the kernel and the server talk over local TCP sockets;
  with CurveZMQ keys the server hands each kernel (ipykernel 7 declares support), that
  traffic is encrypted, and ipykernel no longer warns at every kernel start that it is
  "running over TCP without encryption ... susceptible to eavesdropping".
- `git status` stays clean after a class: see :func:`git_compares_saved_notebooks`.
"""

import os
import subprocess
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[1] / "rope_lab" / "book_assets"

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

c.LabApp.news_url = None
c.LabApp.custom_css = True
# JupyterLab serves custom.css (and the font it names) from static_custom_path, which only
# the server's tornado settings can set.
c.ServerApp.tornado_settings = {"static_custom_path": [str(ASSETS)]}


def _kernels_can_encrypt() -> bool:
    """jupyter_client 8.10+ hands out CurveZMQ keys; pyzmq must have been built with them."""
    try:
        import zmq
        from jupyter_client.manager import KernelManager
    except ImportError:
        return False
    return "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve")


if _kernels_can_encrypt():
    c.KernelManager.transport_encryption = "auto"


def git_compares_saved_notebooks(model, os_path, contents_manager=None, **kwargs):
    """After JupyterLab saves a notebook: make git compare it by content, not by size.

    git's clean filter (`make notebook-filter`) strips a saved notebook back to what is
    committed, so `git diff` shows nothing. `git status`, though, sees that the file's size
    changed and lists it as modified without running the filter (git's shortcut; it holds
    for every clean filter). Putting the notebook's index entry back with the same blob and
    no cached file size makes the next `git status` run the filter: a notebook that was only
    run is clean again, one whose cells were edited still shows as modified. Nothing is
    staged or unstaged: the entry keeps its blob. Outside a git checkout, for an untracked
    notebook, during a merge or when git is busy or missing it does nothing (an error here
    would fail the save).
    """
    if model.get("type") != "notebook":
        return
    folder, name = os.path.split(os_path)

    def git(*args, cwd=folder):
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=30)

    try:
        root = git("rev-parse", "--show-toplevel").stdout.strip()
        entry = git("ls-files", "-z", "--stage", "--full-name", "--", name).stdout
        fields = entry.rstrip("\0").split(None, 3)
        if not root or len(fields) != 4 or fields[2] != "0":  # not in git, or being merged
            return
        mode, blob, _, path = fields
        git("update-index", "--cacheinfo", f"{mode},{blob},{path}", cwd=root)
    except (OSError, subprocess.SubprocessError):
        return


c.ContentsManager.post_save_hook = git_compares_saved_notebooks
