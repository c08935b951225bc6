"""Grade a folder of students' saved notebooks: ``python -m rope_lab.exercises grade``.

::

    python -m rope_lab.exercises grade submitted/ --csv grades.csv --feedback pages/

1. **Checks first.** Every notebook named (a folder: every ``.ipynb`` below it, JupyterLab's
   checkpoint copies left out) is read and identified before anything runs: which course
   notebook it is (its title, ``# 08 · …``, in either edition) and in which language, and
   whether it has this copy of the course's exercises. A file that is not a notebook, a
   notebook of another course, one saved by another version of the course (an exercise
   missing, or a grader it calls that this copy does not have), or an output that cannot be
   written: one line each, exit status 2, nothing run and nothing written.
2. **Only the cells an answer needs.** Each notebook runs offline in its own kernel (this
   Python's ipykernel, the notebook's folder as working folder), but not every cell: the
   cells that define the exercise functions and, transitively, the names those use (the
   imports of the setup cell, a helper, a constant), found by reading each cell's names
   with :mod:`symtable`. A notebook's figures, widgets, timings and the learner's own
   experiments (an endless loop among them) never run: that is most of a notebook's time,
   and none of its answers. A cell the analysis cannot read (IPython cell magics) runs if
   its text mentions a name that is needed.
3. **Limits.** The kernel gets a memory limit (Linux without an NVIDIA GPU,
   ``RLIMIT_DATA``), each cell a time limit, and the notebook one across its cells. A cell
   that does not finish in time or ends the kernel (an endless loop, ``os._exit``) is left
   out and the others run again in a fresh kernel, so it costs only the answers that need
   it; a syntax error costs the answer whose cell it is in.
4. **Grading.** Each answer leaves the kernel pickled (cloudpickle, by value, as a notebook's
   check sends it) and is graded by the course's own grader in a grader worker
   (:mod:`rope_lab.exercises.worker`) started for that notebook alone: one student's code
   never shares a process with another's. Per answer: the graders' time limit and memory
   limit. The feedback is in the notebook's language.
5. **Output.** ``--csv``: one row per (file, exercise) (file, notebook, language, exercise,
   title, passed 1/0, feedback, seed), rewritten whole after each notebook through the
   package's atomic writer, so an interrupted run leaves a complete file of the notebooks
   graded so far. ``--feedback DIR``: one HTML page per notebook, in its language, every
   text escaped. A progress bar on stderr.

A ✔ says the function passed the grader's cases; code written to fool a grader in its own
process can (the graders are a learning aid): read the code of a grade that matters.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import csv
import html
import io
import json
import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rope_lab.exercises.worker import SETUP_LIMIT_S
from rope_lab.i18n import _, using_language

# defaults of the command's limits: a cell that runs longer than CELL_TIME_LIMIT_S is an endless
# loop to leave out (the notebooks' own cells each take under 20 s); the notebook's limit bounds
# all its cells, kernel restarts included
CELL_TIME_LIMIT_S = 60.0
NOTEBOOK_TIME_LIMIT_S = 300.0
NOTEBOOK_MEMORY_BYTES = 4 * 10**9
# notebooks graded at once: a kernel (~0.4 GB with torch) and a grader worker (~0.3 GB) each
JOBS = max(1, min(4, os.cpu_count() or 1))
# an answer bigger than this when pickled carries data it should not (a notebook's tensors)
MAX_ANSWER_BYTES = 50 * 1024**2
_MARKER = "rope-lab-answer:"
_TITLE = re.compile(r"^#\s*(\d\d)\s*·\s*(.+?)\s*$")
_EXERCISE = re.compile(r"(?:Exercise|练习)\s*(\d\d\.\d)")
_CALL = re.compile(r"exercises\.(check_\w+)\s*\(\s*(\w+)?")


class BadInput(ValueError):
    """A file or an option the command cannot use: one line, exit status 2."""


@dataclass
class Submission:
    """One student's notebook, read and identified."""

    path: Path
    shown: str                      # the file as the CSV and the messages name it
    number: str                     # "08"
    language: str                   # "en" or "zh"
    notebook: object                # nbformat.NotebookNode
    answers: dict[str, str]         # exercise id → the name of the learner's function


@dataclass
class Row:
    file: str
    notebook: str
    language: str
    exercise: str
    title: str
    passed: bool
    feedback: str
    seed: int | None = None


@dataclass
class _Cell:
    """What a code cell binds and reads at the notebook's top level."""

    index: int
    source: str
    defines: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    readable: bool = True


