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


def _float64(value):
    return torch.as_tensor(value, dtype=torch.float64)


def _rotation(angle: float) -> torch.Tensor:
    c, s = torch.cos(_float64(angle)), torch.sin(_float64(angle))
    return torch.stack((torch.stack((c, -s)), torch.stack((s, c))))


def check_rotation_matrix(rotation_matrix) -> bool:
    """03.1: ``rotation_matrix(angle) -> (2, 2)`` turns vectors counter-clockwise by angle.

    Checks the entries, then R(mθ)ᵀ R(nθ) = R((n − m)θ) for a few m, n.
    """
    exercise, title = "03.1", "the 2×2 rotation matrix"
    for angle in (0.0, torch.pi / 2, torch.pi / 4, 1.0, -2.5):
        answer, failure = call_learner(rotation_matrix, angle)
        if failure is None:
            failure = compare(answer, _rotation(angle), atol=1e-6, what=f"angle = {angle:.4f}")
        if failure is not None:
            if answer is not None and compare(answer, _rotation(-angle), atol=1e-6,
                                              what="") is None:
                failure += " (your matrix turns clockwise: R(π/2) must send (1, 0) to (0, 1))"
            return report(exercise, title, failure)
    theta = 0.3
    for m, n in ((0, 0), (2, 5), (7, 3), (11, 11)):
        r_m, _ = call_learner(rotation_matrix, m * theta)
        r_n, _ = call_learner(rotation_matrix, n * theta)
        relative = _float64(r_m).T @ _float64(r_n)
        failure = compare(relative, _rotation((n - m) * theta), atol=1e-6,
                          what=f"R_{m}ᵀ R_{n} versus R_{n - m} (θ = {theta})")
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


def check_score_2d(score_2d) -> bool:
    """03.2: ``score_2d(q, k, m, n, theta) -> float`` via complex numbers.

    q, k are complex numbers; the answer must equal Re[(q e^{imθ}) · conj(k e^{inθ})], which
    is ⟨R_m q, R_n k⟩ for the real 2-vectors (Re, Im).
    """
    exercise, title = "03.2", "the RoPE score in complex form"
    generator = torch.Generator().manual_seed(3)
    cases = [(1 + 0j, 1 + 0j, 0, 0, 0.5), (1 + 0j, 0 + 1j, 1, 0, torch.pi / 2)]
    for _ in range(6):
        q = complex(*torch.randn(2, generator=generator, dtype=torch.float64).tolist())
        k = complex(*torch.randn(2, generator=generator, dtype=torch.float64).tolist())
        m, n = (int(v) for v in torch.randint(0, 50, (2,), generator=generator))
        cases.append((q, k, m, n, float(torch.rand(1, generator=generator))))
    for q, k, m, n, theta in cases:
        answer, failure = call_learner(score_2d, q, k, m, n, theta)
        if failure is None:
            r_q = _rotation(m * theta) @ _float64([q.real, q.imag])
            r_k = _rotation(n * theta) @ _float64([k.real, k.imag])
            expected = r_q @ r_k
            try:
                answer = _float64(complex(answer).real if isinstance(answer, complex)
                                  else answer)
            except (TypeError, ValueError, RuntimeError):
                return report(exercise, title, f"return a real number, got {answer!r}")
            failure = compare(answer.reshape(()), expected, atol=1e-6,
                              what=f"q = {q:.3f}, k = {k:.3f}, m = {m}, n = {n}, θ = {theta:.3f}")
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


# --- 04 RoPE in d dimensions --------------------------------------------------------------


def check_rotate_half(rotate_half) -> bool:
    """04.1: ``rotate_half(x)`` maps the halves (x_a, x_b) of the last dimension to (−x_b, x_a)."""
    from rope_lab import implementations

    exercise, title = "04.1", "rotate_half"
    generator = torch.Generator().manual_seed(4)
    inputs = [torch.arange(1.0, 5.0), torch.arange(1.0, 9.0).reshape(2, 4),
              torch.randn(2, 3, 5, 16, generator=generator)]
    for x in inputs:
        answer, failure = call_learner(rotate_half, x.clone())
        if failure is None:
            failure = compare(answer, implementations.rotate_half(x), atol=0.0,
                              what=f"x = {x.tolist()}" if x.numel() <= 8
                              else f"x of shape {tuple(x.shape)}")
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


def check_rope_interleaved(rope_interleaved) -> bool:
    """04.2: ``rope_interleaved(x, positions, base) -> like x``, pairs (2i, 2i+1)."""
    from rope_lab import rope

    exercise, title = "04.2", "interleaved RoPE"
    generator = torch.Generator().manual_seed(5)
    cases = [(torch.tensor([[1.0, 0.0]]), torch.tensor([1]), 10000.0),
             (torch.tensor([[1.0, 0.0, 0.0, 1.0]]), torch.tensor([3]), 100.0),
             (torch.randn(2, 7, 8, generator=generator, dtype=torch.float64),
              torch.arange(7), 10000.0),
             (torch.randn(5, 64, generator=generator, dtype=torch.float64),
              torch.tensor([0, 1, 100, 1000, 4095]), 500000.0)]
    for x, positions, base in cases:
        answer, failure = call_learner(rope_interleaved, x.clone(), positions, base)
        if failure is None:
            expected = rope.apply_rope(x, positions, base=base, layout="interleaved")
            label = (f"x = {x.tolist()}, positions = {positions.tolist()}, base = {base:g}"
                     if x.numel() <= 4 else f"x of shape {tuple(x.shape)}, base = {base:g}")
            failure = compare(answer, expected, atol=1e-5, what=label)
            if failure is not None and x.numel() <= 4:
                swapped = rope.apply_rope(x, positions, base=base, layout="half")
                if compare(answer, swapped, atol=1e-5, what="") is None and x.shape[-1] > 2:
                    failure += " (you paired (i, i + d/2): that is the half layout)"
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


def check_layout_permutation(layout_permutation) -> bool:
    """04.3: ``layout_permutation(dim) -> LongTensor p`` with
    ``apply_rope(x, layout="interleaved")[..., p] == apply_rope(x[..., p], layout="half")``.
    """
    from rope_lab import rope

    exercise, title = "04.3", "the permutation between layouts"
    generator = torch.Generator().manual_seed(6)
    for dim in (2, 4, 8, 64):
        p, failure = call_learner(layout_permutation, dim)
        if failure is None:
            p = torch.as_tensor(p)
            if p.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
                failure = f"dim = {dim}: return integer indices, got dtype {p.dtype}"
            elif p.shape != (dim,) or sorted(p.tolist()) != list(range(dim)):
                failure = (f"dim = {dim}: expected a permutation of 0 … {dim - 1}, "
                           f"got {p.tolist()}")
        if failure is None:
            x = torch.randn(6, dim, generator=generator, dtype=torch.float64)
            left = rope.apply_rope(x, layout="interleaved")[..., p]
            right = rope.apply_rope(x[..., p], layout="half")
            failure = compare(left, right, atol=1e-9,
                              what=f"dim = {dim}, p = {p.tolist()}: interleaved-then-permute "
                              "versus permute-then-half")
        if failure is not None:
            return report(exercise, title, failure)
    return report(exercise, title, None)


# --- 05 long-range decay ------------------------------------------------------------------

# --- 06 length extrapolation --------------------------------------------------------------

# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
