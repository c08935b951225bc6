"""Exercises of notebook 08 (RoPE beyond 1D): axial 2D RoPE and M-RoPE position ids."""

from __future__ import annotations

import torch

from rope_lab import nd
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    compare,
    grader,
    log_uniform,
    matches,
    randint,
    rotation_tolerance,
)
from rope_lab.i18n import N_, _


@grader("08.1", N_("axial 2D RoPE"), answer="axial_rope")
def check_axial_rope(function: Learner, generator: torch.Generator) -> None:
    """08.1: ``function(x, positions, base)`` is axial 2D RoPE built from ``rl.apply_rope``.

    x: ``(..., seq, d)``, positions: ``(seq, 2)`` (x, y); compared with
    ``nd.apply_rope_nd(x, positions, nd.axial_freqs(d, base))`` in float64. The text's speeds
    ``rl.inv_freq(d // 2, base)`` are float32: the tolerance allows float32 angles.
    """
    teaching = torch.Generator().manual_seed(8)
    cases = [(torch.randn(2, rows * columns, dim, generator=teaching, dtype=torch.float64),
              nd.grid_positions(rows, columns), base)
             for dim, base, (rows, columns) in ((8, 100.0, (3, 4)), (16, 10.0, (5, 2)))]
    rows, columns = randint(generator, 1, 5), randint(generator, 1, 5)
    dim = 4 * randint(generator, 1, 8)
    leading = [randint(generator, 1, 3) for _ in range(randint(generator, 0, 2))]
    x = torch.randn(*leading, rows * columns, dim, generator=generator, dtype=torch.float64)
    random = [(x, nd.grid_positions(rows, columns), round(log_uniform(generator, 2.0, 1e4), 1))]
    for number, (x, positions, base) in enumerate(cases + random):
        function.random = number >= len(cases)
        dim = x.shape[-1]
        answer = function(x, positions, base)
        freqs = nd.axial_freqs(dim, base, dtype=torch.float64)
        expected = nd.apply_rope_nd(x, positions, freqs)
        # half layout: pair i is (x_i, x_{i + d/2}); its angle is ⟨p, ω_i⟩
        pair_length = torch.stack(x.chunk(2, dim=-1)).norm(dim=0)
        atol = rotation_tolerance(positions.double() @ freqs, pair_length, floor=1e-9).repeat(
            *([1] * (x.dim() - 1)), 2)
        what = _("x of shape {shape}, base = {base:g}").format(shape=tuple(x.shape), base=base)
        failure = compare(answer, expected, atol=atol, what=what)
        if failure is not None:
            swapped = nd.apply_rope_nd(x, positions.flip(-1), freqs)
            if matches(answer, swapped, atol=atol):
                failure = _("{what}: x and y are swapped: pairs 0 … d/4 − 1 turn with x (column "
                            "0)").format(what=what)
            raise Wrong(failure)


@grader("08.2", N_("M-RoPE position ids"), answer="mrope_position_ids")
def check_mrope_positions(function: Learner, generator: torch.Generator) -> None:
    """08.2: ``function(text_before, grid_thw, text_after)`` returns M-RoPE (t, h, w) ids.

    Compared with :func:`rope_lab.nd.mrope_positions` on a few layouts, under either rule
    for where the text after a video resumes (``rule="qwen2-vl"``, the paper's and the
    released model's, or ``rule="transformers"``, transformers ≥ 5.3's); one rule for all
    layouts. The layout (1, (3, 1, 2), 3), a video with more frames than rows and columns,
    tells the two apart.
    """
    cases = [(3, (1, 2, 3), 2), (0, (2, 2, 2), 1), (2, (1, 4, 1), 0), (1, (3, 1, 2), 3)]
    random = [(randint(generator, 0, 6), tuple(randint(generator, 1, 5) for _ in range(3)),
               randint(generator, 0, 6)) for _ in range(2)]
    answers = []
    for number, case in enumerate(cases + random):
        function.random = number >= len(cases)
        answers.append((case, function(*case)))
    failures = {}
    for rule in nd.MROPE_RULES:
        failures[rule] = next(
            ((number, failure) for number, (case, answer) in enumerate(answers)
             if (failure := compare(answer, nd.mrope_positions(*case, rule=rule), atol=0,
                                    what=_("for (text_before, grid_thw, text_after) = "
                                           "{case}").format(case=case)))
             is not None), None)
        if failures[rule] is None:
            return
    # the seed matters only if a failure shown is on a random layout
    function.random = max(number for number, _ in failures.values()) >= len(cases)
    raise Wrong(_("{failure} (transformers ≥ 5.3's rule, text resuming at s + max(rows, "
                  "columns), is accepted too: {other})").format(
                      failure=failures["qwen2-vl"][1], other=failures["transformers"][1]))
