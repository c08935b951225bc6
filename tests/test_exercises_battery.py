"""Every grader against a battery of learners: the solutions pass, everything else fails.

The correct learners are the worked solutions, read from ``notebooks/solutions/*.ipynb`` so
the two cannot drift apart, plus variants the exercise text allows. The hostile learners
crash, return the wrong type, NaN, inf, complex or the wrong shape, zero their inputs,
replay memorised answers, call a forbidden package function or never return; each must get
a ✘ verdict in one printed line, no traceback, in bounded time.
"""

from __future__ import annotations

import json
import math
import re
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from test_exercises_05 import bisection  # the monotone-search mistake of 05.3

import rope_lab as rl
from rope_lab import decay, exercises, hf, nd
from rope_lab import linear_attention as la
from rope_lab.course import notebook_files
from rope_lab.exercises import grading

SOLUTIONS = Path(__file__).resolve().parent.parent / "notebooks" / "solutions"
NAMES = [grader.__name__ for grader in exercises.GRADERS]


def _solutions() -> dict:
    """check_* name → the solution notebook's function it asserts."""
    found = {}
    for path in notebook_files(SOLUTIONS):
        namespace: dict = {}
        exec("import torch\nimport rope_lab as rl\nfrom rope_lab import exercises\n", namespace)
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or "google.colab" in source:
                continue
            if "setup_notebook" in source:  # the imports, without seeding the session
                source = "\n".join(line for line in source.splitlines()
                                   if "setup_notebook" not in line)
            asserted = re.findall(r"assert exercises\.(check_\w+)\((\w+)\)", source)
            code = [line for line in source.splitlines()
                    if not re.match(r"(assert |rl\.show_source|exercises\.)", line)]
            exec("\n".join(code), namespace)
            for checker, name in asserted:
                found[checker] = namespace[name]
    return found


SOLUTION = _solutions()
# the honest 05.3 scan takes a second per case; the battery builds its answers faster
REFERENCE = {**SOLUTION, "check_minimum_base": decay.minimum_base}


@pytest.fixture(autouse=True)
def _worker_ready(grader_worker):
    """Each grading's time is its own, not a fresh worker's start-up."""


def _grade(capsys, name, learner, **kwargs):
    capsys.readouterr()
    start = time.perf_counter()
    passed = getattr(exercises, name)(learner, **kwargs)
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    return passed, captured.out, captured.err, elapsed


def _assert_failed_cleanly(passed, out, err, elapsed, limit=None):
    """A one-line ✘, no traceback, within the graders' promise: the time limit + 2 s (a
    hostile answer that returns at once still waits for its worker to start, which took
    5.0–6.3 s on a 2-core machine at load 7)."""
    limit = grading.TIME_LIMIT_S + 2.0 if limit is None else limit
    assert not passed and isinstance(passed, grading.Verdict)
    assert out.startswith("✘ Exercise ") and out.count("\n") == 1, out
    assert "Traceback" not in out + err
    assert elapsed < limit


def test_every_grader_has_a_solution():
    assert len(NAMES) == 32
    assert set(SOLUTION) == set(NAMES)


def test_each_grader_names_the_function_its_notebook_asks_for():
    # `python -m rope_lab.exercises grade` finds an answer by grader.answer when a student's
    # notebook no longer calls the grader
    found = {}
    for path in notebook_files(SOLUTIONS.parent, recursive=True):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                for checker, name in re.findall(r"exercises\.(check_\w+)\((\w+)",
                                                "".join(cell["source"])):
                    found.setdefault(checker, set()).add(name)
    assert found == {name: {getattr(exercises, name).answer} for name in NAMES}


# --- correct learners --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_solution_passes_on_fresh_random_inputs(name, capsys):
    for _ in range(3):  # a fresh seed each time
        passed, out, err, elapsed = _grade(capsys, name, SOLUTION[name])
        assert passed, out
        assert "✔ Exercise" in out and "Traceback" not in err
        assert elapsed < 5


