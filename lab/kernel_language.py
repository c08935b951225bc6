"""A notebook that was only opened is not marked modified (a Jupyter server extension).

`make lab` loads it beside ``git_after_save`` (``lab/jupyter_server_config.d/``).

When its kernel starts, JupyterLab writes the kernel's ``language_info`` (Python's version
among it) into the notebook's metadata, and any difference from what the file holds marks
the notebook modified: the dot on its tab and the "unsaved changes" question on closing,
before the learner has changed anything. The course's notebooks are committed with
``"language_info": {"name": "python"}`` only (git's filter keeps no more: the version differs
from machine to machine). So when the lab reads a notebook for the native Python kernel, this
extension hands JupyterLab the ``language_info`` that kernel will report (ipykernel's own,
for the Python that runs the server and its native kernel), and the kernel's update changes
nothing. The file on disk is not touched; a notebook that names another kernel, or holds a
fuller ``language_info`` of its own, is served as it is.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging

log = logging.getLogger(__name__)


@functools.cache
def native_language_info() -> dict | None:
    """What ipykernel's Python kernel, run by this interpreter, reports as its language."""
    try:
        from ipykernel.ipkernel import IPythonKernel
    except ImportError:
        return None
    info = IPythonKernel.language_info
    return copy.deepcopy(info) if isinstance(info, dict) else None


def fill_language_info(model: dict, native_kernel: str = "python3") -> dict:
    """``model`` (a contents model) with the native kernel's language_info where the
    notebook names that kernel and holds no more than the language's name."""
    if not isinstance(model, dict) or model.get("type") != "notebook":
        return model
    content = model.get("content")
    metadata = content.get("metadata") if isinstance(content, dict) else None
    if not isinstance(metadata, dict):
        return model
    kernel = metadata.get("kernelspec")
    held = metadata.get("language_info")
    info = native_language_info()
    if (info is None or not isinstance(kernel, dict) or kernel.get("name") != native_kernel
            or not (held is None or (isinstance(held, dict) and set(held) <= {"name"}
                                     and held.get("name") == info.get("name")))):
        return model
    metadata["language_info"] = copy.deepcopy(info)
    return model


def _filling(get):
    """The contents manager's ``get``, filling in language_info (sync or async)."""
    if inspect.iscoroutinefunction(get):
        @functools.wraps(get)
        async def filled(*args, **kwargs):
            return fill_language_info(await get(*args, **kwargs))
    else:
        @functools.wraps(get)
        def filled(*args, **kwargs):
            return fill_language_info(get(*args, **kwargs))
    filled.rope_lab_fills_language_info = True
    return filled


def _jupyter_server_extension_points():
    return [{"module": "kernel_language"}]


def _load_jupyter_server_extension(serverapp):
    manager = serverapp.contents_manager
    if getattr(manager.get, "rope_lab_fills_language_info", False):
        return
    if native_language_info() is not None:
        manager.get = _filling(manager.get)
