"""The course as an nbgrader course: ``python -m rope_lab.nbgrader_course --out DIR``.

nbgrader (the ``teach`` extra) is how Jupyter classrooms hand out, collect and grade
notebooks on JupyterHub. This writes one nbgrader course per edition of rope_lab::

    DIR/en/nbgrader_config.py             course id "rope_lab"
    DIR/en/source/03_rope_in_2d/03_rope_in_2d.ipynb
    DIR/zh_CN/nbgrader_config.py          course id "rope_lab_zh_CN"
    DIR/zh_CN/source/03_rope_in_2d/03_rope_in_2d.ipynb
    ...

Each notebook of the course is one assignment, named after it. Its exercises become
nbgrader cells:

- the **answer cell** (nbgrader's "autograded answer") is the notebook's template, the
  function's signature and docstring, with the worked solution of
  ``notebooks/solutions/`` between ``### BEGIN SOLUTION`` and ``### END SOLUTION``.
  ``nbgrader generate_assignment`` puts the course's own stub back in its place
  (``raise NotImplementedError("your code here")``, in the edition's language), so students
  get the notebook they know;
- the **test cell** (an "autograder test", read-only, worth the exercise's points) is the
  notebook's check cell made strict: ``assert exercises.check_…(function)``. It calls the
  course's grader, so the feedback a student reads in the graded notebook is the grader's
  own line (in the notebook's language), and the points come from the same verdict as
  ``exercises.summary()``.

The rest of each notebook is the lesson as it is; ``nbgrader autograde`` runs all of it
(every notebook takes well under 20 s) with a 120 s limit per cell. A teacher's flow, in
``DIR/en``, with the course's environment activated (nbgrader runs ``alembic`` from ``PATH``)::

    nbgrader generate_assignment 03_rope_in_2d      # release/ for the students
    nbgrader db student add alice                   # or import a CSV: nbgrader db student import
    nbgrader collect 03_rope_in_2d                  # or copy to submitted/alice/03_rope_in_2d/
    nbgrader autograde 03_rope_in_2d
    nbgrader export --to grades.csv                 # one row per (student, assignment)

Points: 1 per exercise unless ``--points 05.3=2`` (repeatable) says otherwise.

What nbgrader guards: a test cell a student edited is put back from the gradebook before
grading, and the points are the gradebook's. A learner's function that never returns
or ends its process costs that exercise only (the graders run it apart, with a time limit). A
notebook whose own code ends its kernel (``os._exit`` in a cell) is not graded at all: nbgrader
gives it 0, says so in its log and exits 1, and grades the other students as usual. What it
cannot guard: the tests run in the student's kernel, after the student's code, so code written
to fool a grader (patching ``exercises``) can; read the code of a grade that matters (the
graders are a learning aid).

Bad input (a file that is not a notebook, a notebook of another course or of another version
of the course, an output folder that cannot be written, an unknown exercise in ``--points``)
gets one line and exit status 2, before anything is written. Every file goes through
:mod:`rope_lab._atomic`; files already in ``DIR`` that this command does not write (the
gradebook, ``submitted/``, …) are left alone, so the course can be rewritten after an update.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import math
import os
import re
import symtable
import sys
from dataclasses import dataclass
from pathlib import Path

from rope_lab import _atomic
from rope_lab.course import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
# the edition's folder below notebooks/ (and below DIR) → its language and course id
EDITIONS = {"en": "en", "zh_CN": "zh"}
COURSE_IDS = {"en": "rope_lab", "zh_CN": "rope_lab_zh_CN"}
CELL_TIMEOUT_S = 120  # nbgrader's limit per cell; no cell of the course takes 20 s
SCHEMA_VERSION = 3  # nbgrader 0.9's cell metadata
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

_TITLE = re.compile(r"#\s*(\d\d)\s*·")
_CHECK = re.compile(r"exercises\.(check_\w+)\(\s*(\w+)\s*\)\s*;?")
_STUB = re.compile(r"^(\s*)raise NotImplementedError\(.*\)\s*$")


class BadInput(ValueError):
    """A notebook or an option the command cannot use: one line, exit status 2."""


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook: its id ("03.1"), its grader, the learner's function and
    the cells that hold the template and the check."""

    id: str
    grader: str  # "check_rotation_matrix"
    function: str  # "rotation_matrix"
    template: int  # cell indices
    check: int


# --- reading a notebook ----------------------------------------------------------------------

