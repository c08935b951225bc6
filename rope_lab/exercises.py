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

# exercise id ("05.1") → passed?
_results: dict[str, bool] = {}


def report(exercise: str, title: str, failure: str | None) -> bool:
    """Record and print the verdict for one exercise. ``failure`` None means passed."""
    passed = failure is None
    _results[exercise] = passed
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


def summary(prefix: str = "") -> dict[str, bool]:
    """Print and return the exercises graded so far (those whose id starts with ``prefix``)."""
    chosen = {k: v for k, v in sorted(_results.items()) if k.startswith(prefix)}
    if not chosen:
        print("No exercises graded yet in this session.")
    for exercise, passed in chosen.items():
        print(f"{'✔' if passed else '✘'} {exercise}")
    if chosen:
        print(f"{sum(chosen.values())} of {len(chosen)} passed")
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
