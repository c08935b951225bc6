"""Plant each bug of the mutant catalogue in a copy of the package and run the notebook that
teaches it: every bug must be caught by a check (a ✘ line), not by a crash.

    python tests/mutants/run.py                    # the whole catalogue, both modes
    python tests/mutants/run.py --only yarn-ramp-cubed abel-bound-x10
    python tests/mutants/run.py --notebook 05 --mode extras
    python tests/mutants/run.py --list             # the catalogue, one line per bug

``make mutants`` runs it; ``tests/test_mutants.py`` runs it under pytest.

The catalogue (``catalogue.toml`` next to this file) names, for each bug, a file of the
package, a piece of its text that occurs exactly once and what replaces it, and the notebooks
that teach the concept. For every notebook and each mode — ``extras`` (everything the course
installs) and ``bare`` (as if the optional ``models`` extra were missing: ``import
transformers`` fails) — one process imports the heavy libraries once, checks that the
unchanged package passes every check (the baseline), then forks one child per bug. The child
builds a copy of the package in a temporary folder (links to every file, the changed file
written out), imports ``rope_lab`` from there and runs the notebook's code cells in order,
stopping at the first exception:

* **✘**: an ``AssertionError`` whose message starts with ✘ (``rl.check``, ``rl.check_close``
  and the notebooks' own ``assert``s, which must say ✘ too) — the bug is caught by a check;
* **crash**: any other exception (an ``IndexError`` in a check's detail, a shape error) — the
  notebook stops, but no check said what is wrong;
* **missed**: every cell ran.

Cells that only draw (``plots.…``, ``widgets.…``, ``figures.…``, ``rl.show_source``, a
``Markdown`` table) or only call a grader (``exercises.…``, which prints and never raises)
are skipped: they check nothing. The exit status is 0 when every bug is caught by ✘ in every
mode whose notebook can run (notebook 11 needs transformers: it has no ``bare`` run), 1
otherwise, 2 for a stale catalogue (a text that no longer occurs exactly once).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import faulthandler
import io
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rope_lab"
NOTEBOOKS = ROOT / "notebooks"
CATALOGUE = Path(__file__).with_name("catalogue.toml")
MODES = ("extras", "bare")
# Libraries a notebook imports, loaded once per notebook before the children fork.
HEAVY = ("torch", "numpy", "sympy", "matplotlib", "matplotlib.pyplot", "ipywidgets",
         "IPython", "scipy", "packaging.version", "pygments")
OPTIONAL = ("transformers", "safetensors", "sentence_transformers")
# The notebooks that cannot run at all without the optional extras.
NEEDS_EXTRAS = {"11"}
DRAWING = {"plots", "widgets", "figures", "exercises"}
SECONDS_PER_MUTANT = 60


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str  # relative to rope_lab/
    old: str
    new: str
    notebooks: tuple[str, ...]
    kind: str
    why: str


def load(path: Path = CATALOGUE) -> list[Mutant]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    mutants = [Mutant(m["id"], m["file"], m["old"], m["new"], tuple(m["notebooks"]),
                      m["kind"], m["why"]) for m in data["mutant"]]
    ids = [m.id for m in mutants]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate mutant ids in {path.name}: "
                         f"{sorted({i for i in ids if ids.count(i) > 1})}")
    return mutants


def stale(mutants: list[Mutant]) -> list[str]:
    """Mutants whose text does not occur exactly once in their file (or change nothing)."""
    problems = []
    for mutant in mutants:
        path = PACKAGE / mutant.file
        if not path.is_file():
            problems.append(f"{mutant.id}: no file rope_lab/{mutant.file}")
            continue
        count = path.read_text(encoding="utf-8").count(mutant.old)
        if count != 1:
            problems.append(f"{mutant.id}: its text occurs {count} times in "
                            f"rope_lab/{mutant.file}, expected once")
        if mutant.old == mutant.new:
            problems.append(f"{mutant.id}: old and new are the same text")
    return problems


# --- the notebook's cells ------------------------------------------------------------------

def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _only_draws(source: str) -> bool:
    """A cell whose every statement is a call of plots/widgets/figures/exercises, show_source
    or Markdown: it draws or grades, and checks nothing."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    if not tree.body:
        return True
    for statement in tree.body:
        if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
            return False
        call = statement.value
        name = getattr(call.func, "attr", getattr(call.func, "id", None))
        if _root_name(call) not in DRAWING and name not in ("show_source", "Markdown"):
            return False
    return True


