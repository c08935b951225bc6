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


def check_score_curve(score_curve) -> bool:
    """05.1: ``score_curve(q, k, distances, base) -> (D,)``: q at position 0, k at each Δ.

    Compared with :func:`rope_lab.decay.score_curve` (half layout) on all-ones and on random
    q, k, for several bases.
    """
    from rope_lab import decay

    exercise, title = "05.1", "the score curve"
    generator = torch.Generator().manual_seed(51)
    distances = torch.tensor([0, 1, 2, 5, 17, 100, 1000])
    cases = [(torch.ones(8), torch.ones(8), 10000.0)]
    for dim, base in ((8, 100.0), (64, 10000.0), (128, 5e5)):
        cases.append((torch.randn(dim, generator=generator),
                      torch.randn(dim, generator=generator), base))
    for q, k, base in cases:
        answer, failure = call_learner(score_curve, q.clone(), k.clone(), distances.clone(),
                                       base)
        if failure is None:
            expected = decay.score_curve(q, k, distances, base=base)
            failure = compare(answer, expected, atol=1e-3 * (1 + float(expected.abs().max())),
                              what=f"d = {q.shape[0]}, base {base:g}, distances "
                                   f"{distances.tolist()}")
            interleaved = decay.score_curve(q, k, distances, base=base, layout="interleaved")
            if failure and answer is not None and compare(answer, interleaved, atol=1e-3 * (
                    1 + float(interleaved.abs().max())), what="") is None:
                failure += " (you paired features (2i, 2i+1); use the half layout, the default"
                failure += " of rl.apply_rope)"
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


def check_bound_breaker(make_key) -> bool:
    """05.2: ``make_key(q, distance, base) -> k`` with unit pairs whose score at ``distance``
    beats seed 000's "bound" Σ_i cos(Δθ_i) (q also has unit pairs, half layout)."""
    import rope_lab as rl
    from rope_lab import decay

    exercise, title = "05.2", "a key that breaks the Σcos “bound”"
    generator = torch.Generator().manual_seed(52)
    for dim, distance, base in ((64, 1000, 10000.0), (128, 300, 10000.0), (32, 1777, 500.0)):
        first, second = rl.rope_pairs(dim, "half")
        angles = 2 * torch.pi * torch.rand(dim // 2, generator=generator, dtype=torch.float64)
        q = torch.empty(dim, dtype=torch.float64)
        q[first], q[second] = angles.cos(), angles.sin()  # every pair of q has length 1
        answer, failure = call_learner(make_key, q.clone(), distance, base)
        if failure is None:
            try:
                k = torch.as_tensor(answer, dtype=torch.float64).reshape(dim)
            except (TypeError, ValueError, RuntimeError):
                return report(exercise, title, f"return a tensor of shape ({dim},), got "
                                               f"{answer!r:.80}")
            lengths = torch.sqrt(k[first] ** 2 + k[second] ** 2)
            bound = float(decay.cos_sum([distance], dim, base=base)[0])
            score = float(decay.score_curve(q, k, [distance], base=base)[0])
            where = f"d = {dim}, Δ = {distance}, base {base:g}"
            if not bool(torch.allclose(lengths, torch.ones_like(lengths), atol=1e-4)):
                i = int((lengths - 1).abs().argmax())
                failure = (f"{where}: pair {i} of k has length {float(lengths[i]):.4f}; the "
                           "bound is about unit pairs, so every pair of k must have length 1")
            elif score <= bound + 1:
                failure = (f"{where}: your k scores {score:.3f}, the “bound” is {bound:.3f}; "
                           "aim for the largest possible score, d/2 (hint: undo the rotation)")
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


def check_minimum_base(minimum_base) -> bool:
    """05.3: ``minimum_base(context_length, dim) -> base``: the smallest base ≥ 1 with
    Σ_i cos(mθ_i) ≥ 0 for every m = 0 … L. Accepted within 1 % above the exact answer."""
    from rope_lab import decay

    exercise, title = "05.3", "the minimum base for a context length"
    for length, dim in ((100, 16), (512, 64)):
        answer, failure = call_learner(minimum_base, length, dim)
        if failure is None:
            try:
                base = float(answer)
            except (TypeError, ValueError):
                return report(exercise, title, f"return a number, got {answer!r:.80}")
            exact = decay.minimum_base(length, dim)
            where = f"L = {length}, d = {dim}"
            if not base >= 1 or not decay.satisfies_base_criterion(base, length, dim):
                lowest = decay.lowest_cos_sum(base, length, dim) if base > 0 else float("nan")
                failure = (f"{where}: base {base:.6g} fails the criterion (the smallest sum "
                           f"over m ≤ L is {lowest:.4f} < 0)")
            elif base > exact * 1.01:
                failure = (f"{where}: base {base:.6g} works, but so does the smaller "
                           f"{exact:.6g}. The condition is not monotone in the base: "
                           "bisection can land on a later crossing; scan upward instead")
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


# --- 06 length extrapolation --------------------------------------------------------------

# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
