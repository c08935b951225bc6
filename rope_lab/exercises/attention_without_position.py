"""Exercises of notebook 01 (attention without position): attention, permutations, masks."""

from __future__ import annotations

import torch

from rope_lab.attention import attention
from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_tensor,
    compare,
    grader,
    matches,
    randint,
    values_differ,
)
from rope_lab.i18n import N_, _


def _qkv(generator, seq_q, seq_k, d, d_v):
    return (torch.randn(seq_q, d, generator=generator), torch.randn(seq_k, d, generator=generator),
            torch.randn(seq_k, d_v, generator=generator))


@grader("01.1", N_("attention without position"), forbidden=("rope_lab.attention.attention",),
        answer="my_attention")
def check_attention(attention_fn: Learner, generator: torch.Generator) -> None:
    """01.1 — ``attention_fn(q, k, v)`` = softmax(q kᵀ / √d) v, no mask, no position.

    q: ``(seq_q, d)``, k: ``(seq_k, d)``, v: ``(seq_k, d_v)`` → ``(seq_q, d_v)``.
    """
    teaching = torch.Generator().manual_seed(11)
    cases = [_qkv(teaching, *sizes) for sizes in ((4, 4, 8, 8), (3, 5, 16, 2))]
    random = [_qkv(generator, randint(generator, 1, 9), randint(generator, 1, 9),
                   randint(generator, 2, 32), randint(generator, 1, 8)) for _ in range(2)]
    for number, (q, k, v) in enumerate(cases + random):
        attention_fn.random = number >= len(cases)
        answer = attention_fn(q, k, v)
        expected = attention(q, k, v)
        d = q.shape[-1]
        failure = compare(answer, expected, atol=1e-5,
                          what=f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
        if failure is None:
            continue
        shape = tuple(getattr(answer, "shape", ()))
        if shape == (len(q), len(k)) != tuple(expected.shape):
            failure += _(" — that is the weight matrix; multiply it by v")
        elif matches(answer, torch.softmax(q @ k.T, dim=-1) @ v, atol=1e-5):
            failure += _(" — the scores were not divided by √d")
        elif matches(answer, torch.softmax(q @ k.T / d**0.5, dim=0) @ v, atol=1e-5):
            failure += _(" — softmax ran over the queries (dim 0); each query's weights "
                         "over the keys must sum to 1 (dim −1)")
        raise Wrong(failure)


@grader("01.2", N_("undo a permutation"), answer="inverse_permutation")
def check_inverse_permutation(inverse_fn: Learner, generator: torch.Generator) -> None:
    """01.2 — ``inverse_fn(perm)``: the permutation that undoes ``perm``.

    perm: ``(n,)`` long tensor holding 0 … n−1 once each; the answer ``inverse`` must satisfy
    ``x[perm][inverse] == x`` for every x.
    """
    teaching = torch.Generator().manual_seed(12)
    # [1, 2, 0] first: the smallest permutation that is not its own inverse.
    cases = [torch.tensor([1, 2, 0]), torch.tensor([0]), torch.tensor([1, 0])]
    cases += [torch.randperm(n, generator=teaching) for n in (5, 9, 32)]
    random = [torch.randperm(randint(generator, 3, 64), generator=generator) for _ in range(3)]
    for number, perm in enumerate(cases + random):
        inverse_fn.random = number >= len(cases)
        shown = (f"perm {perm.tolist()}" if len(perm) <= 12
                 else _("a perm of length {length}").format(length=len(perm)))
        answer = answer_tensor(inverse_fn(perm), shown, kind="int", shape=perm.shape)
        n = len(perm)
        if bool(((answer < 0) | (answer >= n)).any()):
            raise Wrong(_("{shown}: every index must lie in 0 … {last}, got {got}").format(
                shown=shown, last=n - 1, got=answer.tolist() if n <= 12 else int(answer.max())))
        x = torch.arange(n) * 10
        if not torch.equal(x[perm][answer], x):
            hint = _(" — you returned perm itself, which undoes only swaps") \
                if torch.equal(answer, perm) else ""
            if n <= 12:
                raise Wrong(_("{shown}: x[perm][answer] should be x = {x}, got {got}{hint}")
                            .format(shown=shown, x=x.tolist(), got=x[perm][answer].tolist(),
                                    hint=hint))
            raise Wrong(_("{shown}: x[perm][answer] is not x = 0, 10, 20, …{hint}").format(
                shown=shown, hint=hint))


@grader("01.3", N_("causal attention"),
        forbidden=("rope_lab.attention.attention", "rope_lab.attention.causal_mask"),
        answer="my_causal_attention")
def check_causal_attention(causal_fn: Learner, generator: torch.Generator) -> None:
    """01.3 — ``causal_fn(q, k, v)``: attention where query i sees keys 0 … i only.

    q, k: ``(seq, d)``, v: ``(seq, d_v)`` → ``(seq, d_v)``. The mask is the learner's own.
    """
    teaching = torch.Generator().manual_seed(13)
    cases = [_qkv(teaching, seq, seq, d, d_v) for seq, d, d_v in ((4, 8, 3), (7, 16, 5))]
    random = []
    for _draw in range(2):
        seq = randint(generator, 2, 10)
        d, d_v = randint(generator, 2, 16), randint(generator, 1, 6)
        random.append(_qkv(generator, seq, seq, d, d_v))
    for number, (q, k, v) in enumerate(cases + random):
        causal_fn.random = number >= len(cases)
        answer = causal_fn(q, k, v)
        expected = attention(q, k, v, mask="causal")
        failure = compare(answer, expected, atol=1e-5, what=f"seq = {len(q)}")
        if failure is None:
            continue
        if matches(answer, attention(q, k, v), atol=1e-5):
            failure += _(" — no mask was applied: query 0 must see only key 0")
        elif values_differ(answer, expected, atol=1e-5):
            answer = answer_tensor(answer, "").double()
            if torch.allclose(answer[-1], v[-1].double(), atol=1e-5):
                failure += _(" — the last query sees only itself: the mask is flipped (keys "
                             "0 … i are allowed, keys after i are blocked)")
            elif not torch.allclose(answer[0], v[0].double(), atol=1e-5):
                failure += _(" — query 0 sees only key 0, so its output must be v[0] exactly")
        raise Wrong(failure)
