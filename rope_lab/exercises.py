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


def check_rope_bytes(rope_bytes) -> bool:
    """09.1 — bytes RoPE moves for one tensor: ``rope_bytes(batch, heads, seq, head_dim,
    bytes_per_element)`` = read x + write the result (cos/sin tables left out)."""
    from rope_lab import bench

    title = "bytes moved by RoPE"
    for shape, width in (((1, 32, 2048, 128), 4), ((2, 8, 100, 64), 2), ((1, 1, 1, 2), 8)):
        answer, failure = call_learner(rope_bytes, *shape, width)
        if failure:
            return report("09.1", title, failure)
        expected = bench.rope_traffic(*shape, bytes_per_element=width)["tensor_bytes"]
        if answer is None or float(answer) != expected:
            hint = " (did you count the write as well as the read?)" \
                if answer is not None and float(answer) * 2 == expected else ""
            return report("09.1", title,
                          f"for shape {shape} with {width}-byte elements expected {expected} "
                          f"bytes, got {answer}{hint}")
    return report("09.1", title, None)


def check_attainable(attainable) -> bool:
    """09.2 — the roofline: ``attainable(intensity, peak_gflops, bandwidth_gb_s)`` in GFLOP/s."""
    from rope_lab import bench

    title = "the roofline"
    for args in ((0.375, 1000.0, 50.0), (100.0, 1000.0, 50.0), (20.0, 1000.0, 50.0),
                 (0.1, 60_000.0, 3000.0)):
        answer, failure = call_learner(attainable, *args)
        if failure:
            return report("09.2", title, failure)
        expected = bench.attainable_gflops(*args)
        if answer is None or abs(float(answer) - expected) > 1e-9 * max(1.0, expected):
            return report("09.2", title,
                          f"for intensity {args[0]} FLOP/byte, peak {args[1]:g} GFLOP/s and "
                          f"{args[2]:g} GB/s expected {expected:g} GFLOP/s, got {answer}")
    return report("09.2", title, None)


def check_complex_rope(complex_rope) -> bool:
    """09.3 — one-pass interleaved RoPE: ``complex_rope(x, cos, sin)`` for x ``(..., seq, d)``
    float32 and cos, sin ``(seq, d/2)``, equal to ``apply_rope(x, layout="interleaved")``."""
    from rope_lab import rope

    title = "interleaved RoPE as one complex multiply"
    generator = torch.Generator().manual_seed(9)
    for shape in ((5, 8), (2, 3, 7, 16)):
        x = torch.randn(*shape, generator=generator)
        freqs = rope.inv_freq(shape[-1])
        angles = rope.rope_angles(torch.arange(shape[-2]), freqs)
        cos, sin = angles.cos(), angles.sin()
        answer, failure = call_learner(complex_rope, x.clone(), cos, sin)
        failure = failure or compare(answer, rope.rotate_reference(x, cos, sin, "interleaved"),
                                     atol=1e-5, what=f"x of shape {shape}")
        if failure:
            return report("09.3", title, failure)
    return report("09.3", title, None)
