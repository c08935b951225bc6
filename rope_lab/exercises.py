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


def check_recurrent_linear_attention(function) -> bool:
    """07.1: ``function(q, k, v, rope)`` is causal linear attention as a loop over positions.

    q, k: ``(L, d)``, v: ``(L, d_v)``; returns ``(L, d_v)``. Compared with
    :func:`rope_lab.linear_attention.linear_attention` (causal) without and with RoPE.
    """
    from rope_lab import linear_attention as la

    title = "causal linear attention, recurrent form"
    generator = torch.Generator().manual_seed(7)
    q, k = torch.randn(2, 9, 6, generator=generator, dtype=torch.float64)
    v = torch.randn(9, 3, generator=generator, dtype=torch.float64)
    for rope in (False, True):
        answer, error = call_learner(function, q.clone(), k.clone(), v.clone(), rope)
        if error:
            return report("07.1", title, f"with rope={rope}: {error}")
        expected = la.linear_attention(q, k, v, causal=True, rope=rope)
        failure = compare(answer, expected, atol=1e-9, what=f"with rope={rope}")
        if failure is None:
            continue
        hints = {
            "includes future tokens (did you sum over all n, not n ≤ m?)":
                la.linear_attention(q, k, v, causal=False, rope=rope),
            "rotates the denominator too; keep Σ φ(q_m)·φ(k_n) unrotated":
                la.linear_attention_weights(q, k, causal=True, rope=True,
                                            rotate_denominator=True) @ v,
        }
        for hint, wrong in hints.items():
            if answer is not None and compare(answer, wrong, atol=1e-9, what="") is None:
                return report("07.1", title, f"with rope={rope}: your answer {hint}")
        return report("07.1", title, failure)
    return report("07.1", title, None)


def check_non_positive_normalizer(function) -> bool:
    """07.2: ``function()`` returns q, k of shape ``(L, 4)`` with L ≤ 8 whose *rotated*
    causal normalizer (base 10000, φ = elu + 1) is ≤ 0 for some query."""
    from rope_lab import linear_attention as la

    title = "a rotated normalizer that is not positive"
    answer, error = call_learner(function)
    if error:
        return report("07.2", title, error)
    try:
        q, k = (torch.as_tensor(t, dtype=torch.float64) for t in answer)
    except (TypeError, ValueError) as problem:
        return report("07.2", title, f"return a pair (q, k) of tensors, got {problem}")
    if q.ndim != 2 or q.shape != k.shape or q.shape[1] != 4 or not 1 <= q.shape[0] <= 8:
        return report("07.2", title,
                      f"q and k must both have shape (L, 4) with L ≤ 8, got {tuple(q.shape)} "
                      f"and {tuple(k.shape)}")
    if not bool(torch.isfinite(q).all() and torch.isfinite(k).all()):
        return report("07.2", title, "q and k must be finite")
    rotated = la.linear_attention_normalizers(q, k, causal=True, rotated=True)
    plain = la.linear_attention_normalizers(q, k, causal=True, rotated=False)
    if float(rotated.min()) > 0:
        return report("07.2", title,
                      f"the smallest rotated normalizer is {float(rotated.min()):.4g} > 0. "
                      "Hint: pair 1 (features 1 and 3) turns 100× slower than pair 0; "
                      "make φ small there.")
    print(f"  rotated normalizer min {float(rotated.min()):.4g}; "
          f"unrotated min {float(plain.min()):.4g} (positive, as always)")
    return report("07.2", title, None)


# --- 08 RoPE beyond 1D --------------------------------------------------------------------


def check_axial_rope(function) -> bool:
    """08.1: ``function(x, positions, base)`` is axial 2D RoPE built from ``rl.apply_rope``.

    x: ``(..., seq, d)``, positions: ``(seq, 2)`` (x, y); compared with
    ``nd.apply_rope_nd(x, positions, nd.axial_freqs(d, base))``.
    """
    from rope_lab import nd

    title = "axial 2D RoPE"
    generator = torch.Generator().manual_seed(8)
    for dim, base, (rows, columns) in ((8, 100.0, (3, 4)), (16, 10.0, (5, 2))):
        x = torch.randn(2, rows * columns, dim, generator=generator, dtype=torch.float64)
        positions = nd.grid_positions(rows, columns)
        expected = nd.apply_rope_nd(x, positions, nd.axial_freqs(dim, base, dtype=torch.float64))
        answer, error = call_learner(function, x.clone(), positions.clone(), base)
        if error:
            return report("08.1", title, error)
        failure = compare(answer, expected, atol=1e-9, what=f"d = {dim}, base = {base:g}")
        if failure is not None:
            swapped = nd.apply_rope_nd(x, positions.flip(-1),
                                       nd.axial_freqs(dim, base, dtype=torch.float64))
            if answer is not None and compare(answer, swapped, atol=1e-9, what="") is None:
                failure = "x and y are swapped: pairs 0 … d/4 − 1 turn with x (column 0)"
            return report("08.1", title, failure)
    return report("08.1", title, None)


def check_mrope_positions(function) -> bool:
    """08.2: ``function(text_before, grid_thw, text_after)`` returns M-RoPE (t, h, w) ids.

    Compared with :func:`rope_lab.nd.mrope_positions` on a few layouts.
    """
    from rope_lab import nd

    title = "M-RoPE position ids"
    for case in ((3, (1, 2, 3), 2), (0, (2, 2, 2), 1), (2, (1, 4, 1), 0), (1, (3, 1, 2), 3)):
        answer, error = call_learner(function, *case)
        if error:
            return report("08.2", title, f"for {case}: {error}")
        expected = nd.mrope_positions(*case)
        failure = compare(answer, expected, atol=0, what=f"for (text_before, grid_thw, "
                                                        f"text_after) = {case}")
        if failure is not None:
            return report("08.2", title, failure)
    return report("08.2", title, None)


# --- 09 performance -----------------------------------------------------------------------
