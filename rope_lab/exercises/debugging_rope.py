"""Exercises of notebook 11 (debugging RoPE in real code): position ids and a partial-rotary fix.

11.1 and 11.2 ask for the position ids of a padded and of a packed batch (the functions
:mod:`rope_lab.hf.positions` provides, which the learner may not call); 11.3 asks for the
fixed version of a buggy partial-rotary snippet, in transformers' ``apply_rotary_pos_emb``
signature.
"""

from __future__ import annotations

import torch

from rope_lab.exercises.grading import (
    Learner,
    Wrong,
    answer_tensor,
    compare,
    context,
    grader,
    matches,
    randint,
)
from rope_lab.hf import positions as hf_positions
from rope_lab.i18n import N_, _
from rope_lab.implementations import rotate_half
from rope_lab.rope import inv_freq


def _mask(lengths, seq, *, left=True):
    rows = [[0] * (seq - n) + [1] * n if left else [1] * n + [0] * (seq - n) for n in lengths]
    return torch.tensor(rows, dtype=torch.long)


@grader("11.1", N_("position ids from the attention mask"),
        forbidden=("rope_lab.hf.positions.position_ids_from_attention_mask",),
        answer="position_ids")
def check_position_ids(function: Learner, generator: torch.Generator) -> None:
    """11.1: ``function(attention_mask)`` returns generate's ``(batch, seq)`` position ids.

    Real tokens (mask 1) are numbered 0, 1, … in order; padding slots may hold anything.
    """
    # padding on the left, on the right, none, a row of padding only, and holes: a 0 between
    # real tokens (a masked-out token) is no token either, so the count skips it
    cases = [_mask([3, 5], 5), _mask([3, 1], 5, left=False), _mask([4], 4), _mask([0, 3], 3),
             torch.ones(1, 1, dtype=torch.long), _mask([2, 6, 4], 7),
             torch.tensor([[1, 0, 1, 1]]), torch.tensor([[0, 1, 0, 1, 1], [1, 1, 0, 0, 1]])]
    for number in range(4):
        batch, seq = randint(generator, 1, 4), randint(generator, 1, 12)
        if number % 2:  # any 0/1 pattern
            cases.append(torch.randint(0, 2, (batch, seq), generator=generator))
        else:
            lengths = [randint(generator, 0, seq) for _ in range(batch)]
            cases.append(_mask(lengths, seq, left=bool(randint(generator, 0, 1))))
    for number, mask in enumerate(cases):
        function.random = number >= 8
        answer = function(mask)
        what = _("for attention_mask = {mask}").format(mask=mask.tolist())
        tensor = answer_tensor(answer, what, kind="int", shape=mask.shape)
        expected = hf_positions.position_ids_from_attention_mask(mask)
        real = mask == 1
        if torch.equal(tensor[real], expected[real]):
            continue
        first_real = torch.where(real.any(-1), real.long().argmax(-1), 0)[:, None]
        hints = [(torch.arange(mask.shape[1]) - first_real,
                  _("you counted slots from the row's first real token, but a 0 between real "
                    "tokens is not a token either: count the real tokens before each one")),
                 (torch.arange(mask.shape[1]).expand_as(mask),
                  _("you numbered the padding too: count real tokens only, so a left-padded "
                    "row's first real token gets position 0")),
                 (mask.cumsum(-1), _("off by one: the first real token gets position 0, not 1")),
                 (mask.cumsum(0) - 1, _("you summed over the batch (dim 0); count along the "
                                        "sequence, dim -1"))]
        for wrong, hint in hints:
            if torch.equal(tensor[real], wrong[real]):
                raise Wrong(context(what) + hint)
        index = tuple(int(i) for i in torch.nonzero(tensor.ne(expected) & real)[0])
        raise Wrong(context(what) + _("the real token at {index} should have position "
                                      "{expected}, got {got}").format(
            index=list(index), expected=int(expected[index]), got=int(tensor[index])))


@grader("11.2", N_("position ids for packed documents"),
        forbidden=("rope_lab.hf.positions.packed_position_ids",),
        answer="packed_positions")
def check_packed_positions(function: Learner, generator: torch.Generator) -> None:
    """11.2: ``function(lengths)`` returns ``(1, sum(lengths))`` positions restarting at 0
    for every document, as transformers' ``DataCollatorWithFlattening`` writes them."""
    # an empty document (length 0) adds no position, wherever it sits
    cases = [[3, 2], [5], [1, 1, 1], [2, 5, 3], [4, 1], [3, 0, 2], [0, 4], [2, 0], [0]]
    for _draw in range(3):
        cases.append([randint(generator, 0, 9) for _ in range(randint(generator, 1, 5))])
    for number, lengths in enumerate(cases):
        function.random = number >= 9
        answer = function(list(lengths))
        expected = hf_positions.packed_position_ids(lengths)
        what = _("for lengths = {lengths}").format(lengths=lengths)
        failure = compare(answer, expected, atol=0, what=what)
        if failure is None:
            continue
        total = sum(lengths)
        one_each = torch.cat([torch.arange(max(n, 1)) for n in lengths])[None]
        if matches(answer, torch.arange(total)[None], atol=0):
            failure = context(what) + _("the positions never restart; each document starts "
                                        "again at 0 (that restart is how varlen attention "
                                        "finds the boundary)")
        elif matches(answer, expected + 1, atol=0):
            failure = context(what) + _("off by one: every document starts at position 0, "
                                        "not 1")
        elif 0 in lengths and matches(answer, one_each, atol=0):
            failure = context(what) + _("you gave an empty document (length 0) a position; it "
                                        "has no tokens, so it adds nothing: {total} positions "
                                        "in all").format(total=total)
        raise Wrong(failure)


