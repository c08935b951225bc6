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

from rope_lab.rope import inv_freq

# exercise id ("05.1") → passed? Titles and the last feedback are kept for summary().
_results: dict[str, bool] = {}
_titles: dict[str, str] = {}
_feedback: dict[str, str] = {}


def report(exercise: str, title: str, failure: str | None) -> bool:
    """Record and print the verdict for one exercise. ``failure`` None means passed."""
    passed = failure is None
    _results[exercise] = passed
    _titles[exercise] = title
    _feedback[exercise] = failure or ""
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


def _notebook_title(number: str) -> str:
    from rope_lab.course import NOTEBOOKS

    titles = {n.filename[:2]: n.title for n in NOTEBOOKS}
    return f"notebook {number}: {titles[number]}" if number in titles else f"notebook {number}"


def summary(prefix: str | int = "") -> dict[str, bool]:
    """Print which exercises passed in this session, grouped by notebook, ready to paste.

    ``prefix`` picks exercises by id: ``"05"`` or ``5`` for notebook 05, ``""`` for all.
    A failed exercise shows its last feedback line, so a post asking for help says what
    went wrong. Returns exercise id → passed.
    """
    if isinstance(prefix, int):
        prefix = f"{prefix:02d}."
    chosen = {k: v for k, v in sorted(_results.items()) if k.startswith(prefix)}
    if not chosen:
        print("No exercises graded yet in this session"
              + (f" for {prefix!r}." if prefix else ".")
              + " Run the exercise cells (each calls a check_… function), then summary() again.")
        return chosen
    from rope_lab import __version__

    lines = [f"rope_lab {__version__} exercises, torch {torch.__version__}"]
    by_notebook: dict[str, list[str]] = {}
    for exercise in chosen:
        by_notebook.setdefault(exercise.split(".")[0], []).append(exercise)
    for number, exercises in by_notebook.items():
        passed = sum(chosen[e] for e in exercises)
        lines.append(f"{_notebook_title(number)} ({passed} of {len(exercises)} passed)")
        for exercise in exercises:
            mark = "✔" if chosen[exercise] else "✘"
            line = f"  {mark} {exercise} {_titles.get(exercise, '')}".rstrip()
            if not chosen[exercise] and _feedback.get(exercise):
                line += f": {_feedback[exercise]}"
            lines.append(line)
    if len(by_notebook) > 1:
        lines.append(f"total: {sum(chosen.values())} of {len(chosen)} passed")
    print("\n".join(lines))
    return chosen


# --- 00 start here ---------------------------------------------------------------------------


def _scaled_dot_reference(q, k):
    return (q * k).sum(-1) / q.shape[-1] ** 0.5


def check_scaled_dot(scaled_dot) -> bool:
    """00.1 — ``scaled_dot(q, k)``: the attention score q·k / √d over the last dimension.

    q, k: ``(..., d)``; returns ``(...)``.
    """
    title = "the scaled dot product"
    generator = torch.Generator().manual_seed(1)
    for shape in ((8,), (3, 16), (2, 5, 4)):
        q = torch.randn(shape, generator=generator)
        k = torch.randn(shape, generator=generator)
        answer, crash = call_learner(scaled_dot, q.clone(), k.clone())
        if crash:
            return report("00.1", title, crash)
        expected = _scaled_dot_reference(q, k)
        failure = compare(answer, expected, atol=1e-5, what=f"q, k of shape {tuple(shape)}")
        if failure and answer is not None and torch.as_tensor(answer).shape == expected.shape:
            d = shape[-1]
            answer = torch.as_tensor(answer).double()
            if torch.allclose(answer, expected.double() * d**0.5, atol=1e-5):
                failure += " — you did not divide by √d"
            elif torch.allclose(answer, expected.double() / d**0.5, atol=1e-5):
                failure += " — you divided by d; divide by √d"
        if failure:
            return report("00.1", title, failure)
    return report("00.1", title, None)


# --- 01 attention without position ----------------------------------------------------------


