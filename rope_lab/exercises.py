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

_CASES_06 = [(64, 10000.0, 4.0), (128, 500000.0, 8.0), (16, 100.0, 2.5), (4, 10000.0, 1.0)]


def check_position_interpolation(function) -> bool:
    """06.1: ``function(dim, base, factor)`` → the ``(dim // 2,)`` PI rotation speeds θ_i/s."""
    from rope_lab import scaling

    for dim, base, factor in _CASES_06:
        answer, crash = call_learner(function, dim, base, factor)
        if crash:
            return report("06.1", "position interpolation", crash)
        expected, _ = scaling.linear_inv_freq(dim, base=base, factor=factor,
                                              dtype=torch.float64)
        failure = compare(answer, expected, atol=1e-6 * float(expected.max()),
                          what=f"dim={dim}, base={base:g}, factor={factor:g}")
        if failure:
            return report("06.1", "position interpolation", failure)
    return report("06.1", "position interpolation", None)


def check_ntk_base(function) -> bool:
    """06.2: ``function(base, dim, factor)`` → the static NTK-aware base base·s^(d/(d−2))."""
    for dim, base, factor in _CASES_06:
        answer, crash = call_learner(function, base, dim, factor)
        if crash:
            return report("06.2", "NTK-aware base", crash)
        expected = base * factor ** (dim / (dim - 2))
        try:
            answer = float(answer)
        except (TypeError, ValueError):
            return report("06.2", "NTK-aware base", f"expected a number, got {answer!r}")
        if not abs(answer - expected) <= 1e-6 * expected:
            slowest = (answer / base) ** (-(dim - 2) / dim) if answer > 0 else float("nan")
            return report(
                "06.2", "NTK-aware base",
                f"dim={dim}, base={base:g}, factor={factor:g}: expected {expected:.6g}, got "
                f"{answer:.6g} — with your base the slowest pair slows by {slowest:.4g}, "
                f"it should slow by exactly 1/factor = {1 / factor:.4g}")
    return report("06.2", "NTK-aware base", None)


def check_full_turn_pairs(function) -> bool:
    """06.3: ``function(dim, base, length)`` → how many pairs complete a turn (λ_i ≤ L)."""
    import math

    from rope_lab import inv_freq

    for dim, base, length in [(64, 10000.0, 2048), (128, 500000.0, 8192), (16, 10000.0, 64),
                              (8, 10.0, 3)]:
        answer, crash = call_learner(function, dim, base, length)
        if crash:
            return report("06.3", "pairs that turn", crash)
        wavelengths = 2 * math.pi / inv_freq(dim, base, dtype=torch.float64)
        expected = int((wavelengths <= length).sum())
        if answer != expected:
            return report("06.3", "pairs that turn",
                          f"dim={dim}, base={base:g}, L={length}: expected {expected} of "
                          f"{dim // 2} pairs, got {answer!r}")
    return report("06.3", "pairs that turn", None)


# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