def read_notebook(path: Path):
    """The notebook at ``path`` (nbformat 4), or :class:`BadInput` saying why it is none."""
    import nbformat

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"{path}: cannot read it ({error})") from None
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception:  # nbformat raises several kinds on text that is not a notebook
        raise BadInput(f"{path}: not a Jupyter notebook (expected an .ipynb file of the "
                       "course)") from None
    if not isinstance(nb.get("cells"), list):
        raise BadInput(f"{path}: not a Jupyter notebook (no cells)")
    return nb


def identify(nb, path: Path) -> tuple[str, str]:
    """(notebook number "03", edition folder "en" or "zh_CN") of a notebook of this course:
    its title (``# 03 · …``) names a notebook of :data:`rope_lab.course.NOTEBOOKS`."""
    first = next((cell for cell in nb.cells if cell.cell_type == "markdown"), None)
    found = _TITLE.match(first.source.lstrip()) if first is not None else None
    numbers = {entry.filename[:2] for entry in NOTEBOOKS}
    if found is None or found[1] not in numbers:
        raise BadInput(f"{path}: not a notebook of rope_lab (its first markdown cell should be "
                       "a title such as '# 03 · RoPE in two dimensions')")
    language = nb.metadata.get("rope_lab", {}).get("language")
    edition = "zh_CN" if language == "zh_CN" else "en"
    return found[1], edition


def exercises_in(nb, path: Path) -> list[Exercise]:
    """The exercises of a notebook: each check cell (``exercises.check_…(function)``) with
    the template cell above it that defines ``function``."""
    from rope_lab import exercises

    found = []
    for index, cell in enumerate(nb.cells):
        call = _CHECK.fullmatch(cell.source.strip()) if cell.cell_type == "code" else None
        if call is None:
            continue
        grader = getattr(exercises, call[1], None)
        if grader not in exercises.GRADERS:
            raise BadInput(f"{path}: cell {index} calls exercises.{call[1]}, which this copy "
                           "of rope_lab does not have (a notebook of another version of the "
                           "course?)")
        template = next((i for i in range(index - 1, -1, -1)
                         if nb.cells[i].cell_type == "code"
                         and _defines(nb.cells[i].source, call[2])), None)
        if template is None:
            raise BadInput(f"{path}: exercise {grader.exercise} checks {call[2]}, but no cell "
                           f"above it defines {call[2]}")
        found.append(Exercise(grader.exercise, call[1], call[2], template, index))
    return found


def _defines(source: str, name: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body)


def course_exercises(number: str) -> list[str]:
    """The ids of notebook ``number``'s exercises, as this copy of the graders has them."""
    from rope_lab.exercises import GRADERS

    return [grader.exercise for grader in GRADERS if grader.exercise.startswith(number + ".")]


# --- the worked solution of one exercise -----------------------------------------------------

def _function(nb, name: str) -> tuple[ast.FunctionDef, str]:
    for cell in nb.cells:
        if cell.cell_type != "code" or not _defines(cell.source, name):
            continue
        tree = ast.parse(cell.source)
        return next(node for node in tree.body
                    if isinstance(node, ast.FunctionDef) and node.name == name), cell.source
    raise LookupError(name)


def _parameters(function: ast.FunctionDef) -> list[str]:
    arguments = function.args
    return [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]


def _globals_used(source: str, name: str) -> set[str]:
    """The global names function ``name`` of ``source`` (and the functions inside it) read."""
    top = symtable.symtable(source, "<cell>", "exec")
    tables = [t for t in top.get_children() if t.get_name() == name]
    found: set[str] = set()
    while tables:
        table = tables.pop()
        found |= {s.get_name() for s in table.get_symbols() if s.is_global()}
        tables += table.get_children()
    return found - set(dir(builtins))


def _bound_at_top(sources: list[str]) -> set[str]:
    """Names the cells ``sources`` bind at a notebook's top level (imports, assignments,
    definitions); a cell Python cannot parse (an IPython magic) binds none we can know of."""
    bound: set[str] = set()
    for source in sources:
        try:
            table = symtable.symtable(source, "<cell>", "exec")
        except SyntaxError:
            continue
        bound |= {s.get_name() for s in table.get_symbols()
                  if s.is_assigned() or s.is_imported() or s.is_namespace()}
    return bound


def _import_of(solutions, name: str) -> str | None:
    """The import statement of the solutions notebook that binds ``name``, alone."""
    for cell in solutions.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    one = (ast.Import(names=[alias]) if isinstance(node, ast.Import) else
                           ast.ImportFrom(module=node.module, names=[alias], level=node.level))
                    return ast.unparse(one)
    return None


