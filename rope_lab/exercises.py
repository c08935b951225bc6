"""Auto-graded exercises: ``check_*`` functions that test a learner's function.

A checker calls the learner's function on random inputs, compares with the package's
reference, and prints specific feedback: which property failed and the smallest input that
shows it. It never raises on a wrong answer (a notebook keeps running while a student
works); it returns True or False, and the solution notebooks ``assert`` that.

``summary()`` prints which exercises passed in this session, to paste into a forum post
or hand in.
"""

from __future__ import annotations

import traceback

import torch

# exercise id ("05.1") → passed? Titles and the last feedback are kept for summary().
_results: dict[str, bool] = {}
_titles: dict[str, str] = {}
_feedback: dict[str, str] = {}


def report(exercise: str, title: str, failure: str | None) -> bool:
    """Record and print the verdict for one exercise. ``failure`` None means passed."""
    passed = failure is None
    _results[exercise] = passed
    _titles[exercise] = title
    _feedback[exercise] = failure or ""
    if passed:
        print(f"✔ Exercise {exercise} ({title}): passed")
    else:
        print(f"✘ Exercise {exercise} ({title}): {failure}")
    return passed


def call_learner(function, *args, **kwargs):
    """Call the learner's function; turn a crash into feedback instead of a traceback."""
    try:
        return function(*args, **kwargs), None
    except NotImplementedError:
        return None, "not attempted yet (the function raises NotImplementedError)"
    except Exception as error:  # the learner's bug, reported, not raised
        where = traceback.extract_tb(error.__traceback__)[-1]
        return None, f"your function raised {type(error).__name__}: {error} (line {where.lineno})"


def compare(answer, expected, *, atol: float, what: str) -> str | None:
    """None when ``answer`` matches ``expected`` (shape and values), else the reason."""
    if answer is None:
        return f"{what}: your function returned None"
    answer = torch.as_tensor(answer)
    if answer.shape != expected.shape:
        return f"{what}: expected shape {tuple(expected.shape)}, got {tuple(answer.shape)}"
    gap = (answer.double() - expected.double()).abs()
    if not bool(torch.isfinite(gap).all()) or float(gap.max()) > atol:
        index = tuple(int(i) for i in torch.nonzero(~(gap <= atol))[0])
        return (
            f"{what}: at index {index} expected {float(expected[index]):.6g}, "
            f"got {float(answer[index]):.6g}"
        )
    return None


def _notebook_title(number: str) -> str:
    from rope_lab.course import NOTEBOOKS

    titles = {n.filename[:2]: n.title for n in NOTEBOOKS}
    return f"notebook {number}: {titles[number]}" if number in titles else f"notebook {number}"


def summary(prefix: str | int = "") -> dict[str, bool]:
    """Print which exercises passed in this session, grouped by notebook, ready to paste.

    ``prefix`` picks exercises by id: ``"05"`` or ``5`` for notebook 05, ``""`` for all.
    A failed exercise shows its last feedback line, so a post asking for help says what
    went wrong. Returns exercise id → passed.
    """
    if isinstance(prefix, int):
        prefix = f"{prefix:02d}."
    chosen = {k: v for k, v in sorted(_results.items()) if k.startswith(prefix)}
    if not chosen:
        print("No exercises graded yet in this session"
              + (f" for {prefix!r}." if prefix else ".")
              + " Run the exercise cells (each calls a check_… function), then summary() again.")
        return chosen
    from rope_lab import __version__

    lines = [f"rope_lab {__version__} exercises, torch {torch.__version__}"]
    by_notebook: dict[str, list[str]] = {}
    for exercise in chosen:
        by_notebook.setdefault(exercise.split(".")[0], []).append(exercise)
    for number, exercises in by_notebook.items():
        passed = sum(chosen[e] for e in exercises)
        lines.append(f"{_notebook_title(number)} ({passed} of {len(exercises)} passed)")
        for exercise in exercises:
            mark = "✔" if chosen[exercise] else "✘"
            line = f"  {mark} {exercise} {_titles.get(exercise, '')}".rstrip()
            if not chosen[exercise] and _feedback.get(exercise):
                line += f": {_feedback[exercise]}"
            lines.append(line)
    if len(by_notebook) > 1:
        lines.append(f"total: {sum(chosen.values())} of {len(chosen)} passed")
    print("\n".join(lines))
    return chosen


# --- 01 attention without position ----------------------------------------------------------

# --- 02 absolute position encodings -------------------------------------------------------

# --- 03 RoPE in 2D ------------------------------------------------------------------------

# --- 04 RoPE in d dimensions --------------------------------------------------------------

# --- 05 long-range decay ------------------------------------------------------------------

# --- 06 length extrapolation --------------------------------------------------------------

# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