def notebook_path(number: str) -> Path:
    from rope_lab.course import notebook_files  # only the parent: children import the copy

    (path,) = notebook_files(NOTEBOOKS, f"{number}_*.ipynb")
    return path


def code_cells(number: str) -> list[tuple[str, str]]:
    """(cell id, source) of the cells a mutant run executes, in order."""
    notebook = json.loads(notebook_path(number).read_text(encoding="utf-8"))
    cells = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "google.colab" in source or _only_draws(source):
            continue
        cells.append((cell.get("id", "?"), source))
    return cells


# --- one run: plant, import, execute ---------------------------------------------------------

def overlay(mutant: Mutant | None, folder: Path) -> Path:
    """A copy of the package in ``folder``: links to its files, the mutated file written."""
    target = folder / "rope_lab"
    for path in PACKAGE.rglob("*"):
        if "__pycache__" in path.parts or path.is_dir():
            continue
        copy = target / path.relative_to(PACKAGE)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if mutant is not None and path == PACKAGE / mutant.file:
            copy.write_text(path.read_text(encoding="utf-8").replace(mutant.old, mutant.new),
                            encoding="utf-8")
        else:
            copy.symlink_to(path)
    return folder


def execute(cells: list[tuple[str, str]]) -> dict:
    """Run the cells in one namespace; the verdict of the first exception, if any."""
    namespace = {"__name__": "__main__"}
    for cell_id, source in cells:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<cell {cell_id}>", "exec"), namespace)  # noqa: S102
        except AssertionError as error:
            message = str(error).strip()
            verdict = "✘" if message.startswith("✘") else "assert"
            return {"verdict": verdict, "cell": cell_id, "message": message.splitlines()[0][:160]
                    if message else "assert"}
        except BaseException as error:  # noqa: BLE001 - a crash is a verdict, not an error
            where = traceback.extract_tb(error.__traceback__)[-1]
            return {"verdict": "crash", "cell": cell_id,
                    "message": f"{type(error).__name__}: {str(error)[:120]} "
                               f"({Path(where.filename).name}:{where.lineno})"}
    return {"verdict": "missed", "cell": None, "message": ""}


def _block_optional() -> list[str]:
    """Make the optional libraries missing (``import transformers`` raises ImportError,
    ``importlib.util.find_spec`` says not installed); returns the list each attempt is
    recorded in."""
    import builtins
    import importlib.util

    attempts = []
    for name in OPTIONAL:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
        sys.modules[name] = None  # `import transformers` raises ImportError
    original_import, original_find_spec = builtins.__import__, importlib.util.find_spec

    def recording_import(name, *args, **kwargs):
        if name.split(".")[0] in OPTIONAL:
            attempts.append(name)
        return original_import(name, *args, **kwargs)

    def recording_find_spec(name, *args, **kwargs):
        if name.split(".")[0] in OPTIONAL:
            attempts.append(name)
        return original_find_spec(name, *args, **kwargs)

    builtins.__import__, importlib.util.find_spec = recording_import, recording_find_spec
    return attempts


def child(mutant: Mutant | None, cells, mode: str, write_end: int) -> None:
    """In the forked child: plant the mutant, import rope_lab from the copy, run the cells."""
    result = {"verdict": "crash", "cell": None, "message": "the child died"}
    # a child that hangs writes where it hangs, for the timeout's message
    stack = open(_stack_file(os.getpid()), "w")  # noqa: SIM115 - open until os._exit
    faulthandler.dump_traceback_later(SECONDS_PER_MUTANT - 5, file=stack)
    try:
        folder = Path(tempfile.mkdtemp(prefix="rope_lab_mutant_"))
        sys.dont_write_bytecode = True  # the copy is imported once: its bytecode is never read
        try:
            sys.path.insert(0, str(overlay(mutant, folder)))
            # the parent may have imported the real package (to list notebooks): forget it
            for name in [m for m in sys.modules if m == "rope_lab" or m.startswith("rope_lab.")]:
                del sys.modules[name]
            attempts = _block_optional() if mode == "bare" else []
            import rope_lab

            if not Path(os.path.abspath(rope_lab.__file__)).is_relative_to(folder):
                raise RuntimeError(f"rope_lab was imported from {rope_lab.__file__}, not from "
                                   f"the copy in {folder}")
            result = execute(cells)
            result["optional"] = sorted(set(attempts))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    except BaseException as error:  # noqa: BLE001
        result = {"verdict": "crash", "cell": None, "message": repr(error)[:200]}
    finally:
        os.write(write_end, json.dumps(result).encode())
        os.close(write_end)
        os._exit(0)


