"""Notebook checks on top of nbval (`pytest --nbval-lax notebooks`).

nbval runs every cell and fails on an error. Three more promises of the course are checked
here: no cell writes to stderr (warnings included); every cell can be re-run after Run All
(right after a notebook's last cell, in the same kernel, every code cell runs once more,
last cell first, as for a learner who goes back to a cell; `--nbval-no-rerun` skips that
pass); and each
notebook's run time is reported in the summary, so the "under 20 s" budget and the cost of
the re-run pass are visible on every run (also with pytest-xdist: run a notebook's cells on
one worker, ``-n N --dist loadfile``, as `make notebooks` does).
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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not hasattr(item, "cell"):  # not an nbval cell
        return (yield)
    start = time.perf_counter()
    try:
        return (yield)
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
            raise AssertionError("cell wrote to stderr:\n" + "".join(stderr))


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