def answer_source(template: str, exercise: Exercise, solutions, available: set[str],
                  where: str) -> str:
    """The nbgrader answer cell of ``exercise``: the template's signature and docstring, then
    the worked solution's body between the solution markers, with the imports it needs that
    the notebook does not make (``available``: the names the notebook binds above)."""
    lines = template.split("\n")
    stub = next((i for i, line in enumerate(lines) if _STUB.match(line)), None)
    if stub is None:
        raise ValueError(f"{where}: the template of {exercise.id} has no "
                         "'raise NotImplementedError(...)' line to put the solution in")
    indent = _STUB.match(lines[stub])[1]
    try:
        function, source = _function(solutions, exercise.function)
    except LookupError:
        raise ValueError(f"{where}: the solutions notebook defines no {exercise.function} "
                         f"(exercise {exercise.id})") from None
    wanted = _parameters(next(node for node in ast.parse(template).body
                              if isinstance(node, ast.FunctionDef)
                              and node.name == exercise.function))
    if _parameters(function) != wanted:
        raise ValueError(f"{where}: the solution of {exercise.id} takes "
                         f"{_parameters(function)}, the template {wanted}; expected the same "
                         "parameters")
    body = function.body
    if (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)) and len(body) > 1:
        body = body[1:]  # the template's docstring stays, the solution's goes
    source_lines = source.split("\n")
    start = body[0].lineno - 1
    own_indent = len(source_lines[start]) - len(source_lines[start].lstrip())
    code = [line[own_indent:] if line.strip() else ""
            for line in source_lines[start:function.end_lineno]]
    imports = []
    for name in sorted(_globals_used(source, exercise.function) - available):
        statement = _import_of(solutions, name)
        if statement is None:
            raise ValueError(f"{where}: the solution of {exercise.id} uses {name}, which "
                             "neither the notebook nor an import of the solutions notebook "
                             "defines")
        imports.append(statement)
    region = [BEGIN, *imports, *code, END]
    return "\n".join(lines[:stub] + [indent + line if line else "" for line in region]
                     + lines[stub + 1:])


def code_stub(nb, found: list[Exercise]) -> str:
    """The stub line of the notebook's templates (``raise NotImplementedError("your code
    here")`` in English), which nbgrader puts back in place of each solution."""
    stubs = {_STUB.match(line).group(0).strip()
             for exercise in found for line in nb.cells[exercise.template].source.split("\n")
             if _STUB.match(line)}
    if len(stubs) != 1:
        raise ValueError(f"expected one stub line in the templates, found {sorted(stubs)}")
    return stubs.pop()


# --- writing the course ----------------------------------------------------------------------

def nbgrader_notebook(path: Path, solutions_path: Path, points: dict[str, float]):
    """The nbgrader source notebook made from the course notebook at ``path`` and its worked
    solutions; returns (notebook, its exercises, its stub line)."""
    import copy

    nb = copy.deepcopy(read_notebook(path))
    number, _edition = identify(nb, path)
    found = exercises_in(nb, path)
    missing = sorted(set(course_exercises(number)) - {exercise.id for exercise in found})
    if missing:
        raise BadInput(f"{path}: has no exercise {', '.join(missing)} (saved by another "
                       "version of the course?); expected the exercises of this copy, "
                       f"{', '.join(course_exercises(number))}")
    solutions = read_notebook(solutions_path)
    stub = code_stub(nb, found)
    for exercise in found:
        above = [cell.source for cell in nb.cells[:exercise.template]
                 if cell.cell_type == "code"]
        template = nb.cells[exercise.template]
        template.source = answer_source(template.source, exercise, solutions,
                                        _bound_at_top(above), str(path))
        key = "ex" + exercise.id.replace(".", "_")
        template.metadata["nbgrader"] = {
            "grade": False, "grade_id": key + "_answer", "locked": False,
            "schema_version": SCHEMA_VERSION, "solution": True, "task": False}
        check = nb.cells[exercise.check]
        check.source = (f"from rope_lab import exercises\n\n"
                        f"assert exercises.{exercise.grader}({exercise.function})")
        check.metadata["nbgrader"] = {
            "grade": True, "grade_id": key, "locked": True, "points": points[exercise.id],
            "schema_version": SCHEMA_VERSION, "solution": False, "task": False}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb, found, stub


def config_source(edition: str, stub: str) -> str:
    """The course's ``nbgrader_config.py``."""
    return (f"# The nbgrader course of rope_lab's {edition} edition, written by\n"
            "# `python -m rope_lab.nbgrader_course` (run it again after updating the course).\n"
            "c = get_config()  # noqa: F821 - nbgrader defines it\n"
            f"c.CourseDirectory.course_id = {COURSE_IDS[edition]!r}\n"
            "# the stub students see in place of each solution: the course's own template line\n"
            f"c.ClearSolutions.code_stub = {{'python': {stub!r}}}\n"
            f"c.Execute.timeout = {CELL_TIMEOUT_S}  # seconds per cell\n")


