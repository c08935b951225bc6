"""Notebook checks on top of nbval (`pytest --nbval-lax notebooks`).

nbval runs every cell and fails on an error. Three more promises of the course are checked
here: no cell writes to stderr (warnings included); every cell can be re-run after Run All
(right after a notebook's last cell, in the same kernel, every code cell runs once more,
last cell first, as for a learner who goes back to a cell; `--nbval-no-rerun` skips that
pass); and each
notebook's run time is reported in the summary, so the "under 20 s" budget and the cost of
the re-run pass are visible on every run (also with pytest-xdist: run a notebook's cells on
one worker, ``-n N --dist loadfile``, as `make notebooks` does). With ``--keep-runs`` each
notebook's first pass is recorded (the kernel's messages, the cells run into the history as
in JupyterLab) and, when no cell failed, kept as rope_lab.runner keeps a run of its own
(:func:`rope_lab.runner.keep_run`), for `make book` to take instead of running it again.
"""

import time
from collections import defaultdict
from pathlib import Path

import pytest

_notebook_seconds = defaultdict(float)
_rerun_seconds = defaultdict(float)
NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
RERUN = "re-run after Run All"


def pytest_addoption(parser):
    parser.addoption("--nbval-no-rerun", action="store_true",
                     help="do not run every notebook cell a second time after Run All")
    parser.addoption("--keep-runs", action="store_true",
                     help="keep each notebook's run (outputs and widget state) in "
                          "build/executed/ for `make book`, which then does not run it again")
    parser.addoption("--keep-runs-in", metavar="DIR",
                     help="--keep-runs, into DIR instead of build/executed/")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """After the last cell nbval runs of each notebook, every code cell once more, same kernel."""
    if config.getoption("--nbval-no-rerun"):
        return
    ordered = []
    for position, item in enumerate(items):
        ordered.append(item)
        is_cell = hasattr(item, "cell") and hasattr(item, "cell_num")
        last_of_notebook = is_cell and (position + 1 == len(items)
                                        or items[position + 1].parent is not item.parent)
        if last_of_notebook:
            # Last cell first: each cell then runs in (nearly) the state Run All left, so a
            # name a later cell overwrites (`scaling = {...}` over the module) is still
            # overwritten, as for a learner who goes back to one cell. Front to back, the
            # import cells would run first and hide it.
            cells = [other for other in items if other.parent is item.parent]
            for cell in reversed(cells):
                options = defaultdict(bool, cell.options)
                options["check"] = False  # outputs may differ the second time; errors may not
                again = type(cell).from_parent(
                    cell.parent, name=f"{cell.name} {RERUN} (cell id {cell.cell.get('id')})",
                    cell_num=cell.cell_num, cell=cell.cell, options=options)
                again.rerun = True
                ordered.append(again)
    items[:] = ordered


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if hasattr(item, "cell") and report.failed:  # later re-runs of this notebook are moot
        item.parent.rope_lab_failed = True
    return report


def pytest_runtest_setup(item):
    if getattr(item, "rerun", False) and getattr(item.parent, "rope_lab_failed", False):
        pytest.skip("a cell of this notebook failed already; re-running the rest says nothing")


def _record(notebook) -> None:
    """From now on, keep the kernel's iopub messages for each cell nbval runs in
    ``notebook`` (its first pass) on ``notebook.rope_lab_replies``."""
    notebook.rope_lab_replies, notebook.rope_lab_current = [], None
    # the bytes that run: the cache key must not be taken from a file edited meanwhile
    notebook.rope_lab_source = Path(notebook.path).read_bytes()
    kernel, receive = notebook.kernel, notebook.get_kernel_message

    def recording_execute(source, allow_stdin=False):
        # as nbval runs a cell, but into the history as JupyterLab and nbclient do: without
        # it IPython numbers no cell and shows the value of a line that ends with ";"
        notebook.rope_lab_msg_id = kernel.kc.execute(
            source, store_history=True, allow_stdin=allow_stdin, stop_on_error=False)
        return notebook.rope_lab_msg_id

    def recording_receive(timeout=None, stream="iopub"):
        message = receive(timeout=timeout, stream=stream)
        current = notebook.rope_lab_current
        if (stream == "iopub" and current is not None
                and message["parent_header"].get("msg_id") == notebook.rope_lab_msg_id):
            current[1].append(message)
        return message

    notebook.kernel.execute_cell_input = recording_execute
    notebook.get_kernel_message = recording_receive