def _partial_rotary(q, k, cos, sin):
    """transformers' partial rotary: the first r = cos.shape[-1] features in pairs
    (i, i + r/2), the rest passed through."""
    r = cos.shape[-1]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

    def rotate(x):
        part = x[..., :r]
        return torch.cat((part * cos + rotate_half(part) * sin, x[..., r:]), -1)

    return rotate(q), rotate(k)


def _full_head_pairs(q, k, cos, sin):  # the notebook's buggy snippet, for the hint
    d, r = q.shape[-1], cos.shape[-1]
    ones, zeros = cos.new_ones(*cos.shape[:-1], (d - r) // 2), cos.new_zeros(
        *cos.shape[:-1], (d - r) // 2)
    half = r // 2
    cos = torch.cat((cos[..., :half], ones, cos[..., :half], ones), -1).unsqueeze(1)
    sin = torch.cat((sin[..., :half], zeros, sin[..., :half], zeros), -1).unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _tables(positions, rotary_dim, base):
    angles = positions.double()[..., None] * inv_freq(rotary_dim, base, dtype=torch.float64)
    emb = torch.cat((angles, angles), -1)
    return emb.cos().float(), emb.sin().float()


@grader("11.3", N_("partial rotary, the bug fixed"), preload=("transformers",),
        answer="apply_partial_rotary")
def check_partial_rotary(function: Learner, generator: torch.Generator) -> None:
    """11.3: ``function(q, k, cos, sin) -> (q, k)`` rotates the first r = cos.shape[-1]
    features of each head in pairs (i, i + r/2) and passes the rest through.

    q, k: ``(batch, heads, seq, head_dim)`` float32; cos, sin: ``(batch, seq, r)`` as a
    transformers rotary embedding returns them (each angle twice).
    """
    teaching = torch.Generator().manual_seed(11)
    shapes = [(1, 2, 5, 16, 4), (2, 3, 4, 32, 8), (1, 1, 3, 8, 8), (1, 2, 6, 12, 6)]
    for _draw in range(2):
        head_dim = 2 * randint(generator, 2, 24)
        shapes.append((randint(generator, 1, 2), randint(generator, 1, 3),
                       randint(generator, 1, 8), head_dim, 2 * randint(generator, 1,
                                                                        head_dim // 2)))
    for number, (batch, heads, seq, head_dim, rotary) in enumerate(shapes):
        function.random = number >= 4
        source = generator if function.random else teaching
        q = torch.randn(batch, heads, seq, head_dim, generator=source)
        k = torch.randn(batch, heads, seq, head_dim, generator=source)
        positions = torch.randint(0, 200, (batch, seq), generator=source)
        cos, sin = _tables(positions, rotary, 100.0)
        answer = function(q, k, cos, sin)
        what = _("q of shape {shape}, r = {rotary}").format(shape=tuple(q.shape), rotary=rotary)
        if not isinstance(answer, tuple) or len(answer) != 2:
            raise Wrong(context(what) + _("return the pair (q, k), as apply_rotary_pos_emb "
                                          "does; got {type}").format(type=type(answer).__name__))
        expected = _partial_rotary(q, k, cos, sin)
        for name, given, right in (("q", answer[0], expected[0]), ("k", answer[1], expected[1])):
            failure = compare(given, right, atol=1e-5, what=f"{what}, {name}")
            if failure is None:
                continue
            if name == "k" and matches(given, k, atol=1e-6):
                failure = context(what) + _("k came back unrotated; RoPE turns both q and k")
            elif matches(given, _full_head_pairs(q, k, cos, sin)[name == "k"], atol=1e-5):
                failure = context(what) + _(
                    "that is the bug: you pair feature i with i + head_dim/2 over the whole "
                    "head; the pairs are (i, i + r/2) within the first r = {rotary} "
                    "features").format(rotary=rotary)
            elif rotary < head_dim and matches(
                    given, torch.cat(((q, k)[name == "k"][..., :head_dim - rotary],
                                      _partial_rotary(*(t[..., head_dim - rotary:]
                                                        for t in (q, k)), cos, sin)
                                      [name == "k"]), -1), atol=1e-5):
                failure = context(what) + _("you rotated the last {rotary} features; it is the "
                                            "first").format(rotary=rotary)
            raise Wrong(failure)
