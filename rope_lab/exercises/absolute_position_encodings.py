"""Exercises of notebook 02 (absolute position encodings): sinusoids, shifts, binary codes."""

from __future__ import annotations

import torch

from rope_lab.absolute import binary_pe, sinusoidal_pe
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_number,
    answer_tensor,
    compare,
    grader,
    log_uniform,
    randint,
    values_differ,
)
from rope_lab.i18n import N_, _
from rope_lab.rope import inv_freq


@grader("02.1", N_("the sinusoidal encoding"), forbidden=("rope_lab.absolute.sinusoidal_pe",),
        answer="my_sinusoidal_pe")
def check_sinusoidal_pe(sinusoidal_fn: Learner, generator: torch.Generator) -> None:
    """02.1 — ``sinusoidal_fn(length, dim, base)``: PE(p)_{2i} = sin(p·ω_i),
    PE(p)_{2i+1} = cos(p·ω_i), ω_i = base^(−2i/dim), positions p = 0 … length−1.
    """
    cases = [(8, 4, 10000.0), (50, 16, 100.0), (20, 6, 10.0)]
    random = [(randint(generator, 1, 60), 2 * randint(generator, 1, 16),
               round(log_uniform(generator, 2.0, 1e5), 3)) for _ in range(2)]
    for number, (length, dim, base) in enumerate(cases + random):
        sinusoidal_fn.random = number >= len(cases)
        answer = sinusoidal_fn(length, dim, base)
        expected = sinusoidal_pe(length, dim, base)
        failure = compare(answer, expected, atol=1e-4,
                          what=f"length = {length}, dim = {dim}, base = {base:g}")
        if failure is not None:
            if values_differ(answer, expected, atol=1e-4):
                failure += _sinusoidal_hint(answer_tensor(answer, "").double(), length, dim, base)
            raise Wrong(failure)


def _sinusoidal_hint(answer, length, dim, base) -> str:
    p = torch.arange(length, dtype=torch.float64)[:, None]
    omega = inv_freq(dim, base, dtype=torch.float64)
    sin, cos = torch.sin(p * omega), torch.cos(p * omega)
    close = lambda table: torch.allclose(answer, table, atol=1e-4)  # noqa: E731
    if close(torch.stack((cos, sin), -1).flatten(-2)):
        return _(" — sin and cos are swapped: even features are sin, odd features cos")
    if close(torch.cat((sin, cos), -1)):
        return _(" — all sines first, then all cosines; this course interleaves them "
                 "(feature 2i is sin, 2i+1 is cos)")
    slow = base ** -(torch.arange(0, dim // 2, dtype=torch.float64) / dim)
    if close(torch.stack((torch.sin(p * slow), torch.cos(p * slow)), -1).flatten(-2)):
        return _(" — ω_i uses i/dim; the exponent is 2i/dim (i counts pairs)")
    shifted = p + 1
    if close(torch.stack((torch.sin(shifted * omega), torch.cos(shifted * omega)), -1)
             .flatten(-2)):
        return _(" — positions start at 0, not 1")
    return ""


@grader("02.2", N_("the sinusoidal shift map"),
        forbidden=("rope_lab.absolute.sinusoidal_shift_map",),
        answer="my_shift_map")
def check_shift_map(shift_fn: Learner, generator: torch.Generator) -> None:
    """02.2 — ``shift_fn(dim, k, base)``: the ``(dim, dim)`` matrix W_k with
    PE(p + k) = W_k PE(p) for every p (sinusoidal encoding, column vectors).
    """
    cases = [(2, 1, 10000.0), (8, 3, 10000.0), (16, 10, 100.0)]
    random = [(2 * randint(generator, 1, 12), randint(generator, 1, 60),
               round(log_uniform(generator, 10.0, 1e5), 3)) for _ in range(2)]
    for number, (dim, k, base) in enumerate(cases + random):
        shift_fn.random = number >= len(cases)
        where = f"dim = {dim}, k = {k}, base = {base:g}"
        answer = answer_tensor(shift_fn(dim, k, base), where, shape=(dim, dim)).double()
        pe = sinusoidal_pe(40 + k, dim, base).double()
        moved = pe[:40] @ answer.T  # row p: W_k PE(p)
        gap = (moved - pe[k:]).abs().amax(dim=-1)
        if float(gap.max()) > 1e-4:
            p = int(torch.nonzero(gap > 1e-4)[0])
            hint = ""
            if torch.allclose(pe[k:40] @ answer.T, pe[: 40 - k], atol=1e-4):
                hint = _(" — your matrix moves back: it takes PE(p) to PE(p − k) (transpose it)")
            raise Wrong(_("{where}: W_k PE({p}) differs from PE({shifted}) by {gap:.3g}{hint}")
                        .format(where=where, p=p, shifted=p + k, gap=float(gap[p]), hint=hint))


@grader("02.3", N_("bits flipped between neighbours"), answer="bits_flipped")
def check_bits_flipped(bits_flipped_fn: Learner, generator: torch.Generator) -> None:
    """02.3 — ``bits_flipped_fn(p)``: how many binary-PE features change from p to p + 1."""
    cases = list(range(1024))
    # large p: trailing ones, so more than the table's 11 bits can flip
    random = [int(torch.randint(0, 2**40, (), generator=generator)) for _ in range(16)]
    random = [p | (2 ** randint(generator, 0, 30) - 1) if i % 2 else p
              for i, p in enumerate(random)]
    answers = bits_flipped_fn.map([(p,) for p in cases])
    bits_flipped_fn.random = True
    answers += bits_flipped_fn.map([(p,) for p in random])
    table = binary_pe(1025, 11)  # the reference after the answers, as in every grader
    flipped = (table[1:] != table[:-1]).sum(dim=-1)
    expected_counts = [int(flipped[p]) for p in cases] + [(p ^ (p + 1)).bit_count()
                                                          for p in random]
    for number, (p, expected, answer) in enumerate(zip(cases + random, expected_counts, answers,
                                                       strict=True)):
        bits_flipped_fn.random = number >= len(cases)
        where = _("p = {p} (binary {p:b} → {next:b})").format(p=p, next=p + 1)
        count = answer_number(answer, where, integer=True)
        if count != expected:
            raise Wrong(_("{where}: expected {expected} flipped bits, got {answer}").format(
                where=where, expected=expected, answer=repr(answer)))