def _stack_file(pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"rope_lab_mutant_{pid}.stack"


def _where_it_hangs(pid: int) -> str:
    path = _stack_file(pid)
    lines = [line.strip() for line in path.read_text().splitlines()
             if 'File "' in line] if path.exists() else []
    return " ← ".join(lines[:3])


def start(task, cells) -> tuple[int, int]:
    """Fork a child for one task (notebook, mode, mutant or None): its pid and pipe."""
    _, mode, mutant = task
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        child(mutant, cells, mode, write_end)
    os.close(write_end)
    return pid, read_end


def _import_heavy() -> None:
    """Load the libraries every child needs once, here, before any fork (one thread each:
    the children run side by side, one per core)."""
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = "1"
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ["ROPE_LAB_LANG"] = "en"
    import importlib

    for name in HEAVY + OPTIONAL:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    import torch

    torch.set_num_threads(1)


def run_tasks(tasks, processes: int) -> list[dict]:
    """Every (notebook, mode, mutant) task, ``processes`` children at a time; the results in
    the order of ``tasks``. The heavy libraries are imported here, once, before any fork."""
    _import_heavy()
    cells = {number: code_cells(number) for number in {task[0] for task in tasks}}
    waiting, running, results = list(enumerate(tasks)), {}, {}
    while waiting or running:
        while waiting and len(running) < processes:
            index, task = waiting.pop(0)
            pid, pipe = start(task, cells[task[0]])
            running[pipe] = (index, task, pid, time.monotonic(), [])
        ready, _, _ = select.select(list(running), [], [], 0.5)
        for pipe in ready:
            index, task, pid, began, chunks = running[pipe]
            chunk = os.read(pipe, 65536)
            if chunk:
                chunks.append(chunk)
                continue
            os.close(pipe)
            os.waitpid(pid, 0)
            _stack_file(pid).unlink(missing_ok=True)
            del running[pipe]
            result = json.loads(b"".join(chunks) or
                                b'{"verdict": "crash", "cell": null, "message": "no result"}')
            results[index] = _result(task, result, time.monotonic() - began)
        for pipe, (index, task, pid, began, _) in list(running.items()):
            if time.monotonic() - began > SECONDS_PER_MUTANT:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(pipe)
                del running[pipe]
                where = _where_it_hangs(pid)
                _stack_file(pid).unlink(missing_ok=True)
                results[index] = _result(task, {"verdict": "crash", "cell": None, "message":
                                                f"timeout after {SECONDS_PER_MUTANT} s: {where}"},
                                         time.monotonic() - began)
    return [results[index] for index in range(len(tasks))]


def _result(task, result: dict, seconds: float) -> dict:
    number, mode, mutant = task
    return {"notebook": number, "mode": mode, "id": mutant.id if mutant else None, **result,
            "seconds": round(seconds, 2)}


# --- the whole catalogue -------------------------------------------------------------------

def plan(mutants: list[Mutant], modes, notebooks=None) -> dict[tuple[str, str], list[Mutant]]:
    """The mutants of each (notebook, mode), the notebooks with the most mutants first."""
    groups = {}
    for mutant in mutants:
        for number in mutant.notebooks:
            if notebooks and number not in notebooks:
                continue
            for mode in modes:
                if mode == "bare" and number in NEEDS_EXTRAS:
                    continue
                groups.setdefault((number, mode), []).append(mutant)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def run_catalogue(groups: dict, processes: int) -> list[dict]:
    """Baselines first; then every mutant in ``extras`` mode, and in ``bare`` mode where the
    notebook reached for an optional library without the extras (elsewhere the two runs are
    the same program, and the ``extras`` verdict stands for both)."""
    baselines = run_tasks([(number, mode, None) for number, mode in groups], processes)
    reaches = {(b["notebook"], b["mode"]): bool(b.get("optional")) for b in baselines}
    tasks, same = [], []
    for (number, mode), group in groups.items():
        for mutant in group:
            if mode == "bare" and not reaches[(number, mode)] and (number, "extras") in groups:
                same.append((number, mutant))
            else:
                tasks.append((number, mode, mutant))
    results = run_tasks(tasks, processes)
    extras = {(r["notebook"], r["id"]): r for r in results if r["mode"] == "extras"}
    for number, mutant in same:
        copied = dict(extras[(number, mutant.id)], mode="bare", seconds=0.0)
        copied["message"] = "(as extras: the notebook imports no optional library) " + \
            copied["message"]
        results.append(copied)
    return baselines + results


def summarize(mutants: list[Mutant], results: list[dict]) -> tuple[str, bool]:
    """A table, one row per mutant and mode, and whether every mutant was caught by ✘ (in a
    notebook whose unchanged run passes: a failing baseline makes its verdicts void)."""
    by_id = {m.id: m for m in mutants}
    broken = {(r["notebook"], r["mode"]) for r in results
              if r["id"] is None and r["verdict"] != "missed"}
    ok, rows = not broken, []
    for result in results:
        if result["id"] is None:
            if (result["notebook"], result["mode"]) in broken:
                rows.append(f"BASELINE {result['notebook']} {result['mode']}: the unchanged "
                            f"package fails: {result['verdict']} in cell {result['cell']}: "
                            f"{result['message']}")
            continue
        if (result["notebook"], result["mode"]) in broken:
            result = dict(result, verdict="void")
        if result["verdict"] != "✘":
            ok = False
        where = f"cell {result['cell']}" if result.get("cell") else ""
        rows.append(f"{result['verdict']:7s} {result['id']:38s} {result['notebook']} "
                    f"{result['mode']:6s} {result.get('seconds', 0):5.1f}s {where:24s} "
                    f"{result['message'][:80]}"
                    + ("" if result["id"] in by_id else "  (not in the catalogue)"))
    runs = [r for r in results if r["id"]]
    counts = {verdict: sum(r["verdict"] == verdict for r in runs)
              for verdict in ("✘", "assert", "crash", "missed")}
    caught = {m.id for m in mutants
              if any(r["id"] == m.id for r in runs)
              and all(r["verdict"] == "✘" and (r["notebook"], r["mode"]) not in broken
                      for r in runs if r["id"] == m.id)}
    ran = len({r["id"] for r in runs})
    header = (f"{len(mutants)} mutants, {len(runs)} runs: "
              + ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
              + f"; caught by ✘ in every run: {len(caught)} of the {ran} mutants run")
    return "\n".join(rows + [header]), ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="these mutants only")
    parser.add_argument("--notebook", nargs="+", metavar="NN", help="these notebooks only")
    parser.add_argument("--mode", choices=MODES, action="append",
                        help="extras, bare (default both)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--list", action="store_true", help="list the catalogue and stop")
    parser.add_argument("--json", type=Path, help="also write every result to this file")
    args = parser.parse_args(argv)
    mutants = load()
    if problems := stale(mutants):
        print("the mutant catalogue is stale:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    if args.list:
        for mutant in mutants:
            print(f"{mutant.id:32s} {mutant.kind:14s} {','.join(mutant.notebooks):6s} "
                  f"rope_lab/{mutant.file}: {mutant.why}")
        return 0
    if args.only:
        unknown = set(args.only) - {m.id for m in mutants}
        if unknown:
            parser.error(f"no mutant {sorted(unknown)} in {CATALOGUE.name}")
        mutants = [m for m in mutants if m.id in args.only]
    start = time.perf_counter()
    results = run_catalogue(plan(mutants, args.mode or MODES, args.notebook), args.processes)
    table, ok = summarize(mutants, results)
    print(table)
    print(f"{time.perf_counter() - start:.0f} s with {args.processes} processes")
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