def solutions_of(path: Path, edition: str) -> Path:
    folder = NOTEBOOK_DIR / ("" if edition == "en" else edition) / "solutions"
    return folder / f"{Path(path).stem}_solutions.ipynb"


def course_notebooks() -> list[Path]:
    """Every notebook of both editions, in course order."""
    return [NOTEBOOK_DIR / folder / entry.filename for folder in ("", "zh_CN")
            for entry in NOTEBOOKS if (NOTEBOOK_DIR / folder / entry.filename).exists()]


def parse_points(given: list[str]) -> dict[str, float]:
    """Points per exercise id: 1 each, then ``ID=N`` overrides (``05.3=2``)."""
    from rope_lab.exercises import GRADERS

    points: dict[str, float] = {grader.exercise: 1 for grader in GRADERS}
    for item in given:
        exercise, _, value = item.partition("=")
        if exercise not in points:
            raise BadInput(f"--points {item}: no exercise {exercise!r}; expected ID=N with an "
                           f"exercise id of this course ({', '.join(points)})")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not 0 < number < 1e6:
            raise BadInput(f"--points {item}: expected a positive number of points after "
                           "'=', such as 05.3=2")
        points[exercise] = int(number) if number.is_integer() else number
    return points


def check_out(out: Path) -> Path:
    """``out`` if the course can be written there (a folder, or a path whose first existing
    folder is writable), else :class:`BadInput`."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out}: exists and is not a folder; expected a folder for the "
                       "course")
    existing = out
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise BadInput(f"--out {out}: {existing} is a file, not a folder; choose another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"--out {out}: the folder {existing} is not writable; choose another "
                       "path")
    return out


def write_course(out: Path, notebooks: list[Path], points: dict[str, float]) -> list[Path]:
    """Write the nbgrader course(s) of ``notebooks`` under ``out``; returns the files
    written. Everything is read and built first: a bad notebook writes nothing."""
    import nbformat

    files: dict[Path, str] = {}
    stubs: dict[str, str] = {}
    for path in notebooks:
        nb = read_notebook(path)
        _number, edition = identify(nb, path)
        solutions = solutions_of(path, edition)
        if not solutions.exists():
            raise BadInput(f"{path}: no worked solutions at {solutions}")
        built, _found, stub = nbgrader_notebook(path, solutions, points)
        assignment = Path(path).stem
        if stubs.setdefault(edition, stub) != stub:
            raise BadInput(f"{path}: its templates end in {stub!r}, the edition's other "
                           f"notebooks in {stubs[edition]!r}")
        target = out / edition / "source" / assignment / f"{assignment}.ipynb"
        if target in files:
            raise BadInput(f"{path}: notebook {assignment} of the {edition} edition is given "
                           "twice")
        files[target] = nbformat.writes(built) + "\n"
    for edition, stub in stubs.items():
        files[out / edition / "nbgrader_config.py"] = config_source(edition, stub)
    for target, text in files.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic.write_text(target, text)
    return list(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rope_lab.nbgrader_course", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks of the course to make assignments of (either edition; "
                             "default: every notebook of both editions)")
    parser.add_argument("--out", type=Path, required=True,
                        help="the folder of the courses (DIR/en, DIR/zh_CN)")
    parser.add_argument("--points", action="append", default=[], metavar="ID=N",
                        help="points of one exercise (default 1 each), e.g. --points 05.3=2")
    args = parser.parse_args(argv)
    try:
        out = check_out(args.out)
        points = parse_points(args.points)
        paths = list(args.notebooks) or course_notebooks()
        for path in paths:
            if path.is_dir():
                raise BadInput(f"{path}: a folder; expected notebooks (.ipynb) of the course")
            if not path.exists():
                raise BadInput(f"{path}: no such file")
        written = write_course(out, paths, points)
    except BadInput as error:
        print(f"nbgrader_course: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a full disk, a folder made read-only meanwhile
        print(f"nbgrader_course: could not write the course: {error}", file=sys.stderr)
        return 2
    editions = sorted({path.relative_to(out).parts[0] for path in written})
    for edition in editions:
        count = sum(1 for p in written if p.relative_to(out).parts[:2] == (edition, "source"))
        print(f"nbgrader_course: {count} assignment(s) in {out / edition} (course id "
              f"{COURSE_IDS[edition]}); next: cd {out / edition} && nbgrader "
              "generate_assignment NAME")
    return 0


if __name__ == "__main__":
    sys.exit(main())