def _start_keeping(item) -> None:
    """`--keep-runs`: record the first pass of item's notebook, cell by cell."""
    notebook = item.parent
    if not hasattr(notebook, "rope_lab_replies"):
        _record(notebook)
    index = next(i for i, cell in enumerate(notebook.nb.cells) if cell is item.cell)
    notebook.rope_lab_current = (index, [])


def _finish_keeping(item) -> None:
    """After the notebook's last code cell ran without a failure, hand its run to
    rope_lab.runner.keep_run (which keeps a whole run without an error only)."""
    notebook = item.parent
    notebook.rope_lab_replies.append(notebook.rope_lab_current)
    notebook.rope_lab_current = None
    code_cells = sum(cell.cell_type == "code" for cell in notebook.nb.cells)
    if len(notebook.rope_lab_replies) == code_cells and not getattr(
            notebook, "rope_lab_failed", False):
        from rope_lab import runner

        folder = item.config.getoption("--keep-runs-in")
        runner.keep_run(Path(notebook.path), notebook.rope_lab_replies,
                        cache=Path(folder) if folder else runner.CACHE_DIR,
                        source=notebook.rope_lab_source)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not hasattr(item, "cell"):  # not an nbval cell
        return (yield)
    keeping = ((item.config.getoption("--keep-runs") or item.config.getoption("--keep-runs-in"))
               and not getattr(item, "rerun", False))
    if keeping:
        _start_keeping(item)
    start = time.perf_counter()
    try:
        result = yield
    except BaseException as error:  # a failed cell (nbval's errors, pytest.fail), not a skip
        if not isinstance(error, pytest.skip.Exception):
            item.parent.rope_lab_failed = True
        raise
    finally:
        # reported with the test (user_properties travel from an xdist worker to the
        # process that prints the summary)
        item.user_properties.append(("rope_lab_cell_seconds", (
            _name(item.path), getattr(item, "rerun", False), time.perf_counter() - start)))
        stderr = [
            output.get("text", "")
            for output in getattr(item, "test_outputs", None) or []
            if output.get("output_type") == "stream" and output.get("name") == "stderr"
        ]
        if stderr:
            item.parent.rope_lab_failed = True
            raise AssertionError("cell wrote to stderr:\n" + "".join(stderr))
    if keeping:
        _finish_keeping(item)
    return result


def pytest_runtest_logreport(report):
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == "rope_lab_cell_seconds":
            name, rerun, seconds = value
            (_rerun_seconds if rerun else _notebook_seconds)[name] += seconds


def _name(path: Path) -> str:
    """notebooks/solutions/x.ipynb → solutions/x.ipynb; notebooks/zh_CN/x.ipynb → zh_CN/x.ipynb
    (the Chinese edition has the English file names)."""
    try:
        return path.relative_to(NOTEBOOKS).as_posix()
    except ValueError:
        return path.name


def pytest_terminal_summary(terminalreporter):
    if not _notebook_seconds:
        return
    terminalreporter.section("notebook execution time (cells only, kernel start excluded)")
    for name, seconds in sorted(_notebook_seconds.items()):
        again = f"   + {_rerun_seconds[name]:5.1f} s {RERUN}" if name in _rerun_seconds else ""
        terminalreporter.write_line(f"{seconds:6.1f} s  {name}{again}")
    if _rerun_seconds:
        terminalreporter.write_line(f"{sum(_notebook_seconds.values()):6.1f} s  in all, "
                                    f"+ {sum(_rerun_seconds.values()):.1f} s {RERUN}")
