"""Exercises of notebook 03 (RoPE in 2D): the rotation matrix and the complex-number score."""

from __future__ import annotations

import torch

from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_number,
    check_answer,
    compare,
    grader,
    matches,
    precision_note,
    randint,
    tell_apart,
)
from rope_lab.i18n import N_, _


def _float64(value):
    return torch.as_tensor(value, dtype=torch.float64)


def _rotation(angle: float) -> torch.Tensor:
    c, s = torch.cos(_float64(angle)), torch.sin(_float64(angle))
    return torch.stack((torch.stack((c, -s)), torch.stack((s, c))))


@grader("03.1", N_("the 2×2 rotation matrix"), answer="rotation_matrix")
def check_rotation_matrix(rotation_matrix: Learner, generator: torch.Generator) -> None:
    """03.1: ``rotation_matrix(angle) -> (2, 2)`` turns vectors counter-clockwise by angle.

    Checks the entries, then R(mθ)ᵀ R(nθ) = R((n − m)θ) for a few m, n.
    """
    angles = [0.0, torch.pi / 2, torch.pi / 4, 1.0, -2.5]
    random = [float(20 * torch.rand((), generator=generator, dtype=torch.float64) - 10)
              for _ in range(3)]
    for number, angle in enumerate(angles + random):
        rotation_matrix.random = number >= len(angles)
        answer = rotation_matrix(angle)
        failure = compare(answer, _rotation(angle), atol=1e-6, what=f"angle = {angle:.4f}")
        if failure is not None:
            if matches(answer, _rotation(-angle), atol=1e-6):
                failure += _(" (your matrix turns clockwise: R(π/2) must send (1, 0) to (0, 1))")
            raise Wrong(failure)
    pairs = [(0.3, m, n) for m, n in ((0, 0), (2, 5), (7, 3), (11, 11))]
    pairs += [(float(torch.rand((), generator=generator, dtype=torch.float64)),
               randint(generator, 0, 40), randint(generator, 0, 40)) for _ in range(2)]
    for number, (theta, m, n) in enumerate(pairs):
        rotation_matrix.random = number >= 4
        r_m = check_answer(rotation_matrix(m * theta), _rotation(m * theta), atol=1e-6,
                           what=f"angle = {m * theta:.4f}")
        r_n = check_answer(rotation_matrix(n * theta), _rotation(n * theta), atol=1e-6,
                           what=f"angle = {n * theta:.4f}")
        check_answer(r_m.double().T @ r_n.double(), _rotation((n - m) * theta), atol=1e-6,
                     what=_("R_{m}ᵀ R_{n} versus R_{difference} (θ = {theta:.3f})").format(
                         m=m, n=n, difference=n - m, theta=theta))


@grader("03.2", N_("the RoPE score in complex form"), answer="score_2d")
def check_score_2d(score_2d: Learner, generator: torch.Generator) -> None:
    """03.2: ``score_2d(q, k, m, n, theta) -> float`` via complex numbers.

    q, k are complex numbers; the answer must equal Re[(q e^{imθ}) · conj(k e^{inθ})], which
    is ⟨R_m q, R_n k⟩ for the real 2-vectors (Re, Im).
    """
    def draw(g):
        q = complex(*torch.randn(2, generator=g, dtype=torch.float64).tolist())
        k = complex(*torch.randn(2, generator=g, dtype=torch.float64).tolist())
        m, n = (int(v) for v in torch.randint(0, 50, (2,), generator=g))
        return q, k, m, n, float(torch.rand(1, generator=g, dtype=torch.float64))

    teaching = torch.Generator().manual_seed(3)
    cases = [(1 + 0j, 1 + 0j, 0, 0, 0.5), (1 + 0j, 0 + 1j, 1, 0, torch.pi / 2)]
    cases += [draw(teaching) for _ in range(6)]
    random = [draw(generator) for _ in range(4)]
    for number, (q, k, m, n, theta) in enumerate(cases + random):
        score_2d.random = number >= len(cases)
        where = f"q = {q:.3f}, k = {k:.3f}, m = {m}, n = {n}, θ = {theta:.3f}"
        answer = answer_number(score_2d(q, k, m, n, theta), where)
        r_q = _rotation(m * theta) @ _float64([q.real, q.imag])
        r_k = _rotation(n * theta) @ _float64([k.real, k.imag])
        expected = float(r_q @ r_k)
        allowed = 1e-6 * (1 + abs(expected))
        if not abs(answer - expected) <= allowed:
            shown_expected, shown_answer = tell_apart(expected, answer)
            raise Wrong(_("{where}: expected {expected}, got {answer}").format(
                where=where, expected=shown_expected, answer=shown_answer)
                + precision_note(None, expected, answer, allowed))
