"""``python -m rope_lab.exercises grade``: a class's saved notebooks into grades and pages.

Identifying a notebook, refusing bad input and choosing the cells to run are tested without
a kernel; grading runs real kernels and is slow: a class of hostile submissions, and the
course's solutions (all pass) with its untouched notebooks (all fail, no crash).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest

from rope_lab.course import notebook_files
from rope_lab.exercises import BY_EXERCISE, GRADERS, submissions

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _grade(tmp_path, *paths, extra=()):
    """main() on ``paths``; (exit status, CSV rows by (file name, exercise) or None)."""
    target = tmp_path / "grades.csv"
    status = submissions.main(["grade", *map(str, paths), "--csv", str(target), *extra])
    if not target.exists():
        return status, None
    rows = {(Path(row["file"]).name, row["exercise"]): row
            for row in csv.DictReader(target.open(encoding="utf-8"))}
    return status, rows


# --- which notebook, in which language ---------------------------------------------------------


@pytest.mark.parametrize("folder, language", [("", "en"), ("zh_CN", "zh"), ("solutions", "en"),
                                              ("zh_CN/solutions", "zh")])
def test_every_course_notebook_is_identified(folder, language):
    for path in notebook_files(NOTEBOOKS / folder):
        submission = submissions.read_submission(path, path.name)
        assert submission.number == path.name[:2] and submission.language == language
        expected = {grader.exercise: grader.answer for grader in GRADERS
                    if grader.exercise.startswith(path.name[:2] + ".")}
        assert submission.answers == expected


def _course_notebook(number="08"):
    return nbformat.read(notebook_files(NOTEBOOKS, f"{number}_*.ipynb")[0], as_version=4)


def _without(nb, *starts):
    nb.cells = [cell for cell in nb.cells if not cell.source.lstrip().startswith(starts)]
    return nb


def _renamed_check(nb):
    for cell in nb.cells:
        cell.source = cell.source.replace("check_mrope_positions(", "check_mrope_ids(")
    return nb


def _exercise_removed(nb):  # an older 08 had only 08.1
    return _without(nb, "**Exercise 08.2", "def mrope_position_ids",
                    "exercises.check_mrope_positions")


def _other_course():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Homework 3: sorting"),
                                         nbformat.v4.new_code_cell("def sort(x): ...")])
    return nb


def _write_notebook(path: Path, nb) -> Path:
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return path


BAD_NOTEBOOKS = {
    "not JSON": (lambda path: path.write_text("cells: none"), "not a Jupyter notebook (not JSON"),
    "not text": (lambda path: path.write_bytes(b"\x89PNG\r\n\x1a\n"),
                 "not a Jupyter notebook (not UTF-8 text)"),
    "JSON, not a notebook": (lambda path: path.write_text('{"answers": [1, 2]}'),
                             "not a Jupyter notebook (JSON without a notebook's 'cells'"),
    "another course": (lambda path: _write_notebook(path, _other_course()),
                       "not a notebook of this course (its first heading is '# Homework 3"),
    "a renamed exercise": (lambda path: _write_notebook(path, _renamed_check(_course_notebook())),
                           "calls exercises.check_mrope_ids, which this copy of the course does "
                           "not have"),
    "an exercise missing": (
        lambda path: _write_notebook(path, _exercise_removed(_course_notebook())),
        "exercise 08.2 (M-RoPE position ids) is not in it"),
}


@pytest.mark.parametrize("kind", list(BAD_NOTEBOOKS))
def test_a_notebook_that_cannot_be_graded_gets_one_line(kind, tmp_path, capsys):
    make, message = BAD_NOTEBOOKS[kind]
    path = tmp_path / "student.ipynb"
    make(path)
    good = shutil.copy(NOTEBOOKS / "solutions" / "00_start_here_solutions.ipynb", tmp_path)
    status, rows = _grade(tmp_path, path, good)
    lines = capsys.readouterr().err.splitlines()
    assert status == 2 and rows is None  # nothing graded, nothing written
    assert len(lines) == 1 and f"student.ipynb: {message}" in lines[0], lines


@pytest.mark.parametrize("csv_path, feedback, message", [
    ("missing/grades.csv", None, "--csv {tmp}/missing/grades.csv: the folder {tmp}/missing "
                                 "does not exist"),
    (".", None, "--csv {tmp} is a folder; expected a file name such as {tmp}/grades.csv"),
    ("file.txt/grades.csv", None, "{tmp}/file.txt is not a folder"),
    ("grades.csv", "file.txt", "--feedback {tmp}/file.txt: a file; expected a folder"),
])
def test_an_output_that_cannot_be_written_is_refused_first(csv_path, feedback, message,
                                                             tmp_path, capsys):
    (tmp_path / "file.txt").write_text("")
    notebook = NOTEBOOKS / "solutions" / "00_start_here_solutions.ipynb"
    arguments = ["grade", str(notebook), "--csv", str(tmp_path / csv_path)]
    if feedback:
        arguments += ["--feedback", str(tmp_path / feedback)]
    assert submissions.main(arguments) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and message.format(tmp=tmp_path) in lines[0], lines
    assert not (tmp_path / "grades.csv").exists()


def test_paths_that_hold_no_notebook_are_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    status, _ = _grade(tmp_path, tmp_path / "empty", tmp_path / "nothing.ipynb")
    lines = capsys.readouterr().err.splitlines()
    assert status == 2 and len(lines) == 2
    assert "empty: a folder with no notebook (.ipynb) in it" in lines[0]
    assert "nothing.ipynb: no such file or folder" in lines[1]


# --- the cells an answer needs -------------------------------------------------------------------


def test_only_the_cells_an_answer_needs_run():
    cells = ["import torch\nimport rope_lab as rl\nfrom rope_lab import plots",        # 0
             "fig = plots.everything()  # seconds of figures",                           # 1
             "SCALE = 2.0\nTHETA = torch.ones(4)",                                       # 2
             "THETA[0] = 0.5  # changed in place",                                       # 3
             "def helper(x):\n    return x * SCALE",                                      # 4
             "%%time\ndef by_magic(x):\n    return x",                                    # 5
             "def answer(x):\n    return helper(x) + THETA.sum() + by_magic(0)",          # 6
             "while True:\n    pass  # the learner's own experiment",                       # 7
             "exercises.check_something(answer)",                                         # 8
             "%timeit answer(1)"]                                                           # 9
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    read = submissions.read_cells(nb)
    assert not read[5].readable  # a cell magic: text, not Python
    assert submissions.needed_cells(read, ["answer"]) == [0, 2, 3, 4, 5, 6]


def test_an_unused_name_pulls_in_no_cell():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in (
        "x = 1", "def answer(q):\n    x = 2  # a local, not the notebook's x\n    return q + x")])
    assert submissions.needed_cells(submissions.read_cells(nb), ["answer"]) == [1]


# --- the page ---------------------------------------------------------------------------------


def test_a_page_escapes_everything_and_speaks_the_notebooks_language():
    path = NOTEBOOKS / "zh_CN" / "09_performance.ipynb"
    submission = submissions.read_submission(path, "<b>class</b>/09.ipynb")
    rows = [submissions.Row(submission.shown, "09", "zh", "09.1", BY_EXERCISE["09.1"].title,
                            False, "your function raised ValueError: <script>alert(1)</script>"),
            submissions.Row(submission.shown, "09", "zh", "09.2", BY_EXERCISE["09.2"].title,
                            True, "")]
    page = submissions.page_html(submission, rows)
    assert '<html lang="zh-CN">' in page and "<script>" not in page and "<b>class" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>&lt;b&gt;class&lt;/b&gt;/09.ipynb 的反馈</title>" in page
    assert "笔记本 09：性能 · 2 题中通过 1 题" in page


# --- grading, in kernels ----------------------------------------------------------------------


def _replace_answer(nb, name, source):
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.lstrip().startswith(f"def {name}("):
            cell.source = source
            return nb
    raise KeyError(name)


def _class_folder(folder: Path) -> Path:
    """Five students, each with something that must cost one answer only."""
    folder.mkdir()
    nb = _course_notebook("01")
    _replace_answer(nb, "my_attention", "def my_attention(q, k, v):\n    return (q @ k.T\n")
    _replace_answer(nb, "inverse_permutation",  # right, then a loop that holds the GIL
                    "import itertools\n\ndef inverse_permutation(perm):\n"
                    "    return torch.argsort(perm)\n\nsum(itertools.repeat(1))\n")
    _replace_answer(nb, "my_causal_attention",
                    "def my_causal_attention(q, k, v):\n"
                    "    return rl.attention(q, k, v, mask='causal')\n")  # forbidden
    _write_notebook(folder / "alice.ipynb", nb)
    nb = _course_notebook("00")
    _replace_answer(nb, "scaled_dot", "import os\n\ndef scaled_dot(q, k):\n"
                                      "    return (q * k).sum(-1) / q.shape[-1] ** 0.5\n\n"
                                      "os._exit(3)\n")
    _write_notebook(folder / "bob.ipynb", nb)
    nb = _course_notebook("08")
    _replace_answer(nb, "axial_rope", "def axial_rope(x, positions, base):\n    while True:\n"
                                      "        pass\n")
    _replace_answer(nb, "mrope_position_ids",
                    "def mrope_position_ids(text_before, grid_thw, text_after):\n"
                    "    return nd.mrope_positions(text_before, grid_thw, text_after)\n")
    nb.cells.insert(5, nbformat.v4.new_code_cell("while True:\n    pass  # never needed"))
    _write_notebook(folder / "carol.ipynb", nb)
    nb = nbformat.read(NOTEBOOKS / "zh_CN" / "09_performance.ipynb", as_version=4)
    _replace_answer(nb, "rope_bytes", "def rope_bytes(batch, heads, seq, head_dim, width):\n"
                                      "    raise ValueError('<script>alert(1)</script>')\n")
    _replace_answer(nb, "attainable", "def attainable(intensity, peak, bandwidth):\n"
                                      "    return min(peak, intensity * bandwidth)\n")
    _write_notebook(folder / "dong.ipynb", _without(nb, "def complex_rope("))
    nb = _course_notebook("00")
    _replace_answer(nb, "scaled_dot", "def scaled_dot(q, k):\n    return (q * k).sum(-1) * SCALE\n")
    nb.cells.insert(5, nbformat.v4.new_code_cell("SCALE = 1 / 0  # a helper cell that fails"))
    _write_notebook(folder / "erin.ipynb", nb)
    return folder


@pytest.mark.slow
def test_a_class_of_hostile_submissions_costs_each_mistake_one_answer(tmp_path):
    folder = _class_folder(tmp_path / "class")
    pages = tmp_path / "pages"
    status, rows = _grade(tmp_path, folder, extra=[
        "--feedback", str(pages), "--cell-time-limit", "15", "--answer-time-limit", "2"])
    assert status == 0
    verdicts = {key: (row["passed"], row["feedback"]) for key, row in rows.items()}
    expected = {
        ("alice.ipynb", "01.1"): ("0", "the cell that defines my_attention (it starts “def "
                                       "my_attention(q, k, v):”) raised SyntaxError"),
        ("alice.ipynb", "01.2"): ("0", "did not finish within 15 s (a loop that never ends?), "
                                       "so inverse_permutation was never defined"),
        ("alice.ipynb", "01.3"): ("0", "exercise 01.3 asks you to write this without "
                                       "rope_lab.attention"),
        ("bob.ipynb", "00.1"): ("0", "ended the notebook's kernel (os._exit, a crash or "
                                     "running out of memory)"),
        ("carol.ipynb", "08.1"): ("0", "your function had not finished after 2 s"),
        ("carol.ipynb", "08.2"): ("1", ""),
        ("dong.ipynb", "09.1"): ("0", "你的函数抛出了 ValueError：<script>alert(1)</script>"),
        ("dong.ipynb", "09.2"): ("1", ""),
        ("dong.ipynb", "09.3"): ("0", "complex_rope"),
        ("erin.ipynb", "00.1"): ("0", "NameError: name 'SCALE' is not defined (line 2), on "
                                      "inputs (tensor of shape (8,), tensor of shape (8,)) (a "
                                      "cell your function needs, the one that starts “SCALE = 1 "
                                      "/ 0 # a helper cell that fails”, raised "
                                      "ZeroDivisionError: division by zero)"),
    }
    assert set(verdicts) == set(expected)
    for key, (passed, words) in expected.items():
        assert verdicts[key][0] == passed and words in verdicts[key][1], (key, verdicts[key])
    assert sorted(path.name for path in pages.rglob("*.html")) == [
        "alice.html", "bob.html", "carol.html", "dong.html", "erin.html"]
    page = next(pages.rglob("dong.html")).read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page and "<script>" not in page and "性能" in page


# Untouched course notebooks graded whole: three of the lighter ones (every course notebook
# runs under nbval in `make notebooks`; grading all thirteen here cost a minute and a half).
UNTOUCHED = ("00", "03", "07")


@pytest.mark.slow
def test_the_solutions_pass_and_the_untouched_notebooks_fail(tmp_path):
    for source, target, numbers in ((NOTEBOOKS / "solutions", tmp_path / "solutions", None),
                                    (NOTEBOOKS, tmp_path / "untouched", UNTOUCHED)):
        target.mkdir()
        for path in notebook_files(source):
            if numbers is None or path.name[:2] in numbers:
                shutil.copy(path, target)
    status, rows = _grade(tmp_path, tmp_path / "solutions", tmp_path / "untouched",
                          extra=["--jobs", "2"])
    untouched = [g for g in GRADERS if g.exercise[:2] in UNTOUCHED]
    assert untouched and status == 0 and len(rows) == len(GRADERS) + len(untouched)
    for (name, exercise), row in rows.items():
        if name.endswith("_solutions.ipynb"):
            assert row["passed"] == "1", (name, exercise, row["feedback"])
        else:
            assert row["passed"] == "0" and row["feedback"] == (
                "not attempted yet (the function raises NotImplementedError)"), row
