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
- `git status` stays clean after a class: the server extension in ``git_after_save.py``.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ASSETS = HERE.parent / "rope_lab" / "book_assets"

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


# git compares a saved notebook by content (lab/git_after_save.py, a server extension that
# lab/jupyter_server_config.d/git_after_save.json enables): importable from this folder.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
