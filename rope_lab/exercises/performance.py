"""Exercises of notebook 09 (performance): bytes moved, the roofline, RoPE as a complex multiply."""

from __future__ import annotations

import torch

from rope_lab import cost, rope
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_number,
    check_answer,
    grader,
    log_uniform,
    precision_note,
    randint,
    tell_apart,
)
from rope_lab.i18n import N_, _


@grader("09.1", N_("bytes moved by RoPE"), answer="rope_bytes")
def check_rope_bytes(rope_bytes: Learner, generator: torch.Generator) -> None:
    """09.1 — bytes RoPE moves for one tensor: ``rope_bytes(batch, heads, seq, head_dim,
    bytes_per_element)`` = read x + write the result (cos/sin tables left out)."""
    # the last: 2.36 GB (a 50k-token prefill), past 2^31 bytes, where an int32 count wraps,
    # and not a float32 number (18450369 · 2^7: an odd part past 2^24)
    cases = [((1, 32, 2048, 128), 4), ((2, 8, 100, 64), 2), ((1, 1, 1, 2), 8),
             ((3, 41, 50_001, 96), 2)]
    random = [((randint(generator, 1, 8), randint(generator, 1, 64), randint(generator, 1, 9999),
                2 * randint(generator, 1, 128)), 2 ** randint(generator, 0, 3)) for _ in range(2)]
    for number, (shape, width) in enumerate(cases + random):
        rope_bytes.random = number >= len(cases)
        where = _("for shape {shape} with {width}-byte elements").format(shape=shape,
                                                                         width=width)
        answer = answer_number(rope_bytes(*shape, width), where)
        expected = cost.rope_traffic(*shape, bytes_per_element=width)["tensor_bytes"]
        if answer != expected:
            hint = ""
            if answer * 2 == expected:
                hint = _(" (did you count the write as well as the read?)")
            elif isinstance(answer, int) and (answer - expected) % 2**32 == 0:
                hint = _(" (the count passed 2^31 and wrapped around: an int32 holds at most "
                         "2^31 − 1; count in Python ints or torch.int64)")
            elif isinstance(answer, float) and abs(answer - expected) <= expected * 2.0**-23:
                hint = _(" (float32 holds whole numbers exactly only up to 2^24: count in "
                         "Python ints or torch.int64)")
            raise Wrong(_("{where} expected {expected} bytes, got {answer}{hint}").format(
                where=where, expected=expected, answer=answer, hint=hint))


@grader("09.2", N_("the roofline"), answer="attainable")
def check_attainable(attainable: Learner, generator: torch.Generator) -> None:
    """09.2 — the roofline: ``attainable(intensity, peak_gflops, bandwidth_gb_s)`` in GFLOP/s."""
    cases = [(0.375, 1000.0, 50.0), (100.0, 1000.0, 50.0), (20.0, 1000.0, 50.0),
             (0.1, 60_000.0, 3000.0)]
    random = [(round(log_uniform(generator, 0.01, 1000.0), 4),
               round(log_uniform(generator, 10.0, 1e6), 1),
               round(log_uniform(generator, 10.0, 1e4), 1)) for _ in range(3)]
    for number, args in enumerate(cases + random):
        attainable.random = number >= len(cases)
        where = _("for intensity {intensity:g} FLOP/byte, peak {peak:g} GFLOP/s and "
                  "{bandwidth:g} GB/s").format(intensity=args[0], peak=args[1],
                                               bandwidth=args[2])
        answer = answer_number(attainable(*args), where)
        expected = cost.attainable_gflops(*args)
        allowed = 1e-9 * max(1.0, expected)
        if abs(answer - expected) > allowed:
            shown_expected, shown_answer = tell_apart(expected, answer)
            raise Wrong(_("{where} expected {expected} GFLOP/s, got {answer}").format(
                where=where, expected=shown_expected, answer=shown_answer)
                + precision_note(None, expected, answer, allowed))


@grader("09.3", N_("interleaved RoPE as one complex multiply"),
        answer="complex_rope")
def check_complex_rope(complex_rope: Learner, generator: torch.Generator) -> None:
    """09.3 — one-pass interleaved RoPE: ``complex_rope(x, cos, sin)`` for x ``(..., seq, d)``
    float32 and cos, sin ``(seq, d/2)``, equal to ``apply_rope(x, layout="interleaved")``."""
    teaching = torch.Generator().manual_seed(9)
    cases = [(torch.randn(*shape, generator=teaching), 10000.0)
             for shape in ((5, 8), (2, 3, 7, 16))]
    leading = [randint(generator, 1, 3) for _ in range(randint(generator, 0, 2))]
    random = [(torch.randn(*leading, randint(generator, 1, 9), 2 * randint(generator, 1, 16),
                           generator=generator), round(log_uniform(generator, 10.0, 1e5), 1))]
    for number, (x, base) in enumerate(cases + random):
        complex_rope.random = number >= len(cases)
        angles = rope.rope_angles(torch.arange(x.shape[-2]), rope.inv_freq(x.shape[-1], base))
        cos, sin = angles.cos(), angles.sin()
        answer = complex_rope(x, cos, sin)
        check_answer(answer, rope.rotate_reference(x, cos, sin, "interleaved"), atol=1e-5,
                     what=_("x of shape {shape}").format(shape=tuple(x.shape)))