# --- 1. reading and identifying --------------------------------------------------------------


def find_notebooks(paths) -> tuple[list[tuple[Path, str]], list[str]]:
    """(notebook, as shown) for every path given (a folder gives the notebooks below it), and
    a problem for each path that is not there or an empty folder."""
    from rope_lab.course import notebook_files

    found: list[tuple[Path, str]] = []
    problems = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = notebook_files(path, recursive=True)
            if not inside:
                problems.append(f"{given}: a folder with no notebook (.ipynb) in it")
            found += [(notebook, _shown(notebook)) for notebook in inside]
        elif path.is_file():
            found.append((path, _shown(path)))
        else:
            problems.append(f"{given}: no such file or folder")
    unique: dict[Path, tuple[Path, str]] = {}
    for path, shown in found:
        unique.setdefault(path.resolve(), (path, shown))
    return list(unique.values()), problems


def _shown(path: Path) -> str:
    relative = os.path.relpath(path.resolve())
    return relative if not relative.startswith("..") else str(path.resolve())


def read_submission(path: Path, shown: str) -> Submission:
    """The notebook at ``path``, identified, or :class:`BadInput` saying why it cannot be
    graded."""
    import nbformat

    from rope_lab.course import NOTEBOOKS
    from rope_lab.exercises import GRADERS

    expected = "expected a .ipynb file saved from one of the course's notebooks"
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)
    except OSError as error:
        raise BadInput(f"{shown}: cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise BadInput(f"{shown}: not a Jupyter notebook (not UTF-8 text); {expected}") from None
    except ValueError as error:
        raise BadInput(f"{shown}: not a Jupyter notebook (not JSON: {error}); {expected}") from None
    if not (isinstance(data, dict) and isinstance(data.get("cells"), list)
            and isinstance(data.get("nbformat"), int)):
        raise BadInput(f"{shown}: not a Jupyter notebook (JSON without a notebook's 'cells' and "
                       f"'nbformat'); {expected}")
    try:  # sources as one string (a saved file holds lists of lines), older formats upgraded
        notebook = nbformat.reads(text, as_version=4)
    except Exception as error:  # noqa: BLE001 - nbformat's own errors
        reason = (str(error).splitlines() or [type(error).__name__])[0][:120]
        raise BadInput(f"{shown}: a notebook nbformat cannot read ({reason}); {expected}") from None
    numbers = {entry.filename[:2]: entry for entry in NOTEBOOKS}
    title = _first_heading(notebook)
    match = _TITLE.match(title or "")
    if match is None or match.group(1) not in numbers:
        seen = f"its first heading is {title!r}" if title else "it has no heading"
        raise BadInput(f"{shown}: not a notebook of this course ({seen}; expected a title "
                       f"such as '# 08 · RoPE beyond one dimension')")
    number = match.group(1)
    language = _language(notebook, match.group(2))
    graders = {grader.__name__: grader for grader in GRADERS}
    calls = {name: argument for cell in _code_cells(notebook)
             for name, argument in _CALL.findall(_source(cell))}
    unknown = sorted(name for name in calls if name not in graders)
    if unknown:
        raise BadInput(f"{shown}: calls exercises.{unknown[0]}, which this copy of the course "
                       "does not have: it was saved by another version of the course; grade it "
                       "with that version, or give the student the current notebook")
    markdown = " ".join(_source(cell) for cell in notebook.cells
                        if cell.get("cell_type") == "markdown")
    headed = set(_EXERCISE.findall(markdown))
    answers = {}
    for grader in GRADERS:
        if not grader.exercise.startswith(number + "."):
            continue
        if grader.exercise not in headed and grader.__name__ not in calls:
            raise BadInput(f"{shown}: exercise {grader.exercise} ({grader.title}) is not in it "
                           f"(no 'Exercise {grader.exercise}' and no exercises.{grader.__name__}"
                           "): it was saved by an older copy of the course, or its cells were "
                           "deleted; give the student the current notebook, or leave the file "
                           "out")
        answers[grader.exercise] = calls.get(grader.__name__) or grader.answer
    return Submission(path, shown, number, language, notebook, answers)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _code_cells(notebook):
    return [cell for cell in notebook.cells if cell.get("cell_type") == "code"]


def _first_heading(notebook) -> str | None:
    for cell in notebook.cells:
        if cell.get("cell_type") == "markdown":
            for line in _source(cell).splitlines():
                if line.strip():
                    return line.strip()
    return None


def _language(notebook, title: str) -> str:
    """"zh" for the Chinese edition (its metadata says so; a copy that lost it: CJK in the
    title), else "en"."""
    declared = notebook.get("metadata", {}).get("rope_lab", {}).get("language", "")
    if isinstance(declared, str) and declared.lower().startswith("zh"):
        return "zh"
    return "zh" if re.search(r"[\u4e00-\u9fff]", title) else "en"


# --- 2. the cells an answer needs ------------------------------------------------------------


def read_cells(notebook) -> list[_Cell]:
    """Each code cell with the names it binds and reads (IPython syntax turned into Python
    first: ``%timeit f(x)`` reads nothing, ``!pip`` neither)."""
    import symtable

    from IPython.core.inputtransformer2 import TransformerManager

    transformer = TransformerManager()
    cells = []
    for index, cell in enumerate(notebook.cells):
        if cell.get("cell_type") != "code":
            continue
        source = _source(cell)
        entry = _Cell(index, source)
        if source.lstrip().startswith("%%"):  # a cell magic: its body is text to IPython
            entry.readable = False
            cells.append(entry)
            continue
        try:
            code = transformer.transform_cell(source)
            table = symtable.symtable(code, f"<cell {index}>", "exec")
        except (SyntaxError, ValueError, TypeError):
            entry.readable = False
        else:
            _names(table, entry, top=True)
            entry.defines |= _mutated(code)
        cells.append(entry)
    return cells


def _names(table, cell: _Cell, *, top: bool) -> None:
    for symbol in table.get_symbols():
        name = symbol.get_name()
        if top:
            if symbol.is_assigned() or symbol.is_imported():
                cell.defines.add(name)
            if symbol.is_referenced():
                cell.uses.add(name)
        else:  # inside a function, class or comprehension: what it reads from the notebook
            if symbol.is_global() and symbol.is_referenced():
                cell.uses.add(name)
            if symbol.is_declared_global() and symbol.is_assigned():
                cell.defines.add(name)
    for child in table.get_children():
        _names(child, cell, top=False)


def _mutated(code: str) -> set[str]:
    """Names a cell changes in place at the top level (``theta[0] = 0``, ``config.x = 1``)."""
    import ast

    changed = set()
    for statement in ast.parse(code).body:
        targets = (statement.targets if isinstance(statement, ast.Assign) else
                   [statement.target] if isinstance(statement, (ast.AugAssign, ast.AnnAssign))
                   else [])
        for target in targets:
            while isinstance(target, (ast.Subscript, ast.Attribute)):
                target = target.value
            if isinstance(target, ast.Name):
                changed.add(target.id)
    return changed


def needed_cells(cells: list[_Cell], names) -> list[int]:
    """The indices of the cells that define ``names`` and, transitively, what they read, in
    notebook order. A name no readable cell defines is looked for in the text of the cells
    the analysis could not read, and in cells that bind names it cannot see (``from x import
    *``, ``%run``, ``exec``)."""
    wanted, chosen = set(names), set()
    while True:
        added = False
        for cell in cells:
            if cell.index in chosen:
                continue
            if cell.defines & wanted or _might_define(cell, wanted, cells):
                chosen.add(cell.index)
                wanted |= cell.uses
                added = True
        if not added:
            return sorted(chosen)


def _might_define(cell: _Cell, wanted: set[str], cells: list[_Cell]) -> bool:
    undefined = wanted - set().union(*(c.defines for c in cells if c.readable))
    if not undefined:
        return False
    if not cell.readable:
        return any(re.search(rf"\b{re.escape(name)}\b", cell.source) for name in undefined)
    return bool(re.search(r"import\s+\*|^\s*%run\b|\bexec\s*\(", cell.source, re.M))


# --- 3. running them ----------------------------------------------------------------------------


@dataclass
class _Outcome:
    """What became of a cell: None (ran), or why it did not."""

    error: str | None = None      # "NameError: name 'x' is not defined"
    timeout: bool = False
    died: bool = False
    skipped: bool = False         # the notebook's time ran out first


def _export_source(name: str) -> str:
    return (f"def __rope_lab_export(name={name!r}):\n"
            "    import base64, json\n"
            "    from rope_lab.exercises.grading import pickle_function\n"
            "    value = globals().get(name)\n"
            "    if value is None:\n"
            "        found = {'missing': True}\n"
            "    elif not callable(value):\n"
            "        found = {'not_callable': type(value).__name__}\n"
            "    else:\n"
            "        try:\n"
            "            data = pickle_function(value)\n"
            "        except Exception as error:\n"
            "            found = {'unpicklable': f'{type(error).__name__}: {error}'[:300]}\n"
            "        else:\n"
            f"            found = ({{'too_big': len(data)}} if len(data) > {MAX_ANSWER_BYTES}\n"
            "                     else {'function': base64.b64encode(data).decode()})\n"
            f"    __import__('sys').__stdout__.flush()\n"
            f"    __import__('builtins').print({_MARKER!r} + json.dumps(found), flush=True)\n"
            "__rope_lab_export()\n"
            "del __rope_lab_export\n")


def _setup_source(memory: int | None) -> str:
    return ("from rope_lab.exercises.worker import limit_memory as __rope_lab_limit\n"
            f"__rope_lab_limit({memory!r})\n"
            "del __rope_lab_limit\n")


def _kernel_manager_class():
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import AsyncKernelManager

    class ThisPython(AsyncKernelManager):
        """A kernel of this very Python (whatever kernels the machine has installed), so the
        student's code runs with the rope_lab and torch that grade it."""

        @property
        def kernel_spec(self):
            from ipykernel.kernelspec import get_kernel_dict

            return KernelSpec(resource_dir="", **get_kernel_dict())

    return ThisPython


def run_cells(submission: Submission, plan: list[int], *, time_limit: float,
              memory: int | None, cell_time_limit: float = CELL_TIME_LIMIT_S,
              environment: dict[str, str] | None = None,
              on_kernel_start=None) -> tuple[dict, dict[str, dict]]:
    """Run the cells ``plan`` of the notebook, then read each answer out of the kernel.

    Returns (cell index → :class:`_Outcome`, exercise → what the kernel gave for it: a
    ``{"function": base64}`` or why not). A cell that times out or ends the kernel is left
    out and the rest run again in a fresh kernel.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from rope_lab.runner import kernel_config

    cells = {index: submission.notebook.cells[index] for index in plan}
    exports = {exercise: nbformat.v4.new_code_cell(_export_source(name))
               for exercise, name in submission.answers.items()}
    outcomes: dict = {}
    answers: dict[str, dict] = {}
    deadline = time.monotonic() + time_limit
    environment = {**(os.environ if environment is None else environment),
                   "ROPE_LAB_GRADER_PRESTART": "0", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    while True:
        todo = [("cell", index) for index in plan if index not in outcomes
                or not (outcomes[index].timeout or outcomes[index].died)]
        todo += [("answer", exercise) for exercise in exports if exercise not in answers]
        if not todo:
            return outcomes, answers
        run = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(_setup_source(memory))]
                                       + [nbformat.from_dict(dict(cells[key]))
                                          if kind == "cell" else exports[key]
                                          for kind, key in todo])
        client = NotebookClient(run, timeout=1, allow_errors=True, interrupt_on_timeout=False,
                                shutdown_kernel="immediate", startup_timeout=120,
                                kernel_manager_class=_kernel_manager_class(),
                                config=kernel_config(), record_timing=False,
                                resources={"metadata": {"path": str(submission.path.parent)}})
        restart = False
        with client.setup_kernel(env=environment, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL):
            if on_kernel_start is not None:
                on_kernel_start()
            for position, cell in enumerate(run.cells):
                left = deadline - time.monotonic()
                kind, key = ("setup", None) if position == 0 else todo[position - 1]
                if left <= 0:
                    for kind_left, key_left in todo[max(position - 1, 0):]:
                        if kind_left == "cell":
                            outcomes[key_left] = _Outcome(skipped=True)
                        else:
                            answers[key_left] = {"out_of_time": True}
                    return outcomes, answers
                # the first cell is ours (the memory limit, importing rope_lab: seconds)
                limit = SETUP_LIMIT_S if kind == "setup" else min(left, cell_time_limit)
                client.timeout = max(1, math.ceil(limit))
                try:
                    client.execute_cell(cell, position)
                except (CellTimeoutError, DeadKernelError, RuntimeError) as error:
                    timed_out = isinstance(error, CellTimeoutError)
                    if kind == "setup":
                        raise RuntimeError(f"the kernel could not be prepared ({error})") from None
                    if kind == "cell":
                        outcomes[key] = _Outcome(timeout=timed_out, died=not timed_out)
                    else:
                        answers[key] = {"timeout": True} if timed_out else {"died": True}
                    restart = True
                    break
                if kind == "cell":
                    outcomes[key] = _Outcome(error=_error_of(cell))
                elif kind == "answer":
                    answers[key] = _answer_of(cell)
                cell.outputs = []  # what it printed is not needed any more
        if not restart:
            return outcomes, answers


def _error_of(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            value = " ".join(str(output.get("evalue", "")).split())[:200]
            return f"{output.get('ename', 'Error')}: {value}" if value else output.get("ename")
    return None


def _answer_of(cell) -> dict:
    text = "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream")
    for line in reversed(text.splitlines()):
        if line.startswith(_MARKER):
            with contextlib.suppress(ValueError):
                return json.loads(line[len(_MARKER):])
    error = _error_of(cell)
    return {"export_error": error or "no answer came back"}


# --- 4. grading ---------------------------------------------------------------------------------


def _first_line(source: str) -> str:
    line = next((line.strip() for line in source.splitlines() if line.strip()), "")
    return line if len(line) <= 60 else line[:57] + "…"


def _problem(name: str, found: dict, cells: list[_Cell], outcomes: dict, time_limit: float,
             cell_time_limit: float) -> str:
    """Why the function ``name`` could not be graded, in the notebook's words."""
    if "not_callable" in found:
        return _("{name} is a {type}, not a function").format(name=name,
                                                             type=found["not_callable"])
    if "unpicklable" in found:
        return _("{name} could not be sent to the grader ({error})").format(
            name=name, error=found["unpicklable"])
    if "too_big" in found:
        return _("{name} carries {size:.0f} MB of data with it (the notebook's tensors it "
                 "uses?); the grader takes at most {limit:.0f} MB").format(
                     name=name, size=found["too_big"] / 1e6, limit=MAX_ANSWER_BYTES / 1e6)
    if found.get("out_of_time"):
        return _("the notebook's cells took more than its {limit:g} s before {name} could be "
                 "read").format(limit=time_limit, name=name)
    if found.get("timeout"):
        return _("reading {name} out of the notebook took more than {limit:g} s").format(
            name=name, limit=min(cell_time_limit, time_limit))
    if found.get("died"):
        return _("the notebook's kernel ended while reading {name}").format(name=name)
    if "export_error" in found:
        return _("{name} could not be read from the notebook ({error})").format(
            name=name, error=found["export_error"])
    definers = [cell for cell in cells if name in cell.defines
                or (not cell.readable and re.search(rf"\bdef\s+{re.escape(name)}\b", cell.source))]
    for cell in definers:
        outcome = outcomes.get(cell.index)
        if outcome is None:
            continue
        where = _("the cell that defines {name} (it starts “{start}”)").format(
            name=name, start=_first_line(cell.source))
        if outcome.timeout:
            return _("{where} did not finish within {limit:g} s (a loop that never ends?), so "
                     "{name} was never defined").format(
                         where=where, limit=min(cell_time_limit, time_limit), name=name)
        if outcome.died:
            return _("{where} ended the notebook's kernel (os._exit, a crash or running out "
                     "of memory), so {name} was never defined").format(where=where, name=name)
        if outcome.skipped:
            return _("the notebook's {limit:g} s ran out before {where} ran").format(
                limit=time_limit, where=where)
        if outcome.error:
            return _("{where} raised {error}").format(where=where, error=outcome.error)
    if not definers:
        return _("your notebook does not define {name}, the function this exercise asks "
                 "for").format(name=name)
    return _("{name} is not defined after your notebook's cells ran").format(name=name)


@dataclass
class Executed:
    """What became of one notebook: its cells, how they ran, and each answer's verdict (a
    Verdict) or what the kernel said instead."""

    cells: list[_Cell]
    outcomes: dict
    found: dict[str, dict]
    verdicts: dict = field(default_factory=dict)   # exercise → (Verdict, seed)


def execute(submission: Submission, *, time_limit: float, memory: int | None,
            cell_time_limit: float = CELL_TIME_LIMIT_S, seed: int | None = None,
            environment: dict[str, str] | None = None) -> Executed:
    """One notebook: its needed cells run in a kernel, each answer graded in a grader worker
    of its own (started with the kernel, so its imports overlap the notebook's), feedback in
    the notebook's language. Safe to run for several notebooks at once, one thread each."""
    from rope_lab.exercises import BY_EXERCISE
    from rope_lab.exercises.grading import fresh_seed, grade_pickled
    from rope_lab.exercises.worker import Worker

    cells = read_cells(submission.notebook)
    plan = needed_cells(cells, submission.answers.values())
    worker = Worker()
    try:
        try:
            outcomes, found = run_cells(submission, plan, time_limit=time_limit, memory=memory,
                                        cell_time_limit=cell_time_limit,
                                        environment=environment,
                                        on_kernel_start=worker.start)
        except Exception as error:  # noqa: BLE001 - no kernel: every answer says so
            reason = " ".join(str(error).split())[:200] or type(error).__name__
            outcomes, found = {}, {exercise: {"export_error": reason}
                                   for exercise in submission.answers}
        executed = Executed(cells, outcomes, found)
        for exercise in submission.answers:
            answer = found.get(exercise, {})
            if "function" in answer:
                used = fresh_seed() if seed is None else seed
                verdict = grade_pickled(BY_EXERCISE[exercise],
                                        base64.b64decode(answer["function"]), seed=used,
                                        worker=worker, language=submission.language)
                executed.verdicts[exercise] = (verdict, used)
        return executed
    finally:
        worker.stop()


def rows_for(submission: Submission, executed: Executed, time_limit: float,
             cell_time_limit: float = CELL_TIME_LIMIT_S) -> list[Row]:
    """One row per exercise of the notebook, feedback in its language."""
    from rope_lab.exercises import BY_EXERCISE

    rows = []
    with using_language(submission.language):
        for exercise, name in submission.answers.items():
            grader = BY_EXERCISE[exercise]
            if exercise in executed.verdicts:
                verdict, seed = executed.verdicts[exercise]
                feedback = verdict.feedback
                if not verdict.passed:  # a NameError may come from a cell that failed
                    feedback += _broken_dependency(name, executed, time_limit, cell_time_limit)
                rows.append(_row(submission, grader, verdict.passed, feedback, seed))
            else:
                answer = executed.found.get(exercise) or {"export_error": "no answer came back"}
                problem = _problem(name, answer, executed.cells, executed.outcomes,
                                   time_limit, cell_time_limit)
                rows.append(_row(submission, grader, False, problem, None))
    return rows


def _broken_dependency(name: str, executed: Executed, time_limit: float,
                       cell_time_limit: float) -> str:
    """A note on the first cell the function ``name`` needs (its setup cell, a helper's)
    that did not run to its end, or nothing."""
    own = {cell.index for cell in executed.cells if name in cell.defines}
    for index in needed_cells(executed.cells, [name]):
        outcome = executed.outcomes.get(index)
        if index in own or outcome is None:
            continue
        if outcome.timeout:
            what = _("did not finish within {limit:g} s").format(
                limit=min(cell_time_limit, time_limit))
        elif outcome.died:
            what = _("ended the notebook's kernel")
        elif outcome.skipped:
            what = _("did not run: the notebook's {limit:g} s ran out").format(limit=time_limit)
        elif outcome.error:
            what = _("raised {error}").format(error=outcome.error)
        else:
            continue
        cell = next(cell for cell in executed.cells if cell.index == index)
        return _(" (a cell your function needs, the one that starts “{start}”, {what})").format(
            start=_first_line(cell.source), what=what)
    return ""


def _row(submission, grader, passed, feedback, seed) -> Row:
    return Row(submission.shown, submission.number, submission.language, grader.exercise,
               grader.title, bool(passed), " ".join(str(feedback).split()), seed)


# --- 5. output ----------------------------------------------------------------------------------

COLUMNS = ("file", "notebook", "language", "exercise", "title", "passed", "feedback", "seed")


def csv_text(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([row.file, row.notebook, row.language, row.exercise, row.title,
                         int(row.passed), row.feedback, "" if row.seed is None else row.seed])
    return buffer.getvalue()


def page_html(submission: Submission, rows: list[Row]) -> str:
    """The feedback page of one notebook, in its language; every text escaped."""
    import torch

    from rope_lab._version import __version__
    from rope_lab.course import NOTEBOOKS

    title = next(entry.title for entry in NOTEBOOKS if entry.filename[:2] == submission.number)
    with using_language(submission.language):
        passed = sum(row.passed for row in rows)
        items = []
        for row in rows:
            mark, status = ("✔", "passed") if row.passed else ("✘", "failed")
            detail = _("passed") if row.passed else row.feedback
            items.append(f'<li class="{status}"><span class="mark">{mark}</span> '
                         f"<b>{html.escape(row.exercise)}</b> {html.escape(_(row.title))}"
                         f"<br>{html.escape(detail)}</li>")
        heading = _("Feedback on {file}").format(file=submission.shown)
        summary = _("notebook {number}: {title} · {passed} of {count} exercises passed").format(
            number=submission.number, title=_(title), passed=passed, count=len(rows))
        note = _("Graded by rope_lab {version} with torch {torch}. A failure on random inputs "
                 "names its seed: the check in your notebook with that seed, "
                 "exercises.check_…(your_function, seed=…), repeats them.").format(
                     version=__version__, torch=torch.__version__)
        language = "zh-CN" if submission.language == "zh" else "en"
    return ("<!DOCTYPE html>\n"
            f'<html lang="{language}">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(heading)}</title>\n"
            "<style>body{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto;"
            "padding:0 1rem;line-height:1.5;font-size:16px}li{margin:.6rem 0}"
            ".passed .mark{color:#0072B2}.failed .mark{color:#D55E00}"
            ".note{color:#555;font-size:14px}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(heading)}</h1>\n<p>{html.escape(summary)}</p>\n"
            "<ul>\n" + "\n".join(items) + "\n</ul>\n"
            f'<p class="note">{html.escape(note)}</p>\n</body>\n</html>\n')


def page_paths(submissions: list[Submission], folder: Path) -> dict[Path, Path]:
    """Where each notebook's page goes: its path as shown, .html for .ipynb (a path outside
    the working folder: its name), numbered where two would meet."""
    taken: set[Path] = set()
    pages = {}
    for submission in submissions:
        shown = Path(submission.shown)
        relative = shown if not shown.is_absolute() else Path(shown.name)
        page = folder / relative.with_suffix(".html")
        number = 2
        while page in taken:
            page = folder / relative.with_name(f"{relative.stem}-{number}.html")
            number += 1
        taken.add(page)
        pages[submission.path] = page
    return pages


def _write(path: Path, text: str) -> None:
    """Through the package's one writer (rope_lab._atomic: a temporary file renamed over the
    target)."""
    from rope_lab import _atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic.write_text(path, text)


# --- the command ---------------------------------------------------------------------------------


def _check_csv(path: Path) -> None:
    from rope_lab import _atomic

    try:
        _atomic.check_target(path, "--csv", example="grades.csv")
    except ValueError as error:
        raise BadInput(str(error)) from None


def _check_feedback(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise BadInput(f"--feedback {path}: a file; expected a folder for the pages")
    existing = path if path.exists() else next(
        (parent for parent in path.parents if parent.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"--feedback {path}: cannot be written here (no permission in "
                       f"{existing})")


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
        return value
    return parse


def parser() -> argparse.ArgumentParser:
    from rope_lab.exercises import grading

    main = argparse.ArgumentParser(
        prog="python -m rope_lab.exercises",
        description="Grade students' saved rope_lab notebooks with the course's graders.")
    commands = main.add_subparsers(dest="command", required=True)
    grade = commands.add_parser(
        "grade", help="grade saved notebooks (files or folders) into a CSV",
        description="Run each notebook's exercise cells in a kernel of its own and grade "
                    "every answer; one CSV row per (file, exercise).")
    grade.add_argument("notebooks", nargs="+", metavar="NOTEBOOK",
                       help="a saved notebook, or a folder of them (searched below)")
    grade.add_argument("--csv", required=True, type=Path, metavar="FILE",
                       help="the grades, one row per (file, exercise)")
    grade.add_argument("--feedback", type=Path, metavar="DIR",
                       help="write one HTML page per notebook here, in its language")
    grade.add_argument("--notebook-time-limit", type=_positive(float), metavar="S",
                       default=NOTEBOOK_TIME_LIMIT_S,
                       help=f"seconds for a notebook's cells (default {NOTEBOOK_TIME_LIMIT_S:g})")
    grade.add_argument("--cell-time-limit", type=_positive(float), metavar="S",
                       default=CELL_TIME_LIMIT_S,
                       help="seconds for one cell; a cell that takes longer is left out "
                            f"(default {CELL_TIME_LIMIT_S:g})")
    grade.add_argument("--notebook-memory", type=_positive(float), metavar="GB",
                       default=NOTEBOOK_MEMORY_BYTES / 1e9,
                       help="memory for a notebook's kernel, Linux (default "
                            f"{NOTEBOOK_MEMORY_BYTES / 1e9:.3g})")
    grade.add_argument("--answer-time-limit", type=_positive(float), metavar="S",
                       default=grading.TIME_LIMIT_S,
                       help="seconds for one answer's grading, all its calls (default "
                            f"{grading.TIME_LIMIT_S:g}; a slow exercise gets a multiple)")
    grade.add_argument("--answer-memory", type=_positive(float), metavar="GB",
                       default=grading.MEMORY_LIMIT_BYTES / 1e9,
                       help="new memory for one answer's grading, Linux (default "
                            f"{grading.MEMORY_LIMIT_BYTES / 1e9:.3g})")
    grade.add_argument("--seed", type=int, help="the seed of every grader's random cases "
                                                "(default: a fresh one each, in the CSV)")
    grade.add_argument("--jobs", type=_positive(int), metavar="N", default=JOBS,
                       help=f"notebooks graded at once, a kernel and a grader each (default "
                            f"{JOBS}: the cores, at most 4)")
    return main


def main(argv=None) -> int:
    arguments = parser().parse_args(argv)
    try:
        submissions = _prepare(arguments)
    except BadInput as error:  # one line per problem, nothing run, nothing written
        for line in str(error).splitlines():
            print(f"python -m rope_lab.exercises grade: {line}", file=sys.stderr)
        return 2
    return _grade_all(submissions, arguments)


def _prepare(arguments) -> list[Submission]:
    """Every check, before anything runs: the outputs, the tools, every notebook. Raises
    :class:`BadInput` with one line per problem."""
    problems = []
    for check, value in ((_check_csv, arguments.csv), (_check_feedback, arguments.feedback)):
        if value is not None:
            try:
                check(value)
            except BadInput as error:
                problems.append(str(error))
    for module in ("nbformat", "nbclient", "ipykernel", "cloudpickle"):
        try:
            __import__(module)
        except ImportError:
            problems.append(f"grading notebooks needs {module}, which is not installed: "
                            f"pip install {module} (or rope_lab[lab])")
    submissions = []
    if "nbformat" in sys.modules:
        found, missing = find_notebooks(arguments.notebooks)
        problems += missing
        for path, shown in found:
            try:
                submissions.append(read_submission(path, shown))
            except BadInput as error:
                problems.append(str(error))
    if problems:
        raise BadInput("\n".join(problems))
    return submissions


def _grade_all(submissions: list[Submission], arguments) -> int:
    from rope_lab.exercises import grading

    saved = grading.TIME_LIMIT_S, grading.MEMORY_LIMIT_BYTES
    grading.TIME_LIMIT_S = arguments.answer_time_limit
    grading.MEMORY_LIMIT_BYTES = int(arguments.answer_memory * 1e9)
    try:
        return _grade_each(submissions, arguments)
    finally:
        grading.TIME_LIMIT_S, grading.MEMORY_LIMIT_BYTES = saved


def _grade_each(submissions: list[Submission], arguments) -> int:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    pages = page_paths(submissions, arguments.feedback) if arguments.feedback else {}
    done: dict[int, list[Row]] = {}
    from rope_lab.runner import kernel_environment

    options = {"time_limit": arguments.notebook_time_limit,
               "cell_time_limit": arguments.cell_time_limit,
               "memory": int(arguments.notebook_memory * 1e9), "seed": arguments.seed,
               # the cores shared out between the kernels running at once
               "environment": kernel_environment(arguments.jobs)}
    pool = ThreadPoolExecutor(arguments.jobs, thread_name_prefix="rope_lab grade")
    try:
        with tqdm(total=len(submissions), unit="notebook", file=sys.stderr,
                  dynamic_ncols=True) as bar:
            running = {pool.submit(execute, submission, **options): number
                       for number, submission in enumerate(submissions)}
            for future in as_completed(running):
                number = running[future]
                done[number] = _rows(submissions[number], future, arguments)
                # the whole file again, in the order given: an interrupted run leaves a
                # complete CSV of the notebooks graded so far
                _write(arguments.csv, csv_text([row for key in sorted(done)
                                                for row in done[key]]))
                if submissions[number].path in pages:
                    _write(pages[submissions[number].path],
                           page_html(submissions[number], done[number]))
                bar.set_postfix_str(submissions[number].shown[-40:])
                bar.update()
    except BaseException:  # an interrupt: no new notebook starts; those running end on time
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    rows = [row for key in sorted(done) for row in done[key]]
    passed = sum(row.passed for row in rows)
    print(f"{len(submissions)} notebooks, {len(rows)} answers, {passed} passed: {arguments.csv}"
          + (f"; pages in {arguments.feedback}" if arguments.feedback else ""))
    return 0


def _rows(submission: Submission, future, arguments) -> list[Row]:
    try:
        executed = future.result()
    except Exception as error:  # noqa: BLE001 - a bug of ours costs this notebook only
        reason = f"{type(error).__name__}: {error}"[:200]
        executed = Executed([], {}, {exercise: {"export_error": reason}
                                     for exercise in submission.answers})
    return rows_for(submission, executed, arguments.notebook_time_limit,
                    arguments.cell_time_limit)
