"""Exercises of notebook 04 (RoPE in d dimensions): rotate_half, interleaved RoPE, layouts."""

from __future__ import annotations

import torch

from rope_lab import implementations, rope
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_tensor,
    check_answer,
    compare,
    grader,
    log_uniform,
    matches,
    randint,
    rotation_tolerance,
)
from rope_lab.i18n import N_, _


def _random_x(generator, *, max_dim: int = 32):
    shape = [randint(generator, 1, 3) for _ in range(randint(generator, 0, 2))]
    dtype = (torch.float32, torch.float64)[randint(generator, 0, 1)]
    dim = 2 * randint(generator, 1, max_dim // 2)
    return torch.randn(*shape, randint(generator, 1, 6), dim, generator=generator, dtype=dtype)


def _same_dtype(answer, x, what):
    if isinstance(answer, torch.Tensor) and answer.dtype != x.dtype:
        raise Wrong(_("{what}: x is {dtype}, your answer is {answer}; return x's dtype").format(
            what=what, dtype=x.dtype, answer=answer.dtype))


@grader("04.1", N_("rotate_half"), answer="rotate_half")
def check_rotate_half(rotate_half: Learner, generator: torch.Generator) -> None:
    """04.1: ``rotate_half(x)`` maps the halves (x_a, x_b) of the last dimension to (−x_b, x_a)."""
    teaching = torch.Generator().manual_seed(4)
    cases = [torch.arange(1.0, 5.0), torch.arange(1.0, 9.0).reshape(2, 4),
             torch.randn(2, 3, 5, 16, generator=teaching),
             torch.randn(3, 6, generator=teaching, dtype=torch.float64)]
    random = [_random_x(generator) for _ in range(2)]
    for number, x in enumerate(cases + random):
        rotate_half.random = number >= len(cases)
        what = (f"x = {x.tolist()}" if x.numel() <= 8
                else _("x of shape {shape}").format(shape=tuple(x.shape)))
        answer = rotate_half(x)
        _same_dtype(answer, x, what)  # first: a float32 answer to float64 x is off by 1e-8
        check_answer(answer, implementations.rotate_half(x), atol=0.0, what=what)


def _interleaved_reference(x, positions, base):
    """RoPE with pairs (2i, 2i + 1) in float64, and the angles m·θ_i it used."""
    angles = rope.rope_angles(positions, rope.inv_freq(x.shape[-1], base, dtype=torch.float64))
    return rope.rotate_reference(x.double(), angles.cos(), angles.sin(), "interleaved"), angles


@grader("04.2", N_("interleaved RoPE"), answer="rope_interleaved")
def check_rope_interleaved(rope_interleaved: Learner, generator: torch.Generator) -> None:
    """04.2: ``rope_interleaved(x, positions, base) -> like x``, pairs (2i, 2i+1).

    The text allows angles in float32: the tolerance grows with |m·θ_i| to match.
    """
    teaching = torch.Generator().manual_seed(5)
    cases = [(torch.tensor([[1.0, 0.0]]), torch.tensor([1]), 10000.0),
             (torch.tensor([[1.0, 0.0, 0.0, 1.0]]), torch.tensor([3]), 100.0),
             (torch.randn(2, 7, 8, generator=teaching, dtype=torch.float64),
              torch.arange(7), 10000.0),
             (torch.randn(5, 64, generator=teaching, dtype=torch.float64),
              torch.tensor([0, 1, 100, 1000, 4095]), 500000.0)]
    random = []
    for _draw in range(2):
        x = _random_x(generator, max_dim=64)
        positions = torch.randperm(5000, generator=generator)[: x.shape[-2]]
        random.append((x, positions, round(log_uniform(generator, 10.0, 1e6), 1)))
    for number, (x, positions, base) in enumerate(cases + random):
        rope_interleaved.random = number >= len(cases)
        answer = rope_interleaved(x, positions, base)
        expected, angles = _interleaved_reference(x, positions, base)
        pair_length = x.double().unflatten(-1, (-1, 2)).norm(dim=-1)
        atol = rotation_tolerance(angles, pair_length, floor=1e-5).repeat_interleave(2, dim=-1)
        label = (f"x = {x.tolist()}, positions = {positions.tolist()}, base = {base:g}"
                 if x.numel() <= 4 else _("x of shape {shape}, base = {base:g}").format(
                     shape=tuple(x.shape), base=base))
        failure = compare(answer, expected, atol=atol, what=label)
        if failure is not None:
            half = rope.apply_rope(x.double(), positions, base=base, layout="half")
            if x.shape[-1] > 2 and matches(answer, half, atol=atol):
                failure += _(" (you paired (i, i + d/2): that is the half layout)")
            raise Wrong(failure)
        _same_dtype(answer, x, label)


@grader("04.3", N_("the permutation between layouts"),
        forbidden=("rope_lab.rope.interleaved_to_half", "rope_lab.rope.half_to_interleaved"),
        answer="layout_permutation")
def check_layout_permutation(layout_permutation: Learner, generator: torch.Generator) -> None:
    """04.3: ``layout_permutation(dim) -> LongTensor p`` with
    ``apply_rope(x, layout="interleaved")[..., p] == apply_rope(x[..., p], layout="half")``.
    """
    teaching = torch.Generator().manual_seed(6)
    dims = [2, 4, 8, 64]
    random = [2 * randint(generator, 3, 64) for _ in range(2)]
    for number, dim in enumerate(dims + random):
        layout_permutation.random = number >= len(dims)
        p = answer_tensor(layout_permutation(dim), f"dim = {dim}", kind="int", shape=(dim,))
        if sorted(p.tolist()) != list(range(dim)):
            shown = p.tolist() if dim <= 16 else f"{p.tolist()[:8]} …"
            raise Wrong(_("dim = {dim}: expected a permutation of 0 … {last}, got {shown}").format(
                dim=dim, last=dim - 1, shown=shown))
        x = torch.randn(6, dim, generator=generator if number >= len(dims) else teaching,
                        dtype=torch.float64)
        left = rope.apply_rope(x, layout="interleaved")[..., p]
        right = rope.apply_rope(x[..., p], layout="half")
        shown = p.tolist() if dim <= 16 else _("yours")
        check_answer(left, right, atol=1e-9, what=_(
            "dim = {dim}, p = {shown}: interleaved-then-permute versus permute-then-half").format(
                dim=dim, shown=shown))