def check_attention(attention_fn) -> bool:
    """01.1 — ``attention_fn(q, k, v)`` = softmax(q kᵀ / √d) v, no mask, no position.

    q: ``(seq_q, d)``, k: ``(seq_k, d)``, v: ``(seq_k, d_v)`` → ``(seq_q, d_v)``.
    """
    from rope_lab.attention import attention

    title = "attention without position"
    generator = torch.Generator().manual_seed(11)
    for seq_q, seq_k, d, d_v in ((4, 4, 8, 8), (3, 5, 16, 2)):
        q = torch.randn(seq_q, d, generator=generator)
        k = torch.randn(seq_k, d, generator=generator)
        v = torch.randn(seq_k, d_v, generator=generator)
        answer, crash = call_learner(attention_fn, q.clone(), k.clone(), v.clone())
        if crash:
            return report("01.1", title, crash)
        expected = attention(q, k, v)
        failure = compare(answer, expected, atol=1e-5,
                          what=f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
        if failure and answer is not None:
            answer = torch.as_tensor(answer)
            if answer.shape == (seq_q, seq_k):
                failure += " — that is the weight matrix; multiply it by v"
            elif answer.shape == expected.shape:
                unscaled = torch.softmax(q @ k.T, dim=-1) @ v
                wrong_axis = torch.softmax(q @ k.T / d**0.5, dim=0) @ v
                if torch.allclose(answer, unscaled, atol=1e-5):
                    failure += " — the scores were not divided by √d"
                elif torch.allclose(answer, wrong_axis, atol=1e-5):
                    failure += (" — softmax ran over the queries (dim 0); each query's weights "
                                "over the keys must sum to 1 (dim −1)")
        if failure:
            return report("01.1", title, failure)
    return report("01.1", title, None)


def check_inverse_permutation(inverse_fn) -> bool:
    """01.2 — ``inverse_fn(perm)``: the permutation that undoes ``perm``.

    perm: ``(n,)`` long tensor holding 0 … n−1 once each; the answer ``inverse`` must satisfy
    ``x[perm][inverse] == x`` for every x.
    """
    title = "undo a permutation"
    generator = torch.Generator().manual_seed(12)
    # [1, 2, 0] first: the smallest permutation that is not its own inverse.
    cases = [torch.tensor([1, 2, 0]), torch.tensor([0]), torch.tensor([1, 0])]
    cases += [torch.randperm(n, generator=generator) for n in (5, 9, 32)]
    for perm in cases:
        answer, crash = call_learner(inverse_fn, perm.clone())
        if crash:
            return report("01.2", title, crash)
        if answer is None:
            return report("01.2", title, f"perm {perm.tolist()}: your function returned None")
        answer = torch.as_tensor(answer)
        x = torch.arange(len(perm)) * 10
        if answer.shape != perm.shape or answer.dtype.is_floating_point:
            return report("01.2", title, f"perm {perm.tolist()}: expected an integer tensor of "
                          f"shape {tuple(perm.shape)}, got {answer.dtype} {tuple(answer.shape)}")
        if not torch.equal(x[perm][answer], x):
            hint = ""
            if torch.equal(answer, perm):
                hint = " — you returned perm itself, which undoes only swaps"
            return report("01.2", title, f"perm {perm.tolist()}: x[perm][answer] should be "
                          f"x = {x.tolist()}, got {x[perm][answer].tolist()}{hint}")
    return report("01.2", title, None)


def check_causal_attention(causal_fn) -> bool:
    """01.3 — ``causal_fn(q, k, v)``: attention where query i sees keys 0 … i only.

    q, k: ``(seq, d)``, v: ``(seq, d_v)`` → ``(seq, d_v)``.
    """
    from rope_lab.attention import attention

    title = "causal attention"
    generator = torch.Generator().manual_seed(13)
    for seq, d, d_v in ((4, 8, 3), (7, 16, 5)):
        q = torch.randn(seq, d, generator=generator)
        k = torch.randn(seq, d, generator=generator)
        v = torch.randn(seq, d_v, generator=generator)
        answer, crash = call_learner(causal_fn, q.clone(), k.clone(), v.clone())
        if crash:
            return report("01.3", title, crash)
        expected = attention(q, k, v, mask="causal")
        failure = compare(answer, expected, atol=1e-5, what=f"seq = {seq}")
        if failure and answer is not None and torch.as_tensor(answer).shape == expected.shape:
            answer = torch.as_tensor(answer).double()
            if torch.allclose(answer, attention(q, k, v).double(), atol=1e-5):
                failure += " — no mask was applied: query 0 must see only key 0"
            elif torch.allclose(answer[-1], v[-1].double(), atol=1e-5):
                failure += (" — the last query sees only itself: the mask is flipped (keys "
                            "0 … i are allowed, keys after i are blocked)")
            elif not torch.allclose(answer[0], v[0].double(), atol=1e-5):
                failure += " — query 0 sees only key 0, so its output must be v[0] exactly"
        if failure:
            return report("01.3", title, failure)
    return report("01.3", title, None)

# --- 02 absolute position encodings -------------------------------------------------------


def check_sinusoidal_pe(sinusoidal_fn) -> bool:
    """02.1 — ``sinusoidal_fn(length, dim, base)``: PE(p)_{2i} = sin(p·ω_i),
    PE(p)_{2i+1} = cos(p·ω_i), ω_i = base^(−2i/dim), positions p = 0 … length−1.
    """
    from rope_lab.absolute import sinusoidal_pe

    title = "the sinusoidal encoding"
    for length, dim, base in ((8, 4, 10000.0), (50, 16, 100.0), (20, 6, 10.0)):
        answer, crash = call_learner(sinusoidal_fn, length, dim, base)
        if crash:
            return report("02.1", title, crash)
        expected = sinusoidal_pe(length, dim, base)
        failure = compare(answer, expected, atol=1e-4,
                          what=f"length = {length}, dim = {dim}, base = {base:g}")
        if failure and answer is not None and torch.as_tensor(answer).shape == expected.shape:
            failure += _sinusoidal_hint(torch.as_tensor(answer).double(), length, dim, base)
        if failure:
            return report("02.1", title, failure)
    return report("02.1", title, None)


def _sinusoidal_hint(answer, length, dim, base) -> str:
    p = torch.arange(length, dtype=torch.float64)[:, None]
    omega = inv_freq(dim, base, dtype=torch.float64)
    sin, cos = torch.sin(p * omega), torch.cos(p * omega)
    close = lambda table: torch.allclose(answer, table, atol=1e-4)
    if close(torch.stack((cos, sin), -1).flatten(-2)):
        return " — sin and cos are swapped: even features are sin, odd features cos"
    if close(torch.cat((sin, cos), -1)):
        return (" — all sines first, then all cosines; this course interleaves them "
                "(feature 2i is sin, 2i+1 is cos)")
    slow = base ** -(torch.arange(0, dim // 2, dtype=torch.float64) / dim)
    if close(torch.stack((torch.sin(p * slow), torch.cos(p * slow)), -1).flatten(-2)):
        return " — ω_i uses i/dim; the exponent is 2i/dim (i counts pairs)"
    shifted = p + 1
    if close(torch.stack((torch.sin(shifted * omega), torch.cos(shifted * omega)), -1)
             .flatten(-2)):
        return " — positions start at 0, not 1"
    return ""


def check_shift_map(shift_fn) -> bool:
    """02.2 — ``shift_fn(dim, k, base)``: the ``(dim, dim)`` matrix W_k with
    PE(p + k) = W_k PE(p) for every p (sinusoidal encoding, column vectors).
    """
    from rope_lab.absolute import sinusoidal_pe

    title = "the sinusoidal shift map"
    for dim, k, base in ((2, 1, 10000.0), (8, 3, 10000.0), (16, 10, 100.0)):
        answer, crash = call_learner(shift_fn, dim, k, base)
        if crash:
            return report("02.2", title, crash)
        if answer is None:
            return report("02.2", title, "your function returned None")
        answer = torch.as_tensor(answer).double()
        if answer.shape != (dim, dim):
            return report("02.2", title, f"dim = {dim}: expected a ({dim}, {dim}) matrix, got "
                          f"shape {tuple(answer.shape)}")
        pe = sinusoidal_pe(40 + k, dim, base).double()
        moved = pe[:40] @ answer.T  # row p: W_k PE(p)
        gap = (moved - pe[k:]).abs().amax(dim=-1)
        if float(gap.max()) > 1e-4:
            p = int(torch.nonzero(gap > 1e-4)[0])
            hint = ""
            if torch.allclose(pe[k:40] @ answer.T, pe[: 40 - k], atol=1e-4):
                hint = " — your matrix moves back: it takes PE(p) to PE(p − k) (transpose it)"
            return report("02.2", title, f"dim = {dim}, k = {k}, base = {base:g}: W_k PE({p}) "
                          f"differs from PE({p + k}) by {float(gap[p]):.3g}{hint}")
    return report("02.2", title, None)


def check_bits_flipped(bits_flipped_fn) -> bool:
    """02.3 — ``bits_flipped_fn(p)``: how many binary-PE features change from p to p + 1."""
    from rope_lab.absolute import binary_pe

    title = "bits flipped between neighbours"
    table = binary_pe(1025, 11)
    expected = (table[1:] != table[:-1]).sum(dim=-1)
    for p in range(1024):
        answer, crash = call_learner(bits_flipped_fn, p)
        if crash:
            return report("02.3", title, f"p = {p}: {crash}")
        try:
            matches = answer is not None and int(answer) == int(expected[p])
        except (TypeError, ValueError):
            matches = False
        if not matches:
            return report("02.3", title, f"p = {p} (binary {p:b} → {p + 1:b}): expected "
                          f"{int(expected[p])} flipped bits, got {answer!r}")
    return report("02.3", title, None)

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
