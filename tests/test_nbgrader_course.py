"""rope_lab.nbgrader_course: the course as nbgrader courses, checked by nbgrader itself.

The cell metadata is validated by nbgrader's own validator; one assignment goes through the
real flow (generate, submit, autograde, export) with its own gradebook in a temporary folder.
"""

from __future__ import annotations

import ast
import builtins
import csv
import dis
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from rope_lab import nbgrader_course
from rope_lab.course import notebook_files
from rope_lab.exercises import GRADERS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "03_rope_in_2d.ipynb"
ASSIGNMENT = NOTEBOOK.stem


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """Both editions' courses, every notebook (built once for the module)."""
    out = tmp_path_factory.mktemp("nbgrader") / "course"
    assert nbgrader_course.main(["--out", str(out)]) == 0
    return out


def graded_cells(path: Path) -> list:
    return [cell for cell in nbformat.read(path, as_version=4).cells
            if "nbgrader" in cell.metadata]


@pytest.mark.parametrize("edition", ["en", "zh_CN"])
def test_every_exercise_is_one_answer_and_one_test_in_each_edition(course, edition):
    pytest.importorskip("nbgrader", reason="the teach extra is not installed")
    from nbgrader.nbgraderformat import MetadataValidator

    tests, validator = {}, MetadataValidator()
    for path in notebook_files(course / edition / "source", recursive=True):
        nb = nbformat.read(path, as_version=4)
        validator.validate_nb(nb)  # nbgrader 0.9's schema: raises on a bad cell
        cells = graded_cells(path)
        answers = [c for c in cells if c.metadata.nbgrader["solution"]]
        for cell in cells:
            meta = cell.metadata.nbgrader
            if not meta["grade"]:
                continue
            call = ast.parse(cell.source).body[-1]  # assert exercises.check_…(function)
            grader = call.test.func.attr
            tests[meta["grade_id"]] = (grader, meta["points"], meta["locked"])
            answer = next(a for a in answers
                          if a.metadata.nbgrader["grade_id"] == meta["grade_id"] + "_answer")
            assert f"def {call.test.args[0].id}(" in answer.source
            assert nbgrader_course.BEGIN in answer.source and nbgrader_course.END in answer.source
    expected = {"ex" + g.exercise.replace(".", "_"): (g.__name__, 1, True) for g in GRADERS}
    assert tests == expected