def _rope_float32_angles(x, positions, base):  # the text allows angles in float32
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = positions.to(torch.float32)[:, None] * theta
    cos, sin = angles.cos(), angles.sin()
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def _rope_float16_angles(x, positions, base):  # too narrow: whole turns lost past m ≈ 2048
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = (positions.to(torch.float16)[:, None] * theta.half()).double()
    even, odd = x[..., 0::2].double(), x[..., 1::2].double()
    rotated = torch.stack((even * angles.cos() - odd * angles.sin(),
                           even * angles.sin() + odd * angles.cos()), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def _axial_rope_as_written(x, positions, base):
    d = x.shape[-1]
    speeds = rl.inv_freq(d // 2, base)
    zeros = torch.zeros_like(speeds)
    x = rl.apply_rope(x, positions[:, 0], inv_freq=torch.cat((speeds, zeros)))
    return rl.apply_rope(x, positions[:, 1], inv_freq=torch.cat((zeros, speeds)))


def _score_curve_float32_by_hand(q, k, distances, base):
    d = q.shape[-1]
    angles = distances.float()[:, None] * rl.inv_freq(d, base)
    q1, q2, k1, k2 = q[: d // 2], q[d // 2:], k[: d // 2], k[d // 2:]
    return ((q1 * k1 + q2 * k2) * angles.cos() + (q2 * k1 - q1 * k2) * angles.sin()).sum(-1)


def _score_curve_complex64(q, k, distances, base):
    d = q.shape[-1]
    theta = base ** (-torch.arange(0, d, 2).float() / d)
    turns = torch.polar(torch.ones(len(distances), d // 2), distances.float()[:, None] * theta)
    q_pairs = torch.complex(q[: d // 2], q[d // 2:])
    k_pairs = torch.complex(k[: d // 2], k[d // 2:])
    return (q_pairs.conj() * k_pairs * turns).real.sum(-1)


def _rope_in_place(x, positions, base):  # reshapes and overwrites its own input
    out = SOLUTION["check_rope_interleaved"](x.clone(), positions, base)
    x.copy_(out)
    positions.zero_()
    return x


def _complex_rope_in_place(x, cos, sin):
    out = SOLUTION["check_complex_rope"](x, cos, sin)
    cos.zero_()
    sin.zero_()
    return out


VARIANTS = {
    "check_scaled_dot": [lambda q, k: torch.einsum("...d,...d->...", q, k)
                         / math.sqrt(q.shape[-1])],
    "check_inverse_permutation": [torch.argsort, lambda perm: np.argsort(perm.numpy())],
    "check_rotate_half": [lambda x: torch.cat((-x[..., x.shape[-1] // 2:],
                                               x[..., :x.shape[-1] // 2]), dim=-1)],
    "check_rope_interleaved": [_rope_float32_angles, _rope_in_place],
    "check_complex_rope": [_complex_rope_in_place],
    "check_score_2d": [lambda *args: np.float64(SOLUTION["check_score_2d"](*args))],
    "check_full_turn_pairs": [
        lambda d, b, L: (2 * math.pi / rl.inv_freq(d, b, dtype=torch.float64) <= L).sum(),
        lambda d, b, L: float((2 * math.pi / rl.inv_freq(d, b) <= L).sum())],
    "check_bits_flipped": [lambda p: torch.tensor(bin(p ^ (p + 1)).count("1"))],
    "check_ntk_base": [lambda b, d, s: torch.tensor(b * s ** (d / (d - 2)), dtype=torch.float64)],
    "check_layout_permutation": [lambda d: torch.arange(d).reshape(-1, 2).T.flatten()],
    "check_sinusoidal_pe": [lambda length, dim, base: SOLUTION["check_sinusoidal_pe"](
        length, dim, base).double()],
    "check_p_rope_speeds": [lambda d, b, p: SOLUTION["check_p_rope_speeds"](d, b, p).float(),
                            # torch.round takes halves to even too
                            lambda d, b, p: rl.inv_freq(d, b, dtype=torch.float64).where(
                                torch.arange(d // 2) < torch.tensor(p * d / 2).round(), 0.0)],
    "check_seed_verdict": [lambda a, b: torch.tensor(SOLUTION["check_seed_verdict"](a, b)),
                           lambda a, b: np.int64(SOLUTION["check_seed_verdict"](a, b)),
                           lambda a, b: Decimal(SOLUTION["check_seed_verdict"](a, b)),
                           lambda a, b: Fraction(SOLUTION["check_seed_verdict"](a, b))],
    # 11.1: padding slots may hold anything; int32 and uint64 are integer tensors too
    "check_position_ids": [lambda mask: mask.long().cumsum(-1) - 1,
                           lambda mask: (mask.cumsum(-1) - 1).clamp(min=0).int(),
                           lambda mask: (mask.cumsum(-1) - 1).clamp(min=0).to(torch.uint64),
                           lambda mask: (mask.cumsum(-1) - 1).clamp(min=0).numpy().astype(
                               np.uint64)],
    "check_packed_positions": [lambda lengths: np.array([[p for n in lengths
                                                          for p in range(n)]]),
                               lambda lengths: torch.tensor([[p for n in lengths
                                                              for p in range(n)]])],
    "check_partial_rotary": [lambda q, k, cos, sin: tuple(
        t.float() for t in SOLUTION["check_partial_rotary"](q.double(), k.double(),
                                                            cos.double(), sin.double()))],
    # 08.1 exactly as its text says: speeds rl.inv_freq(d // 2, base), float32 (issue 35: was
    # refused with "expected -0.449937, got -0.449937")
    "check_axial_rope": [_axial_rope_as_written],
    # 05.1 in float32 throughout, three ways
    "check_score_curve": [lambda q, k, d, b: SOLUTION["check_score_curve"](q, k, d, b).float(),
                          _score_curve_float32_by_hand, _score_curve_complex64],
    # 06.1 in float32, the ways a learner writes base^(−2i/d)
    "check_position_interpolation": [
        lambda d, b, s: rl.inv_freq(d, b) / s,
        lambda d, b, s: b ** (-torch.arange(0, d, 2).float() / d) / s,
        lambda d, b, s: torch.exp(-torch.arange(0, d, 2).float() * math.log(b) / d) / s],
    # 10.1 / 10.2: float32 speeds are as good as float64 ones
    "check_config_inv_freq": [lambda c: SOLUTION["check_config_inv_freq"](c).float()],
    "check_longrope_inv_freq": [lambda c, n: SOLUTION["check_longrope_inv_freq"](c, n).float()],
}


@pytest.mark.parametrize(("name", "index"),
                         [(n, i) for n, variants in VARIANTS.items() for i in range(len(variants))])
def test_a_correct_variant_passes(name, index, capsys):
    passed, out, _, _ = _grade(capsys, name, VARIANTS[name][index])
    assert passed, out


# --- plausible wrong answers: three per grader ----------------------------------------------


def _attention(q, k, v, dim=-1, scale=True, allowed=None):
    scores = q @ k.T / (q.shape[-1] ** 0.5 if scale else 1)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=dim) @ v


def _sinusoid(order="stack", shift=0, exponent=2):
    def pe(length, dim, base):
        p = torch.arange(length, dtype=torch.float64)[:, None] + shift
        omega = base ** -(exponent * torch.arange(dim // 2, dtype=torch.float64) / dim)
        sin, cos = torch.sin(p * omega), torch.cos(p * omega)
        if order == "swapped":
            return torch.stack((cos, sin), -1).flatten(-2)
        if order == "blocks":
            return torch.cat((sin, cos), -1)
        return torch.stack((sin, cos), -1).flatten(-2)
    return pe


def _rotation(c, s, t=False):
    matrix = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    return matrix.T if t else matrix


def _rope_interleaved(shift=0, base=None, layout="interleaved"):
    def rope(x, positions, b):
        return rl.apply_rope(x, positions + shift, base=base or b, layout=layout)
    return rope


def _axial(flip=False, only_x=False):
    def axial(x, positions, base):
        speeds = rl.inv_freq(x.shape[-1] // 2, base, dtype=torch.float64)
        zeros = torch.zeros_like(speeds)
        positions = positions.flip(-1) if flip else positions
        x = rl.apply_rope(x, positions[:, 0], inv_freq=torch.cat((speeds, zeros)))
        if only_x:
            return x
        return rl.apply_rope(x, positions[:, 1], inv_freq=torch.cat((zeros, speeds)))
    return axial


def _recurrent(causal=True, rotate_denominator=False, rope_ever=True):
    def recurrent(q, k, v, rope):
        rope = rope and rope_ever
        weights = la.linear_attention_weights(q, k, causal=causal, rope=rope,
                                              rotate_denominator=rotate_denominator and rope)
        return weights @ v
    return recurrent


def _mrope(shift_vision=True, after_from_index=False):
    def ids(text_before, grid_thw, text_after):
        frames, rows, columns = grid_thw
        before = torch.arange(text_before)[:, None].repeat(1, 3)
        t, h, w = torch.meshgrid(torch.arange(frames), torch.arange(rows), torch.arange(columns),
                                 indexing="ij")
        vision = torch.stack((t.flatten(), h.flatten(), w.flatten()), -1)
        vision = vision + (text_before if shift_vision else 0)
        start = text_before + len(vision) if after_from_index else int(vision.max()) + 1
        after = torch.arange(start, start + text_after)[:, None].repeat(1, 3)
        return torch.cat((before, vision, after))
    return ids


def _complex(x, cos, sin, conjugate=False):
    pairs = torch.view_as_complex(x.contiguous().unflatten(-1, (-1, 2)))
    turn = torch.complex(cos, -sin if conjugate else sin)
    return torch.view_as_real(pairs * turn).flatten(-2)


def _popcount(p):
    return bin(p).count("1")


def _full_head_pairs(q, k, cos, sin):  # 11.3's snippet: pairs (i, i + d/2) over the head
    d, r = q.shape[-1], cos.shape[-1]
    ones = cos.new_ones(*cos.shape[:-1], (d - r) // 2)
    cos = torch.cat((cos[..., : r // 2], ones, cos[..., : r // 2], ones), -1).unsqueeze(1)
    sin = torch.cat((sin[..., : r // 2], 0 * ones, sin[..., : r // 2], 0 * ones), -1).unsqueeze(1)
    return q * cos + rl.rotate_half(q) * sin, k * cos + rl.rotate_half(k) * sin


def _partial_rotary_wrong(interleaved=False, rotate_k=True, last=False):
    def apply(q, k, cos, sin):
        r = cos.shape[-1]
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)

        def rotate(x):
            part = x[..., -r:] if last else x[..., :r]
            if interleaved:
                c2 = c[..., : r // 2].repeat_interleave(2, -1)
                s2 = s[..., : r // 2].repeat_interleave(2, -1)
                swapped = torch.stack((-part[..., 1::2], part[..., 0::2]), -1).flatten(-2)
                turned = part * c2 + swapped * s2
            else:
                turned = part * c + rl.rotate_half(part) * s
            if last:
                return torch.cat((x[..., : x.shape[-1] - r], turned), -1)
            return torch.cat((turned, x[..., r:]), -1)

        return rotate(q), rotate(k) if rotate_k else k
    return apply


def _config_wrong(partial=True, head_dim=True, multiply=False, old_schema=True):
    def config_inv_freq(config):
        block = ((config.get("rope_scaling") if old_schema else None)
                 or config.get("rope_parameters") or {})
        kind = block.get("rope_type", block.get("type", "default"))
        base = block.get("rope_theta", config.get("rope_theta", 10000.0))
        share = (block.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
                 if partial else 1.0)
        head = ((config.get("head_dim") if head_dim else None)
                or config["hidden_size"] // config["num_attention_heads"])
        dim = int(head * share)
        theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        if kind != "linear":
            return theta
        return theta * block["factor"] if multiply else theta / block["factor"]
    return config_inv_freq


def _longrope(config, seq_len, switch, *, original_from_longest=False, heads=None):
    block = config.get("rope_scaling") or config["rope_parameters"]
    base = block.get("rope_theta", config.get("rope_theta", 10000.0))
    original = (config.get("original_max_position_embeddings")
                or block["original_max_position_embeddings"])
    if original_from_longest:  # Phi-3-mini-128k: 131072 = 32 × 4096
        original = config["max_position_embeddings"] // 32
    head = config["hidden_size"] // (heads or config["num_attention_heads"])
    theta = base ** (-torch.arange(0, head, 2, dtype=torch.float64) / head)
    factors = block["long_factor" if switch(seq_len, original, config) else "short_factor"]
    return theta / torch.tensor(factors, dtype=torch.float64)


WRONG = {
    "check_scaled_dot": [lambda q, k: (q * k).sum(-1),
                         lambda q, k: (q * k).sum(-1) / q.shape[-1],
                         lambda q, k: (q * k).sum(-1) / q.shape[0] ** 0.5],
    "check_attention": [lambda q, k, v: _attention(q, k, v, scale=False),
                        lambda q, k, v: _attention(q, k, v, dim=0),
                        lambda q, k, v: torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1)],
    "check_inverse_permutation": [lambda perm: perm, lambda perm: perm.flip(0),
                                  lambda perm: torch.arange(len(perm))],
    "check_causal_attention": [
        _attention,
        lambda q, k, v: _attention(q, k, v, allowed=torch.ones(len(q), len(k)).bool().triu()),
        lambda q, k, v: _attention(q, k, v, allowed=torch.ones(len(q), len(k)).bool().tril(-1))],
    "check_sinusoidal_pe": [_sinusoid("swapped"), _sinusoid("blocks"), _sinusoid(shift=1),
                            _sinusoid(exponent=1)],
    "check_shift_map": [lambda d, k, b: SOLUTION["check_shift_map"](d, k, b).T,
                        lambda d, k, b: torch.eye(d),
                        lambda d, k, b: SOLUTION["check_shift_map"](d, k + 1, b)],
    "check_bits_flipped": [lambda p: 1, _popcount, lambda p: _popcount(p + 1)],
    "check_rotation_matrix": [
        lambda a: _rotation(math.cos(a), math.sin(a), t=True),
        lambda a: _rotation(math.cos(math.radians(a)), math.sin(math.radians(a))),
        lambda a: torch.tensor([[math.cos(a), math.sin(a)], [math.sin(a), math.cos(a)]],
                               dtype=torch.float64)],
    "check_score_2d": [
        lambda q, k, m, n, t: SOLUTION["check_score_2d"](q, k, n, m, t),
        lambda q, k, m, n, t: (q * complex(math.cos(m * t), math.sin(m * t))
                               * (k * complex(math.cos(n * t), math.sin(n * t))).conjugate()).imag,
        lambda q, k, m, n, t: (q * k * complex(math.cos((m + n) * t),
                                               math.sin((m + n) * t))).real],
    "check_rotate_half": [lambda x: -rl.rotate_half(x), lambda x: x.flip(-1),
                          lambda x: torch.cat((x[..., x.shape[-1] // 2:],
                                               -x[..., :x.shape[-1] // 2]), -1)],
    "check_rope_interleaved": [_rope_interleaved(layout="half"), _rope_interleaved(shift=1),
                               _rope_interleaved(base=10000.0), _rope_float16_angles],
    "check_layout_permutation": [
        lambda d: torch.arange(d),
        lambda d: torch.argsort(torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))),
        lambda d: torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2))).double()],
    "check_score_curve": [
        lambda q, k, d, base: decay.score_curve(q, k, d, base=base, layout="interleaved"),
        lambda q, k, d, base: (q @ k).expand(len(d)),
        lambda q, k, d, base: decay.score_curve(q, k, -d, base=base)],
    "check_bound_breaker": [
        lambda q, distance, base: q,
        lambda q, distance, base: 2 * rl.apply_rope(q[None], [-distance], base=base)[0],
        lambda q, distance, base: rl.apply_rope(q[None], [distance], base=base)[0]],
    "check_minimum_base": [lambda length, dim: 10.0, bisection,
                           lambda length, dim: 1.05 * decay.minimum_base(length, dim)],
    "check_position_interpolation": [
        lambda d, b, s: rl.inv_freq(d, b, dtype=torch.float64) * s,
        lambda d, b, s: rl.inv_freq(d, b, dtype=torch.float64),
        lambda d, b, s: b ** -(torch.arange(d // 2, dtype=torch.float64) / d) / s],
    "check_ntk_base": [lambda b, d, s: b * s, lambda b, d, s: b * s ** ((d - 2) / d),
                       lambda b, d, s: b * s**2],
    "check_full_turn_pairs": [
        lambda d, b, L: d // 2,
        lambda d, b, L: int((rl.inv_freq(d, b, dtype=torch.float64) <= L).sum()),
        lambda d, b, L: int((2 * math.pi / rl.inv_freq(d, b, dtype=torch.float64) >= L).sum())],
    "check_recurrent_linear_attention": [_recurrent(causal=False),
                                         _recurrent(rotate_denominator=True),
                                         _recurrent(rope_ever=False)],
    "check_non_positive_normalizer": [lambda: (torch.zeros(5, 4),) * 2,
                                      lambda: (torch.zeros(9, 4),) * 2,
                                      lambda: (torch.zeros(5, 2),) * 2],
    "check_axial_rope": [_axial(flip=True), _axial(only_x=True),
                         lambda x, positions, base: x],
    "check_mrope_positions": [lambda b, g, a: torch.arange(b + math.prod(g) + a)[:, None]
                              .repeat(1, 3), _mrope(shift_vision=False),
                              _mrope(after_from_index=True)],
    "check_rope_bytes": [lambda b, h, s, d, w: b * h * s * d * w,
                         lambda b, h, s, d, w: 3 * b * h * s * d * w,
                         lambda b, h, s, d, w: 2 * b * h * s * d],
    "check_attainable": [lambda i, p, bw: i * bw, lambda i, p, bw: max(p, i * bw),
                         lambda i, p, bw: p],
    "check_complex_rope": [lambda x, cos, sin: rl.apply_rope(x),
                           lambda x, cos, sin: _complex(x, cos, sin, conjugate=True),
                           lambda x, cos, sin: x],
    # 12.1: stops the fastest pairs; spreads θ over p·d features (partial rotary); plain RoPE
    "check_p_rope_speeds": [
        lambda d, b, p: rl.inv_freq(d, b, dtype=torch.float64).flip(0).where(
            torch.arange(d // 2) < round(p * d / 2), 0.0).flip(0),
        lambda d, b, p: torch.cat((b ** (-torch.arange(0, 2 * round(p * d / 2), 2,
                                                       dtype=torch.float64) / (p * d)),
                                   torch.zeros(d // 2 - round(p * d / 2), dtype=torch.float64))),
        lambda d, b, p: rl.inv_freq(d, b, dtype=torch.float64)],
    # 12.2: compares means; counts touching ranges as apart; looks at the first seed only
    "check_seed_verdict": [
        lambda a, b: int((a.mean() > b.mean()).item()) - int((a.mean() < b.mean()).item()),
        lambda a, b: -1 if a.max() <= b.min() else 1 if a.min() >= b.max() else 0,
        lambda a, b: int((a[0] > b[0]).item()) - int((a[0] < b[0]).item())],
    # 11.1: numbers the padding too; off by one; sums over the batch
    "check_position_ids": [lambda mask: torch.arange(mask.shape[1]).expand_as(mask).clone(),
                           lambda mask: mask.long().cumsum(-1),
                           lambda mask: mask.long().cumsum(0) - 1],
    # 11.2: never restarts; restarts at 1; forgets the batch dimension
    "check_packed_positions": [lambda lengths: torch.arange(sum(lengths))[None],
                               lambda lengths: torch.cat([torch.arange(1, n + 1)
                                                          for n in lengths])[None],
                               lambda lengths: torch.cat([torch.arange(n) for n in lengths])],
    # 11.3: the notebook's full-head pairing; interleaved pairs; k left alone; the last r
    "check_partial_rotary": [_full_head_pairs, _partial_rotary_wrong(interleaved=True),
                             _partial_rotary_wrong(rotate_k=False),
                             _partial_rotary_wrong(last=True)],
    # 10.1: ignores partial_rotary_factor; ignores head_dim; multiplies by the factor;
    # reads only the transformers 5 block
    "check_config_inv_freq": [_config_wrong(partial=False), _config_wrong(head_dim=False),
                              _config_wrong(multiply=True), _config_wrong(old_schema=False)],
    # 10.2: switches at seq_len ≥ L; always long; switches at max_position_embeddings
    "check_longrope_inv_freq": [
        lambda c, n: _longrope(c, n, switch=lambda n, L, c: n >= L),
        lambda c, n: _longrope(c, n, switch=lambda n, L, c: True),
        lambda c, n: _longrope(c, n, switch=lambda n, L, c: n > c["max_position_embeddings"])],
}



def _p_rope(rounding):
    def speeds(d, b, p):
        return rl.inv_freq(d, b, dtype=torch.float64).where(
            torch.arange(d // 2) < rounding(p * d / 2), 0.0)
    return speeds


def _seed_verdict(a, b):
    return -1 if a.max() < b.min() else 1 if a.min() > b.max() else 0


def _normalizer_pair(value):
    def answer():  # φ(1e300) squared overflows; φ(−1000) = e^−1000 is 0 in float64
        q = torch.full((5, 4), value, dtype=torch.float64)
        return q, q.clone()
    return answer


# The honest mistakes a hostile review found passing (issue 28, and 12.1's truncation from
# issue 30), each with the words its feedback must contain. They join WRONG below and are
# run over 200 seeds each.
# issue 35's honest mistakes of precision and range, each once accepted on most seeds
def _pi_without_the_slowest(dim, base, factor):  # "too slow to matter": they still turn
    speeds = rl.inv_freq(dim, base, dtype=torch.float64) / factor
    speeds[speeds < 1e-7] = 0.0
    return speeds


def _rope_bytes_in_int32(batch, heads, seq, head_dim, width):  # wraps past 2^31 bytes
    return torch.tensor(batch, dtype=torch.int32) * heads * seq * head_dim * width * 2


def _rope_bytes_in_float32(batch, heads, seq, head_dim, width):  # rounds past 2^24
    return torch.tensor(float(batch)) * heads * seq * head_dim * width * 2


def _score_curve_in_float16(q, k, distances, base):
    return SOLUTION["check_score_curve"](q, k, distances, base).half()


REVIEWED = {
    ("check_position_interpolation", "slowest speeds set to 0"): (
        _pi_without_the_slowest, "the slowest pairs still turn"),
    ("check_rope_bytes", "an int32 count"): (_rope_bytes_in_int32, "wrapped around"),
    ("check_rope_bytes", "a float32 count"): (
        _rope_bytes_in_float32, "float32 holds whole numbers exactly only up to 2^24"),
    ("check_score_curve", "returned as float16"): (
        _score_curve_in_float16, "float16 keeps about 3 significant digits"),
    ("check_rotate_half", "float32 for float64 x"): (
        lambda x: torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), -1).float(),
        "return x's dtype"),
    ("check_position_ids", "index minus the first real token"): (
        lambda mask: torch.arange(mask.shape[1]) - mask.long().argmax(-1, keepdim=True),
        "a 0 between real tokens is not a token"),
    ("check_longrope_inv_freq", "original = max_position_embeddings // 32"): (
        lambda c, n: _longrope(c, n, switch=lambda n, L, c: n > L, original_from_longest=True),
        "max_position_embeddings // 32 would be"),
    ("check_longrope_inv_freq", "two heads, hard-coded"): (
        lambda c, n: _longrope(c, n, switch=lambda n, L, c: n > L, heads=2),
        "the head dim is hidden_size // num_attention_heads"),
    ("check_p_rope_speeds", "int(p·d/2)"): (
        _p_rope(lambda x: int(x)), "that drops the fraction"),
    ("check_p_rope_speeds", "halves rounded down"): (
        _p_rope(lambda x: math.ceil(x - 0.5)), "Python's round goes to the even neighbour"),
    ("check_p_rope_speeds", "halves rounded up"): (
        _p_rope(lambda x: math.floor(x + 0.5)), "Python's round goes to the even neighbour"),
    ("check_seed_verdict", "the first 3 seeds only"): (
        lambda a, b: _seed_verdict(a[:3], b[:3]), "you looked at the first 3 seeds only"),
    ("check_packed_positions", "a token for an empty document"): (
        lambda lengths: torch.cat([torch.arange(max(n, 1)) for n in lengths])[None],
        "an empty document (length 0)"),
    ("check_non_positive_normalizer", "q = k = 1e300"): (
        _normalizer_pair(1e300), "overflow to inf or NaN"),
    ("check_non_positive_normalizer", "φ underflowed to 0"): (
        _normalizer_pair(-1000.0), "φ underflowed to 0"),
}
for (_name, _label), (_learner, _hint) in REVIEWED.items():
    WRONG[_name].append(_learner)


def test_every_grader_has_three_wrong_answers():
    assert set(WRONG) == set(NAMES)
    assert all(len(answers) >= 3 for answers in WRONG.values())


@pytest.mark.parametrize(("name", "index"),
                         [(n, i) for n, answers in WRONG.items() for i in range(len(answers))])
def test_a_plausible_wrong_answer_fails(name, index, capsys):
    passed, out, err, elapsed = _grade(capsys, name, WRONG[name][index])
    _assert_failed_cleanly(passed, out, err, elapsed)
    # caught on the fixed cases, which come before the random ones and do not depend on the
    # seed: so caught whatever the seed, not by luck
    assert "[random inputs" not in out, out


def _verdict_for_seed(name, learner, seed):
    """One grading in this process, without printing: the feedback, or None if it passed.
    (The fast path for running one answer over hundreds of seeds.)"""
    check = getattr(exercises, name).__wrapped__
    return grading._verdict(check, grading.Learner(learner, ""),
                            seed)


@pytest.mark.parametrize(("name", "label"), list(REVIEWED))
def test_a_reviewed_mistake_is_named_on_every_seed(name, label):
    learner, hint = REVIEWED[(name, label)]
    for seed in range(200):
        failure = _verdict_for_seed(name, learner, seed)
        assert failure is not None, f"{label} passed {name} with seed={seed}"
        assert hint in failure, f"{label}, seed={seed}: {failure}"


@pytest.mark.parametrize(("name", "index"), [
    ("check_axial_rope", 0), ("check_score_curve", 1), ("check_score_curve", 2),
    ("check_position_interpolation", 2)])
def test_a_float32_variant_passes_on_many_seeds(name, index):
    for seed in range(40):
        assert _verdict_for_seed(name, VARIANTS[name][index], seed) is None, f"seed={seed}"


@pytest.mark.parametrize("name", NAMES)
def test_the_solution_passes_on_many_seeds(name):
    for seed in range(2 if name == "check_minimum_base" else 40):
        assert _verdict_for_seed(name, REFERENCE[name], seed) is None, f"seed={seed}"


# --- hostile learners -----------------------------------------------------------------------


def _map(answer, tensor_fn, number_fn):
    if isinstance(answer, tuple):
        return tuple(_map(a, tensor_fn, number_fn) for a in answer)
    if isinstance(answer, torch.Tensor):
        return tensor_fn(answer)
    return number_fn(answer)


def _twisted(name, tensor_fn, number_fn):
    reference = REFERENCE[name]  # the learner travels to the worker with this one function,
                                 # not every solution (0.19 s of pickling per grading)

    def learner(*args):
        return _map(reference(*args), tensor_fn, number_fn)
    return learner


def _zero_inputs_then_answer(name):
    """Zeroes its tensor inputs and answers for those: right only if the grader reads them."""
    reference = REFERENCE[name]  # one function travels to the worker, not every solution

    def learner(*args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        for tensor in tensors:
            tensor.zero_()
        answer = reference(*args)
        return answer if tensors else _map(answer, torch.zeros_like, lambda a: 0)
    return learner


def _raises(*args):
    raise ValueError("a bug on line one\nand a second line of message")


HOSTILE = {
    "raises": lambda name: _raises,
    "zero division": lambda name: lambda *args: 1 / 0,
    "returns None": lambda name: lambda *args: None,
    "returns a str": lambda name: lambda *args: "the answer",
    "returns a list": lambda name: lambda *args: [1.0, 2.0, 3.0],
    "returns a dict": lambda name: lambda *args: {"answer": 1},
    "returns a tuple": lambda name: lambda *args: (1, "two", None),
    "returns a list of the right values": lambda name: _twisted(
        name, lambda t: t.tolist(), lambda n: [n]),
    "NaN": lambda name: _twisted(name, lambda t: torch.full(t.shape, math.nan),
                                 lambda n: math.nan),
    "inf": lambda name: _twisted(name, lambda t: torch.full(t.shape, math.inf),
                                 lambda n: math.inf),
    "complex with the right real part": lambda name: _twisted(
        name, lambda t: t.to(torch.complex128) + 1j, lambda n: complex(n, 1.0)),
    "complex with imaginary part 0": lambda name: _twisted(
        name, lambda t: t.to(torch.complex128), lambda n: complex(n, 0.0)),
    "wrong shape": lambda name: _twisted(
        name, lambda t: torch.stack((t, t)), lambda n: torch.tensor([n, n])),
    "bool": lambda name: _twisted(name, lambda t: t != 0, lambda n: True),
    "wrong number kind": lambda name: _twisted(
        name, lambda t: t.float() + 0.5 if not t.is_floating_point() else t.round().long() + 7,
        lambda n: str(n)),
    "zeroes its inputs": _zero_inputs_then_answer,
}


# 07.2 asks for any real q, k: whole numbers are as good a counterexample as floats
_NOT_HOSTILE = {("wrong number kind", "check_non_positive_normalizer")}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_learner_fails_in_one_line(name, kind, capsys):
    if (kind, name) in _NOT_HOSTILE:
        pytest.skip("integers are a right answer here")
    _assert_failed_cleanly(*_grade(capsys, name, HOSTILE[kind](name)))


def _key(args):
    return repr([(a.dtype, a.tolist()) if isinstance(a, torch.Tensor) else a for a in args])


def _record(name):
    """The calls a correct learner saw under seed 1, with the answers it gave (recorded in
    this process, the tests' fast path: the worker's list would stay in the worker)."""
    calls = []

    def recorder(*args):
        key = _key(args)
        answer = REFERENCE[name](*args)
        calls.append((key, answer))
        return answer

    assert _verdict_for_seed(name, recorder, 1) is None
    return calls


@pytest.mark.parametrize("name", [n for n in NAMES if n != "check_non_positive_normalizer"])
def test_memorised_answers_fail_on_fresh_inputs(name, capsys):
    calls = _record(name)
    replayed = iter(calls)

    def replay(*args):  # the answers of the last run, in order, whatever the inputs
        return next(replayed, calls[-1])[1]

    passed, out, err, elapsed = _grade(capsys, name, replay, seed=2)
    _assert_failed_cleanly(passed, out, err, elapsed)
    assert "seed=2" in out

    known = dict(calls)

    def lookup(*args):  # right on every input seen before, a stale answer otherwise
        return known.get(_key(args), calls[0][1])

    passed, out, err, elapsed = _grade(capsys, name, lookup, seed=2)
    _assert_failed_cleanly(passed, out, err, elapsed)
    assert f"{name}(…, seed=2) repeats them" in out
    assert _grade(capsys, name, lookup, seed=2)[1] == out  # the seed reproduces the failure


# what differs between graders when a learner never returns: the time factor (05.3) and the
# modules preloaded before the clock (10.x): one of each (each stops the worker, seconds)
@pytest.mark.slow
@pytest.mark.parametrize("name", ["check_scaled_dot", "check_minimum_base",
                                  "check_config_inv_freq"])
def test_a_learner_that_never_returns_gets_a_verdict_on_time(name, capsys, monkeypatch):
    monkeypatch.setattr(grading, "TIME_LIMIT_S", 0.5)
    passed, out, err, elapsed = _grade(capsys, name, lambda *args: time.sleep(60))
    limit = 0.5 * getattr(exercises, name).time_factor
    # the clock starts once the worker has what the exercise preloads (transformers: seconds)
    _assert_failed_cleanly(passed, out, err, elapsed, limit=limit + 2.0 + (
        30 if getattr(exercises, name).preload else 0))
    assert elapsed >= limit * 0.9
    assert f"had not finished after {limit:g} s" in out


@pytest.mark.slow
def test_the_time_limit_counts_all_calls_together(capsys, monkeypatch):
    monkeypatch.setattr(grading, "TIME_LIMIT_S", 0.5)

    def slow(p):  # 10 ms a call is fine once, not 1040 times
        time.sleep(0.01)
        return bin(p ^ (p + 1)).count("1")

    passed, out, err, elapsed = _grade(capsys, "check_bits_flipped", slow)
    # the limit, then at most 2 s to stop the worker and answer (issue 35)
    _assert_failed_cleanly(passed, out, err, elapsed, limit=0.5 + 2.0)
    assert "had not finished after 0.5 s" in out


from rope_lab.rope import interleaved_to_half as imported_shortcut  # noqa: E402

FORBIDDEN = [
    ("check_config_inv_freq", lambda c: hf.inv_freq_from_config(c)[0],
     "rope_lab.hf.config.inv_freq_from_config"),
    ("check_longrope_inv_freq",
     lambda c, n: hf.inv_freq_from_config(c, seq_len=n)[0],
     "rope_lab.hf.config.inv_freq_from_config"),
    ("check_p_rope_speeds", lambda d, b, p: rl.models.p_rope_inv_freq(d, b, p),
     "rope_lab.models.p_rope_inv_freq"),
    ("check_attention", lambda q, k, v: rl.attention(q, k, v), "rope_lab.attention"),
    ("check_causal_attention", lambda q, k, v: rl.attention(q, k, v, mask="causal"),
     "rope_lab.attention"),
    ("check_causal_attention",
     lambda q, k, v: _attention(q, k, v, allowed=~rl.causal_mask(len(q))),
     "rope_lab.causal_mask"),
    ("check_sinusoidal_pe", rl.sinusoidal_pe, "rope_lab.sinusoidal_pe"),
    ("check_shift_map", lambda d, k, b: rl.absolute.sinusoidal_shift_map(d, k, b),
     "rope_lab.absolute.sinusoidal_shift_map"),
    ("check_layout_permutation", lambda d: rl.interleaved_to_half(torch.arange(d)),
     "rope_lab.interleaved_to_half"),
    ("check_layout_permutation", lambda d: rl.rope.interleaved_to_half(torch.arange(d)),
     "rope_lab.interleaved_to_half"),
    ("check_layout_permutation", lambda d: imported_shortcut(torch.arange(d)),
     "rope_lab.interleaved_to_half"),
    ("check_layout_permutation",
     lambda d: torch.argsort(rl.half_to_interleaved(torch.arange(d))),
     "rope_lab.half_to_interleaved"),
]


@pytest.mark.parametrize(("name", "learner", "shown"), FORBIDDEN)
def test_a_forbidden_shortcut_fails_and_says_so(name, learner, shown, capsys):
    passed, out, err, elapsed = _grade(capsys, name, learner)
    _assert_failed_cleanly(passed, out, err, elapsed)
    number = getattr(exercises, name).exercise
    assert f"exercise {number} asks you to write this without {shown}" in out
    # the package is whole again: the grader's patches are gone
    assert rl.interleaved_to_half is imported_shortcut
    assert rl.rope.interleaved_to_half is imported_shortcut
    assert torch.equal(rl.interleaved_to_half(torch.arange(4)), torch.tensor([0, 2, 1, 3]))


def _uses_the_shortcut_legitimately(q, k):
    """Right only where the forbidden stand-ins of an earlier grading are gone."""
    assert torch.equal(rl.interleaved_to_half(torch.arange(4)), torch.tensor([0, 2, 1, 3]))
    assert rl.rope.interleaved_to_half is rl.interleaved_to_half
    return (q * k).sum(-1) / q.shape[-1] ** 0.5


def test_the_forbidden_stand_ins_are_gone_after_the_grading(capsys):
    passed, out, *_ = _grade(capsys, "check_layout_permutation",
                             lambda d: imported_shortcut(torch.arange(d)))
    assert not passed and "without rope_lab.interleaved_to_half" in out
    # the next grading, in the same worker, may call it (00.1 does not forbid it)
    passed, out, *_ = _grade(capsys, "check_scaled_dot", _uses_the_shortcut_legitimately)
    assert passed, out
    assert rl.interleaved_to_half is imported_shortcut
    assert rl.rope.interleaved_to_half is imported_shortcut
    assert globals()["imported_shortcut"] is rl.rope.interleaved_to_half


def test_catching_the_forbidden_error_does_not_help(capsys):
    def sly(dim):
        try:
            return rl.interleaved_to_half(torch.arange(dim))
        except RuntimeError:
            return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))

    passed, out, *_ = _grade(capsys, "check_layout_permutation", sly)
    assert not passed and "without rope_lab.interleaved_to_half" in out


# --- the grader's own boundary ------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_grader_called_without_a_function_names_the_parameter(name):
    grader = getattr(exercises, name)
    parameter = next(iter(grader.__signature__.parameters))
    with pytest.raises(TypeError, match=rf"{parameter} must be your function"):
        grader(42)


@pytest.mark.slow
def test_the_grader_leaves_the_notebook_rng_alone(capsys):
    torch.manual_seed(0)
    state = torch.get_rng_state()
    for name in NAMES:
        _grade(capsys, name, SOLUTION[name] if name != "check_minimum_base"
               else REFERENCE[name])
    assert torch.equal(torch.get_rng_state(), state)


def test_fresh_seeds_differ_and_do_not_touch_torch():
    state = torch.get_rng_state()
    seeds = {grading.fresh_seed() for _ in range(20)}
    assert len(seeds) > 15
    assert torch.equal(torch.get_rng_state(), state)


def test_the_learner_gets_copies(capsys):
    seen = []

    def keeps(x, cos, sin):  # fails the exercise if any tensor comes twice
        if any(t is u for t in (x, cos, sin) for call in seen for u in call):
            raise AssertionError("the grader handed the same tensor twice")
        seen.append((x, cos, sin))
        return SOLUTION["check_complex_rope"](x, cos, sin)

    passed, out, *_ = _grade(capsys, "check_complex_rope", keeps)
    assert passed, out


def test_crash_feedback_is_one_line_with_the_line_number(capsys):
    passed, out, *_ = _grade(capsys, "check_rotation_matrix", _raises)
    assert not passed and "your function raised ValueError: a bug on line one (line" in out
    assert "second line" not in out


def test_right_on_the_listed_angles_but_crashing_later(capsys):
    def brittle(angle):
        if angle not in (0.0, math.pi / 2, math.pi / 4, 1.0, -2.5):
            raise ValueError("unknown angle")
        return _rotation(math.cos(angle), math.sin(angle))

    passed, out, err, elapsed = _grade(capsys, "check_rotation_matrix", brittle)
    _assert_failed_cleanly(passed, out, err, elapsed)
    assert "unknown angle" in out


def test_summary_still_reports_after_the_battery(capsys):
    exercises.check_attainable(lambda i, p, bw: math.nan)
    exercises.check_rope_bytes(SOLUTION["check_rope_bytes"])
    capsys.readouterr()
    result = exercises.summary("09")
    out = capsys.readouterr().out
    assert result["09.1"] is True and result["09.2"] is False
    assert "✘ 09.2 the roofline" in out and "NaN" in out


def test_bad_answers_from_notebook_05_and_06_do_not_crash(capsys):
    for name, learner in (("check_minimum_base", lambda length, dim: math.inf),
                          ("check_full_turn_pairs", lambda d, b, L: torch.tensor([1, 2])),
                          ("check_inverse_permutation", lambda perm: perm + 1),
                          ("check_layout_permutation",
                           lambda d: torch.arange(d).to(torch.complex64)),
                          ("check_axial_rope", lambda x, p, base: nd.apply_rope_nd(
                              x, p, nd.axial_freqs(x.shape[-1], base)).to(torch.complex128))):
        _assert_failed_cleanly(*_grade(capsys, name, learner))


def test_a_near_miss_says_by_how_much_and_what_to_change():
    # issue 35: 08.1 refused a float32 answer with "expected -0.449937, got -0.449937"
    expected = torch.tensor([0.25, -0.4499371234], dtype=torch.float64)
    assert grading.compare(torch.tensor([0.25, -0.44993684]), expected, atol=1e-9, what="x") == (
        "x: at index (1,) expected -0.4499371, got -0.4499368: off by 2.9e-07, more than "
        "float32 rounding allows (1e-09 here): compute in float64")
    assert grading.compare(expected.half(), expected, atol=1e-6, what="").endswith(
        "off by 1.4e-05; float16 keeps about 3 significant digits, not enough here: compute "
        "and return float32 or float64")
    in_float64 = torch.tensor([0.25, -0.44993684], dtype=torch.float64)
    assert "is a step done in float32 or float16?" in grading.compare(
        in_float64, expected, atol=1e-9, what="")
    # a formula slip is not a rounding error: no advice about dtypes
    assert grading.compare(expected * 1.01, expected, atol=1e-6, what="") == (
        "at index (0,) expected 0.25, got 0.2525")
    # a number (09.2's GFLOP/s, a float32 answer): the digits that differ, and the gap
    assert grading.tell_apart(1.0180800000001, float(np.float32(1.01808))) == (
        "1.01808", "1.018079996")
    assert grading.precision_note(None, 1.01808, 1.018080016, 1e-9).startswith(
        ": off by 1.6e-08, more than rounding allows (1e-09 here)")
