"""rope_lab.runner: the one notebook runner (the book, the teacher's check `make check`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from rope_lab import runner

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, *sources: str) -> Path:
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)
    return path


def test_problems_name_each_error_and_stderr_output_with_its_cell():
    nb = new_notebook(cells=[
        new_code_cell("print('fine')", outputs=[new_output("stream", name="stdout",
                                                           text="fine\n")]),
        new_code_cell("import warnings\nwarnings.warn('careful')", outputs=[new_output(
            "stream", name="stderr", text="<stdin>:2: UserWarning: careful\n")]),
        new_code_cell("1 / 0", outputs=[new_output(
            "error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])]),
    ])
    found = runner.problems(nb)
    assert len(found) == 2
    assert "cell 1 (import warnings)" in found[0] and "UserWarning: careful" in found[0]
    assert "cell 2 (1 / 0)" in found[1] and "ZeroDivisionError: division by zero" in found[1]


def test_the_cache_key_follows_the_notebook_and_the_package(monkeypatch):
    """A changed notebook, a changed package file or another library version: another key."""
    first = runner.cache_key(b"notebook")
    assert runner.cache_key(b"notebook") == first
    assert runner.cache_key(b"notebook, edited") != first
    monkeypatch.setattr(runner, "fingerprint", lambda: "another package")
    assert runner.cache_key(b"notebook") != first


def test_the_fingerprint_reads_every_package_file(tmp_path, monkeypatch):
    package = tmp_path / "rope_lab"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "data.json").write_text("{}")
    monkeypatch.setattr(runner, "PACKAGE", package)
    runner.fingerprint.cache_clear()
    try:
        before = runner.fingerprint()
        runner.fingerprint.cache_clear()
        (package / "sub" / "data.json").write_text('{"changed": true}')
        assert runner.fingerprint() != before
    finally:
        runner.fingerprint.cache_clear()


def test_an_unknown_edition_or_worker_count_is_one_clear_line():
    for arguments, expected in [(["--edition", "fr"], "invalid choice: 'fr'"),
                                (["--workers", "0"], "--workers 0: expected a whole number")]:
        done = subprocess.run([sys.executable, "-m", "rope_lab.runner", *arguments],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 2 and expected in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_run_is_cached_and_a_failing_notebook_is_reported(tmp_path):
    """Two notebooks at once: the good one's run is kept and reused (not run again), the
    failing one is reported with its cell and never cached."""
    good = _notebook(tmp_path / "good.ipynb", "print(sum(range(10)))")
    bad = _notebook(tmp_path / "bad.ipynb", "x = 1", "import sys\nprint('oops', file=sys.stderr)",
                    "raise ValueError('planted')")
    cache = tmp_path / "cache"
    runs = runner.run_notebooks([good, bad], workers=2, cache=cache, progress=False)
    assert [run.path for run in runs] == [good, bad]
    assert runs[0].ok and not runs[0].cached
    assert runs[0].notebook.cells[0].outputs[0]["text"] == "45\n"
    assert len(runs[1].problems) == 2 and "planted" in runs[1].problems[1]
    assert len(list(cache.iterdir())) == 1
    again = runner.run_notebooks([good], workers=1, cache=cache, progress=False)
    assert again[0].cached and again[0].notebook.cells[0].outputs[0]["text"] == "45\n"
    good.write_text(good.read_text().replace("range(10)", "range(11)"))
    changed = runner.run_notebooks([good], workers=1, cache=cache, progress=False)
    assert not changed[0].cached and changed[0].notebook.cells[0].outputs[0]["text"] == "55\n"
    table = runner.report(runs)
    assert "✔ good.ipynb" in table and "✘ bad.ipynb" in table
    assert "1 of 2 notebooks ran without an error or a warning." in table


def test_the_editions_are_the_course_notebooks():
    english = runner.edition_notebooks("en")
    chinese = runner.edition_notebooks("zh_CN")
    assert [path.name for path in english] == [path.name for path in chinese]
    assert all("solutions" not in path.parts for path in english)
    assert len(runner.edition_notebooks("en", solutions=True)) == 2 * len(english)
    with pytest.raises(ValueError, match="edition 'fr'"):
        runner.edition_notebooks("fr")
    assert json.loads(english[0].read_text())["cells"]


def _shape(nb) -> list:
    """Per code cell: its execution count and its outputs' kinds (consecutive stream outputs
    as one: where a stream is split follows timing); the widget models' names."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            kinds = []
            for output in cell.outputs:
                kind = (output.output_type, output.get("name"),
                        tuple(sorted(output.get("data", {}))))
                if not (kinds and kind[0] == "stream" and kinds[-1] == kind):
                    kinds.append(kind)
            cells.append((cell.execution_count, kinds))
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [cells, sorted(model["model_name"] for model in state.get("state", {}).values())]


@pytest.mark.slow
def test_a_run_kept_from_nbval_is_the_run_the_runner_makes(tmp_path):
    """`make notebooks` keeps nbval's runs for `make book` (`--keep-runs`, conftest.py): a
    kept run must be what rope_lab.runner would have made, the numbering of the cells, a
    value hidden by ";", widgets and an Output widget's capture included; a notebook with a
    failing cell keeps nothing."""
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")  # the notebooks' conftest
    kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                  "language": "python"}
    good = new_notebook(cells=[
        new_code_cell("x = 40 + 2\nx;"), new_code_cell("print('printed')\nx"),
        new_code_cell("import ipywidgets\nipywidgets.IntSlider(value=3)"),
        new_code_cell("out = ipywidgets.Output()\nwith out:\n    print('captured')\nout"),
    ], metadata={"kernelspec": kernelspec})
    nbformat.write(good, tmp_path / "good.ipynb")
    nbformat.write(new_notebook(cells=[new_code_cell("1 / 0")], metadata={
        "kernelspec": kernelspec}), tmp_path / "bad.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-current-env", "--nbval-no-rerun", "--keep-runs-in", str(tmp_path / "kept"),
         "good.ipynb", "bad.ipynb"], cwd=tmp_path, capture_output=True, text=True)
    assert "1 failed" in done.stdout and "4 passed" in done.stdout, done.stdout[-3000:]
    kept = sorted(path for path in (tmp_path / "kept").iterdir())
    assert [path.name for path in kept] == [
        f"{runner.cache_key((tmp_path / 'good.ipynb').read_bytes())}.ipynb"]
    kept = nbformat.read(kept[0], as_version=4)
    made = runner.execute(nbformat.read(tmp_path / "good.ipynb", as_version=4), tmp_path)
    assert _shape(kept) == _shape(made)
    assert [cell.execution_count for cell in kept.cells] == [1, 2, 3, 4]
    assert "captured" in json.dumps(kept.metadata["widgets"])