def test_answers_keep_the_template_and_the_stub_is_the_editions_own(course):
    config = (course / "zh_CN" / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "'rope_lab_zh_CN'" in config
    assert 'raise NotImplementedError("在这里写你的代码")' in config
    answer = next(c for c in graded_cells(course / "zh_CN" / "source" / ASSIGNMENT
                                          / f"{ASSIGNMENT}.ipynb")
                  if c.metadata.nbgrader["grade_id"] == "ex03_1_answer")
    # the template's translated docstring, then the solution
    assert answer.source.startswith('def rotation_matrix(angle: float) -> torch.Tensor:\n'
                                    '    """R(angle)，形状 (2, 2)')
    assert "    ### BEGIN SOLUTION\n    c, s = math.cos(angle)" in answer.source


def _namespace_of(notebook: Path, before: int) -> dict:
    """The imports the notebook's code cells above cell ``before`` make, run."""
    namespace: dict = {}
    for cell in nbformat.read(notebook, as_version=4).cells[:before]:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                exec(compile(ast.Module([node], []), "<imports>", "exec"), namespace)
    return namespace


def _globals_read(code) -> set[str]:
    """The global names ``code`` (and the functions inside it) load, from its bytecode."""
    found = {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
    for constant in code.co_consts:
        if hasattr(constant, "co_code"):
            found |= _globals_read(constant)
    return found


@pytest.mark.slow  # imports what every notebook imports (transformers, sympy): seconds
@pytest.mark.parametrize("edition", ["en", "zh_CN"])
def test_every_answer_cell_runs_with_what_the_notebook_defines_above_it(course, edition):
    """Each answer cell, solution in place, run with the imports of the cells above it (the
    notebook's setup): every global its function reads is there. A solution that needs a name
    the notebook does not make would fail in nbgrader with a NameError; the solutions
    themselves are checked by their graders in the solution notebooks (make notebooks)."""
    missing = {}
    for path in notebook_files(course / edition / "source", recursive=True):
        cells = nbformat.read(path, as_version=4).cells
        for index, cell in enumerate(cells):
            if not cell.metadata.get("nbgrader", {}).get("solution"):
                continue
            namespace = _namespace_of(path, index)
            before = set(namespace)
            exec(cell.source, namespace)
            function = next(namespace[name] for name in set(namespace) - before
                            if callable(namespace[name]) and name != "__builtins__")
            unbound = sorted(name for name in _globals_read(function.__code__)
                             if name not in namespace and not hasattr(builtins, name))
            if unbound:
                missing[cell.metadata.nbgrader["grade_id"]] = unbound
    assert not missing


# --- bad input: one line, exit status 2, nothing written ----------------------------------------

def _run(capsys, *argv) -> tuple[int, str]:
    code = nbgrader_course.main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_a_file_that_is_not_a_notebook(tmp_path, capsys):
    text = tmp_path / "essay.ipynb"
    text.write_text("my answers, as plain text", encoding="utf-8")
    code, err = _run(capsys, "--out", tmp_path / "out", text)
    assert code == 2 and err.count("\n") == 1
    assert f"{text}: not a Jupyter notebook" in err
    assert not (tmp_path / "out").exists()


def test_a_notebook_of_another_course(tmp_path, capsys):
    other = tmp_path / "lecture.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "# Week 3 · Convolutions")]), other)
    code, err = _run(capsys, "--out", tmp_path / "out", other)
    assert code == 2 and err.count("\n") == 1
    assert "not a notebook of rope_lab" in err


def test_a_notebook_of_another_version_of_the_course(tmp_path, capsys):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells = [c for c in nb.cells if "check_score_2d" not in c.source]  # 03.2 missing
    older = tmp_path / "03_rope_in_2d.ipynb"
    nbformat.write(nb, older)
    code, err = _run(capsys, "--out", tmp_path / "out", older)
    assert code == 2 and err.count("\n") == 1
    assert "has no exercise 03.2" in err
    renamed = nbformat.read(NOTEBOOK, as_version=4)
    for cell in renamed.cells:
        cell.source = cell.source.replace("check_score_2d", "check_score_two_d")
    nbformat.write(renamed, older)
    code, err = _run(capsys, "--out", tmp_path / "out", older)
    assert code == 2 and "exercises.check_score_two_d, which this copy of rope_lab does not " \
                          "have" in err
    assert not (tmp_path / "out").exists()


def test_an_output_path_that_cannot_be_written(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "grades.csv"
    afile.write_text("", encoding="utf-8")
    code, err = _run(capsys, "--out", afile, NOTEBOOK)
    assert code == 2 and "exists and is not a folder" in err
    code, err = _run(capsys, "--out", afile / "course", NOTEBOOK)
    assert code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    # as the OS answers a user without write permission there (root may write anywhere)
    real_access = os.access
    monkeypatch.setattr(nbgrader_course.os, "access", lambda path, mode: False
                        if Path(path) == locked else real_access(path, mode))
    code, err = _run(capsys, "--out", locked / "course", NOTEBOOK)
    assert code == 2 and f"the folder {locked} is not writable" in err and err.count("\n") == 1


@pytest.mark.parametrize(("points", "expected"), [
    ("99.1=2", "no exercise '99.1'"), ("03.1=lots", "expected a positive number"),
    ("03.1=-1", "expected a positive number"), ("03.1", "expected a positive number")])
def test_bad_points(tmp_path, capsys, points, expected):
    code, err = _run(capsys, "--out", tmp_path / "out", "--points", points, NOTEBOOK)
    assert code == 2 and expected in err and err.count("\n") == 1


def test_points_and_a_course_rewritten_in_place(tmp_path, capsys):
    out = tmp_path / "out"
    assert _run(capsys, "--out", out, "--points", "03.2=2.5", NOTEBOOK)[0] == 0
    keep = out / "en" / "gradebook.db"
    keep.write_bytes(b"the teacher's grades")
    assert _run(capsys, "--out", out, "--points", "03.2=3", NOTEBOOK)[0] == 0
    points = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader.get("points")
              for c in graded_cells(out / "en" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")}
    assert points == {"ex03_1_answer": None, "ex03_1": 1, "ex03_2_answer": None, "ex03_2": 3}
    assert keep.read_bytes() == b"the teacher's grades"
    assert not (out / "zh_CN").exists()


# --- the real flow --------------------------------------------------------------------------

def nbgrader(course: Path, *args: str) -> str:
    # nbgrader runs alembic (the gradebook's migrations) from PATH: the environment's bin/
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                                 os.environ.get("PATH", "")]))
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout + result.stderr


def submit(course: Path, student: str, answers: dict[str, str],
           tests: dict[str, tuple[str, int]] = {}) -> None:  # noqa: B006 - read only
    """Copy the released notebook into submitted/STUDENT/, answers filled in, test cells
    rewritten as ``tests`` says (grade id → (source, points))."""
    nb = nbformat.read(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
        if grade_id in tests:
            cell.source, cell.metadata.nbgrader["points"] = tests[grade_id]
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")


@pytest.mark.slow
@pytest.mark.versions
def test_generate_submit_autograde_export_with_nbgrader(tmp_path):
    """Three students hand in notebook 03: a right one, an honestly wrong one (the clockwise
    rotation), and a hostile one (a function that ends the grader's process, and its test
    cell rewritten to `pass` worth 100 points). (A notebook whose own code ends its kernel,
    `os._exit` in an answer cell, is not graded by nbgrader at all: it scores 0, autograde
    exits 1, and the other students keep their grades; checked by hand, see the module's
    docstring.)"""
    pytest.importorskip("nbgrader", reason="the teach extra is not installed")
    from nbgrader.api import Gradebook

    out = tmp_path / "courses"
    assert nbgrader_course.main(["--out", str(out), str(NOTEBOOK)]) == 0
    course = out / "en"
    nbgrader(course, "generate_assignment", ASSIGNMENT)
    released = graded_cells(course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    stubs = [c.source for c in released if c.metadata.nbgrader["solution"]]
    assert all(s.endswith('\n    raise NotImplementedError("your code here")') for s in stubs)
    assert not any("BEGIN SOLUTION" in s or "cos(angle)" in s for s in stubs)

    source = {c.metadata.nbgrader["grade_id"]: c.source for c in graded_cells(
        course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")}
    right = {key: text for key, text in source.items() if key.endswith("_answer")}
    submit(course, "right", right)
    submit(course, "wrong", {**right, "ex03_1_answer": (
        "def rotation_matrix(angle):\n"
        "    c, s = math.cos(angle), math.sin(angle)\n"
        "    return torch.tensor([[c, s], [-s, c]], dtype=torch.float64)\n")})
    submit(course, "hostile", {**right, "ex03_1_answer": (
        "import os\n\n\ndef rotation_matrix(angle):\n    os._exit(0)\n")},
        tests={"ex03_1": ("pass", 100)})
    nbgrader(course, "autograde", ASSIGNMENT)
    nbgrader(course, "export", "--to", str(tmp_path / "grades.csv"))

    with open(tmp_path / "grades.csv", encoding="utf-8") as file:
        rows = {row["student_id"]: row for row in csv.DictReader(file)}
    scores = {s: (float(r["score"]), float(r["max_score"])) for s, r in rows.items()}
    assert scores == {"right": (2, 2), "wrong": (1, 2), "hostile": (1, 2)}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "rope_lab") as gradebook:
        per_exercise = {(student, exercise): gradebook.find_grade(
            exercise, ASSIGNMENT, ASSIGNMENT, student).score
            for student in ("right", "wrong", "hostile") for exercise in ("ex03_1", "ex03_2")}
    assert per_exercise == {("right", "ex03_1"): 1, ("right", "ex03_2"): 1,
                            ("wrong", "ex03_1"): 0, ("wrong", "ex03_2"): 1,
                            ("hostile", "ex03_1"): 0, ("hostile", "ex03_2"): 1}
    # the student reads the grader's own line in the graded notebook
    graded = json.loads((course / "autograded" / "wrong" / ASSIGNMENT
                         / f"{ASSIGNMENT}.ipynb").read_text(encoding="utf-8"))
    shown = "".join("".join(o.get("text", "")) for c in graded["cells"]
                    if c["metadata"].get("nbgrader", {}).get("grade_id") == "ex03_1"
                    for o in c["outputs"])
    assert "✘ Exercise 03.1" in shown
    restored = json.loads((course / "autograded" / "hostile" / ASSIGNMENT
                           / f"{ASSIGNMENT}.ipynb").read_text(encoding="utf-8"))
    assert any("assert exercises.check_rotation_matrix" in "".join(c["source"])
               for c in restored["cells"])
    shutil.rmtree(tmp_path / "courses")
